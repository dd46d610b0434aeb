"""A backfill over all partitions of every job, launched from each job's page as a user does it
(Materialize… → All → Launch backfill) with `hypograph ui`'s daemon running, on the four example
inputs (one library round made beforehand with a scripted model, the case's published batch minted
into the vault once, so the case names it): zero failed runs, and each job's
partition page counts only partitions it can process, none failed or missing. Then `hypograph case
add` makes revision 2 (unconfirmed) and supersedes revision 1: a second backfill of every case job
over both fails nowhere either (each skipped, saying why) and revision 1 keeps what it had. A run
that does fail (a vault node that does not parse) shows its cause as the step failure's first line,
no Dagster wrapper and no cause chain, and the `make ui` terminal logs that line. Last, the
library_observe job from its page's Observe button (one run for every library).

The UI runs with the model named but switched off (``HYPOGRAPH_LLM=offline``): the round (and its
re-score with the same model and web grounding) and the published case batch are served from their
inputs' own state, the rest uses the offline policy.
Skipped where no Chromium binary exists, as tests/system/test_browser.py."""

from __future__ import annotations

import re
import time

import pytest
import services
from cli_helper import HYPOGRAPH
from conftest import REPO, copy_tree, offline_env
from dagster import AssetKey, DagsterInstance, DagsterRunStatus, RunsFilter
from library_stub import AtomServer, LibraryModel, OpenAlexServer, behavior
from llm_stub import MODEL, configure_llm_env, llm_server  # noqa: F401  (fixture)
from test_browser import CHROMIUM, CHROMIUM_ARGS, expect_visible
from test_ui import free_port, launch_as_the_ui_does, wait_for_code_location

from hypograph.inputs import stored_id

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no Chromium binary (apt-get install chromium; .ci/run does)")

# In the order a user would run them: step 4 reads the vault's proximity.
JOBS = {
    "proximity": 3,
    "report": 3,
    "structure": 1,
    "library_round": 1,
    "library_rescore": 1,
    "case_interpret": 1,
    "case_confirmed": 1,
    "case_batch": 1,
    "case_batch_into_vault": 1,
}
CASE_JOBS = [job for job in JOBS if job.startswith("case_")]
# Its page's button observes every partition in one run (no dialog); backfilled last, after the rest.
OBSERVING = {"library_observe"}
ROUND = "Reward models score an answer higher when it repeats the opinion the user stated first."


@pytest.fixture
def ui(tmp_path, llm_server, monkeypatch):
    from hypograph.library.settings import LibrarySettings
    from pipelines.launch import execute

    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    roots = [copy_tree(REPO / "examples" / name, tmp_path / name) for name in ("run", "vault", "library", "case")]
    configure_llm_env(monkeypatch, llm_server.url, timeout=5.0)
    llm_server.always(LibraryModel(rounds=[{"behaviors": [behavior(ROUND, tag="rw")]}]))
    atom, openalex = AtomServer(), OpenAlexServer()  # the round is grounded (web on, the default a rescore uses)
    try:
        settings = LibrarySettings(
            topic="LLM sycophancy", n_behaviors=1, search_url=atom.url, openalex_url=openalex.url
        )
        assert execute(roots[2], "library_round", {"library": settings}, offline=False, sub="r0001").success
    finally:
        atom.close(), openalex.close()
    calls = len(llm_server.requests)
    from cli_helper import hypograph_main as main

    assert main(["batch", str(roots[3]), "--into", str(roots[1])]) == 0  # the case now names its vault
    env = {**offline_env(), "DAGSTER_HOME": str(home), "HYPOGRAPH_LLM_MODEL": MODEL}
    port = free_port()
    process = services.start([HYPOGRAPH, "ui", *roots, "--port", port], tmp_path / "ui.log", env)
    try:
        wait_for_code_location(port, process)
        yield f"http://127.0.0.1:{port}", home, tmp_path, roots[3], port
    finally:
        services.stop(process)
    assert len(llm_server.requests) == calls  # the UI's runs asked no model


