"""Every ``file.py`` and ``file.py:name`` the documentation cites exists: README.md, docs/*.md,
deploy/**/*.md and benchmarks/README.md, read as text (nothing is imported).

A path with a folder is taken from the repository's root, else from the page's own folder; a bare
file name (``structure.py`` in benchmarks/README.md) from the page's folder, else anywhere in the
repository. ``file.py:name`` (or ``file.py: name, other``) also needs ``name`` defined in that file:
a ``def``, a ``class`` or an assignment at the start of a line (``Holder.member``: its last part).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted(
    [
        ROOT / "README.md",
        ROOT / "benchmarks" / "README.md",
        *(ROOT / "docs").glob("*.md"),
        *(ROOT / "deploy").rglob("*.md"),
    ]
)
# a path ending in .py (not part of a URL), then optionally ``:name`` or ``: name, name``
CITED = re.compile(r"(?<![\w/.:-])((?:[\w.-]+/)*[\w-]+\.py)\b(?!\w)(?::\s?((?:[A-Za-z_][\w.]*(?:,\s)?)+))?")
SKIPPED = ("http://", "https://")
# Cited as another tool's, not this repository's: the research pipeline's own minting script.
ELSEWHERE = {"create_node.py"}
ALL_FILES = [p for p in ROOT.rglob("*.py") if ".venv" not in p.parts and "node_modules" not in p.parts]


def cited(page: Path) -> list[tuple[str, list[str]]]:
    """(path, names) for each citation on ``page`` (names: those after ``:``, maybe none)."""
    out = []
    for line in page.read_text(encoding="utf-8").splitlines():
        for m in CITED.finditer(line):
            if any(line[max(0, m.start() - 120) : m.start()].rstrip().endswith(s) for s in SKIPPED):
                continue
            names = [n.strip() for n in (m.group(2) or "").split(",") if n.strip()]
            out.append((m.group(1), names))
    return out


def resolve(page: Path, path: str) -> Path | None:
    for base in (ROOT, page.parent):
        if (base / path).is_file():
            return base / path
    if "/" not in path:
        return next((p for p in ALL_FILES if p.name == path), None)
    return None


def defines(path: Path, name: str) -> bool:
    last = name.rstrip(".").split(".")[-1]
    text = path.read_text(encoding="utf-8")
    return bool(
        re.search(rf"^\s*(?:async\s+def|def|class)\s+{re.escape(last)}\b|^\s*{re.escape(last)}\s*[:=]", text, re.M)
    )


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_cited_file_and_name_exists(page):
    missing = []
    for path, names in cited(page):
        if path in ELSEWHERE:
            continue
        found = resolve(page, path)
        if found is None:
            missing.append(path)
            continue
        missing += [f"{path}:{n}" for n in names if not defines(found, n)]
    assert missing == [], f"{page.relative_to(ROOT)} cites what does not exist"


def test_the_reader_sees_citations(tmp_path):
    """The check is only as good as ``cited``: a path, a path with a name, names after ``: ``, and
    no URL."""
    page = tmp_path / "page.md"
    page.write_text(
        "see `assets/structure/flow.py:next_job`, (`hypograph/atomic.py: open_regular, read_regular`),\n"
        "benchmarks' `structure.py --time`, and https://example.org/x/setup.py\n",
        encoding="utf-8",
    )
    assert cited(page) == [
        ("assets/structure/flow.py", ["next_job"]),
        ("hypograph/atomic.py", ["open_regular", "read_regular"]),
        ("structure.py", []),
    ]
    assert resolve(page, "assets/structure/flow.py") is not None and resolve(page, "nowhere/x.py") is None
    assert not defines(ROOT / "assets" / "structure" / "flow.py", "next_job")
