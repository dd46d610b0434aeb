"""A backfill over all partitions of every job, launched from each job's page as a user does it
(Materialize… → All → Launch backfill) with `hypograph ui`'s daemon running, on the four example
inputs (one library round made beforehand with a scripted model, the case's published batch minted
into the vault once, so the case names it): zero failed runs, and each job's
partition page counts only partitions it can process, none failed or missing.

The UI runs with the model named but switched off (``HYPOGRAPH_LLM=offline``): the round (and its
re-score with the same model and web grounding) and the published case batch are served from their
inputs' own state, the rest uses the offline policy.
Skipped where no Chromium binary exists, as tests/test_browser.py."""

from __future__ import annotations

import re
import time

import pytest
import services
from cli_helper import HYPOGRAPH
from conftest import REPO, copy_tree, offline_env
from dagster import DagsterInstance, DagsterRunStatus
from library_stub import AtomServer, LibraryModel, OpenAlexServer, behavior
from llm_stub import MODEL, configure_llm_env, llm_server  # noqa: F401  (fixture)
from test_browser import CHROMIUM, CHROMIUM_ARGS, expect_visible
from test_ui import free_port, wait_for_code_location

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no Chromium binary (apt-get install chromium; .ci/run does)")

# In the order a user would run them: step 4 reads the vault's proximity.
JOBS = {
    "proximity": 3,
    "structure": 1,
    "library_round": 1,
    "library_rescore": 1,
    "case_interpret": 1,
    "case_confirmed": 1,
    "case_batch": 1,
    "case_batch_into_vault": 1,
}
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
    from hypograph_cli.main import main

    assert main(["batch", str(roots[3]), "--into", str(roots[1])]) == 0  # the case now names its vault
    env = {**offline_env(), "DAGSTER_HOME": str(home), "HYPOGRAPH_LLM_MODEL": MODEL}
    port = free_port()
    process = services.start([HYPOGRAPH, "ui", *roots, "--port", port], tmp_path / "ui.log", env)
    try:
        wait_for_code_location(port, process)
        yield f"http://127.0.0.1:{port}", home, tmp_path
    finally:
        services.stop(process)
    assert len(llm_server.requests) == calls  # the UI's runs asked no model


def finished_runs(home, job: str, count: int, seconds: float = 180) -> list:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with DagsterInstance.from_config(str(home)) as instance:
            runs = [r for r in instance.get_runs() if r.job_name == job]  # one partition: a run, not a backfill
        if len(runs) == count and all(r.is_finished for r in runs):
            return runs
        time.sleep(2)
    pytest.fail(f"{job}: {count} runs not finished in {seconds} s")


def test_a_backfill_of_every_job_over_all_its_partitions_fails_nowhere(ui):
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import sync_playwright

    url, home, base = ui
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
        skip = page.get_by_role("button", name="Skip", exact=True)  # Dagster's first-visit dialog: a user skips it
        page.goto(f"{url}/overview")
        try:
            skip.wait_for(timeout=20_000)
            skip.click()
        except PlaywrightTimeout:
            pass  # not shown this time
        page.add_locator_handler(skip, skip.click)  # should it come back
        try:
            for job, count in JOBS.items():
                page.goto(f"{url}/locations/hypograph/jobs/{job}/partitions")
                expect_visible(page.get_by_text("Total partitions"))
                page.get_by_role("button", name=re.compile("Materialize")).first.click()
                dialog = page.get_by_role("dialog").filter(has_text="Partition selection")
                dialog.get_by_role("button", name="All", exact=True).click()
                dialog.get_by_role("button", name=re.compile("Launch")).click()
                runs = finished_runs(home, job, count)
                assert {r.status for r in runs} == {DagsterRunStatus.SUCCESS}, job
                page.reload()
                totals = page.get_by_text("Total partitions").locator("xpath=..")
                expect_visible(totals.get_by_text(str(count), exact=True))  # the page loads its counts
                status = page.locator("body").inner_text()
                assert not re.search(r"\b[1-9]\d*\s+(Failed|Missing) partitions", status), (job, status[:500])
            page.screenshot(path=str(base / "last-partitions-page.png"), full_page=True)
        except BaseException:
            page.screenshot(path=str(base / "failure.png"), full_page=True)
            print(f"screenshot: {base / 'failure.png'}")
            raise
        finally:
            context.close()
