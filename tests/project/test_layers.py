"""The project's import layers, read from the source with ``ast`` (nothing is imported).

The packages, bottom to top: the core ``hypograph``, then ``resources`` and ``io_managers``, then
``assets`` (one package per product), then ``pipelines`` (the code location and the launcher),
then the command ``hypograph_cli``. A package imports only from its own level or below, at module
level or inside a function, and there is no cycle among all of their modules. Within the core:

* no module under ``hypograph/`` imports Dagster (the core runs without it: ``prox``, the CLI);
* every module belongs to one declared layer, and imports only from its own layer or below;
* there is no import cycle, counting imports inside functions too (a function-level import must
  not hide a cycle; the few kept are there to delay a heavy third-party import, or listed below).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "hypograph"
PACKAGES = [["hypograph"], ["resources", "io_managers"], ["assets"], ["pipelines"], ["hypograph_cli"]]

# Bottom to top. A module belongs to the longest prefix listed here.
LAYERS: dict[str, list[str]] = {
    "base": [
        "hypograph",
        "hypograph.errors",
        "hypograph.atomic",
        "hypograph.ids",
        "hypograph.paths",
        "hypograph.limits",
        "hypograph.journal",
        "hypograph.locks",
        "hypograph.inputs",
        "hypograph.environment",  # every environment variable, parsed once (below the readers of them)
        "hypograph.llm.config",  # pydantic alone: the LLM settings' ranges, which the environment's use
    ],
    "vault": ["hypograph.vault"],
    "corpus": ["hypograph.hypotheses"],
    "llm": ["hypograph.llm"],
    "proximity": ["hypograph.proximity"],
    "structure": ["hypograph.structure"],
    "top": ["hypograph.library", "hypograph.case", "hypograph.report", "hypograph.titles"],
}
# Modules allowed to import hypograph modules inside functions, and why.
LAZY_HYPOGRAPH_IMPORTS = {
    "hypograph.case.settings": "the policy reader only when asked: a command validates flags with pydantic alone",
    "hypograph.library.guard": "the sentence model only where embeddings decide (no model): a refusal stays fast",
    "hypograph.proximity.adjudicate": "the vault's node reader only when a review names ids to check against the input",
    "hypograph.proximity.store": "owned by the proximity work; hides no cycle (checked below)",
    "hypograph.proximity.communities": "owned by the proximity work; hides no cycle (checked below)",
    "hypograph.proximity.shards": "the kNN index (faiss) is imported only for large dense inputs",
    "hypograph.proximity.embed": "each backend's code is imported only when it is used (prox embed starts fast)",
    "hypograph.proximity.graph": "the builders (similarity, shards: scipy) only when building: readers start light",
    "hypograph.proximity.graph_files": "the writers' helpers (forked chunks, edge order) only when writing",
    "hypograph.hypotheses": "the vault's modules (YAML) only when reading a vault: prox on a run dir starts light",
    "hypograph.report": "the vault and corpus readers only for the input that needs them (titles, HC clusters)",
    "hypograph.report.sweep": "the graph builder only when the sweep rebuilds below the threshold",
}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
PROJECT = {module_name(p): p for top in sum(PACKAGES, []) for p in sorted((ROOT / top).rglob("*.py"))}


def imports(name: str, modules: dict[str, Path] = MODULES) -> list[tuple[str, bool]]:
    """(imported module, inside a function?) for every import statement of module ``name``."""
    path = modules[name]
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            nested = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            if isinstance(child, ast.Import):
                out.extend((alias.name, in_function) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    anchor = package.rsplit(".", child.level - 1)[0] if child.level > 1 else package
                    base = f"{anchor}.{base}" if base else anchor
                for alias in child.names:  # ``from pkg import module`` imports the module
                    sub = f"{base}.{alias.name}"
                    out.append((sub if sub in modules else base, in_function))
            visit(child, nested)

    visit(tree, False)
    return out


def layer_of(name: str) -> int:
    best, index = "", -1
    for k, prefixes in enumerate(LAYERS.values()):
        for prefix in prefixes:
            if (name == prefix or name.startswith(prefix + ".")) and len(prefix) > len(best):
                best, index = prefix, k
    return index


def own(name: str) -> bool:
    return name == "hypograph" or name.startswith("hypograph.")


def test_every_module_has_a_layer():
    assert [m for m in MODULES if layer_of(m) < 0] == []
    assert layer_of("hypograph.library.rounds") == layer_of("hypograph.case") == len(LAYERS) - 1


def test_no_module_imports_dagster():
    offenders = [(m, imp) for m in MODULES for imp, _ in imports(m) if imp.split(".")[0].startswith("dagster")]
    assert offenders == []


def test_imports_only_go_down_the_layers():
    names = list(LAYERS)
    upward = [
        f"{m} ({names[layer_of(m)]}) imports {imp} ({names[layer_of(imp)]})"
        for m in MODULES
        for imp, _ in imports(m)
        if own(imp) and layer_of(imp) > layer_of(m)
    ]
    assert upward == []


def test_function_level_imports_of_the_core_are_only_where_listed():
    """And every module listed exists and still imports so: an exemption outlives nothing."""
    lazy = sorted({m for m in MODULES for imp, inside in imports(m) if inside and own(imp)})
    assert lazy == sorted(LAZY_HYPOGRAPH_IMPORTS), lazy


def level(name: str) -> int:
    return next(k for k, tops in enumerate(PACKAGES) if name.split(".", maxsplit=1)[0] in tops)


def test_the_dagster_layer_sits_above_the_core_and_the_command_above_it():
    """No core module imports the Dagster layer or the command (so no call goes back up), and no
    Dagster module imports the command: counting imports inside functions too."""
    upward = [
        f"{m} imports {imp}"
        for m in PROJECT
        for imp, _ in imports(m, PROJECT)
        if imp in PROJECT and level(imp) > level(m)
    ]
    assert upward == []


def test_no_import_cycle():
    """Across the whole project (the core's modules among them), imports inside functions counted."""
    graph = {m: sorted({i for i, _ in imports(m, PROJECT) if i in PROJECT and i != m}) for m in PROJECT}
    state: dict[str, int] = {}  # 1 on the path, 2 done
    cycles = []

    def walk(m: str, path: list[str]) -> None:
        state[m] = 1
        for n in graph[m]:
            if state.get(n) == 1:
                cycles.append(path[path.index(n) :] + [n])
            elif n not in state:
                walk(n, path + [n])
        state[m] = 2

    for m in graph:
        if m not in state:
            walk(m, [m])
    assert cycles == []


@pytest.mark.parametrize(
    "source, expected",
    [
        ("from hypograph.vault import vault\n", [("hypograph.vault.vault", False)]),
        ("def f():\n    from hypograph.ids import id_number\n", [("hypograph.ids", True)]),
        ("import dagster as dg\n", [("dagster", False)]),
    ],
)
def test_the_import_reader_sees_what_it_must(tmp_path, monkeypatch, source, expected):
    """The checks above are only as good as ``imports``: it must resolve submodules and see
    imports inside functions."""
    monkeypatch.setitem(MODULES, "hypograph.structure.probe", tmp_path / "probe.py")
    (tmp_path / "probe.py").write_text(source, encoding="utf-8")
    assert imports("hypograph.structure.probe") == expected


def test_prox_stays_outside_dagster():
    """``prox`` (``hypograph_cli/prox.py``) calls the core directly: no Dagster, no Dagster layer, no
    ``hypograph`` command module (whose handlers launch runs), at module level or inside a function;
    only the record, outcome and settings modules every command shares (``--json``, the exit codes,
    flags declared by the settings models)."""
    name = "hypograph_cli.prox"
    shared = {name, "hypograph_cli.outcome", "hypograph_cli.records", "hypograph_cli.settings"}
    bad = [
        imp
        for imp, _ in imports(name, PROJECT)
        if imp.split(".")[0].startswith("dagster")
        or (imp in PROJECT and level(imp) in (1, 2, 3))
        or (imp.startswith("hypograph_cli.") and imp not in shared)
    ]
    assert bad == []


PRODUCT_WORDS = {"proximity", "structure", "library", "libraries", "round", "rounds", "case"}
PRODUCT_WORDS |= {"revision", "revisions", "vault", "vaults", "prox"}


def _code_words(path: Path) -> set[str]:
    """The lower-case words of ``path``'s code (names, attributes, imports, string constants), its
    docstrings and comments left out."""
    tree = ast.parse(path.read_text())
    docstrings = {id(body[0].value) for body in _bodies(tree) if body and _is_docstring(body[0])}
    words = set()
    for node in ast.walk(tree):
        text = _text(node) if id(node) not in docstrings else None
        words |= {w for w in _split(text or "") if w}
    return words


def _bodies(tree: ast.Module) -> list[list]:
    kinds = ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
    return [node.body for node in ast.walk(tree) if isinstance(node, kinds)]


def _is_docstring(statement) -> bool:
    return isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)


