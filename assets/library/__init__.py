"""Library rounds (seed 001): candidates -> dedup -> scores -> hypothesis_library.json, one
partition per round; the library file as it is on disk (observed, checked), one partition per
library; their checks, the round, re-score and observe jobs, the next-round sensor and the
settings resource. The rounds of one command run through ``pipelines/launch.py``."""

from dagster import Definitions

from assets.library.assets import hypothesis_library, round_candidates, round_dedup, round_scores
from assets.library.checks import CHECKS
from assets.library.jobs import library_round_job, next_library_round, observe_job, rescore_job
from assets.library.observed import library_file
from assets.library.resource import LibraryResource

defs = Definitions(
    assets=[library_file, round_candidates, round_dedup, round_scores, hypothesis_library],
    asset_checks=CHECKS,
    jobs=[library_round_job, rescore_job, observe_job],
    sensors=[next_library_round],
    resources={"library": LibraryResource()},
)
