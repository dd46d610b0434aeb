"""What the user's path skips (issue 33), tested by what runs, not by timing: a proximity run
draws no pictures (the report job does, once per change of its inputs), and ``hypograph
structure`` on a vault unchanged since its last structuring with the same settings starts no run.
"""

from __future__ import annotations

import shutil
from types import SimpleNamespace

import dagster as dg
import pytest
from cli_helper import in_process
from conftest import EXAMPLE_RUN, EXAMPLE_VAULT, copy_tree, offline_env

from pipelines.definitions import defs

PICTURES = ("report.html", "cluster-map.png", "thresholds.png")


def open_instance(home):
    home.mkdir(exist_ok=True)
    return dg.DagsterInstance.from_config(str(home))


def _runs(home) -> list[tuple[str, str]]:
    """(job, status) of every run on the instance at ``home``, oldest first."""
    with open_instance(home) as instance:
        return [(r.job_name, r.status.value) for r in reversed(instance.get_runs())]


@pytest.fixture(scope="module")
def first_structuring(tmp_path_factory):
    """A copy of the example vault structured once by ``hypograph structure`` on an instance of its
    own (at ``base``/vault and ``base``/home), its result, the runs it made, and a copy of both
    taken right after (``base``/kept): the starting state of the tests below, made once."""
    base = tmp_path_factory.mktemp("structured")
    vault, home = copy_tree(EXAMPLE_VAULT, base / "vault"), base / "home"
    env = {**offline_env(), "DAGSTER_HOME": str(home)}
    first = in_process("structure", vault, "--llm", "offline", env=env)
    runs = _runs(home)
    for name in ("vault", "home"):
        shutil.copytree(base / name, base / "kept" / name, symlinks=True)
    return SimpleNamespace(base=base, vault=vault, home=home, env=env, first=first, runs=runs)


@pytest.fixture
def structured(first_structuring):
    """The vault and instance as the first structuring left them, put back at the same paths (the
    instance records the vault's path) whatever an earlier test did to them."""
    state = first_structuring
    for name in ("vault", "home"):
        shutil.rmtree(state.base / name)
        shutil.copytree(state.base / "kept" / name, state.base / name, symlinks=True)
    assert state.first.returncode == 0, state.first.stderr
    return state


def test_proximity_draws_no_pictures_and_the_report_job_draws_them_once_per_change(tmp_path):
    run = copy_tree(EXAMPLE_RUN, tmp_path / "run")
    env = {**offline_env(), "DAGSTER_HOME": str(tmp_path / "home")}
    sensor = dg.AssetSelection.assets("proximity_report")
    with open_instance(tmp_path / "home") as instance:  # the sensor's ticks, as the daemon runs them
        tick = dg.evaluate_automation_conditions(defs=defs, instance=instance, asset_selection=sensor)
        assert tick.total_requested == 0
    assert in_process("proximity", run, "--llm", "offline", env=env).returncode == 0
    assert not any((run / "proximity" / name).exists() for name in PICTURES)  # not on proximity's path
    with open_instance(tmp_path / "home") as instance:
        first = dg.evaluate_automation_conditions(
            defs=defs, instance=instance, asset_selection=sensor, cursor=tick.cursor
        )
        assert first.total_requested == 1  # the sensor, when on, draws them after proximity
    done = in_process("report", run, env=env)
    assert done.returncode == 0, done.stderr
    assert all((run / "proximity" / name).is_file() for name in PICTURES)
    assert done.stdout.splitlines()[1:] == [str(run / "proximity" / n) for n in (*PICTURES[1:], PICTURES[0])] + [
        str(run / "proximity" / "report.json")
    ]
    with open_instance(tmp_path / "home") as instance:
        again = dg.evaluate_automation_conditions(
            defs=defs, instance=instance, asset_selection=sensor, cursor=first.cursor
        )
        assert again.total_requested == 0  # drawn for these inputs: not again
    assert [job for job, _ in _runs(tmp_path / "home")] == ["proximity", "report"]