def _text(node) -> str | None:
    """The name or string a node of code carries (None for the others)."""
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, str) else None
    if isinstance(node, ast.ImportFrom):
        return node.module
    return getattr(node, {ast.Name: "id", ast.Attribute: "attr", ast.alias: "name"}.get(type(node), "-"), None)


def _split(text: str) -> list[str]:
    import re

    return re.split(r"[^a-z0-9]+", re.sub(r"([a-z])([A-Z])", r"\1_\2", text).lower())


def test_the_launcher_names_no_product():
    """Issue 45: ``pipelines/launch.py`` knows a job, a partition and settings models; what a job
    needs before its run (whose sub-keys its partitions are, whether it reads the input) is the job's
    own declaration (``assets.groups.launched``), so no product, job or partition set is named there."""
    named = _code_words(ROOT / "pipelines" / "launch.py") & PRODUCT_WORDS
    assert not named, f"pipelines/launch.py names {sorted(named)}: declare it on the product's job instead"


def test_the_product_word_reader_sees_names_and_strings_not_docstrings(tmp_path):
    source = tmp_path / "m.py"
    source.write_text('"""About the library."""\n# a case\nx = job_name.startswith("case_")\ny = ROUNDS\n')
    assert _code_words(source) & PRODUCT_WORDS == {"case", "rounds"}
