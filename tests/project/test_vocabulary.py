"""One name per product (docs/architecture.md, "One name per product"): every name the table gives
a product exists under that name, and the names it retired are nowhere.

Read from the source and the docs (``ast``, the ``hypograph`` parser, which imports the standard
library only): nothing of Dagster is loaded.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from hypograph_cli.main import parser

ROOT = Path(__file__).resolve().parents[2]
TABLE_MARK = "<!-- vocabulary: tests/project/test_vocabulary.py parses the rows below -->"
COLUMNS = ["product", "core", "dagster", "jobs", "commands", "tests", "docs"]
# The project's own folders: a name retired from the vocabulary may be in none of their paths or
# text (the recorded fixtures and example inputs are data, not the project's words).
SOURCES = ["hypograph", "hypograph_cli", "assets", "pipelines", "resources", "io_managers", "tests", "docs"]
SOURCES += ["benchmarks", "eval", "deploy", "config"]
RETIRED = "casework"  # the case product is `case` everywhere: packages, group, tests, docs
# Step 4 is the structure job's work: modules, functions and tests say structure. "step4" is left
# only in the names the structuring spec fixed and in the sensor's run keys as stored.
STEP4 = re.compile(r"\w*step4\w*", re.IGNORECASE)
STEP4_KEPT = {"no_numbers_in_step4_fields", "STEP4_FIELDS", "step4_values"}
RUN_KEY = "step4:"
DATA = ("tests/fixtures/", "tests/data/")


def table(text: str) -> list[dict[str, list[str]]]:
    """The rows after the vocabulary mark: each cell's backquoted names (the docs cell as written)."""
    lines = text.split(TABLE_MARK, 1)[1].strip().splitlines()
    rows = []
    for line in lines[2:]:  # after the header and its rule
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        assert len(cells) == len(COLUMNS), line
        rows.append({c: re.findall(r"`([^`]+)`", v) or [v] for c, v in zip(COLUMNS, cells, strict=True)})
    return rows


ROWS = table((ROOT / "docs" / "architecture.md").read_text(encoding="utf-8"))


def test_the_table_names_the_four_products():
    assert [r["product"][0] for r in ROWS] == ["proximity", "structure", "library", "case"]


def group_names() -> dict[str, str]:
    """``assets/groups.py``'s group constants (a name as Dagster allows it, not a tag or metadata
    key such as ``hypograph/reads_input``): NAME -> group."""
    tree = ast.parse((ROOT / "assets" / "groups.py").read_text(encoding="utf-8"))
    return {
        node.targets[0].id: node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
        and node.value.value.isidentifier()
    }


def job_names(folder: Path) -> set[str]:
    """The names given to ``define_asset_job`` in the product's Dagster folder."""
    names = set()
    for path in folder.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "define_asset_job" and node.args:
                names.add(node.args[0].value)
    return names


def commands(name: str) -> set[str]:
    """The ``hypograph`` subcommands as the parser builds them for ``hypograph <name>``."""
    p = parser([name])
    [sub] = [a for a in p._actions if a.choices and hasattr(a, "add_parser")]
    return set(sub.choices)


@pytest.mark.parametrize("row", ROWS, ids=[r["product"][0] for r in ROWS])
def test_every_name_the_table_gives_a_product_exists(row):
    """Its core package, Dagster folder and group (the group of that folder's assets), its jobs
    (defined in that folder), its commands, its test files and its docs page."""
    product = row["product"][0]
    assert row["core"] == [f"hypograph/{product}/"] and (ROOT / "hypograph" / product / "__init__.py").is_file()
    folder, group = row["dagster"]
    assert folder == f"assets/{product}/" and (ROOT / folder / "__init__.py").is_file()
    assert group == product and group in group_names().values()
    constant = next(k for k, v in group_names().items() if v == group)
    assert constant in (ROOT / folder / "assets.py").read_text(encoding="utf-8")  # its assets are in the group
    assert set(row["jobs"]) <= job_names(ROOT / folder)
    for command in row["commands"]:
        tool, _, name = command.partition(" ")
        if tool == "prox":
            assert (ROOT / "hypograph_cli" / "prox.py").is_file()
        else:
            assert name in commands(name), command
    for prefix in row["tests"]:
        assert list((ROOT / "tests").rglob(f"{prefix.rstrip('*')}*.py")), prefix
    assert (ROOT / "docs" / row["docs"][0]).is_file()


def test_every_asset_group_is_a_product():
    assert sorted(group_names().values()) == sorted(r["dagster"][1] for r in ROWS)


def project_files():
    for name in ("README.md", "Makefile", "pyproject.toml", "workspace.yaml"):
        yield name, ROOT / name
    for top in SOURCES:
        for path in sorted((ROOT / top).rglob("*")):
            rel = path.relative_to(ROOT).as_posix()
            if path.is_file() and "__pycache__" not in rel and not rel.startswith(DATA):
                yield rel, path


def test_no_retired_name_is_left():
    """No path or text of the project's own files uses a retired name (this file states them)."""
    me = Path(__file__).resolve()
    left = []
    for rel, path in project_files():
        text = ""
        if path.resolve() != me and path.suffix in (".py", ".md", ".toml", ".txt", ".yaml", ""):
            text = path.read_text(encoding="utf-8", errors="replace")
        words = set(STEP4.findall(rel + "\n" + text.replace(RUN_KEY, ""))) - STEP4_KEPT
        left += [f"{rel}: {word}" for word in sorted(words)]
        left += [f"{rel}: casework"] if RETIRED in rel.lower() or RETIRED in text.lower() else []
    assert left == []