def test_structure_on_an_unchanged_vault_starts_no_run(structured):
    vault, env, home = structured.vault, structured.env, structured.home
    runs = _runs(home)
    assert runs == structured.runs
    assert [job for job, _ in runs] == ["proximity", "structure", "proximity"]
    second = in_process("structure", vault, "--llm", "offline", env=env)
    assert second.returncode == 0, second.stderr
    assert _runs(home) == runs  # no proximity run, no step 4
    assert "unchanged since its last structuring with these settings: no run started" in second.stdout
    assert "structure map:" in second.stdout
    other = in_process("structure", vault, "--llm", "offline", "--threshold", "0.35", env=env)
    assert other.returncode == 0, other.stderr
    assert [job for job, _ in _runs(home)][len(runs) :] == ["proximity", "structure"]
    before = len(_runs(home))
    node = sorted((vault / "hypotheses").glob("*.md"))[0]
    node.touch()
    touched = in_process("structure", vault, "--llm", "offline", "--threshold", "0.35", env=env)
    assert touched.returncode == 0, touched.stderr  # a touch changes no byte: the version is the same
    assert len(_runs(home)) == before
    node.write_text(node.read_text(encoding="utf-8") + "\nEdited by hand.\n", encoding="utf-8")
    edited = in_process("structure", vault, "--llm", "offline", "--threshold", "0.35", env=env)
    assert edited.returncode == 0, edited.stderr
    assert [job for job, _ in _runs(home)][before:][:2] == ["proximity", "structure"]


def test_structure_reruns_what_a_person_deleted(structured):
    """The records say current, but proximity/ was deleted: proximity runs again, step 4 does not."""
    vault, env, home = structured.vault, structured.env, structured.home
    runs = len(_runs(home))
    shutil.rmtree(vault / "proximity")
    again = in_process("structure", vault, "--llm", "offline", env=env)
    assert again.returncode == 0, again.stderr
    assert [job for job, _ in _runs(home)][runs:] == ["proximity"]
    assert (vault / "proximity" / "verdicts.json").is_file()
    assert "only proximity ran (proximity/graph.json was gone, and 3 more of its files)" in again.stdout


def test_structure_says_the_reason_a_job_ran_when_it_was_other_settings(structured):
    """Every file there, the records current, but proximity's last run had another threshold (as
    after a UI backfill with the Launchpad's config): structure runs proximity again and says that
    run had other settings, naming the run and the setting, never that files were gone."""
    vault, env, home = structured.vault, structured.env, structured.home
    assert in_process("proximity", vault, "--llm", "offline", "--threshold", "0.35", env=env).returncode == 0
    with open_instance(home) as instance:
        other = instance.get_runs(dg.RunsFilter(job_name="proximity"), limit=1)[0].run_id[:8]
    again = in_process("structure", vault, "--llm", "offline", env=env)
    assert again.returncode == 0, again.stderr
    assert [job for job, _ in _runs(home)][-1:] == ["proximity"]
    assert (
        f"only proximity ran (its last successful run, {other} (launched by a command), had other settings: "
        "proximity.config.graph_threshold)"
    ) in again.stdout
    assert "gone" not in again.stdout


def test_the_daemon_reads_the_run_queue_every_second_and_an_older_instance_file_is_brought_up_to_date(
    tmp_path, monkeypatch
):
    """A run launched from the UI waits at most about a second in the queue: the instance file
    hypograph writes says so, an unedited one an earlier version wrote is rewritten, and one a
    person edited is left as it is."""
    from pipelines import instance

    old, edited = tmp_path / "old", tmp_path / "edited"
    for home, text in ((old, instance.OLD_INSTANCE_YAMLS[-1]), (edited, "telemetry:\n  enabled: true\n")):
        home.mkdir()
        (home / "dagster.yaml").write_text(text)
    monkeypatch.setenv("DAGSTER_HOME", str(old))
    with instance.open_instance() as opened:
        assert type(opened.run_coordinator).__name__ == "QueuedRunCoordinator"
        assert opened.run_coordinator.dequeue_interval_seconds == 1
    monkeypatch.setenv("DAGSTER_HOME", str(edited))
    instance.dagster_home()
    assert (edited / "dagster.yaml").read_text() == "telemetry:\n  enabled: true\n"


def test_a_persons_review_after_structuring_is_applied_not_passed_over(structured):
    """Issue 46: a MERGE a person records in proximity/review.json after a structuring is part of
    what "unchanged" means: the next `hypograph structure` runs and applies it (or refuses it,
    saying so), never "unchanged … no run started"."""
    from test_merge_by_hand import review

    vault, env, home = structured.vault, structured.env, structured.home
    runs = len(_runs(home))
    review(vault, "H-1", "H-22")
    proc = in_process("structure", vault, "--llm", "offline", env=env)
    assert proc.returncode == 0, proc.stderr
    assert "unchanged since" not in proc.stdout
    assert [job for job, _ in _runs(home)][runs:][:2] == ["proximity", "structure"]
    assert "MERGE H-1/H-22 from proximity/review.json applied: H-22 merged into H-1" in proc.stdout
    again = in_process("structure", vault, "--llm", "offline", env=env)  # applied once: now unchanged
    assert "unchanged since its last structuring with these settings: no run started" in again.stdout
