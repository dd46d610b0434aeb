"""Shared fixtures: small hand-built inputs (a prox run directory and a vault), copies of the bundled
examples and real vaults, and an environment that keeps every test offline.

The small inputs are built so their proximity structure is known in advance (TF-IDF, graph
threshold 0.30, dupe threshold 0.80):

* varroa topic: H-1 / H-2 are word-for-word near-duplicates (~0.92), H-3 is related (~0.45);
* caffeine topic: H-4 / H-5 are word-for-word near-duplicates (~0.96);
* H-10 (monarch butterflies) shares no edge with anything.

The two topics share no vocabulary, so they are disconnected components of the graph.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
EXAMPLE_RUN = REPO / "examples" / "run"
EXAMPLE_VAULT = REPO / "examples" / "vault"
EXAMPLE_LIBRARY = REPO / "examples" / "library"
SHARED_VAULTS = Path(__file__).parent / "fixtures" / "vaults"  # copies of ../shared/examples/vaults

# Environment variables that could make a test reach a network service or a shared Dagster instance.
UNSAFE_ENV_PREFIXES = ("HYPOGRAPH_LLM", "OPENAI_")
UNSAFE_ENV = ("DAGSTER_HOME", "HYPOGRAPH_WORKSPACE")
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HYPOGRAPH_LLM": "offline"}

# Before any test module imports the code location: its LLM resource binds to the variables set now.
for _key in [k for k in os.environ if k in UNSAFE_ENV or k.startswith(UNSAFE_ENV_PREFIXES)]:
    del os.environ[_key]
import pipelines.definitions  # noqa: E402,F401 - loaded once, here, with no model variable bound

# System tests start services of their own (Chromium, the web server and daemon, PostgreSQL, Redis
# and Celery workers, an object store, network namespaces) or kill processes mid-write. They are
# marked ``system`` here, in one place, so `make test-fast` (``-m "not system"``) runs the rest apart;
# `make test` runs both. Every test under tests/system/ is one; SYSTEM_TESTS are the few that live
# beside the code they test in another folder (a daemon or Celery case of a Dagster-layer file).
SYSTEM = Path(__file__).resolve().parent / "system"
SYSTEM_TESTS = {
    "test_sensors.py::test_a_daemon_runs_what_the_sensor_requests_and_nothing_more",
    "test_deployment.py::test_backfill_of_proximity_across_every_input_runs_with_the_daemon",
    "test_fleet_safety.py::test_item02_celery_step_of_a_failed_run_runs_late_and_writes_nothing",
    "test_fleet_safety.py::test_item03_celery_worker_updated_in_place_refuses_the_new_code_s_steps",
    "test_shard_files.py::test_a_run_s_shard_files_are_removed_from_the_object_store_and_nothing_else",
    "test_demo_products.py::test_the_ui_shows_the_library_and_the_case",
    "test_demo_products.py::test_the_daemon_never_evaluates_inputs_discovered_without_a_workspace",
}


def pytest_collection_modifyitems(items):
    """Marks the system tests: tests/system/ and those listed above (tests/project/test_system_marks.py
    keeps the list true)."""
    for item in items:
        if item.path.parent == SYSTEM or f"{item.path.name}::{item.originalname}" in SYSTEM_TESTS:
            item.add_marker(pytest.mark.system)


@pytest.fixture(autouse=True)
def _no_instance_left_entered():
    """Each test starts with no Dagster instance entered. Dagster keeps the entered instance's
    state storage in a context variable and restores it only when instances exit in order; one
    left entered by an earlier test (seen after tests/dagster/test_sensors.py's and test_fast_path.py's
    runs, depending on which files a worker ran before) would be read by a later ``materialize``
    after its instance is gone: "Attempted to resolve undefined DagsterInstance weakref"."""
    from dagster._core.storage.defs_state.base import set_defs_state_storage

    with set_defs_state_storage(None):
        yield


RUN_HYPOTHESES: dict[str, dict] = {
    "H-1": {
        "title": "Varroa mites spread deformed wing virus",
        "statement": "Colonies carrying heavy Varroa mite loads into autumn collapse over winter because "
        "the mites spread deformed wing virus.",
        "mechanism": "Mites feeding on pupae inject deformed wing virus into the haemolymph of developing bees.",
        "predictions": ["Winter losses rise with autumn mite counts"],
        "evidence": ["Okafor 2019"],
        "cluster": None,
        "status": "proposed",
    },
    "H-2": {
        "title": "Varroa mites transmit deformed wing virus",
        "statement": "Colonies carrying heavy Varroa mite loads into autumn die over winter because "
        "the mites spread deformed wing virus.",
        "mechanism": "Mites feeding on pupae inject deformed wing virus into the haemolymph of developing bees.",
    },
    "H-3": {
        "title": "Amitraz-resistant Varroa mites keep deformed wing virus high",
        "statement": "Varroa mite populations that resist amitraz treatments keep mite loads and deformed "
        "wing virus high in autumn colonies.",
        "mechanism": "Repeated amitraz use selects resistant mites.",
    },
    "H-4": {
        "title": "Evening caffeine delays sleep onset",
        "statement": "Drinking coffee after six in the evening delays sleep onset in adults by blocking "
        "adenosine receptors.",
        "mechanism": "Caffeine antagonises the adenosine receptors that build sleep pressure.",
    },
    "H-5": {
        "title": "Evening caffeine postpones sleep onset",
        "statement": "Drinking coffee after six in the evening delays sleep onset in adults by blocking "
        "adenosine receptors.",
        "mechanism": "Caffeine antagonises the adenosine receptors that build sleep pressure.",
    },
    "H-10": {
        "title": "Milkweed loss drives monarch butterfly decline",
        "statement": "Herbicide use along field margins removes milkweed, the only host plant of monarch caterpillars.",
        "mechanism": "Fewer host plants mean fewer larvae survive each summer generation.",
    },
}
RUN_IDS = ["H-1", "H-2", "H-3", "H-4", "H-5", "H-10"]  # natural id order
RUN_DUPLICATES = {("H-1", "H-2"), ("H-4", "H-5")}
RUN_COMPONENTS = [{"H-1", "H-2", "H-3"}, {"H-4", "H-5"}, {"H-10"}]

QUESTION = "Why do honeybee colonies die over winter?"
VAULT_NODES: dict[str, tuple[str, str]] = {  # id -> (title from the filename, statement)
    "H-1": (
        "Varroa mites spread deformed wing virus",
        "Colonies carrying heavy Varroa mite loads into autumn collapse over winter, as "
        "[[S-1 - Okafor 2019|Okafor]] reports, because the mites spread deformed wing virus.",
    ),
    "H-2": (
        "Varroa mites transmit deformed wing virus",
        "Colonies carrying heavy Varroa mite loads into autumn die over winter, as "
        "[[S-1 - Okafor 2019|Okafor]] reports, because the mites spread deformed wing virus.",
    ),
    "H-3": (
        "Evening caffeine delays sleep onset",
        "Drinking coffee after six in the evening delays sleep onset in adults, see [[S-2 - Lind 2020]].",
    ),
    "H-4": (
        "Milkweed loss drives monarch butterfly decline",
        "Herbicide use along field margins removes milkweed, the only host plant of monarch caterpillars.",
    ),
}
VAULT_IDS = ["H-1", "H-2", "H-3", "H-4"]
VAULT_DUPLICATES = {("H-1", "H-2")}


# -- writers ------------------------------------------------------------------------------------


def write_json_hypothesis(root: Path, hid: str, **fields) -> Path:
    """``<root>/hypotheses/<hid>.json`` holding ``{"id": hid, **fields}``."""
    path = Path(root) / "hypotheses" / f"{hid}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"id": hid, **fields}, indent=2), encoding="utf-8")
    return path


def node_markdown(meta: dict, body: str = "") -> str:
    """A vault node: YAML frontmatter between ``---`` lines, then the body."""
    return f"---\n{yaml.safe_dump(meta, sort_keys=False, allow_unicode=True)}---\n{body}"


def write_vault_node(root: Path, hid: str, title: str, folder: str = "hypotheses", body: str = "", **meta) -> Path:
    """``<root>/<folder>/<hid> - <title>.md``: a step-3 hypothesis node (override any field via ``meta``)."""
    path = Path(root) / folder / f"{hid} - {title}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    fields = {
        "type": "hypothesis",
        "id": hid,
        "statement": "",
        "question": QUESTION,
        "source": "[[S-1 - Okafor 2019]]",
        "locator": "Results",
        "state": "active",
        **meta,
    }
    path.write_text(node_markdown(fields, body), encoding="utf-8")
    return path


def build_run_dir(root: Path) -> Path:
    for hid, fields in RUN_HYPOTHESES.items():
        write_json_hypothesis(root, hid, **fields)
    return root


def build_vault(root: Path) -> Path:
    for hid, (title, statement) in VAULT_NODES.items():
        write_vault_node(
            root, hid, title, statement=statement, body=f"Notes on {hid}: links to [[S-1 - Okafor 2019]].\n"
        )
    write_vault_node(
        root,
        "H-5",
        "Varroa mites carry deformed wing virus",
        folder="hypotheses/merged",
        statement="Varroa mites carry deformed wing virus into colonies.",
        state="merged",
        merged_into="[[H-1 - Varroa mites spread deformed wing virus]]",
    )
    write_vault_node(
        root,
        "H-6",
        "Cold snaps kill clusters",
        folder="hypotheses/dropped",
        statement="Sudden cold snaps kill winter clusters.",
        state="dropped",
    )
    source = Path(root) / "sources" / "S-1 - Okafor 2019.md"
    source.parent.mkdir(parents=True, exist_ok=True)
    source.write_text(node_markdown({"type": "source", "id": "S-1"}, "Okafor 2019, invented.\n"), encoding="utf-8")
    return root


def copy_tree(src: Path, dst: Path) -> Path:
    """Copy an input without any proximity output or tool state it may already carry."""
    return Path(shutil.copytree(src, dst, ignore=shutil.ignore_patterns("proximity", ".hypograph")))


RECORDED_STRUCTURE = Path(__file__).parent / "fixtures" / "recorded" / "structure-offline.json"
# Left out of the record: Dagster's own storage and the IO manager's copies (not outputs of the
# structuring itself), lock files (empty), and the embedding matrix (its digest is in
# embedding-meta.json, which is recorded); the report's pictures (their pixels follow matplotlib's
# and plotly's versions; tests/core/proximity/test_report.py checks them, report.json is recorded).
UNRECORDED = (
    ".hypograph/dagster/",
    ".hypograph/assets/",
    ".hypograph/input-id",
    ".hypograph/structure.lock",
    ".hypograph/proximity.lock",
    ".create_node.lock",
    "proximity/embeddings.npz",
    "proximity/report.html",
    "proximity/cluster-map.png",
    "proximity/vault-map.png",
    "proximity/thresholds.png",
)
MAP_DATE_RE = re.compile(rb"^generated: \d{4}-\d{2}-\d{2}$", re.M)


def structure_record(root: Path, stdout: str) -> dict[str, str]:
    """relative path -> sha256 of every file a structured vault holds (the map's ``generated:``
    date blanked), plus ``<stdout>`` -> the command's output with the vault's path replaced."""
    out = {}
    for p in sorted(Path(root).rglob("*")):
        rel = p.relative_to(root).as_posix()
        if p.is_file() and not rel.startswith(UNRECORDED):
            out[rel] = hashlib.sha256(MAP_DATE_RE.sub(b"generated: <date>", p.read_bytes())).hexdigest()
    out["<stdout>"] = stdout.replace(str(root), "<root>")
    return out


def offline_env() -> dict[str, str]:
    """The current environment minus anything that could reach a model or a shared instance."""
    env = {k: v for k, v in os.environ.items() if k not in UNSAFE_ENV and not k.startswith(UNSAFE_ENV_PREFIXES)}
    return {**env, **OFFLINE_ENV, "DAGSTER_HOME": os.environ["DAGSTER_HOME"]}


def snapshot(root: Path, exclude: tuple[str, ...] = ()) -> dict[str, tuple[bytes, int]]:
    """relative path -> (bytes, mtime_ns) for every file under ``root`` not under an excluded top dir."""
    out = {}
    for p in sorted(Path(root).rglob("*")):
        rel = p.relative_to(root)
        if p.is_file() and rel.parts[0] not in exclude:
            out[str(rel)] = (p.read_bytes(), p.stat().st_mtime_ns)
    return out


# -- fixtures -----------------------------------------------------------------------------------


@pytest.fixture(scope="session", autouse=True)
def _offline(tmp_path_factory):
    """No test may reach an LLM endpoint, a model hub or the user's Dagster instance (session-wide,
    so module-scoped fixtures that run a pipeline are covered too): the CLI's shared instance is a
    throwaway one for the session."""
    with pytest.MonkeyPatch.context() as mp:
        for key in list(os.environ):
            if key in UNSAFE_ENV or key.startswith(UNSAFE_ENV_PREFIXES):
                mp.delenv(key)
        for key, value in OFFLINE_ENV.items():
            mp.setenv(key, value)
        mp.setenv("DAGSTER_HOME", str(tmp_path_factory.mktemp("dagster_home")))
        yield


def execute(root: Path, job_name: str = "proximity", offline: bool | None = True, instance=None, **proximity):
    """Run ``job_name`` on ``root``'s partition in this process (so monkeypatches reach it), on
    ``instance`` or a throwaway one, through ``pipelines/launch.py`` as the command does; never
    raises for a failed run. ``proximity``: ProximitySettings fields. ``structure`` runs the flow
    ``hypograph structure`` runs (proximity, step 4, proximity again when step 4 rewrote the
    vault): the result returned is step 4's, or the first failed run's."""
    from dagster import DagsterInstance

    from hypograph.proximity.settings import ProximitySettings
    from hypograph_cli.structure import run_structure
    from pipelines.launch import execute as launch

    instance = instance or DagsterInstance.ephemeral()
    settings = ProximitySettings(**proximity)
    if job_name != "structure":
        return launch(Path(root), job_name, {"proximity": settings}, offline, instance=instance)
    results = run_structure(Path(root), settings, offline, instance=instance)
    failed = [r for r in results if not r.success]
    return failed[0] if failed else next(r for r in results if r.job_def.name == "structure")


@pytest.fixture(scope="session")
def make_run_dir():
    """``make_run_dir(path)`` builds the small run directory there (for module-scoped fixtures)."""
    return build_run_dir


@pytest.fixture(scope="session")
def make_vault():
    """``make_vault(path)`` builds the small vault there (for module-scoped fixtures)."""
    return build_vault


@pytest.fixture
def run_dir(tmp_path) -> Path:
    """A six-hypothesis prox run directory: two topics with a near-duplicate pair each, one loner."""
    return build_run_dir(tmp_path / "run")


@pytest.fixture
def vault(tmp_path) -> Path:
    """A vault with four active hypothesis nodes, one merged, one dropped, one source."""
    return build_vault(tmp_path / "vault")


@pytest.fixture
def add_hypothesis():
    """``add_hypothesis(root, "H-7", title=..., statement=...)`` writes a run-dir hypothesis file."""
    return write_json_hypothesis


@pytest.fixture
def add_node():
    """``add_node(root, "H-7", "Title", statement=..., ...)`` writes a vault hypothesis node."""
    return write_vault_node


def _example_copy(src: Path, dst: Path) -> Path:
    if not (src / "hypotheses").is_dir():
        pytest.skip(f"{src} is not there (yet)")
    return copy_tree(src, dst)


@pytest.fixture
def example_run(tmp_path) -> Path:
    """A private copy of examples/run (30 honeybee hypotheses with planted near-duplicates)."""
    return _example_copy(EXAMPLE_RUN, tmp_path / "example-run")


@pytest.fixture
def example_vault(tmp_path) -> Path:
    """A private copy of examples/vault."""
    return _example_copy(EXAMPLE_VAULT, tmp_path / "example-vault")


def env_config(monkeypatch, env: dict[str, str], offline: bool = False):
    """The ``LLMConfig`` of a process whose only LLM variables are ``env`` (``hypograph.environment``
    reads the process environment: ``env`` is set for the test only)."""
    from hypograph.environment import llm_config

    for key in [k for k in os.environ if k.startswith("HYPOGRAPH_") or k.startswith("OPENAI_")]:
        monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return llm_config(offline=offline)
