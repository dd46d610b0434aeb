"""What a run's page shows when a step cannot do its work, through the jobs the UI launches (run
in-process here, on throwaway instances; tests/system/test_browser_backfill.py looks at the page itself).

A project error, a setting out of range and a refusal: the step's ``Failure`` carries the cause's
own line as its description, what it names as metadata, no cause chain (so no project frames and
no Dagster wrapper), and the same line logged at ERROR (the `make ui` terminal's line).

A partition that cannot run yet or never will (an unconfirmed revision, one a later `case add`
superseded, a round with no settings to run with): the step ends with no output, nothing
downstream runs, the run succeeds, the reason is recorded on the asset's partition and as a run
tag, earlier materializations stay; a command on it exits 2 (``NotDone``)."""

from __future__ import annotations

import pytest
from cli_helper import in_process
from conftest import EXAMPLE_LIBRARY, EXAMPLE_VAULT, REPO, copy_tree
from dagster import AssetKey, DagsterEventType, DagsterInstance, RunsFilter, asset, materialize

from assets.errors import SKIPPED_TAG, Skip, project_errors
from hypograph.errors import HypographError, NotDone
from hypograph.inputs import stored_id
from hypograph.proximity.settings import ProximitySettings
from pipelines.launch import execute, skips

EXAMPLE_CASE = REPO / "examples" / "case"


def step_failures(result) -> dict:
    return {e.step_key: e.step_failure_data for e in result.all_events if e.is_step_failure}


def error_logs(result, instance) -> list[str]:
    return [e.user_message for e in instance.all_logs(result.run_id) if e.level >= 40 and e.dagster_event is None]


def test_a_setting_out_of_range_ends_its_first_step_with_the_line_and_nothing_red(tmp_path):
    """A Launchpad value the settings model refuses (not validated before the run, as the UI's
    is not): the first step ends with no output, nothing downstream runs, the run succeeds (no
    partition turns red); the line names the field by both names and its range, as the step's
    skip (status REFUSED), the run's tags and an ERROR log line; the command's door says exit 1."""
    from assets.errors import REASON_TAG

    vault = copy_tree(EXAMPLE_VAULT, tmp_path / "vault")
    with DagsterInstance.ephemeral() as instance:
        bad = ProximitySettings.model_construct(graph_threshold=30.0)  # as typed in the Launchpad
        line = "graph_threshold (--threshold): must be ≥ -1 and ≤ 1 (got 30.0)"
        with pytest.raises(HypographError, match=r"^hypothesis_texts: graph_threshold \(--threshold\)") as raised:
            execute(vault, "proximity", {"proximity": bad}, offline=True, instance=instance)
        assert not isinstance(raised.value, NotDone)  # exit 1: refused, not "not done yet"
        [run] = instance.get_runs()
        assert run.is_success and run.tags[SKIPPED_TAG] == "REFUSED" and run.tags[REASON_TAG] == line
        ran = {e.step_key for e in instance.all_logs(run.run_id, of_type=DagsterEventType.STEP_SUCCESS)}
        assert ran == {"hypothesis_texts"}  # nothing downstream ran
        errors = [e.user_message for e in instance.all_logs(run.run_id) if e.level >= 40 and e.dagster_event is None]
        assert f"skipped: {line}" in errors  # what the `make ui` terminal prints
        assert not (vault / "proximity").exists()


def test_a_refused_input_names_its_file_in_the_failure(tmp_path):
    """A vault node that does not parse stops the run: the Failure's line is the project's own and
    names the file first, which the metadata names too; nothing of Dagster's wrapper."""
    vault = copy_tree(EXAMPLE_VAULT, tmp_path / "vault")
    node = sorted((vault / "hypotheses").glob("H-*.md"))[0]
    node.write_text("---\nid: [unclosed\n---\nbody\n", encoding="utf-8")
    with DagsterInstance.ephemeral() as instance:
        result = execute(vault, "proximity", offline=True, instance=instance)
        [(step, data)] = step_failures(result).items()
        line = data.user_failure_data.description
        named = str(node.relative_to(vault))  # the vault's own path of it
        assert line.startswith(f"{named}: frontmatter") and "\n" not in line, line
        meta = data.user_failure_data.metadata
        assert meta["names"].value == named and meta["status"].value == "REFUSED"
        assert "DagsterExecutionStepExecutionError" not in data.error.message and data.error.cause is None
        assert line in error_logs(result, instance)


def test_a_skip_outside_a_generator_step_is_a_failure_with_its_line():
    """A step that must give its output cannot skip: its reason becomes its Failure, not a crash."""

    @asset
    @project_errors
    def needs_output():
        raise Skip("x: not yet")

    result = materialize([needs_output], raise_on_error=False)
    [(step, data)] = step_failures(result).items()
    assert data.user_failure_data.description == "x: not yet" and data.error.cause is None


