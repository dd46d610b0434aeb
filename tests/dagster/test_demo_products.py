"""What `make demo` leaves for `make ui` to show, through the commands the demo runs: the example
library observed and checked as it is on disk (``hypograph library DIR --report``: the
``library_observe`` job), the example case's published batch re-read and checked (``hypograph
batch CASE``: ``case_batch`` reuses it, no model), nothing invented (no round, no new batch, no
input byte changed). Read back from the Dagster instance, then from a real ``hypograph ui`` over
GraphQL, whose daemon never evaluates ``inputs_discovered`` when no workspace is configured.
Also: offline, a library round on another topic meets the topic guard before "needs a model";
the README's asset graph names only assets that exist, and every one of them."""

from __future__ import annotations

import json
import re
import time

import pytest
import services
from cli_helper import HYPOGRAPH, in_process
from conftest import EXAMPLE_LIBRARY, REPO, copy_tree, offline_env, snapshot
from dagster import AssetKey, AssetRecordsFilter, DagsterInstance
from test_ui import REPOSITORY, free_port, graphql, wait_for_code_location

from hypograph.inputs import stored_id

EXAMPLE_CASE = REPO / "examples" / "case"


def example_library() -> dict:
    return json.loads((EXAMPLE_LIBRARY / "hypothesis_library.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """The example library and case copied and run through the demo's two commands, on an instance
    of their own; the files before and after, and what each command printed."""
    base = tmp_path_factory.mktemp("demo")
    env = {**offline_env(), "DAGSTER_HOME": str(base / "home")}
    library, case = copy_tree(EXAMPLE_LIBRARY, base / "library"), copy_tree(EXAMPLE_CASE, base / "case")
    before = {root: snapshot(root, exclude=(".hypograph",)) for root in (library, case)}
    report = in_process("library", library, "--report", env=env)
    batch = in_process("batch", case, env=env)
    assert report.returncode == 0 and batch.returncode == 0, (report.stderr, batch.stderr)
    return {
        "env": env,
        "home": base / "home",
        "library": library,
        "case": case,
        "before": before,
        "report": report,
        "batch": batch,
        "ids": {"library": stored_id(library), "case": stored_id(case)},
    }


def test_the_demo_invents_nothing(demo):
    """No input byte changed, no round partition made, no model called (the batch was reused)."""
    for root, files in demo["before"].items():
        assert snapshot(root, exclude=(".hypograph",)) == files, root
    with DagsterInstance.from_config(str(demo["home"])) as instance:
        assert instance.get_dynamic_partitions("library_rounds") == []
        assert instance.get_dynamic_partitions("libraries") == [demo["ids"]["library"]]
    assert "reused, nothing regenerated" in demo["batch"].stdout


def test_the_library_report_says_what_is_there(demo):
    lines = demo["report"].stdout.splitlines()
    raw = example_library()
    mechanisms = sum(len(b["mechanisms"]) for b in raw["behaviors"])
    assert lines[0] == f"topic: {raw['topic']}"
    assert lines[1].startswith("rounds: none run here yet: the library is its file as written")
    assert lines[2] == f"behaviors {len(raw['behaviors'])}; mechanisms {mechanisms}"
    assert not any("0 run of 0" in line or "no rounds in tool state" in line for line in lines)


def observation(instance, key: str, partition: str):
    records = instance.fetch_observations(
        AssetRecordsFilter(asset_key=AssetKey(key), asset_partitions=[partition]), limit=1
    ).records
    return records[0].asset_observation if records else None


def checks_of(instance, key: str, partition: str) -> dict[str, str]:
    """check name -> the status of its latest execution on ``partition``."""
    from dagster._core.event_api import PartitionKeyFilter

    out = {}
    for check in (c for c in _defs().resolve_asset_graph().asset_check_keys if c.asset_key == AssetKey(key)):
        records = instance.event_log_storage.get_asset_check_execution_history(
            check, limit=1, partition_filter=PartitionKeyFilter(key=partition)
        )
        out[check.name] = records[0].status.value if records else "NONE"
    return out


def _defs():
    from pipelines.definitions import defs

    return defs


def test_the_library_is_observed_with_its_tree_and_checks(demo):
    raw = example_library()
    lib = demo["ids"]["library"]
    with DagsterInstance.from_config(str(demo["home"])) as instance:
        seen = observation(instance, "library_file", lib)
        assert seen is not None, "library_file was not observed"
        meta = seen.metadata
        assert meta["topic"].value == raw["topic"]
        assert meta["behaviors"].value == len(raw["behaviors"])
        assert meta["rounds_in_tool_state"].value == 0
        rows = [(r.data["id"], r.data["kind"], r.data["text"]) for r in meta["tree"].value.records]
        expected = []
        for b in raw["behaviors"]:
            expected.append((b["id"], "behavior", b["statement"]))
            expected += [(m["id"], "mechanism", m["hypothesis"]) for m in b["mechanisms"]]
        assert rows == expected
        checks = checks_of(instance, "library_file", lib)
        assert set(checks) >= {"file_validates", "scored", "ids_unique_never_reused", "statements_distinct"}
        assert set(checks.values()) == {"SUCCEEDED"}, checks


def test_an_edited_library_is_observed_failing_its_check(demo, tmp_path):
    """The observation's checks are real: a behavior without an impact fails ``scored``, naming it."""
    lib = copy_tree(EXAMPLE_LIBRARY, tmp_path / "edited")
    raw = example_library()
    del raw["behaviors"][0]["impact"]
    (lib / "hypothesis_library.json").write_text(json.dumps(raw), encoding="utf-8")
    checked = in_process("library", lib, "--check", env=demo["env"])
    assert checked.returncode == 1 and f"{raw['behaviors'][0]['id']}: behavior has no impact" in checked.stdout
    with DagsterInstance.from_config(str(demo["home"])) as instance:
        assert checks_of(instance, "library_file", stored_id(lib))["scored"] == "FAILED"


def test_the_case_shows_its_published_batch_and_checks(demo):
    case = demo["ids"]["case"]
    published = json.loads((EXAMPLE_CASE / "analysis/hypotheses/0001/hypotheses.json").read_text(encoding="utf-8"))
    summary = (EXAMPLE_CASE / "analysis/hypotheses/0001/hypotheses.md").read_text(encoding="utf-8")
    key = f"{case}/r0001"
    with DagsterInstance.from_config(str(demo["home"])) as instance:
        assert observation(instance, "case_package", key) is not None
        for asset in ("case_interpretation", "case_context", "hypothesis_batch"):
            event = instance.get_latest_materialization_event(AssetKey(asset))
            assert event is not None and event.asset_materialization.partition == key, asset
        batch = instance.get_latest_materialization_event(AssetKey("hypothesis_batch")).asset_materialization.metadata
        ids = [h["id"] for h in published["hypotheses"]]
        assert batch["hypotheses"].value == ids and batch["reused"].value is True
        assert batch["summary"].value == summary
        checks = checks_of(instance, "hypothesis_batch", key)
        assert len(checks) == 6 and set(checks.values()) == {"SUCCEEDED"}, checks
        assert instance.get_latest_materialization_event(AssetKey("interpretation_draft")) is None  # none on disk


def test_offline_a_round_on_another_topic_meets_the_topic_guard_first(tmp_path):
    """Offline, another topic is refused by the guard (exit 2, naming both topics), not with
    "needs a model"; the library's own topic goes on to "needs a model". Nothing is written."""
    lib = copy_tree(EXAMPLE_LIBRARY, tmp_path / "library")
    topic = example_library()["topic"]
    before = snapshot(lib)
    other = in_process("library", lib, "--topic", "honey bee colony collapse", "--llm", "offline")
    assert other.returncode == 2, other.stderr
    first = other.stderr.splitlines()[0]
    assert f"is about {topic!r}, not 'honey bee colony collapse'" in first and "need a model" not in other.stderr
    same = in_process("library", lib, "--topic", topic, "--llm", "offline")
    assert same.returncode == 2 and "library rounds need a model" in same.stderr.splitlines()[0]
    after = snapshot(lib)
    assert after.pop(".hypograph/input-id") and after == before  # the rounds' runs registered it, nothing else


# -- the UI over GraphQL ---------------------------------------------------------------------------

ASSET = """query Asset($key: AssetKeyInput!, $partition: String!) {
  assetNodeOrError(assetKey: $key) { ... on AssetNode {
    description
    assetObservations(partitions: [$partition], limit: 1) { metadataEntries { label
      ... on IntMetadataEntry { intValue } ... on TableMetadataEntry { table { records } } } }
    assetMaterializations(partitions: [$partition], limit: 1) { metadataEntries { label
      ... on MarkdownMetadataEntry { mdStr } } }
  } }
}"""
CHECKS = """query Checks($key: AssetKeyInput!, $name: String!, $partition: String!) {
  assetCheckExecutions(assetKey: $key, checkName: $name, partition: $partition, limit: 1) { status }
}"""
JOB = """query Job($selector: PipelineSelector!) {
  pipelineOrError(params: $selector) { ... on Pipeline { description } }
}"""
SENSOR = """query Sensor($selector: SensorSelector!) {
  sensorOrError(sensorSelector: $selector) { ... on Sensor { sensorState { status ticks(limit: 5) { status } } } }
}"""
START = """mutation Start($selector: SensorSelector!) {
  startSensor(sensorSelector: $selector) { __typename }
}"""


def sensor(port: int, name: str) -> dict:
    selector = {**REPOSITORY, "sensorName": name}
    return graphql(port, SENSOR, {"selector": selector})["sensorOrError"]["sensorState"]


@pytest.fixture(scope="module")
def ui(demo):
    """`hypograph ui` on the demo's instance, no workspace configured (as `make ui` runs it)."""
    port = free_port()
    log = demo["home"].parent / "ui.log"
    process = services.start([HYPOGRAPH, "ui", "--port", port], log, demo["env"])
    try:
        wait_for_code_location(port, process)
        yield {"port": port, "log": log}
    finally:
        services.stop(process)


def test_the_ui_shows_the_library_and_the_case(demo, ui):
    port, lib, case = ui["port"], demo["ids"]["library"], f"{demo['ids']['case']}/r0001"
    node = graphql(port, ASSET, {"key": {"path": ["library_file"]}, "partition": lib})["assetNodeOrError"]
    entries = {e["label"]: e for e in node["assetObservations"][0]["metadataEntries"]}
    assert entries["behaviors"]["intValue"] == len(example_library()["behaviors"])
    assert [json.loads(r)["id"] for r in entries["tree"]["table"]["records"]][0] == "B1"
    for name in ("file_validates", "scored", "ids_unique_never_reused", "statements_distinct"):
        run = graphql(port, CHECKS, {"key": {"path": ["library_file"]}, "name": name, "partition": lib})
        assert [e["status"] for e in run["assetCheckExecutions"]] == ["SUCCEEDED"], name
    node = graphql(port, ASSET, {"key": {"path": ["hypothesis_batch"]}, "partition": case})["assetNodeOrError"]
    summary = next(e for e in node["assetMaterializations"][0]["metadataEntries"] if e["label"] == "summary")
    assert "## H1: " in summary["mdStr"]
    for job in ("library_round", "library_rescore"):  # the empty jobs say why they are empty
        selector = {**REPOSITORY, "pipelineName": job}
        assert "No model is configured" in graphql(port, JOB, {"selector": selector})["pipelineOrError"]["description"]


def test_the_daemon_never_evaluates_inputs_discovered_without_a_workspace(ui):
    """Another sensor started: once the daemon has ticked it, inputs_discovered is still stopped,
    with no tick and no line in the `make ui` log (it used to log its skip every 30 s)."""
    port = ui["port"]
    assert graphql(port, START, {"selector": {**REPOSITORY, "sensorName": "case_retries_due"}})
    deadline = time.monotonic() + 180
    while not sensor(port, "case_retries_due")["ticks"]:
        assert time.monotonic() < deadline, "the daemon did not tick a started sensor in time"
        time.sleep(1)
    quiet = sensor(port, "inputs_discovered")
    assert quiet["status"] == "STOPPED" and quiet["ticks"] == []
    text = ui["log"].read_text(errors="replace")
    assert "case_retries_due" in text  # the daemon's sensor lines do reach this log
    assert "inputs_discovered" not in text


def test_the_readme_names_every_asset_and_only_assets():
    """Every snake_case name in README.md's asset graph is an asset, a partition set, a job or a
    sensor of the code location, and every asset is in it."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    graph = readme.split("## The asset graph", 1)[1].split("```")[1]
    defs = _defs()
    assets = {k.to_user_string() for k in defs.resolve_asset_graph().get_all_asset_keys()}
    known = (
        assets
        | {j.name for j in defs.resolve_all_job_defs()}
        | {s.name for s in defs.sensors}
        | {"hypothesis_inputs", "vaults", "libraries", "library_rounds", "case_revisions"}
    )
    named = set(re.findall(r"\b[a-z]+(?:_[a-z0-9]+)+\b", graph))
    assert named - known == set()
    assert assets - set(re.findall(r"\b[a-z_]+\b", graph)) == set()
