"""The Dagster UI in a real browser, as `make ui` starts it (``hypograph ui`` = web server + daemon):
headless Chromium (Debian's, driven by Playwright; no browser download) goes to the lineage page,
the cluster asset, a check and the runs list, then launches a run from the page and sees it succeed.

Skipped only where no Chromium binary exists (`apt-get install chromium`; .ci/run installs it). On a
failure the page is saved as ``<tmp>/screenshots/<test>.png`` (the path is printed).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import urllib.parse
from pathlib import Path
from types import SimpleNamespace

import pytest
import services
from cli_helper import HYPOGRAPH, start_hypograph
from conftest import EXAMPLE_RUN, EXAMPLE_VAULT, copy_tree, offline_env
from test_ui import free_port, wait_for_code_location

CHROMIUM = next(
    (
        p
        for p in ("/usr/bin/chromium", shutil.which("chromium"), shutil.which("chromium-browser"))
        if p and Path(p).exists()
    ),
    None,
)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no Chromium binary (apt-get install chromium; .ci/run does)")

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TIMEOUT_MS = 60_000  # one page element; generous: two cores shared with a web server, a daemon and runs
RUN_SECONDS = 240  # a run launched from the page: queued, started by the daemon, finished


def assets_by_group() -> dict[str, list[str]]:
    """group -> asset names, from the code location the UI loads."""
    from pipelines.definitions import defs

    graph = defs.resolve_asset_graph()
    groups: dict[str, list[str]] = {}
    for key in graph.get_all_asset_keys():
        groups.setdefault(graph.get(key).group_name, []).append(key.to_user_string())
    return groups


@pytest.fixture(scope="module")
def ui(tmp_path_factory):
    """`hypograph ui` on a vault and a run directory (a fresh instance, a free port), and the CLI's
    `hypograph structure` of the vault and `hypograph proximity` of the run directory."""
    base = tmp_path_factory.mktemp("browser")
    vault, run = copy_tree(EXAMPLE_VAULT, base / "vault"), copy_tree(EXAMPLE_RUN, base / "run")
    env = {**offline_env(), "DAGSTER_HOME": str(base / "home")}
    port = free_port()
    # the UI registers both inputs and starts while the CLI runs (the instance serializes its creation)
    process = services.start([HYPOGRAPH, "ui", vault, run, "--port", port], base / "ui.log", env)
    try:
        cli = [
            start_hypograph(job, root, "--llm", "offline", env=env, stdout=subprocess.DEVNULL)
            for job, root in (("structure", vault), ("proximity", run))
        ]
        for command in cli:
            assert command.wait(timeout=300) == 0, command.stderr.read()
        wait_for_code_location(port, process)
        yield SimpleNamespace(
            url=f"http://127.0.0.1:{port}",
            home=base / "home",
            vault=vault,
            run=run,
            screenshots=base / "screenshots",
            log=base / "ui.log",
        )
    finally:
        services.stop(process)


@pytest.fixture(scope="module")
def browser_page(ui, tmp_path_factory):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")),
            executable_path=CHROMIUM,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1600, "height": 1000},
        )
        page = context.new_page()
        page.set_default_timeout(TIMEOUT_MS)
        # Dagster's first-visit "Join the Dagster community" dialog covers the page: a user clicks Skip.
        skip = page.get_by_role("button", name="Skip")
        page.add_locator_handler(skip, skip.click)
        try:
            yield page
        finally:
            context.close()


@pytest.fixture
def page(browser_page, ui, request):
    """The browser page; on a failure of the test, a screenshot of it."""
    failed = request.session.testsfailed
    yield browser_page
    if request.session.testsfailed > failed:
        ui.screenshots.mkdir(exist_ok=True)
        path = ui.screenshots / f"{request.node.name}.png"
        browser_page.screenshot(path=str(path), full_page=True)
        print(f"screenshot of the page: {path}; UI log: {ui.log}")


def test_the_lineage_page_shows_every_asset(page, ui):
    page.goto(f"{ui.url}/asset-groups")
    groups = assets_by_group()
    assert {"proximity", "structure"} <= set(groups)
    for group, assets in groups.items():
        page.get_by_title(group, exact=True).first.wait_for()
        # the group's row in the sidebar tree opens with its caret, as a user unfolds it
        page.locator(
            f"xpath=//*[@title='{group}']/ancestor::div[button//*[@aria-label='arrow_drop_down']][1]/button[1]"
        ).click()
        for name in assets:
            expect_visible(page.get_by_title(name, exact=True).first)
    # the graph: one box per group
    for group in groups:
        box = page.locator("[data-tooltip]", has_text=re.compile(f"^{group}$")).first
        expect_visible(box)


def test_the_cluster_asset_shows_its_cluster_table(page, ui):
    page.goto(f"{ui.url}/assets/proximity_clusters")
    page.get_by_role("tab", name="Partitions").click()
    page.get_by_placeholder("Filter by name").fill(ui.run.name)
    page.get_by_title(ui.run.name, exact=True).filter(visible=True).first.click()  # the input's id
    clusters = json.loads((ui.run / "proximity" / "clusters.json").read_text())["clusters"]
    row = page.locator("tr:not(:has(tr))", has=page.locator("td", has_text=re.compile(r"^C-01$")))  # innermost
    expect_visible(row.first)
    cells = [c.strip() for c in row.first.locator("td").all_inner_texts()]
    assert cells[0] == "C-01" and cells[2] == str(len(clusters["C-01"]))
    assert re.findall(r"H-\d+", cells[3]) == clusters["C-01"]


def test_a_check_shows_its_status(page, ui):
    page.goto(f"{ui.url}/assets/hypothesis_clusters")
    page.get_by_role("tab", name="Checks").click()
    for check in (
        "clusters_are_well_formed",
        "each_cluster_has_one_residual",
        "every_active_hypothesis_in_one_cluster",
        "no_numbers_in_step4_fields",
    ):
        status = page.get_by_title(check, exact=True).first.locator("xpath=following-sibling::span[1]")
        assert status.inner_text() == "Succeeded"
    expect_visible(page.get_by_text("no violations").first)
    expect_visible(page.get_by_text("Passed").first)


def test_the_runs_list_shows_the_cli_runs(page, ui):
    page.goto(f"{ui.url}/runs")
    for job, root in (("structure", ui.vault), ("proximity", ui.run)):
        row = run_row(page, root.name).filter(has_text=job)  # the partition tag (the input's id) and the job
        expect_visible(row.first)
        assert "Success" in row.first.inner_text()


def test_materialize_from_the_page_runs_on_the_chosen_input(page, ui):
    """Job page → Materialize all… → pick one input partition → Launch 1 run: the daemon starts the
    queued run and it succeeds, for that input only."""
    from dagster import DagsterInstance, DagsterRunStatus

    page.goto(f"{ui.url}/locations/hypograph/jobs/proximity")
    page.get_by_role("button", name="Materialize all").click()
    dialog = page.get_by_role("dialog")
    dialog.get_by_text("Select a partition or create one").click()
    page.get_by_placeholder("Filter partitions").fill(ui.run.name)
    page.get_by_title(ui.run.name, exact=True).filter(visible=True).first.click()
    dialog.get_by_text("Launch runs to materialize").click()  # closes the partition list
    dialog.get_by_role("button", name="Launch 1 run").click()
    toast = page.get_by_text(re.compile(r"Launched run [0-9a-f]{8}"))
    expect_visible(toast)
    short_id = re.search(r"[0-9a-f]{8}", toast.inner_text()).group(0)

    page.goto(f"{ui.url}/runs")
    row = run_row(page, short_id)
    row.get_by_text("Success", exact=True).wait_for(timeout=RUN_SECONDS * 1000)  # the runs list polls
    assert ui.run.name in row.inner_text() and "proximity" in row.inner_text()
    row.get_by_role("link", name=short_id).click()
    page.wait_for_url(re.compile(f"/runs/{short_id}"))
    run_id = urllib.parse.urlparse(page.url).path.rsplit("/", 1)[-1]
    expect_visible(page.get_by_text("Success", exact=True).first)

    with DagsterInstance.from_config(str(ui.home)) as instance:
        run = instance.get_run_by_id(run_id)
        assert run.status == DagsterRunStatus.SUCCESS
        assert run.job_name == "proximity" and run.tags["dagster/partition"] == ui.run.name
        assert {r.tags.get("dagster/partition") for r in instance.get_runs()} == {ui.run.name, ui.vault.name}


def run_row(page, text: str):
    """The runs list's row(s) holding ``text`` (the list is virtualized: rows are indexed divs)."""
    return page.locator("[data-index]", has_text=text)


def expect_visible(locator) -> None:
    """Wait for ``locator`` to be visible (the page's default timeout), failing with what was awaited."""
    locator.wait_for(state="visible")
