"""The code location ``workspace.yaml`` loads: the four products (``assets/<product>/``, each its
assets, checks, jobs, sensors and settings resource) joined with what they share.

Nothing here is bound to one input: a partition key is an input's id, or ``<id>/r0001`` for a
library round or a case revision (see ``assets/partitions.py``). Settings are resource config,
editable per run in the Launchpad and validated by the product's settings model.

The environment is checked first, before any product is imported: a bad ``HYPOGRAPH_*`` value
(or a Celery settings file that cannot be used) fails the load with one line naming the variable,
its value and its range (``hypograph/environment.py``).
"""

import logging
import time

from hypograph import environment
from hypograph.errors import HypographError

try:  # the variables, then the executor they name (its package, a Celery settings file)
    environment.current()
    from pipelines.executor import EXECUTOR
except HypographError as e:  # raised here, from None: the UI and `dagster definitions validate` show this one frame
    raise HypographError(f"the code location cannot load: {e}") from None

from dagster import Definitions, default_loggers, logger

import assets.case
import assets.library
import assets.proximity
import assets.structure
from assets.partition_keys import partition_keys
from assets.sources import inputs_discovered, register_inputs
from resources import Inputs, LLMResource


class _StepStages(logging.Handler):
    """Each step as ``hypograph.progress`` events, for the CLI's sinks only (the run's log has
    Dagster's own step events): the step's start and end (``step=True``), each check it evaluated
    (``check``) and, when it materialized an asset, that asset's end (``asset``; the steps of a
    graph-backed asset, ``asset.op``, timed together)."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.started: dict[str, float] = {}  # asset (a step key up to its first ".") -> its first step's start
        self.assets: dict[str, list[str]] = {}  # step -> the assets it materialized

    def emit(self, record: logging.LogRecord) -> None:
        from hypograph import progress

        event = getattr(record, "dagster_event", None)
        kind = getattr(event, "event_type_value", None)
        step = getattr(event, "step_key", None)
        if step is None:
            return
        group = step.split(".")[0]
        if kind == "STEP_START":
            self.started.setdefault(group, time.perf_counter())
            progress.notify(progress.Event("start", step, step=True))
        elif kind == "ASSET_MATERIALIZATION" and event.asset_key is not None:
            self.assets.setdefault(step, []).append(event.asset_key.to_user_string())
        elif kind == "ASSET_CHECK_EVALUATION":
            data = event.event_specific_data
            progress.notify(progress.Event("check", data.check_name, done=int(bool(data.passed))))
        elif kind in ("STEP_SUCCESS", "STEP_FAILURE"):
            progress.notify(progress.Event("end", step, step=True))
            assets = list(dict.fromkeys(self.assets.pop(step, [])))
            if kind == "STEP_FAILURE" or assets or "." not in step:
                seconds = time.perf_counter() - self.started.pop(group, time.perf_counter())
                if kind == "STEP_SUCCESS" and assets:
                    progress.notify(progress.Event("asset", ", ".join(assets), seconds=seconds))


@logger(description="Step starts and ends as hypograph progress stages (what `hypograph` prints on a terminal).")
def step_stages(_init_context) -> logging.Logger:
    out = logging.getLogger("hypograph.steps")
    out.propagate = False
    out.setLevel(logging.DEBUG)
    if not out.handlers:
        out.addHandler(_StepStages())
    return out


inputs_resource = Inputs(workspace=environment.current().workspace)

# What every product shares: where inputs live, the model, the executor, loggers.
# (Not a module-level name of its own: a code location holds one Definitions at module scope.)
defs = Definitions(
    sensors=[inputs_discovered, partition_keys],
    jobs=[register_inputs],  # what inputs_discovered requests: registering happens in a run
    executor=EXECUTOR,
    loggers={**default_loggers(), "step_stages": step_stages},
    resources={
        "inputs": inputs_resource,
        "llm": LLMResource.from_environment(),
    },
)

defs = Definitions.merge(defs, assets.proximity.defs, assets.structure.defs, assets.library.defs, assets.case.defs)
