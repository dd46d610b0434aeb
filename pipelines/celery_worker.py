"""The Celery app a Hypograph worker runs: ``celery -A pipelines.celery_worker worker --pool solo
-Q dagster,shards`` (deploy/systemd/hypograph-worker@.service, deploy/helm/celery-workers.yaml).

In: the YAML file ``HYPOGRAPH_CELERY_CONFIG`` names -- the one the runs read
(``pipelines/executor.py``), so both sides agree on the broker and every setting; its ``broker`` and
``backend`` may be ``{env: VAR}`` (the password stays in the environment). Out: ``app``, the
``dagster-celery`` app with its ``execute_plan`` task, built in memory. (``dagster-celery worker
start`` instead writes those settings, the broker URL and its password among them, into a new file
under ``$DAGSTER_HOME/dagster_celery/config/`` at every start, readable by every user, and starts
``celery`` from ``PATH``.)

What it adds to dagster-celery's task, both for faults of the broker or of a worker:

* **a step of a finished run is not executed.** A run that failed while the broker was away leaves
  its queued or taken steps in Redis (``appendonly``); when Redis returns, a worker takes them. The
  task first reads the run's status and, if the run has ended, drops the step, in one line in the
  worker's log and the run's;
* **a live worker's step is never handed to another** (the heartbeat). A step's message is
  acknowledged only when the step ends (``task_acks_late``), and Redis gives an unacknowledged
  message to another worker ``visibility_timeout`` seconds after it was taken. So that a killed
  worker's step runs again within about a minute while a long step of a live worker is not started
  twice, ``visibility_timeout`` is short (deploy/celery.yaml) and a thread of the worker re-stamps
  the message it holds every quarter of it (the score of its delivery tag in kombu's
  ``unacked_index``, which is what redelivery reads). A killed or frozen worker stops stamping.
"""

from __future__ import annotations

import importlib
import logging
import threading
import time

import redis
from celery import Celery, signals
from dagster import DagsterInstance
from dagster._core.events import EngineEventData  # what dagster-celery reports with
from dagster._grpc.types import ExecuteStepArgs  # what the executor sends (dagster-celery's own import)
from dagster._serdes import unpack_value
from dagster_celery.cli import get_validated_config
from dagster_celery.config import TASK_EXECUTE_PLAN_NAME
from dagster_celery.executor import CeleryExecutor
from dagster_celery.make_app import make_app
from dagster_celery.tasks import create_task
from kombu import Queue

from hypograph.code_version import code_version
from pipelines.executor import CELERY_CONFIG_ENV, celery_settings, config_path

log = logging.getLogger("hypograph.worker")

ANY_HOST_QUEUE = "shards"  # steps that read and write only the shard store (assets/proximity/sharded.py)


def build_app() -> Celery:
    """The worker's app from ``HYPOGRAPH_CELERY_CONFIG`` (ValueError in one line if unusable)."""
    celery_settings()  # the file's one-line checks, as the run makes them
    config = get_validated_config(config_path())  # {env: VAR} resolved, defaults filled, as the run's
    app = make_app(
        CeleryExecutor.for_cli(
            broker=config.get("broker"), backend=config.get("backend"), config_source=config.get("config_source")
        ).app_args()
    )
    # the queue of steps that run on any host, bound as dagster-celery binds its own ("<queue>.#")
    app.conf.task_queues = [*app.conf.task_queues, Queue(ANY_HOST_QUEUE, routing_key=f"{ANY_HOST_QUEUE}.#")]
    # The run gives up on the backend after the file's tries (its waits are bounded); a worker
    # storing a step's result never does: past them it raised BackendStoreError and its solo pool
    # ended, so a broker outage a little longer than the tries (5 minutes on 1 CPU) took it down.
    app.conf.result_backend_max_retries = float("inf")
    return app


app = build_app()

# The code this worker runs, loaded now, at its start, from its own checkout (its working directory
# or PYTHONPATH): a step's code pointer then finds it imported, and the version the worker is
# judged by is taken now, from the files it loaded. (Loaded at the first step instead, a checkout
# updated in place in between gave the new files' version to a worker still holding the modules it
# had imported at start, the old code.)
importlib.import_module("pipelines.definitions")
WORKER_CODE_VERSION = code_version()


def _dagster_task_body():
    """dagster-celery's step task as a function of (task, args...): made on a scratch app, so that this
    app's ``execute_plan`` is ours."""
    scratch = Celery("scratch", set_as_current=False)
    create_task(scratch, shared=False)  # shared: it would be added to every app, this one too
    return type(scratch.tasks[TASK_EXECUTE_PLAN_NAME]).run  # bind=True: the function itself


_run_step = _dagster_task_body()


@app.task(bind=True, name=TASK_EXECUTE_PLAN_NAME)
def execute_plan(self, execute_step_args_packed, executable_dict):
    """dagster-celery's step task, unless the step's run has finished."""
    args = unpack_value(execute_step_args_packed, as_type=ExecuteStepArgs)
    with DagsterInstance.from_ref(args.instance_ref) as instance:
        run = instance.get_run_by_id(args.run_id)
        if run is not None and run.is_finished:
            steps = ", ".join(args.step_keys_to_execute or [])
            message = f"step {steps} of run {args.run_id} not executed: the run has ended ({run.status.value})"
            log.warning(message)
            instance.report_engine_event(message, run, EngineEventData({"Celery worker": self.request.hostname}))
            return []
    return _run_step(self, execute_step_args_packed, executable_dict)


# -- the heartbeat -------------------------------------------------------------------------------

_beats: dict[str, threading.Event] = {}  # task id -> the event that stops its heartbeat


def _transport_option(name: str, default):
    return (app.conf.broker_transport_options or {}).get(name, default)


def _stamp(tag: str, stop: threading.Event) -> None:
    """Every quarter of the visibility timeout: the message ``tag`` marked as just taken, while it
    is still unacknowledged (``XX``: an acknowledged one is never added back)."""
    every = max(1.0, float(_transport_option("visibility_timeout", 3600)) / 4)
    key = _transport_option("global_keyprefix", "") + _transport_option("unacked_index_key", "unacked_index")
    timeout = float(_transport_option("socket_timeout", None) or 10)
    client = redis.Redis.from_url(app.conf.broker_url, socket_timeout=timeout, socket_connect_timeout=timeout)
    try:
        while not stop.wait(every):
            try:
                client.zadd(key, {tag: time.time()}, xx=True)
            except redis.RedisError as exc:  # the broker away: stamped again when it is back
                log.warning("heartbeat of %s: %s", tag, type(exc).__name__)
    finally:
        client.close()


@signals.task_received.connect
def _start_heartbeat(request=None, **_kwargs) -> None:
    tag = getattr(getattr(request, "message", None), "delivery_tag", None)
    if tag is None or not app.conf.broker_url.startswith(("redis://", "rediss://")):
        return
    stop = threading.Event()
    _beats[request.id] = stop
    threading.Thread(target=_stamp, args=(tag, stop), name=f"heartbeat-{tag}", daemon=True).start()


@signals.task_postrun.connect
def _stop_heartbeat(task_id=None, **_kwargs) -> None:
    stop = _beats.pop(task_id, None)
    if stop is not None:
        stop.set()


__all__ = ["CELERY_CONFIG_ENV", "app", "execute_plan"]
