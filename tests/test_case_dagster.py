"""Case packages in the deployment: discovered with their revisions, and a RETRY_PENDING dispatch
re-requested by the ``case_retries_due`` sensor once its persisted due time has passed."""

from __future__ import annotations

import asyncio
import datetime as dt

from casework_support import Clock, builder_for, make_case, package_id
from dagster import DagsterInstance, RunRequest, SensorResult, SkipReason, build_sensor_context
from llm_stub import llm_server, unused_port  # noqa: F401  (fixtures)

from assets.partitions import REVISIONS, revision_partition
from hypograph.casework import Status
from pipelines.sensors import case_retries_due, inputs_discovered
from resources import Inputs


def test_discovery_registers_a_case_package_and_its_revisions(tmp_path):
    case = make_case(tmp_path / "workspace")
    (tmp_path / "workspace" / "notes").mkdir()  # not an input
    instance = DagsterInstance.ephemeral()
    result = inputs_discovered(build_sensor_context(instance=instance),
                               inputs=Inputs(workspace=str(tmp_path / "workspace")))
    assert isinstance(result, SensorResult)
    added = {r.partitions_def_name: r.partition_keys for r in result.dynamic_partitions_requests}
    assert added == {"inputs": [str(case.resolve())], REVISIONS: ["r0001"]}


def test_a_due_retry_is_requested_for_its_revision_partition_and_not_before(tmp_path):
    case = make_case(tmp_path / "cases")
    instance = DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("inputs", [str(case)])
    assert isinstance(case_retries_due(build_sensor_context(instance=instance)), SkipReason)
    dead = f"http://127.0.0.1:{unused_port()}/v1"
    future = Clock(dt.datetime.now(dt.UTC) + dt.timedelta(hours=1))
    result = asyncio.run(builder_for(case, [dead], clock=future).build(case.name, package_id(case)))
    assert result.status is Status.RETRY_PENDING
    assert isinstance(case_retries_due(build_sensor_context(instance=instance)), SkipReason)  # not due yet
    past = Clock(dt.datetime.now(dt.UTC) - dt.timedelta(hours=1))
    case_two = make_case(tmp_path / "more")
    instance.add_dynamic_partitions("inputs", [str(case_two)])
    asyncio.run(builder_for(case_two, [dead], clock=past).build(case_two.name, package_id(case_two)))
    requests = case_retries_due(build_sensor_context(instance=instance))
    assert [r.partition_key for r in requests] == [revision_partition(str(case_two), 1)]
    assert all(isinstance(r, RunRequest) and r.run_key for r in requests)