@pytest.fixture
def case(tmp_path):
    """The example case (revision 1 confirmed, its batch published) registered, offline."""
    return copy_tree(EXAMPLE_CASE, tmp_path / "case")


def materialized(instance, asset_name: str, partition: str) -> int:
    records = instance.fetch_materializations(AssetKey(asset_name), limit=100).records
    return sum(1 for r in records if r.partition_key == partition)


def test_an_unconfirmed_revision_skips_and_a_superseded_one_stays_green(case, tmp_path):
    """r0001 runs; `case add` makes r0002 (unconfirmed) and supersedes r0001. A case_batch run of
    either succeeds with nothing materialized: r0002 skipped as not confirmed (NOT_DONE), r0001 as
    superseded (SUPERSEDED), both recorded on case_interpretation's partition and as a run tag;
    r0001's earlier materializations are still its latest, nothing failed; the command's launch
    path answers NotDone (exit 2)."""
    notes = tmp_path / "notes.txt"
    notes.write_text("The pier was repainted in May.\n", encoding="utf-8")
    with DagsterInstance.ephemeral() as instance:
        assert execute(case, "case_batch", offline=True, sub="r0001", instance=instance).success
        first = stored_id(case) + "/r0001"
        assert materialized(instance, "hypothesis_batch", first) == 1
        added = in_process("case", "add", case, notes)
        assert added.returncode == 0, added.stderr
        for sub, status, words in (("r0002", "NOT_DONE", "is not confirmed"), ("r0001", "SUPERSEDED", "superseded by")):
            with pytest.raises(NotDone, match=words) as raised:
                execute(case, "case_batch", offline=True, sub=sub, instance=instance)
            assert str(raised.value).startswith("case_interpretation: ") and "\n" not in str(raised.value)
            assert_skipped(instance, f"{stored_id(case)}/{sub}", status)
        assert materialized(instance, "hypothesis_batch", first) == 1  # r0001 keeps what it had
        assert materialized(instance, "case_interpretation", first) == 1
        assert not [r for r in instance.get_runs() if r.is_failure]


def assert_skipped(instance, partition: str, status: str) -> None:
    """The latest run on ``partition`` succeeded with case_interpretation skipped for ``status``
    (a run tag, an observation of its partition) and the steps after it not run."""
    run = instance.get_runs(filters=RunsFilter(tags={"dagster/partition": partition}), limit=1)[0]
    assert run.is_success and run.tags[SKIPPED_TAG] == status
    observed = instance.fetch_observations(AssetKey("case_interpretation"), limit=10).records
    assert [o for o in observed if o.partition_key == partition], partition
    ran = {e.step_key for e in instance.all_logs(run.run_id, of_type=DagsterEventType.STEP_SUCCESS)}
    skipped = {e.step_key for e in instance.all_logs(run.run_id, of_type=DagsterEventType.STEP_SKIPPED)}
    assert "case_interpretation" in ran and {"case_context", "hypothesis_batch"} <= skipped


def test_a_round_with_nothing_to_run_with_skips_in_both_library_jobs(tmp_path):
    """A library's first round given no topic (a backfill over a partition added by hand), and a
    re-score of a round never generated: both runs succeed with the reason recorded, the library
    file unchanged; run_job answers NotDone."""
    from pipelines.launch import run_job

    library = copy_tree(EXAMPLE_LIBRARY, tmp_path / "library")
    before = (library / "hypothesis_library.json").read_bytes()
    with DagsterInstance.ephemeral() as instance:
        for job in ("library_round", "library_rescore"):
            with pytest.raises(NotDone, match="r0001") as raised:
                execute(library, job, offline=True, sub="r0001", instance=instance)
            first = "round_candidates" if job == "library_round" else "round_scores"
            assert str(raised.value).startswith(f"{first}: "), raised.value
        assert not [r for r in instance.get_runs() if not r.is_success]
    with pytest.raises(NotDone):
        run_job(library, "library_rescore", offline=True, sub="r0001")
    assert (library / "hypothesis_library.json").read_bytes() == before


def test_skips_reads_only_the_recorded_skips(tmp_path):
    """A run that skipped nothing has no skip lines (so a command's success stays exit 0)."""
    vault = copy_tree(EXAMPLE_VAULT, tmp_path / "vault")
    with DagsterInstance.ephemeral() as instance:
        result = execute(vault, "proximity", offline=True, instance=instance)
        assert result.success and skips(result) == []


def test_a_project_error_is_not_retried(tmp_path):
    """allow_retries=False: a retry policy does not re-run a refused input."""
    from dagster import RetryPolicy

    calls = []

    @asset(retry_policy=RetryPolicy(max_retries=2))
    @project_errors
    def refused():
        calls.append(1)
        raise HypographError("y.json: field z: bad")

    result = materialize([refused], raise_on_error=False)
    assert not result.success and len(calls) == 1
