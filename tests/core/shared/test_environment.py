"""Environment values, issue 47 items 14-19 and 21, each through the path it was found on: every
``HYPOGRAPH_*`` variable is parsed once, in ``hypograph/environment.py``, with a range (finite
numbers, maxima), and a bad one is ONE line naming the variable, its value and its range, exit 1,
before any run or file is touched: by ``hypograph``, by ``prox`` and by the code location itself.
The case config (item 21) refuses ``nan``/``inf`` in one line naming the file and the key.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import time
from pathlib import Path

import pytest
from case_support import make_case
from cli_helper import hypograph, prox, run
from conftest import EXAMPLE_RUN, VENV_BIN, build_vault, offline_env, snapshot
from llm_stub import unused_port

from hypograph import environment

REPO = Path(__file__).resolve().parents[3]
SOURCE_PACKAGES = ("hypograph", "hypograph_cli", "assets", "resources", "pipelines", "io_managers")


def model_env(**extra: str) -> dict[str, str]:
    """A command's environment with a model at a port nobody listens on, and ``extra``."""
    env = {k: v for k, v in offline_env().items() if k != "HYPOGRAPH_LLM"}
    return {
        **env,
        "HYPOGRAPH_LLM_BASE_URL": f"http://127.0.0.1:{unused_port()}/v1",
        "HYPOGRAPH_LLM_MODEL": "m",
        "HYPOGRAPH_LLM_API_KEY": "k",
        **extra,
    }


def refused(result, *needles: str) -> str:
    """The command's one stderr line (exit 1, no traceback), holding every needle."""
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1, (result.returncode, result.stderr[-3000:])
    assert all(n in lines[0] for n in needles), lines[0]
    return lines[0]


@pytest.fixture
def fresh_run(tmp_path) -> Path:
    """The example run directory with no proximity output yet."""
    return Path(
        shutil.copytree(EXAMPLE_RUN, tmp_path / "run", ignore=shutil.ignore_patterns("proximity", ".hypograph"))
    )


# -- item 14: the executor and its Celery settings ---------------------------------------------------


def test_item14_bogus_executor_one_line(fresh_run):
    result = hypograph("proximity", fresh_run, env={**offline_env(), "HYPOGRAPH_EXECUTOR": "bogus"})
    refused(
        result, "hypograph proximity: HYPOGRAPH_EXECUTOR:", "'in_process', 'multiprocess', 'celery' or 'k8s'", "'bogus'"
    )
    assert not (fresh_run / "proximity").exists()


def test_item14_fifo_celery_config_refused_without_hanging(fresh_run, tmp_path):
    fifo = tmp_path / "celery.yaml"
    os.mkfifo(fifo)
    env = {**offline_env(), "HYPOGRAPH_EXECUTOR": "celery", "HYPOGRAPH_CELERY_CONFIG": str(fifo)}
    started = time.monotonic()
    result = hypograph("proximity", fresh_run, env=env, timeout=60)
    refused(result, "HYPOGRAPH_CELERY_CONFIG: must name a regular file", str(fifo))
    assert time.monotonic() - started < 30 and not (fresh_run / "proximity").exists()


def test_item14_the_code_location_fails_to_load_in_one_line():
    """What the web UI and `dagster definitions validate` show: the one line, raised from the one
    frame of ``pipelines/definitions.py`` (Dagster hides its own and the import machinery's)."""
    env = {**offline_env(), "HYPOGRAPH_EXECUTOR": "bogus", "PYTHONPATH": str(REPO)}
    result = run(VENV_BIN / "dagster", "definitions", "validate", "-m", "pipelines.definitions", env=env, cwd=REPO)
    out = result.stdout + result.stderr
    assert result.returncode == 1, out[-3000:]
    line = "HypographError: the code location cannot load: HYPOGRAPH_EXECUTOR: input should be"
    assert sum(line in row for row in out.splitlines()) == 1, out[-3000:]
    frames = re.findall(r'File "([^"]+)", line \d+', out)
    assert [Path(f).relative_to(REPO).as_posix() for f in frames] == ["pipelines/definitions.py"], out[-3000:]


