"""Tests start ``hypograph`` and ``prox`` one way: through ``tests/support/cli_helper.py`` (issue 45). No
other file under tests/ imports a command's ``main`` (in code or in a script it hands to a new
Python), builds a console script's path, or starts a process whose command line begins with one;
a new way to run a command is added to the helper, once. Read from the source with ``ast``."""

from __future__ import annotations

import ast
import re
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
HELPER = TESTS / "support" / "cli_helper.py"
# Files that may start a command themselves, and why.
EXEMPT = {
    "record_golden.py": "runs another checkout's code (GOLDEN_CODE=DIR) as well as the installed script",
    "killed_run_driver.py": "is the command's process itself (a step patched before main runs); the helper's "
    "conftest would clear the DAGSTER_HOME its test gives it",
}
MAINS = ("hypograph_cli.main", "hypograph_cli.prox")
SCRIPT_IMPORT = re.compile(r"from\s+hypograph_cli\.(main|prox)\s+import\s+[^\n]*\bmain\b")
STARTERS = {"run", "Popen", "check_output", "check_call", "call", "execv", "execvp"}
SCRIPTS = {"HYPOGRAPH", "PROX"}


def _names_a_script(node: ast.AST) -> bool:
    """``HYPOGRAPH``, ``str(PROX)``, ``VENV_BIN / "hypograph"``, ``"…/bin/prox"``."""
    if isinstance(node, ast.Call) and node.args:
        return _names_a_script(node.args[0])
    if isinstance(node, ast.Name):
        return node.id in SCRIPTS
    if isinstance(node, ast.BinOp):  # a path in the venv's bin: VENV_BIN / …, Path(sys.executable).parent / …
        bin_dir = (isinstance(node.left, ast.Name) and node.left.id == "VENV_BIN") or (
            isinstance(node.left, ast.Attribute) and node.left.attr == "parent"
        )
        return bin_dir and isinstance(node.right, ast.Constant) and node.right.value in ("hypograph", "prox")
    return False


def violations(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = ((node, _way_around(node)) for node in ast.walk(tree))
    return [f"{path.name}:{getattr(node, 'lineno', '?')}: {why}" for node, why in found if why]


def _way_around(node: ast.AST) -> str | None:
    """How ``node`` starts a command outside the helper, or None."""
    if isinstance(node, ast.ImportFrom) and node.module in MAINS and any(a.name == "main" for a in node.names):
        return f"imports {node.module}.main"
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and SCRIPT_IMPORT.search(node.value):
        return "a script that imports a command's main"
    if isinstance(node, ast.BinOp) and _names_a_script(node):
        return "builds a console script's path"
    if isinstance(node, ast.Call) and _starts_a_script(node):
        return "starts a console script"
    return None


def _starts_a_script(call: ast.Call) -> bool:
    """``subprocess.run([HYPOGRAPH, …])`` and the like: a process whose command line begins with a script."""
    if getattr(call.func, "attr", getattr(call.func, "id", None)) not in STARTERS or not call.args:
        return False
    first = call.args[0]
    return isinstance(first, ast.List | ast.Tuple) and bool(first.elts) and _names_a_script(first.elts[0])


def test_no_test_starts_a_command_outside_the_helper():
    own = Path(__file__).resolve()
    files = [p for p in sorted(TESTS.rglob("*.py")) if p not in (HELPER, own) and p.name not in EXEMPT]
    assert len(files) > 50
    found = [v for p in files for v in violations(p)]
    assert not found, "start commands through tests/support/cli_helper.py:\n" + "\n".join(found)


def test_the_check_sees_each_way_around_the_helper(tmp_path):
    """Each pattern the check forbids is found (so a pass above means something)."""
    source = (
        "from hypograph_cli.main import main\n"
        "from hypograph_cli.prox import main as p\n"
        "CODE = 'from hypograph_cli.main import main'\n"
        "X = VENV_BIN / 'prox'\n"
        "subprocess.run([HYPOGRAPH, 'check'])\n"
        "subprocess.Popen([str(PROX), 'embed'])\n"
        "hypograph('check')\n"  # the helper's own: allowed
    )
    (tmp_path / "t.py").write_text(source)
    assert [v.split(": ", 1)[0] for v in violations(tmp_path / "t.py")] == [f"t.py:{n}" for n in (1, 2, 3, 4, 5, 6)]
