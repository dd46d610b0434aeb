"""Case packages in the deployment: discovered with their revisions, and a RETRY_PENDING dispatch
re-requested by the ``case_retries_due`` sensor once its persisted due time has passed."""

from __future__ import annotations

import asyncio
import datetime as dt

from case_support import Clock, builder_for, make_case, package_id
from dagster import DagsterInstance, RunRequest, SensorResult, SkipReason, build_sensor_context
from llm_stub import llm_server, unused_port  # noqa: F401  (fixtures)

from assets.case.jobs import case_retries_due
from assets.partitions import REVISIONS
from assets.sources import inputs_discovered, register_inputs
from hypograph.case import Status
from resources import Inputs


def test_discovery_registers_a_case_package_and_its_revisions(tmp_path):
    case = make_case(tmp_path / "workspace")
    (tmp_path / "workspace" / "notes").mkdir()  # not an input
    instance = DagsterInstance.ephemeral()
    inputs = Inputs(workspace=str(tmp_path / "workspace"), registry_file=str(tmp_path / "inputs.json"))
    result = inputs_discovered(build_sensor_context(instance=instance), inputs=inputs)
    assert isinstance(result, SensorResult) and not result.dynamic_partitions_requests  # the tick writes nothing
    (run,) = result.run_requests  # the registration, as the daemon launches it
    assert register_inputs.execute_in_process(
        run_config=run.run_config, instance=instance, resources={"inputs": inputs}
    ).success
    assert instance.get_dynamic_partitions(REVISIONS) == [f"{case.name}/r0001"]
    assert instance.get_dynamic_partitions("hypothesis_inputs") == []  # a case is in no other partition set


def test_a_due_retry_is_requested_for_its_revision_partition_and_not_before(tmp_path):
    case = make_case(tmp_path / "cases")
    instance = DagsterInstance.ephemeral()
    inputs = Inputs(registry_file=str(tmp_path / "inputs.json"))
    inputs.registry().add(case)
    tick = lambda: case_retries_due(build_sensor_context(instance=instance), inputs=inputs)  # noqa: E731
    assert isinstance(tick(), SkipReason)
    dead = f"http://127.0.0.1:{unused_port()}/v1"
    future = Clock(dt.datetime.now(dt.UTC) + dt.timedelta(hours=1))
    result = asyncio.run(builder_for(case, [dead], clock=future).build(case.name, package_id(case)))
    assert result.status is Status.RETRY_PENDING
    assert isinstance(tick(), SkipReason)  # not due yet
    past = Clock(dt.datetime.now(dt.UTC) - dt.timedelta(hours=1))
    case_two = make_case(tmp_path / "more")
    two = inputs.registry().add(case_two).id
    asyncio.run(builder_for(case_two, [dead], clock=past).build(case_two.name, package_id(case_two)))
    requests = tick()
    assert [r.partition_key for r in requests] == [f"{two}/r0001"]
    assert all(isinstance(r, RunRequest) and r.run_key for r in requests)


def test_a_foreign_or_broken_folder_never_fails_the_retry_tick(tmp_path):
    """A registered case whose manifest went bad is skipped with one logged line; the others are
    still looked at. Only registered cases are read: a sibling folder is not."""
    good, bad = make_case(tmp_path / "cases"), make_case(tmp_path / "cases2")
    (tmp_path / "cases" / "foreign").mkdir()
    (tmp_path / "cases" / "foreign" / "manifest.json").write_text("[1, 2")  # beside a case, not registered
    inputs = Inputs(registry_file=str(tmp_path / "inputs.json"))
    inputs.registry().add(good), inputs.registry().add(bad)
    (bad / "manifest.json").write_text('{"analysis_revision": ')
    result = case_retries_due(build_sensor_context(instance=DagsterInstance.ephemeral()), inputs=inputs)
    assert isinstance(result, SkipReason)