# -- items 15-17: the LLM settings, through LLMConfig's ranges -------------------------------------------


def test_item15_bad_llm_value_refused_before_any_file(fresh_run):
    result = hypograph("proximity", fresh_run, env=model_env(HYPOGRAPH_LLM_CONCURRENCY="0"))
    refused(result, "HYPOGRAPH_LLM_CONCURRENCY: must be ≥ 1 and ≤ 64 (got '0')")
    assert not (fresh_run / "proximity").exists() and not (fresh_run / ".hypograph").exists()


def test_item16_infinite_llm_timeout_refused(fresh_run):
    result = hypograph("proximity", fresh_run, env=model_env(HYPOGRAPH_LLM_TIMEOUT="inf"))
    refused(result, "HYPOGRAPH_LLM_TIMEOUT: must be > 0 and ≤ 3600 (got 'inf')")
    assert not (fresh_run / "proximity").exists()


def test_item17_huge_max_retries_refused_before_the_down_server_is_asked(fresh_run):
    env = model_env(HYPOGRAPH_LLM_MAX_RETRIES="1000000000", HYPOGRAPH_LLM_TIMEOUT="2")
    result = hypograph("proximity", fresh_run, env=env, timeout=120)
    refused(result, "HYPOGRAPH_LLM_MAX_RETRIES: must be ≥ 0 and ≤ 10 (got '1000000000')")
    assert not (fresh_run / "proximity").exists()


@pytest.mark.parametrize("value", ["inf", "/tmp/a-fifo", "localhost:8000/v1"])
def test_item15_a_base_url_that_is_no_url_is_refused_not_taken_for_an_outage(fresh_run, value):
    """Found by the fresh pass: it was accepted, every call an "outage", the run done offline."""
    result = hypograph("proximity", fresh_run, env=model_env(HYPOGRAPH_LLM_BASE_URL=value))
    refused(result, f"HYPOGRAPH_LLM_BASE_URL: must be an http:// or https:// URL with a host (got '{value}')")
    assert not (fresh_run / "proximity").exists()


# -- item 18: how long a reader waits ---------------------------------------------------------------------


def test_item18_read_wait_abc_one_line(tmp_path):
    vault = build_vault(tmp_path / "vault")
    result = hypograph("check", vault, env={**offline_env(), "HYPOGRAPH_READ_WAIT": "abc"})
    refused(result, "hypograph check: HYPOGRAPH_READ_WAIT: must be a number ≥ 0 and ≤ 86400 (got 'abc')")


def test_item18_read_wait_nan_refused_not_waited_for_ever(tmp_path):
    from hypograph.vault.locking import structuring_lock

    vault = build_vault(tmp_path / "vault")
    with structuring_lock(vault, run="dagster-run-1234"):  # held: a reader given nan would wait for ever
        before = snapshot(vault)
        result = hypograph("check", vault, env={**offline_env(), "HYPOGRAPH_READ_WAIT": "nan"}, timeout=60)
        assert snapshot(vault) == before
    refused(result, "HYPOGRAPH_READ_WAIT: must be ≥ 0 and ≤ 86400 (got 'nan')")


# -- item 19: the memory a graph may use -------------------------------------------------------------


def test_item19_infinite_memory_limit_refused(fresh_run):
    result = hypograph("proximity", fresh_run, env={**offline_env(), "HYPOGRAPH_MEMORY_LIMIT": "inf"})
    refused(result, "HYPOGRAPH_MEMORY_LIMIT: must be bytes or a size like 512M or 4G, from 1K to 1024T (got 'inf')")
    assert not (fresh_run / "proximity").exists()


def test_item19_prox_refuses_it_before_reading_anything(fresh_run):
    assert prox("embed", "--run-dir", fresh_run).returncode == 0
    embedded = snapshot(fresh_run)
    result = prox("graph", "--run-dir", fresh_run, env={**offline_env(), "HYPOGRAPH_MEMORY_LIMIT": "inf"})
    refused(result, "prox graph: HYPOGRAPH_MEMORY_LIMIT:", "'inf'")
    assert snapshot(fresh_run) == embedded


