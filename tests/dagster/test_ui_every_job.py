"""Every job, launched as the UI launches it (its partition and its Launchpad config, no command's
checks before it), on every partition state a user can reach: fresh input, missing upstream, bad
file, bad setting, model down, unconfirmed, superseded, another topic, a key typed by hand.

For each run: no event carries a stack trace or Dagster frames (``Traceback``, ``Stack Trace``,
``File "``; every recorded error has no frames and no cause chain), and the run fails (painting its
partitions red) only for a real failure; a decision, a setting out of range or a job launched out
of order ends its run without a failure, its one line recorded on the run (``hypograph/skipped``)."""

from __future__ import annotations

import pytest
from conftest import EXAMPLE_LIBRARY, EXAMPLE_RUN, EXAMPLE_VAULT, REPO, copy_tree
from dagster import DagsterEventType, DagsterInstance

from assets.errors import SKIPPED_TAG
from hypograph.inputs import sub_key
from pipelines.instance import register

EXAMPLE_CASE = REPO / "examples" / "case"
FORBIDDEN = ("Traceback", "Stack Trace", 'File "')


@pytest.fixture
def instance(tmp_path, monkeypatch):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    monkeypatch.setenv("HYPOGRAPH_LLM", "offline")
    with DagsterInstance.ephemeral() as instance:
        yield instance


def launch(instance, job: str, key: str, resources: dict | None = None):
    """The Launchpad's launch: the job on ``key`` with ``resources`` as its run config (the
    daemon's run worker executes the same plan in its own process)."""
    from pipelines.definitions import defs

    config = {"resources": {name: {"config": values} for name, values in (resources or {}).items()}}
    return defs.resolve_job_def(job).execute_in_process(
        instance=instance, partition_key=key, run_config=config, raise_on_error=False
    )


def lines_of(instance, result) -> list[str]:
    """Everything the run's page can show as text: each event's message and each error in full."""
    out = []
    for record in instance.all_logs(result.run_id):
        out.append(record.user_message or "")
        event = record.dagster_event
        error = getattr(getattr(event, "event_specific_data", None), "error", None) if event else None
        while error is not None:
            assert error.stack == [], f"{event.event_type_value}: frames recorded: {error.message}"
            out.append(error.to_string())
            error = error.cause or error.context
    return out


def assert_clean(instance, result) -> None:
    text = "\n".join(lines_of(instance, result))
    for word in FORBIDDEN:
        assert word not in text, f"{word!r} in the run's events:\n{text[:3000]}"


def assert_decided(instance, result, status: str, *words: str) -> str:
    """The run ended without a failure (nothing red), its step skipped for ``status`` with a line
    containing ``words``; that line."""
    assert_clean(instance, result)
    assert result.success, [e.message for e in result.all_events if e.is_step_failure]
    run = instance.get_run_by_id(result.run_id)
    assert run.tags.get(SKIPPED_TAG) == status, run.tags
    skipped = [
        e.event_specific_data.asset_observation.metadata["skipped"].value
        for e in result.all_events
        if e.event_type == DagsterEventType.ASSET_OBSERVATION
        and "skipped" in e.event_specific_data.asset_observation.metadata
    ]
    assert skipped, "no skip recorded"
    for word in words:
        assert any(word in line for line in skipped), (word, skipped)
    assert all("\n" not in line for line in skipped)
    return skipped[0]


def test_structure_before_proximity_names_the_job_to_launch(instance, tmp_path):
    vault = register(instance, copy_tree(EXAMPLE_VAULT, tmp_path / "vault"))
    instance.add_dynamic_partitions("vaults", [vault.id])
    instance.add_dynamic_partitions("hypothesis_inputs", [vault.id])
    line = assert_decided(instance, launch(instance, "structure", vault.id), "NOT_DONE", "`proximity` job")
    assert "`hypograph proximity " in line
    assert not (vault.path / "agent-notes" / "structure.md").exists()


def test_report_before_proximity_names_the_job_to_launch(instance, tmp_path):
    run = register(instance, copy_tree(EXAMPLE_RUN, tmp_path / "run"))
    instance.add_dynamic_partitions("hypothesis_inputs", [run.id])
    assert_decided(instance, launch(instance, "report", run.id), "NOT_DONE", "`proximity` job")


