"""The seed's numbers and the embedding backends, without a dependency: ``prox`` reads them and
starts without pydantic; ``settings.ProximitySettings`` declares its fields with them."""

from typing import Literal

Backend = Literal["tfidf", "sbert"]
DEFAULT_THRESHOLD = 0.30  # the seed's graph threshold
DEFAULT_DUPE_THRESHOLD = 0.80  # the seed's duplicate-pair threshold
AUTO_MERGE_THRESHOLD = 0.92  # MERGE without a model above this (the seed's adjudication)
# The cap of the Dagster assets and the library (prox graph's default is no cap, the seed's graph).
# Chosen by measurement: benchmarks/proximity.py --cap-study (benchmarks/README.md).
DEFAULT_MAX_NEIGHBOURS = 20
SEED_MAX_NEIGHBOURS = 0  # prox graph's own default: no cap, the seed's graph
