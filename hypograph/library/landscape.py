"""Optional grounding from ``idea-stage/LANDSCAPE.md`` (library rounds, Phase 1).

Gap lines are those starting (after a bullet, heading marks or bold) with a gap id ``G<n>``,
e.g. ``- **G1**: no causal test of …`` or ``### G2 — …``. Their ids are the only ones a behavior
may cite in ``gaps``; the rest of the file is passed as narrative, truncated.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from hypograph.atomic import read_regular
from hypograph.errors import HypographError

LANDSCAPE = Path("idea-stage") / "LANDSCAPE.md"
GAP_RE = re.compile(r"^\s*(?:[-*+]\s+|#{1,6}\s+)?\**\s*(G\d+)\b\**\s*[:.)\-–—]*\s*\**\s*(.*)$")
NARRATIVE_CHARS = 3000
LANDSCAPE_MAX = 16 << 20  # a larger LANDSCAPE.md is refused unread


@dataclass
class Landscape:
    gaps: dict[str, str] = field(default_factory=dict)
    narrative: str = ""

    @property
    def present(self) -> bool:
        return bool(self.gaps or self.narrative)


def read_landscape(root: Path) -> Landscape:
    """Gaps and narrative of ``<root>/idea-stage/LANDSCAPE.md``; empty when absent."""
    path = Path(root) / LANDSCAPE
    if not path.exists():
        return Landscape()
    try:
        text = read_regular(path, LANDSCAPE_MAX, follow=True).decode("utf-8")
    except UnicodeDecodeError:
        raise HypographError(f"{path}: not UTF-8 text") from None
    gaps = {}
    for line in text.splitlines():
        m = GAP_RE.match(line)
        if m and m.group(1) not in gaps:
            gaps[m.group(1)] = m.group(2).strip().strip("*").strip()
    return Landscape(gaps, text[:NARRATIVE_CHARS])