@pytest.mark.parametrize(
    ("field", "value", "flag"),
    [("graph_threshold", 30.0, "--threshold"), ("shards", 0, None), ("dupe_threshold", -0.5, "--dupe-threshold")],
)
def test_a_setting_out_of_range_ends_before_any_work_and_paints_nothing_red(instance, tmp_path, field, value, flag):
    run = register(instance, copy_tree(EXAMPLE_RUN, tmp_path / "run"))
    instance.add_dynamic_partitions("hypothesis_inputs", [run.id])
    result = launch(instance, "proximity", run.id, {"proximity": {field: value}})
    line = assert_decided(instance, result, "REFUSED", field)
    if flag:
        assert flag in line
    assert "must be" in line
    assert not (run.path / "proximity").exists()  # nothing written


def test_a_bad_file_is_a_real_failure_in_one_line(instance, tmp_path):
    vault = register(instance, copy_tree(EXAMPLE_VAULT, tmp_path / "vault"))
    instance.add_dynamic_partitions("hypothesis_inputs", [vault.id])
    node = sorted((vault.path / "hypotheses").glob("H-*.md"))[0]
    node.write_text("---\nid: [unclosed\n---\nbody\n", encoding="utf-8")
    result = launch(instance, "proximity", vault.id)
    assert not result.success
    assert_clean(instance, result)


def test_library_round_states(instance, tmp_path):
    library = register(instance, copy_tree(EXAMPLE_LIBRARY, tmp_path / "library"))
    instance.add_dynamic_partitions("library_rounds", [sub_key(library.id, "r0001")])
    key = sub_key(library.id, "r0001")
    before = (library.path / "hypothesis_library.json").read_bytes()
    assert_decided(instance, launch(instance, "library_round", key), "NOT_DONE", "topic")
    assert_decided(instance, launch(instance, "library_rescore", key), "NOT_DONE")
    other = {"library": {"topic": "the history of Byzantine tax law"}}
    line = assert_decided(instance, launch(instance, "library_round", key, other), "NOT_DONE", "confirm_topic")
    assert "new_library" in line and "--new-library" in line
    assert (library.path / "hypothesis_library.json").read_bytes() == before


