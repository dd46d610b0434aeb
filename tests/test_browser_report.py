"""The report's pictures in the Dagster UI, in a real browser: after `make demo`'s steps
(`hypograph proximity` on a copy of examples/run, `hypograph structure` on a copy of
examples/vault, `hypograph report` on both, a fresh instance of its own), the proximity_report
asset of each input shows its cluster map, the vault its map by hypothesis cluster, and both the
threshold sweep, as images that loaded (decoded, nonzero size, on screen).

Screenshots of each picture as the UI shows it are kept in ``tests/artifacts/`` (git-ignored),
failing or not. Skipped where no Chromium binary exists (`apt-get install chromium`; .ci/run does).
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import services
from cli_helper import HYPOGRAPH, in_process
from conftest import EXAMPLE_RUN, EXAMPLE_VAULT, copy_tree, offline_env
from test_browser import CHROMIUM, CHROMIUM_ARGS, TIMEOUT_MS, expect_visible
from test_ui import free_port, wait_for_code_location

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no Chromium binary (apt-get install chromium; .ci/run does)")
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """make demo's two runs on copies of the examples, then `hypograph ui` on the same instance."""
    base = tmp_path_factory.mktemp("report-demo")
    run, vault = copy_tree(EXAMPLE_RUN, base / "run"), copy_tree(EXAMPLE_VAULT, base / "vault")
    env = {**offline_env(), "DAGSTER_HOME": str(base / "home")}
    for command, root in (("proximity", run), ("structure", vault), ("report", run), ("report", vault)):
        options = () if command == "report" else ("--llm", "offline")
        done = in_process(command, root, *options, env=env)  # the command's runs, in this process
        assert done.returncode == 0, done.stderr
    port = free_port()
    process = services.start([HYPOGRAPH, "ui", "--port", port], base / "ui.log", env)
    try:
        wait_for_code_location(port, process)
        yield SimpleNamespace(url=f"http://127.0.0.1:{port}", run=run, vault=vault, log=base / "ui.log")
    finally:
        services.stop(process)


@pytest.fixture(scope="module")
def page(demo, tmp_path_factory):
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
        skip = page.get_by_role("button", name="Skip")  # Dagster's first-visit dialog: a user clicks Skip
        page.add_locator_handler(skip, skip.click)
        try:
            yield page
        finally:
            context.close()


def open_picture(page, demo, partition: str, key: str, artifact: str) -> dict:
    """On proximity_report's Partitions tab, pick ``partition`` (an input id), open the metadata
    entry ``key`` ([Show Markdown]) and return its image's size as loaded; screenshot kept."""
    page.goto(f"{demo.url}/assets/proximity_report")
    page.get_by_role("tab", name="Partitions").click()
    page.get_by_placeholder("Filter by name").fill(partition)
    page.get_by_title(partition, exact=True).filter(visible=True).first.click()
    row = page.locator("tr:not(:has(tr))", has=page.locator("td", has_text=key)).filter(has_text="[Show Markdown]")
    row.first.get_by_text("[Show Markdown]").click()
    # Dagster's first-visit "Join the Dagster community" dialog can open late, beside this one.
    dialog = page.get_by_role("dialog").filter(has_text=key).filter(has_not_text="Join the Dagster")
    image = dialog.locator("img").first
    expect_visible(image)
    image.scroll_into_view_if_needed()
    loaded = image.evaluate("i => ({complete: i.complete, width: i.naturalWidth, height: i.naturalHeight})")
    box = image.bounding_box()
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{artifact}.png"))
    headline = dialog.inner_text()
    dialog.get_by_role("button", name="Close").click()
    return {**loaded, "box": box, "alt": image.get_attribute("alt"), "text": headline}


def assert_rendered(picture: dict) -> None:
    assert picture["complete"] and picture["width"] > 100 and picture["height"] > 100, picture
    assert picture["box"] and picture["box"]["width"] > 100 and picture["box"]["height"] > 100, picture


def test_the_run_directory_shows_its_cluster_map(page, demo):
    picture = open_picture(page, demo, demo.run.name, "cluster_map", "run-cluster-map")
    assert_rendered(picture)
    assert picture["alt"] == "cluster map"
    assert "edges" in picture["text"]  # the headline under the picture
    assert (demo.run / "proximity" / "report.html").exists() and (demo.run / "proximity" / "cluster-map.png").exists()


def test_the_vault_shows_its_map_by_hypothesis_cluster(page, demo):
    picture = open_picture(page, demo, demo.vault.name, "vault_map", "vault-map")
    assert_rendered(picture)
    assert picture["alt"] == "hypothesis clusters"
    assert (demo.vault / "proximity" / "vault-map.png").exists()
    assert_rendered(open_picture(page, demo, demo.vault.name, "cluster_map", "vault-cluster-map"))


def test_the_threshold_sweep_is_shown_for_each_input(page, demo):
    for root in (demo.run, demo.vault):
        picture = open_picture(page, demo, root.name, "threshold_sweep", f"{root.name}-threshold-sweep")
        assert_rendered(picture)
        assert picture["alt"] == "threshold sweep" and "threshold 0.30" in picture["text"]