def finished_runs(home, job: str, count: int, seconds: float = 300) -> list:
    """The runs of ``job`` the UI launched, once there are ``count`` and all have finished (the
    fixture's own runs, tagged as the command's, are not counted)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with DagsterInstance.from_config(str(home)) as instance:
            runs = [  # one partition: a run, not a backfill
                r for r in instance.get_runs() if r.job_name == job and r.tags.get("hypograph/launched_by") != "cli"
            ]
        if len(runs) == count and all(r.is_finished for r in runs):
            return runs
        time.sleep(2)  # each look opens the instance: about 0.15 s of CPU
    pytest.fail(f"{job}: {count} runs not finished in {seconds} s")


def test_a_backfill_of_every_job_over_all_its_partitions_fails_nowhere(ui):
    from playwright.sync_api import sync_playwright

    url, home, base, case, port = ui
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(base / "profile"),
            executable_path=CHROMIUM,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1600, "height": 1000},
        )
        page = context.new_page()
        page.set_default_timeout(60_000)
        skip_dialog(page, url)
        try:
            for job, count in JOBS.items():
                backfill(page, ui, job, count, partitions=count)
            revision_2_supersedes_revision_1(case, home)
            # each partition of each case job: one run of the first pass, two now; launched one after the
            # other before any is waited for (each is skipped, saying why: none needs another's output)
            for job in CASE_JOBS:
                launch_backfill(page, ui, job)
            for job in CASE_JOBS:
                backfilled(page, ui, job, JOBS[job] + 2, partitions=2, missing_allowed=True)
            revision_1_kept_what_it_had(home, case)
            a_failed_run_shows_its_cause_first(page, url, port, base)
            backfill(page, ui, "library_observe", 1, partitions=1)  # last: its page's Observe runs unpartitioned
            page.screenshot(path=str(base / "last-page.png"), full_page=True)
        except BaseException:
            page.screenshot(path=str(base / "failure.png"), full_page=True)
            print(f"screenshot: {base / 'failure.png'} of {page.url}")
            raise
        finally:
            context.close()


def skip_dialog(page, url: str) -> None:
    """Dagster's first-visit dialog: a user skips it (and would again, should it come back)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    skip = page.get_by_role("button", name="Skip", exact=True)
    page.goto(f"{url}/overview")
    try:
        skip.wait_for(timeout=20_000)
        skip.click()
    except PlaywrightTimeout:
        pass  # not shown this time
    page.add_locator_handler(skip, skip.click)


def backfill(page, ui, job: str, runs: int, partitions: int, missing_allowed: bool = False) -> None:
    """All partitions of ``job`` backfilled from its page; every run succeeds and the page counts
    ``partitions``, none failed (none missing either, unless a skipped one may be)."""
    launch_backfill(page, ui, job)
    backfilled(page, ui, job, runs, partitions, missing_allowed)


def launched(home, job: str) -> tuple[int, int]:
    """How many backfills the instance holds, and runs of ``job`` (one partition: a run, no backfill)."""
    with DagsterInstance.from_config(str(home)) as instance:
        return len(instance.get_backfills()), len(instance.get_runs(RunsFilter(job_name=job)))


def launch_backfill(page, ui, job: str) -> None:
    """All partitions of ``job`` backfilled from its page (Materialize… → All → Launch backfill,
    returning once the instance holds the new backfill, or run for one partition; an observing job's
    Observe)."""
    url, home = ui[:2]
    page.goto(f"{url}/locations/hypograph/jobs/{job}/partitions")
    expect_visible(page.get_by_text("Total partitions"))
    if job in OBSERVING:
        page.get_by_role("button", name=re.compile("Observe")).first.click()
    else:
        page.get_by_role("button", name=re.compile("Materialize")).first.click()
        dialog = page.get_by_role("dialog").filter(has_text="Partition selection")
        dialog.get_by_role("button", name="All", exact=True).click()
        before = launched(home, job)
        dialog.get_by_role("button", name=re.compile("Launch")).click()
        deadline = time.monotonic() + 60
        while launched(home, job) == before:  # the page's request done before it is left
            assert time.monotonic() < deadline, f"{job}: nothing launched in 60 s"
            time.sleep(0.5)


