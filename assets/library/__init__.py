"""Library rounds (seed 001): candidates -> dedup -> scores -> hypothesis_library.json, one
partition per round; its checks, the round and re-score jobs, the next-round sensor and its
settings resource. The rounds of one command run through ``pipelines/launch.py``."""

from dagster import Definitions

from assets.library.assets import hypothesis_library, round_candidates, round_dedup, round_scores
from assets.library.checks import CHECKS
from assets.library.jobs import library_round_job, next_library_round, rescore_job
from resources import LibraryResource

defs = Definitions(
    assets=[round_candidates, round_dedup, round_scores, hypothesis_library],
    asset_checks=CHECKS,
    jobs=[library_round_job, rescore_job],
    sensors=[next_library_round],
    resources={"library": LibraryResource()},
)
