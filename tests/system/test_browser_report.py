"""The report's pictures as a person sees them, in a real browser, after `make demo`'s steps
(`hypograph proximity` on a copy of examples/run, `hypograph structure` on a copy of
examples/vault, `hypograph report` on both, a fresh instance of its own):

* the three pictures themselves (the run's cluster map and thresholds, the vault's map by
  hypothesis cluster) and the interactive report.html, each opened in Chromium;
* in the Dagster UI, proximity_report's Partitions tab at each input's partition: a note naming
  that input first, then its own pictures, each an image that loaded, captioned with the input.

Screenshots of all of it are kept in ``tests/artifacts/report/`` (git-ignored; the test prints
the folder), failing or not, for a person to look at. Skipped where no Chromium binary exists
(`apt-get install chromium`; .ci/run does)."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import quote

import pytest
import services
from cli_helper import HYPOGRAPH, in_process
from conftest import EXAMPLE_RUN, EXAMPLE_VAULT, copy_tree, offline_env
from test_browser import CHROMIUM, CHROMIUM_ARGS, TIMEOUT_MS, expect_visible
from test_ui import free_port, wait_for_code_location

from hypograph.inputs import stored_id

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no Chromium binary (apt-get install chromium; .ci/run does)")
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts" / "report"


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """make demo's two runs on copies of the examples, then `hypograph ui` on the same instance."""
    base = tmp_path_factory.mktemp("report-demo")
    run, vault = copy_tree(EXAMPLE_RUN, base / "run"), copy_tree(EXAMPLE_VAULT, base / "vault")
    env = {**offline_env(), "DAGSTER_HOME": str(base / "home")}
    printed = {}
    for command, root in (("proximity", run), ("structure", vault), ("report", run), ("report", vault)):
        options = () if command == "report" else ("--llm", "offline")
        done = in_process(command, root, *options, env=env)  # the command's runs, in this process
        assert done.returncode == 0, done.stderr
        printed[(command, root.name)] = done.stdout
    port = free_port()
    process = services.start([HYPOGRAPH, "ui", "--port", port], base / "ui.log", env)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    print(f"\nscreenshots of the report's pictures: {ARTIFACTS}")
    try:
        wait_for_code_location(port, process)
        yield SimpleNamespace(url=f"http://127.0.0.1:{port}", run=run, vault=vault, printed=printed)
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


def test_the_report_command_names_the_files_it_wrote(demo):
    for root, maps in ((demo.run, ("cluster-map.png",)), (demo.vault, ("cluster-map.png", "vault-map.png"))):
        lines = demo.printed[("report", root.name)].splitlines()
        d = root / "proximity"
        for name in (*maps, "thresholds.png", "report.html", "report.json"):
            assert str(d / name) in lines and (d / name).is_file(), (name, lines)


@pytest.mark.parametrize(
    ("input_name", "file"), [("run", "cluster-map.png"), ("run", "thresholds.png"), ("vault", "vault-map.png")]
)
def test_the_three_pictures_open_in_a_browser(page, demo, input_name, file):
    """Each PNG as Chromium shows it, whole (screenshot kept); what it says is checked on the
    figure's own text (tests/core/proximity/test_report_figures.py); here: it decodes at its full size."""
    from PIL import Image

    path = getattr(demo, input_name) / "proximity" / file
    page.goto(path.as_uri())
    image = page.locator("img").first
    expect_visible(image)
    size = image.evaluate("i => [i.naturalWidth, i.naturalHeight]")
    assert size == list(Image.open(path).size) and size[0] >= 1000, size
    page.screenshot(path=str(ARTIFACTS / f"{input_name}-{file}"), full_page=True)


def test_the_interactive_report_draws_its_maps_with_ids_and_full_names(page, demo):
    from hypograph.report import hc_groups

    page.goto((demo.vault / "proximity" / "report.html").as_uri())
    expect_visible(page.locator("#vault-map .main-svg").first)
    page.locator("#vault-map").screenshot(path=str(ARTIFACTS / "vault-report-html-map.png"))
    legend = "".join(page.locator("#vault-map .legend").text_content().split())  # SVG: its lines run together
    _, names, _ = hc_groups(demo.vault)
    assert names and all("".join(name.split()) in legend for name in names.values()), (names, legend)
    labels = page.locator("#vault-map .annotation-text").evaluate_all("ts => ts.map(t => t.textContent)")
    assert set(names) <= set(labels), labels  # each cluster's key beside it (its name is long)
    assert sum(label.startswith("H-") for label in labels) >= 20, labels  # the ids, as in the PNG
    page.locator("#thresholds").screenshot(path=str(ARTIFACTS / "vault-report-html-thresholds.png"))


def open_partition(page, demo, root: Path) -> str:
    """proximity_report's Partitions tab at ``root``'s input (its partition): the inline note."""
    partition = stored_id(root)
    page.goto(f"{demo.url}/assets/proximity_report?view=partitions&partition={quote(partition)}")
    note = page.get_by_text("Pictures of input").filter(visible=True).first
    expect_visible(note)
    return note.inner_text()


def open_picture(page, key: str, artifact: str) -> dict:
    """Open the metadata entry ``key`` ([Show Markdown]) of the partition on the page; its image as
    loaded and the dialog's text; screenshot kept."""
    name_cell = page.locator("td").filter(has_text=re.compile(f"^{re.escape(key)}$"))
    page.locator("tr:not(:has(tr))", has=name_cell).first.get_by_text("[Show Markdown]", exact=True).click()
    # Dagster's first-visit "Join the Dagster community" dialog can open late, beside this one.
    dialog = page.get_by_role("dialog").filter(has_text=key).filter(has_not_text="Join the Dagster")
    image = dialog.locator("img").first
    expect_visible(image)
    image.scroll_into_view_if_needed()
    loaded = image.evaluate("i => ({complete: i.complete, width: i.naturalWidth, height: i.naturalHeight})")
    box = image.bounding_box()
    page.screenshot(path=str(ARTIFACTS / f"ui-{artifact}.png"))
    text, src = dialog.inner_text(), image.get_attribute("src")
    dialog.get_by_role("button", name="Close").click()
    return {**loaded, "box": box, "alt": image.get_attribute("alt"), "text": text, "src": src}


def assert_rendered(picture: dict) -> None:
    assert picture["complete"] and picture["width"] >= 1000 and picture["height"] >= 700, picture
    assert picture["box"] and picture["box"]["width"] > 300 and picture["box"]["height"] > 200, picture


def test_each_partition_shows_its_own_pictures(page, demo):
    """The run's partition: its cluster map and sweep; the vault's: its own cluster map (another
    picture), its map by hypothesis cluster and its sweep; each captioned with its input."""
    seen = {}
    for root, keys in (
        (demo.run, ("cluster_map", "threshold_sweep")),
        (demo.vault, ("cluster_map", "vault_map", "threshold_sweep")),
    ):
        partition = stored_id(root)
        note = open_partition(page, demo, root)
        assert partition in note and all(k in note for k in keys), note
        page.screenshot(path=str(ARTIFACTS / f"ui-{partition}-partition.png"))
        for key in keys:
            picture = open_picture(page, key, f"{partition}-{key}")
            assert_rendered(picture)
            assert picture["alt"].endswith(f" of {partition}") and f"input {partition}:" in picture["text"], picture
            seen[(partition, key)] = picture["src"]
    assert seen[(stored_id(demo.run), "cluster_map")] != seen[(stored_id(demo.vault), "cluster_map")]
