"""Library rounds (docs/library.md): behavior -> mechanism hypotheses generated round by round, deduplicated
against everything earlier rounds produced, scored for impact and novelty, persisted in
``hypothesis_library.json``. Plain Python: no dagster import anywhere in this package."""