def backfilled(page, ui, job: str, runs: int, partitions: int, missing_allowed: bool = False) -> None:
    """Once ``job`` has ``runs`` runs, all finished: every one succeeded and its page counts
    ``partitions``, none failed (none missing either, unless a skipped one may be)."""
    url, home = ui[:2]
    finished = finished_runs(home, job, runs)
    assert {r.status for r in finished} == {DagsterRunStatus.SUCCESS}, job
    page.goto(f"{url}/locations/hypograph/jobs/{job}/partitions")  # loaded after the runs: their counts
    totals = page.get_by_text("Total partitions").locator("xpath=..")
    expect_visible(totals.get_by_text(str(partitions), exact=True))  # the page loads its counts
    status = page.locator("body").inner_text()
    bad = "Failed" if missing_allowed or job in OBSERVING else "Failed|Missing"  # an observation materializes nothing
    assert not re.search(rf"\b[1-9]\d*\s+({bad}) partitions", status), (job, status[:500])


def revision_2_supersedes_revision_1(case, home) -> None:
    """`hypograph case add`: revision 2 recorded unconfirmed, its partition added beside r0001."""
    notes = case.parent / "notes.txt"
    notes.write_text("The pier was repainted in May, a month before the cracks were seen.\n", encoding="utf-8")
    from cli_helper import in_process

    added = in_process("case", "add", case, notes)
    assert added.returncode == 0, added.stderr
    with DagsterInstance.from_config(str(home)) as instance:
        keys = sorted(instance.get_dynamic_partitions("case_revisions"))
    assert keys == [f"{stored_id(case)}/r0001", f"{stored_id(case)}/r0002"], keys


def revision_1_kept_what_it_had(home, case) -> None:
    """The second pass skipped r0001 as superseded and r0002 as not confirmed (run tags), and each
    case asset of r0001 is still materialized: the backfill left it green."""
    from assets.errors import SKIPPED_TAG

    first, second = f"{stored_id(case)}/r0001", f"{stored_id(case)}/r0002"
    with DagsterInstance.from_config(str(home)) as instance:
        runs = [r for r in instance.get_runs() if r.job_name in CASE_JOBS]
        tags = {(r.tags.get("dagster/partition"), r.tags.get(SKIPPED_TAG)) for r in runs}
        kept = {
            name: first in instance.get_materialized_partitions(AssetKey(name))
            for name in ("interpretation_draft", "case_interpretation", "case_context", "hypothesis_batch")
        }
    assert {(first, "SUPERSEDED"), (second, "NOT_DONE")} <= tags, tags
    assert all(kept.values()), kept


def a_failed_run_shows_its_cause_first(page, url: str, port: int, base) -> None:
    """A run that does fail (a vault node that does not parse, registered meanwhile as a person
    adds a folder) shows its cause as the step failure's first line: the file and what is wrong,
    no Dagster wrapper and no cause chain; the `make ui` terminal logs that same line."""
    from cli_helper import in_process
    from conftest import EXAMPLE_VAULT

    broken = copy_tree(EXAMPLE_VAULT, base / "broken-vault")
    node = sorted((broken / "hypotheses").glob("H-*.md"))[0]
    node.write_text("---\nid: [unclosed\n---\nbody\n", encoding="utf-8")
    assert in_process("add", broken).returncode == 0
    run_id = launch_as_the_ui_does(port, "proximity", stored_id(broken), {})
    line = f"{node.relative_to(broken)}: frontmatter"
    page.goto(f"{url}/runs/{run_id}")
    expect_visible(page.get_by_text("STEP_FAILURE", exact=True).first)
    body = page.locator("body").inner_text()
    shown = body.split("\nSTEP_FAILURE\n", 1)[1].splitlines()[0]  # the failure's first line
    assert line in shown, body[:3000]
    assert "DagsterExecutionStepExecutionError" not in body and "The above exception" not in body, body[:3000]
    assert 'File "' not in body, body[:3000]  # no stack trace
    terminal = (base / "ui.log").read_text(encoding="utf-8").splitlines()
    assert any(f"hypothesis_texts - {line}" in row for row in terminal), "\n".join(terminal[-40:])