def test_library_round_with_the_model_down_is_not_done(instance, tmp_path, monkeypatch):
    from hypograph.library.schema import read_library

    library = register(instance, copy_tree(EXAMPLE_LIBRARY, tmp_path / "library"))
    key = sub_key(library.id, "r0001")
    instance.add_dynamic_partitions("library_rounds", [key])
    monkeypatch.delenv("HYPOGRAPH_LLM")
    monkeypatch.setenv("HYPOGRAPH_LLM_MODEL", "m")
    monkeypatch.setenv("HYPOGRAPH_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("HYPOGRAPH_LLM_MAX_RETRIES", "0")
    topic = read_library(library.path)[0].topic
    assert_decided(instance, launch(instance, "library_round", key, {"library": {"topic": topic}}), "NOT_DONE")


def test_case_jobs_on_every_revision_state(instance, tmp_path):
    from cli_helper import in_process

    case = register(instance, copy_tree(EXAMPLE_CASE, tmp_path / "case"))
    first = sub_key(case.id, "r0001")
    instance.add_dynamic_partitions("case_revisions", [first])
    for job in ("case_interpret", "case_confirmed", "case_batch"):
        result = launch(instance, job, first)
        assert_clean(instance, result)
        assert result.success, job
    notes = tmp_path / "notes.txt"
    notes.write_text("The pier was repainted in May.\n", encoding="utf-8")
    assert in_process("case", "add", case.path, notes).returncode == 0
    second = sub_key(case.id, "r0002")
    instance.add_dynamic_partitions("case_revisions", [second])
    for job in ("case_confirmed", "case_batch", "case_batch_into_vault"):
        assert_decided(instance, launch(instance, job, second), "NOT_DONE", "confirm")
        assert_decided(instance, launch(instance, job, first), "SUPERSEDED")


def tick(instance):
    """One evaluation of the partition_keys sensor, its requests applied as the daemon applies them."""
    from dagster import build_sensor_context
    from dagster._core.definitions.dynamic_partitions_request import DeleteDynamicPartitionsRequest

    from assets.partition_keys import partition_keys
    from resources import Inputs

    result = partition_keys(build_sensor_context(instance=instance), inputs=Inputs())
    for request in getattr(result, "dynamic_partitions_requests", None) or []:
        if isinstance(request, DeleteDynamicPartitionsRequest):
            for key in request.partition_keys:
                instance.delete_dynamic_partition(request.partitions_def_name, key)
        else:
            instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
    return result


def test_a_registered_library_offers_its_next_round_once_a_model_is_configured(instance, tmp_path, monkeypatch):
    """Offline: no round partition (the job's description says why). With a model named: registering
    the library adds <id>/r0001 at once; after a round exists on disk the sensor offers r0002."""
    library = copy_tree(EXAMPLE_LIBRARY, tmp_path / "library")
    record = register(instance, library)
    assert instance.get_dynamic_partitions("library_rounds") == []
    tick(instance)
    assert instance.get_dynamic_partitions("library_rounds") == []
    monkeypatch.delenv("HYPOGRAPH_LLM")
    monkeypatch.setenv("HYPOGRAPH_LLM_MODEL", "m")
    register(instance, library)
    assert instance.get_dynamic_partitions("library_rounds") == [sub_key(record.id, "r0001")]
    (library / ".hypograph" / "library" / "rounds" / "r0001").mkdir(parents=True)  # a round with state: pending
    tick(instance)
    assert instance.get_dynamic_partitions("library_rounds") == [sub_key(record.id, "r0001")]


def test_keys_typed_by_hand_that_name_no_input_are_removed_saying_why(instance, tmp_path):
    from assets.partition_keys import stray_keys
    from pipelines.instance import registry

    library = register(instance, copy_tree(EXAMPLE_LIBRARY, tmp_path / "library"))
    run = register(instance, copy_tree(EXAMPLE_RUN, tmp_path / "run"))
    typed = {
        "library_rounds": ["foo/r0001", f"{library.id}/r0009", f"{library.id}/x", f"{run.id}/r0001"],
        "hypothesis_inputs": ["foo"],
        "vaults": [run.id],
        "case_revisions": [f"{library.id}/r0001"],
    }
    for name, keys in typed.items():
        instance.add_dynamic_partitions(name, keys)
    records = {r.id: r for r in registry(instance).records()}
    why = {key: line for name, keys in typed.items() for key, line in stray_keys(name, keys, records, print).items()}
    assert set(why) == {k for keys in typed.values() for k in keys}
    assert why["foo/r0001"].startswith("'foo' is no registered library: register its folder with `hypograph add")
    assert why[f"{library.id}/r0009"] == f"'r0009' is no round {library.id} has or runs next (its next: r0001)"
    tick(instance)
    for name, keys in typed.items():
        assert not set(keys) & set(instance.get_dynamic_partitions(name)), name
    assert set(instance.get_dynamic_partitions("hypothesis_inputs")) == {library.id, run.id}  # registered: kept


def test_a_case_question_edited_after_confirmation_is_refused_by_every_case_job(instance, tmp_path):
    """Issue 46: a person's draft.json edited after `case confirm` (its question) is part of what the
    case is: the case package's version changes (what the UI shows as the source's new version),
    and each case job launched on the revision as the UI (or the retry sensor) launches it refuses
    the edit in its one line naming the file and the field (a failed run, as `case confirm` exits
    1), instead of building on the confirmed question with the person's words dropped."""
    import json

    from cli_helper import in_process

    from hypograph.inputs import fingerprint

    report = tmp_path / "inputs" / "grower-report.md"
    report.parent.mkdir()
    report.write_text("Plants in house 3 wilt every afternoon since 2 June.\n", encoding="utf-8")
    case = tmp_path / "case"
    question = "Why do the tomato plants in house 3 wilt every afternoon?"
    assert in_process("case", "new", case, "--question", question, report).returncode == 0
    assert in_process("case", "interpret", case).returncode == 0  # offline: a template a person fills in
    draft = case / "analysis/interpretation/0001/draft.json"
    filled = json.loads(draft.read_text())
    filled["statements"] = [{"text": "Plants wilt every afternoon.", "source_ids": ["IN1"]}]
    draft.write_text(json.dumps(filled, indent=2))
    confirmed = in_process("case", "confirm", case, "--by", "ana")
    assert confirmed.returncode == 0, confirmed.stderr
    key = sub_key(register(instance, case).id, "r0001")
    instance.add_dynamic_partitions("case_revisions", [key])
    assert launch(instance, "case_confirmed", key).success  # unedited: verified as confirmed

    before = fingerprint(case, "case")
    draft.write_text(json.dumps({**filled, "question": "Why did house 3 wilt on 2 June only?"}, indent=2))
    assert fingerprint(case, "case") != before
    for job in ("case_confirmed", "case_batch", "case_batch_into_vault"):
        result = launch(instance, job, key)
        assert_clean(instance, result)
        assert not result.success, job
        assert [e.step_key for e in result.all_events if e.is_step_failure] == ["case_interpretation"], job
        line = f"{draft}: field 'question' was edited after revision 1 was confirmed"
        assert any(line in text for text in lines_of(instance, result)), job
    assert not (case / "analysis/hypotheses").exists()  # nothing built on the confirmed question
