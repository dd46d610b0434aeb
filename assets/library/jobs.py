"""The library round and re-score jobs, and the sensor that runs each library's next round."""

import datetime as dt

from dagster import (
    AssetSelection,
    DefaultSensorStatus,
    RunRequest,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    define_asset_job,
    sensor,
)

from assets.groups import LIBRARY, RUN_TAGS, described, launched
from assets.library.assets import hypothesis_library, round_scores
from assets.library.observed import library_file
from assets.partitions import ROUNDS, libraries, library_rounds, model_configured
from hypograph.errors import HypographError
from hypograph.inputs import sub_key
from hypograph.library.run import round_to_run, settings_for_round
from hypograph.scans import BAD_INPUT, registered, skip_line
from resources import Inputs

# What the UI says of the round partitions, as the code location loads (its environment's model).
ROUND_KEYS = (
    "Partitions: <library id>/r0001, … — each round a registered library has, and the round it runs next, "
    "offered as soon as the library is registered with a model configured (the partition_keys sensor keeps them; "
    "a key typed by hand that names no such round is removed, saying why)."
)
NO_MODEL = (
    " No model is configured where this code location runs (HYPOGRAPH_LLM_MODEL unset, or HYPOGRAPH_LLM=offline), "
    "so no round can run and none is offered: set the model for the web server and daemon (docs/llm.md)."
)
MODEL_STATE = "" if model_configured() else NO_MODEL

library_round_job = define_asset_job(
    "library_round",
    run_tags=RUN_TAGS,
    metadata=launched(sub_keys_of="library"),
    selection=AssetSelection.groups(LIBRARY) - AssetSelection.assets(library_file),
    partitions_def=library_rounds,
    description="One library round: generate behaviors and mechanisms, dedup them against the library by "
    "meaning, score impact and novelty, merge into hypothesis_library.json. Pick the library's next round; its "
    "first needs resources.library.config.topic in the Launchpad (later ones follow the previous round's settings). "
    "A topic the library is not about ends without running, asking for confirm_topic or new_library. "
    + ROUND_KEYS
    + MODEL_STATE,
)

rescore_job = define_asset_job(
    "library_rescore",
    run_tags=RUN_TAGS,
    metadata=launched(sub_keys_of="library"),
    selection=[round_scores, hypothesis_library],
    partitions_def=library_rounds,
    description="Re-score rounds (another model, web grounding on) without regenerating; ids unchanged. "
    "Backfill it over one library's rounds or all of them; a round not generated yet ends without running, saying so. "
    + ROUND_KEYS
    + MODEL_STATE,
)

observe_job = define_asset_job(
    "library_observe",
    run_tags=RUN_TAGS,
    selection=AssetSelection.assets(library_file),
    partitions_def=libraries,
    description="The library file as it is on disk (library_file): its behaviors and mechanisms, and the "
    "library's key rules checked. Offline, no model, writes nothing; `hypograph library DIR --report` and "
    "`--check` run it on their library, a backfill on each library, Observe on every library in one run.",
)


@described(
    sensor, job=library_round_job, minimum_interval_seconds=24 * 3600, default_status=DefaultSensorStatus.STOPPED
)
def next_library_round(context: SensorEvaluationContext, inputs: Inputs):
    """Once a day, runs each registered library's next round (or finishes its interrupted one) with
    the previous round's settings, adding the round's partition. A library with no round yet is
    skipped (its first round needs a topic: `hypograph library DIR --topic …`). Needs a model."""
    known = set(context.instance.get_dynamic_partitions(ROUNDS))
    new, requests = [], []
    for r in registered(inputs.registry(), ("library",), context.log.warning):
        if not r.path.is_dir():
            continue
        try:
            round_key = round_to_run(r.path)
            settings_for_round(r.path, round_key, None)
        except HypographError as e:  # no round to follow yet: its first needs a topic
            context.log.info(skip_line(r.id, e))
            continue
        except BAD_INPUT as e:  # one library that cannot be read: the others still get their round
            context.log.warning(skip_line(f"{r.id}: {r.path}", e))
            continue
        key = sub_key(r.id, round_key)
        if key not in known:
            new.append(key)
        # one run a day per round: a round left not done (a rejected dedup answer) is tried again next day
        requests.append(RunRequest(partition_key=key, run_key=f"{key}:{dt.date.today():%Y-%m-%d}"))
    if not requests:
        return SkipReason("no library has a round to run")
    add = [library_rounds.build_add_request(new)] if new else []
    return SensorResult(run_requests=requests, dynamic_partitions_requests=add)
