"""Hostile input, issue 32, items 2, 5, 6 and 9, each through the path a user takes:

* 2: a schema-valid model that marks every hypothesis off-topic: ``structure`` keeps them (one
  line says so) and the vault stays one that ``check`` and ``structure`` accept;
* 5: a server answering megabytes per request: the traces of a ``structure`` run stay bounded
  (``TRACE_KEEP`` head and tail of any long string, and its size);
* 6: one bad folder or registry entry beside a good one: every sensor still requests the good one,
  the bad one skipped with one logged line; the CLI says one line, no traceback;
* 9: ``batch --into`` a folder that is not a vault, and a case whose ``vault`` setting names one:
  refused in one line before anything is written.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from cli_helper import in_process
from conftest import offline_env
from llm_stub import Reply, answer, llm_env, llm_server  # noqa: F401
from test_case_confinement import published  # noqa: F401  (fixture)
from test_structure import SAHUL, sahul_model, system_of, tagged

from hypograph.structure.dispositions import TOPIC_SYSTEM
from hypograph.vault.vault import open_vault


def model_env(llm_server, llm_env) -> dict[str, str]:
    """The environment of a command that asks the stub (the session's instance, no offline flag)."""
    env = {k: v for k, v in offline_env().items() if k != "HYPOGRAPH_LLM"}
    return {**env, **llm_env(llm_server)}


@pytest.fixture
def sahul(tmp_path) -> Path:
    return Path(shutil.copytree(SAHUL, tmp_path / "sahul"))


# -- 2: an answer that would drop everything -----------------------------------------------------


def everything_off_topic(body: dict):
    """The micro-example's model, but every hypothesis is off-topic (a valid answer of the schema)."""
    if system_of(body).startswith(TOPIC_SYSTEM):
        items = [
            {"hypothesis": int(a["number"]), "off_topic": True, "drop_reason": "Concerns nothing the question asks."}
            for a, _ in tagged(body, "hypothesis")
        ]
        return answer({"items": items})
    return sahul_model()(body)


def test_a_model_that_drops_everything_leaves_a_usable_vault(sahul, llm_server, llm_env):
    env = model_env(llm_server, llm_env)
    llm_server.always(everything_off_topic)
    before = {h.id for h in open_vault(sahul).of_type("hypothesis")}
    done = in_process("structure", sahul, env=env)
    assert done.returncode == 0, done.stderr
    assert "none dropped" in done.stdout
    active = list((sahul / "hypotheses").glob("H-*.md"))
    assert len(active) >= len(before) - 1  # 4b may still drop its straggler (H-133), 4a dropped none
    assert before <= {h.id for h in open_vault(sahul).of_type("hypothesis")}
    again = in_process("structure", sahul, env=env)
    assert again.returncode == 0, again.stderr
    checked = in_process("check", sahul)
    assert "not a vault" not in checked.stdout + checked.stderr


# -- 5: traces that would fill the disk ---------------------------------------------------------

HUGE = 3 * 1024 * 1024  # bytes a request the stub answers


def test_a_server_answering_megabytes_leaves_bounded_traces(sahul, llm_server, llm_env):
    """Every request answered with 3 MB that is no answer: each trace keeps TRACE_KEEP characters at
    each end of any long string (and its size), so the run's traces stay far under what was sent."""
    from hypograph.llm.trace import TRACE_KEEP

    env = model_env(llm_server, llm_env)
    llm_server.always(lambda body: answer('{"items": [' + "x" * HUGE))
    in_process("structure", sahul, env=env)  # falls back to the offline decisions
    requests = len(llm_server.requests)
    assert requests >= 2
    traces = [p for p in (sahul / ".hypograph" / "traces").rglob("*.json") if p.is_file()]
    total = sum(p.stat().st_size for p in traces)
    # at most a few long strings a trace (the answer; a re-ask quoting it), each cut to 2 * TRACE_KEEP
    assert traces and total < len(traces) * 8 * TRACE_KEEP, (len(traces), total)
    assert total < requests * HUGE / 4
    cut = [json.loads(p.read_text())["response"] for p in traces if "response" in json.loads(p.read_text())]
    assert cut and all(f"{HUGE + 11} characters" in r for r in cut if len(r) > TRACE_KEEP)


# -- 9: batch --into a folder that is not a vault ------------------------------------------------


def tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize("holds", ["nothing", "notes", "run-dir"])
def test_batch_into_a_folder_that_is_no_vault_is_refused_before_a_write(published, tmp_path, holds):
    plain = tmp_path / "plain"
    plain.mkdir()
    if holds == "notes":
        (plain / "notes.md").write_text("a note\n")
    if holds == "run-dir":
        (plain / "hypotheses").mkdir()
        (plain / "hypotheses" / "H-1.json").write_text("{}")
    before = tree(plain)
    done = in_process("batch", published, "--into", plain)
    assert done.returncode == 1 and done.stderr.count("\n") == 1, done.stderr
    assert f"{plain}: not a vault" in done.stderr and "(--into)" in done.stderr
    assert tree(plain) == before


def test_a_case_naming_a_folder_that_is_no_vault_mints_nothing_there(published, tmp_path):
    """The job's path (``mint_batch``, what ``batch_vault_nodes`` runs): the vault the case names."""
    from hypograph.case.bridge import mint_batch
    from hypograph.case.package import TARGET_VAULT, CasePackage
    from hypograph.errors import HypographError

    plain = tmp_path / "plain"
    plain.mkdir()
    pkg = CasePackage(published)
    m = pkg.manifest()
    pkg.write({}, {**m, TARGET_VAULT: str(plain), "package_generation": m["package_generation"] + 1})
    with pytest.raises(HypographError) as e:
        mint_batch(published)
    assert "\n" not in str(e.value) and f"{plain}: not a vault" in str(e.value)
    assert tree(plain) == []


# -- 6: one bad folder or registry entry beside a good one ---------------------------------------


def poison_registry(registry: Path) -> None:
    """A hand-edited entry whose path is a number, beside whatever the registry holds."""
    doc = json.loads(registry.read_text()) if registry.exists() else {}
    doc["numbered"] = {"path": 5, "kind": "vault"}
    registry.write_text(json.dumps(doc))


def test_every_sensor_skips_one_bad_input_and_serves_the_good_one(tmp_path):
    from case_support import make_case
    from conftest import build_run_dir, build_vault
    from dagster import DagsterInstance, SensorResult, build_sensor_context

    from assets.case.jobs import case_retries_due
    from assets.library.jobs import next_library_round
    from assets.sources import inputs_discovered
    from assets.structure.flow import hypotheses_changed
    from resources import Inputs

    ws, registry = tmp_path / "workspace", tmp_path / "inputs.json"
    good = build_vault(ws / "vault")
    build_run_dir(ws / "bad-id")
    (ws / "bad-id" / ".hypograph").mkdir(exist_ok=True)
    (ws / "bad-id" / ".hypograph" / "input-id").write_bytes(b"\xff\xfe not utf-8\n")
    case = make_case(ws)
    (case / "analysis" / "interpretation" / "²").mkdir(parents=True)
    (tmp_path / "lib" / ".hypograph" / "library" / "rounds").mkdir(parents=True)
    (tmp_path / "lib" / ".hypograph" / "library" / "rounds" / "r0001").write_bytes(b"\xff")  # a file, not a round
    inputs = Inputs(workspace=str(ws), registry_file=str(registry))
    instance = DagsterInstance.ephemeral()
    inputs.registry().add(good)
    inputs.registry().add(case)
    inputs.registry().add(tmp_path / "lib", "library")
    poison_registry(registry)

    found = inputs_discovered(build_sensor_context(instance=instance), inputs=inputs)
    assert isinstance(found, SensorResult)
    added = {k for r in found.dynamic_partitions_requests for k in r.partition_keys}
    assert "vault" in added  # the good one, beside a case with a "²" revision folder and a bad entry
    for r in found.dynamic_partitions_requests:
        instance.add_dynamic_partitions(r.partitions_def_name, list(r.partition_keys))

    changed = hypotheses_changed(build_sensor_context(instance=instance), inputs=inputs)
    assert isinstance(changed, SensorResult) and [r.partition_key for r in changed.run_requests] == ["vault"]

    rounds = next_library_round(build_sensor_context(instance=instance), inputs=inputs)  # does not raise
    retries = case_retries_due(build_sensor_context(instance=instance), inputs=inputs)  # does not raise
    assert "no library" in rounds.skip_message and "no case retry" in retries.skip_message


def test_a_malformed_registry_entry_is_ignored_in_one_line(tmp_path):
    from hypograph.inputs import Registry

    registry = Registry(tmp_path / "inputs.json")
    poison_registry(registry.store.path)
    assert registry.records() == []
    assert registry.ignored == [f"{registry.store.path}: entry 'numbered': field 'path': 5 is not a path; ignored"]