# -- item 21: the case config's numbers -------------------------------------------------------------------


@pytest.mark.parametrize(
    "command, value",
    [(("batch",), "nan"), (("batch",), "inf"), (("batch",), "1000000000000.0"), (("case", "interpret"), "nan")],
)
def test_item21_nan_first_delay_refused_in_one_line_before_any_run(tmp_path, command, value):
    case = make_case(tmp_path / "cases")
    config = tmp_path / "analysis.toml"
    config.write_text(f"[retry]\nfirst_delay_seconds = {value}\n", encoding="utf-8")
    before = snapshot(case)
    home = tmp_path / "home"
    result = hypograph(*command, case, "--config", config, env=model_env(DAGSTER_HOME=str(home)))
    refused(result, f"{config}: retry.first_delay_seconds: must be > 0 and ≤ 604800 (got {value})")
    assert snapshot(case) == before and not (home / "history").exists()  # no run was created


# -- one module, one table ---------------------------------------------------------------------------------


def _environ_reads(path: Path) -> list[str]:
    """``os.environ`` / ``getenv`` reads in ``path`` (an assignment ``os.environ[K] = V`` is no read)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    written = {
        id(t.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        for t in node.targets
        if isinstance(t, ast.Subscript)
    }
    return [
        f"{path.relative_to(REPO)}:{node.lineno}"
        for node in ast.walk(tree)
        if (isinstance(node, ast.Attribute) and node.attr == "environ" and id(node) not in written)
        or (isinstance(node, ast.Attribute) and node.attr == "getenv")
        or (isinstance(node, ast.Name) and node.id in ("environ", "getenv"))
    ]


def test_no_module_outside_the_environment_module_reads_the_environment():
    """Every variable, ``HYPOGRAPH_*`` or not, is read in ``hypograph/environment.py`` only."""
    own = REPO / "hypograph" / "environment.py"
    reads = [
        r for pkg in SOURCE_PACKAGES for p in sorted((REPO / pkg).rglob("*.py")) if p != own for r in _environ_reads(p)
    ]
    assert reads == []
    assert _environ_reads(own)  # the check sees a read where there is one


def test_the_module_table_lists_every_variable():
    table = environment.__doc__
    names = [environment.variable(field) for field in environment.Environment.model_fields]
    assert [n for n in names if not re.search(rf"^{n}\s", table, re.MULTILINE)] == []
    assert len(names) == 21  # and OPENAI_BASE_URL, OPENAI_API_KEY: the fallbacks of two of them


# -- the LLM resource: LLMConfig's fields, declared once ----------------------------------------------------


def test_llm_resource_is_llm_config_field_for_field(monkeypatch):
    """Every LLMConfig field is a run-config field of the resource (``forced_offline`` as ``offline``)
    with its description; a field set overrides the environment, an empty one takes it; a value out of
    LLMConfig's range is one line naming the field."""
    from hypograph.errors import SettingRefused
    from hypograph.llm.config import LLMConfig
    from resources.llm import LLMResource

    names = {"offline" if n == "forced_offline" else n for n in LLMConfig.model_fields}
    assert set(LLMResource.model_fields) == names
    assert LLMResource.model_fields["timeout"].description == LLMConfig.model_fields["timeout"].description
    monkeypatch.setenv("HYPOGRAPH_LLM_MODEL", "from-env")
    monkeypatch.setenv("HYPOGRAPH_LLM_TIMEOUT", "30")
    config = LLMResource(timeout=5.0, validation_retries=0).config()
    assert (config.model, config.timeout, config.validation_retries) == ("from-env", 5.0, 0)
    with pytest.raises(SettingRefused, match=r"^timeout: must be > 0 and ≤ 3600 \(got 9000.0\)$"):
        LLMResource(timeout=9000.0).config()
