"""Launching from the UI as a new user with a model configured: `hypograph ui` (web server and
daemon) on a library with one round made, a fresh vault and a run directory; headless Chromium
(Debian's, driven by Playwright) picks each partition from the Launchpad's list (no key typed):

* the library's next round, offered as a partition, runs by clicking (the model is a local stub
  server: the real client code runs); its last round is re-scored by clicking;
* the structure job on the fresh vault (no proximity yet) ends without running, green, naming the
  `proximity` job to launch;
* a threshold out of range typed in the Launchpad ends before any work, nothing red, naming the
  field by both names and its range; a value of the wrong type is refused before a run exists;
* a round on another topic ends without running, nothing red, naming `confirm_topic` and
  `new_library`, the library file unchanged.

No run's events carry a stack trace. Screenshots of each page are kept as artifacts in
``<tmp>/screenshots/`` (the path is printed). Skipped where no Chromium binary exists."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest
import services
from cli_helper import HYPOGRAPH
from conftest import EXAMPLE_LIBRARY, EXAMPLE_RUN, EXAMPLE_VAULT, copy_tree, offline_env
from dagster import AssetKey, DagsterInstance
from library_stub import LibraryModel, behavior
from llm_stub import LLMStub, configure_llm_env
from test_browser import CHROMIUM, CHROMIUM_ARGS
from test_ui import free_port, wait_for_code_location
from test_ui_every_job import FORBIDDEN

from assets.errors import REASON_TAG, SKIPPED_TAG
from hypograph.inputs import stored_id

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no Chromium binary (apt-get install chromium; .ci/run does)")

TOPIC = "LLM sycophancy"
ROUNDS = [
    {
        "behaviors": [
            behavior("Reward models score an answer higher when it repeats the opinion the user stated first.")
        ]
    },
    {"behaviors": [behavior("Models concede a correct answer when the user pushes back with confidence.")]},
]


@pytest.fixture(scope="module")
def ui(tmp_path_factory):
    from hypograph.library.settings import LibrarySettings
    from pipelines.launch import execute

    base = tmp_path_factory.mktemp("launch")
    home = base / "home"
    home.mkdir()
    monkeypatch = pytest.MonkeyPatch()
    stub = LLMStub()
    try:
        monkeypatch.setenv("DAGSTER_HOME", str(home))
        env_llm = configure_llm_env(monkeypatch, stub.url, timeout=10.0)
        stub.always(LibraryModel(rounds=list(ROUNDS)))
        library = copy_tree(EXAMPLE_LIBRARY, base / "library")
        vault, run = copy_tree(EXAMPLE_VAULT, base / "vault"), copy_tree(EXAMPLE_RUN, base / "run")
        first = LibrarySettings(topic=TOPIC, n_behaviors=1, web=False)
        assert execute(library, "library_round", {"library": first}, offline=False, sub="r0001").success
        env = {**offline_env(), **env_llm, "DAGSTER_HOME": str(home)}
        env.pop("HYPOGRAPH_LLM", None)  # a model configured: the UI's runs use it
        port = free_port()
        process = services.start([HYPOGRAPH, "ui", library, vault, run, "--port", port], base / "ui.log", env)
        try:
            wait_for_code_location(port, process, seconds=300)  # two cores shared with the daemon
            yield SimpleNamespace(
                url=f"http://127.0.0.1:{port}",
                home=home,
                library=library,
                vault=vault,
                run=run,
                stub=stub,
                shots=base / "screenshots",
            )
        finally:
            services.stop(process)
    finally:
        stub.close()
        monkeypatch.undo()


@pytest.fixture(scope="module")
def page(ui):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(ui.home.parent / "profile"),
            executable_path=CHROMIUM,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1600, "height": 1000},
        )
        page = context.new_page()
        page.set_default_timeout(60_000)
        skip = page.get_by_role("button", name="Skip", exact=True)  # Dagster's first-visit dialog
        page.add_locator_handler(skip, skip.click)
        try:
            yield page
        finally:
            context.close()


@pytest.fixture
def shot(page, ui, request):
    """Saves the page as ``<tmp>/screenshots/<test>-<name>.png``; on a failure, the page as it was."""
    ui.shots.mkdir(exist_ok=True)

    def save(name: str) -> None:
        path = ui.shots / f"{request.node.name}-{name}.png"
        page.screenshot(path=str(path), full_page=True)
        print(f"screenshot: {path}")

    failed = request.session.testsfailed
    yield save
    if request.session.testsfailed > failed:
        save("failure")


def launchpad(page, ui, job: str, partition: str, config: str | None = None) -> None:
    """The job's Launchpad with ``partition`` picked from its list (clicked, not typed) and, when
    given, the run config replaced by ``config`` (YAML, as a person edits it)."""
    page.goto(f"{ui.url}/locations/hypograph/jobs/{job}/playground")
    page.get_by_text("Use Ctrl+Space").wait_for()
    chooser = page.get_by_placeholder("Partition")
    chooser.click()
    chooser.press("Control+A")  # the Launchpad remembers the last partition picked: cleared, the list is whole
    chooser.press("Backspace")
    page.get_by_role("menuitem", name=partition, exact=True).click()
    page.get_by_text(f"partition: {partition}").wait_for()
    if config is not None:
        editor = page.locator(".CodeMirror").first
        editor.click()
        page.keyboard.press("Control+A")
        page.keyboard.press("Delete")
        page.keyboard.insert_text(config)


def launch(page, ui, job: str) -> str:
    """Clicks Launch Run; the run's id once it has finished."""
    with DagsterInstance.from_config(str(ui.home)) as instance:
        before = {r.run_id for r in instance.get_runs()}
    page.get_by_role("button", name="Launch Run").click()
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        with DagsterInstance.from_config(str(ui.home)) as instance:
            new = [r for r in instance.get_runs() if r.run_id not in before and r.job_name == job]
            if new and new[0].is_finished:
                return new[0].run_id
        time.sleep(2)
    pytest.fail(f"{job}: the launched run did not finish")


