"""No function in the project is over cyclomatic complexity 15, as radon counts it (radon also counts
boolean operators, comprehensions and asserts, which ruff's C90 does not)."""

from pathlib import Path

from radon.complexity import cc_visit

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("hypograph", "assets", "resources", "io_managers", "pipelines", "eval", "benchmarks", "tests")
LIMIT = 15


def test_no_function_is_over_complexity_15():
    over = []
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if "fixtures" in path.parts:
                continue
            blocks = cc_visit(path.read_text(encoding="utf-8"))
            # what `radon cc` lists: functions, classes, and each class's methods
            for block in blocks + [m for b in blocks for m in getattr(b, "methods", [])]:
                if block.complexity > LIMIT:
                    over.append(f"{path.relative_to(ROOT)}:{block.lineno} {block.name} {block.complexity}")
    assert not over, "\n".join(over)