def run_record(ui, run_id: str):
    """The finished run; none of its events (messages, errors) carries a stack trace."""
    with DagsterInstance.from_config(str(ui.home)) as instance:
        run = instance.get_run_by_id(run_id)
        texts = []
        for record in instance.all_logs(run_id):
            data = getattr(record.dagster_event, "event_specific_data", None)
            error = getattr(data, "error", None)
            texts += [record.user_message or "", error.to_string() if error is not None else ""]
    text = "\n".join(texts)
    for word in FORBIDDEN:
        assert word not in text, f"{word!r} in run {run_id}'s events"
    return run


def run_page_shows(page, ui, run_id: str, line: str) -> str:
    """The run's page shows ``line`` (its reason, once) and the run did not fail. The event log
    opens scrolled to its end and draws only the rows in view, so, as a person would, the test types
    the line's first words into the log's filter box (a ``key:`` there would be a filter token)."""
    page.goto(f"{ui.url}/runs/{run_id}")
    page.get_by_placeholder("Filter").first.fill(line.partition(":")[0][:40])
    page.get_by_text(line[:60]).first.wait_for()
    body = page.locator("body").inner_text()
    for word in FORBIDDEN:
        assert word not in body, body[:3000]
    return body


def test_a_library_round_and_a_rescore_started_by_clicking(page, ui, shot):
    key = f"{stored_id(ui.library)}/r0002"  # offered: the round after the one the fixture made
    launchpad(page, ui, "library_round", key)
    shot("launchpad")
    run = run_record(ui, launch(page, ui, "library_round"))
    assert run.is_success and SKIPPED_TAG not in run.tags, run.tags
    with DagsterInstance.from_config(str(ui.home)) as instance:
        assert key in instance.get_materialized_partitions(AssetKey("hypothesis_library"))
    run_page_shows(page, ui, run.run_id, "hypothesis_library")
    shot("round-run")
    last = f"{stored_id(ui.library)}/r0002"
    launchpad(page, ui, "library_rescore", last)
    rescore = run_record(ui, launch(page, ui, "library_rescore"))
    assert rescore.is_success and SKIPPED_TAG not in rescore.tags, rescore.tags
    shot("rescore-run")


def test_the_structure_job_on_a_fresh_vault_says_which_job_to_launch(page, ui, shot):
    vault = stored_id(ui.vault)
    launchpad(page, ui, "structure", vault)
    run = run_record(ui, launch(page, ui, "structure"))
    assert run.is_success and run.tags[SKIPPED_TAG] == "NOT_DONE", run.tags
    assert "launch the `proximity` job on " + vault in run.tags[REASON_TAG]
    run_page_shows(page, ui, run.run_id, "proximity/verdicts.json: missing")
    shot("run")
    page.goto(f"{ui.url}/locations/hypograph/jobs/structure/partitions")
    page.get_by_text("Total partitions").wait_for()
    shot("partitions")
    assert "Failed" not in page.locator("body").inner_text()
    assert not (ui.vault / "agent-notes" / "structure.md").exists()


def test_a_bad_launchpad_value_paints_nothing_red(page, ui, shot):
    run_dir = stored_id(ui.run)
    for value, error in (("graph_threshold: high", "Invalid scalar at path"), ("algorithm: bogus", "not in enum")):
        launchpad(page, ui, "proximity", run_dir, f"resources:\n  proximity:\n    config:\n      {value}\n")
        page.get_by_text(error).first.wait_for()  # Dagster's own config check, in the Launchpad
        assert page.get_by_role("button", name="Launch Run").is_disabled(), value  # no run can be made
    shot("wrong-type")
    out_of_range = "resources:\n  proximity:\n    config:\n      graph_threshold: 30\n"
    launchpad(page, ui, "proximity", run_dir, out_of_range)
    run = run_record(ui, launch(page, ui, "proximity"))
    line = "graph_threshold (--threshold): must be ≥ -1 and ≤ 1 (got 30.0)"
    assert run.is_success and run.tags[SKIPPED_TAG] == "REFUSED" and run.tags[REASON_TAG] == line, run.tags
    run_page_shows(page, ui, run.run_id, line)
    shot("run")
    assert not (ui.run / "proximity").exists()


def test_a_round_on_another_topic_ends_asking_for_a_decision(page, ui, shot):
    key = f"{stored_id(ui.library)}/r0003"
    deadline = time.monotonic() + 120  # offered by the partition_keys sensor (every 30 s) after r0002 ran
    while time.monotonic() < deadline:
        with DagsterInstance.from_config(str(ui.home)) as instance:
            if key in instance.get_dynamic_partitions("library_rounds"):
                break
        time.sleep(3)
    before = (ui.library / "hypothesis_library.json").read_bytes()
    config = "resources:\n  library:\n    config:\n      topic: Byzantine tax law\n      n_behaviors: 1\n"
    launchpad(page, ui, "library_round", key, config)
    run = run_record(ui, launch(page, ui, "library_round"))
    assert run.is_success and run.tags[SKIPPED_TAG] == "NOT_DONE", run.tags
    reason = run.tags[REASON_TAG]
    assert "new_library (--new-library)" in reason and "confirm_topic (--confirm-topic)" in reason, reason
    run_page_shows(page, ui, run.run_id, "is about")
    shot("run")
    assert (ui.library / "hypothesis_library.json").read_bytes() == before
