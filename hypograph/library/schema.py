"""``hypothesis_library.json`` in the library rounds schema (docs/library.md), as pydantic models, and its reader.

The file is a nested tree, one topic per file: ``{topic, topic_slug, created, updated,
behaviors: [B<n> {…, impact, mechanisms: [B<n>-M<m> {…, data, model, novelty, status}]}]}``.

Keys a user added anywhere are kept (``extra="allow"``). ``impact``, ``novelty``, ``data`` and
``model`` are optional *in the schema* so that a node a person wrote by hand still reads; the
rule that every node the tool persists carries them is a separate check (``checks.py``).

``read_library(path)`` returns the validated model *and* the raw JSON dict: writers change the
raw dict (append nodes, add notes, restamp scores) so the user's key order and keys survive.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from hypograph.atomic import read_regular
from hypograph.errors import HypographError
from hypograph.paths import LIBRARY_FILE

LIBRARY_MAX = 512 << 20  # a 10,000-behavior library is tens of MB; a larger file is refused unread
DATE = r"^\d{4}-\d{2}-\d{2}$"
BEHAVIOR_ID_RE = re.compile(r"^B([1-9]\d*)$")
MECHANISM_ID_RE = re.compile(r"^(B[1-9]\d*)-M([1-9]\d*)$")
Method = Literal["llm-chat", "llm-chat+web"]
Recommendation = Literal["PROCEED", "PROCEED WITH CAUTION", "DEPRIORITIZE"]
Provenance = Literal["existing", "adapted", "constructed"]
Status = Literal["candidate", "queued", "explored"]


class _Open(BaseModel):
    """Unknown keys are kept, in the order the file had them."""

    model_config = ConfigDict(extra="allow")


class FiveBars(_Open):
    real: str = ""
    nonobvious: str = ""
    specific: str = ""
    robust: str = ""
    tractable: str = ""


class Impact(_Open):
    score: int = Field(ge=1, le=10)
    rationale: str = Field(min_length=1)
    recommendation: Recommendation
    method: Method
    date: str = Field(pattern=DATE)


class Novelty(_Open):
    score: int = Field(ge=1, le=10)
    closest: str = Field(min_length=1)
    differentiation: str = Field(min_length=1)
    caveat: str = ""
    method: Method
    date: str = Field(pattern=DATE)


class Data(_Open):
    provenance: Provenance
    source: str = Field(min_length=1)
    used_n: str | int = Field(description="planned size or split; for interventions e.g. n_pairs")
    note: str = ""


class Mechanism(_Open):
    id: str = Field(pattern=MECHANISM_ID_RE.pattern)
    strategy: str = Field(min_length=1)
    directions: list[str] = Field(default_factory=list)
    hypothesis: str = Field(min_length=1)
    boring_null: str = ""
    data: Data | None = None
    model: list[str] = Field(default_factory=list)
    novelty: Novelty | None = None
    status: Status = "candidate"


class Behavior(_Open):
    id: str = Field(pattern=BEHAVIOR_ID_RE.pattern)
    source: Literal["discover", "given"]
    discovery_strategy: str = ""
    discovery_strategy_detail: str = ""
    statement: str = Field(min_length=1)
    five_bars: FiveBars = Field(default_factory=FiveBars)
    impact: Impact | None = None
    gaps: list[str] = Field(default_factory=list)
    notes: str = ""
    mechanisms: list[Mechanism] = Field(default_factory=list)


class Library(_Open):
    topic: str = Field(min_length=1)
    topic_slug: str = ""
    created: str = Field(pattern=DATE)
    updated: str = Field(pattern=DATE)
    behaviors: list[Behavior] = Field(default_factory=list)

    def behavior(self, bid: str) -> Behavior | None:
        return next((b for b in self.behaviors if b.id == bid), None)

    def mechanisms(self):
        """Every (behavior, mechanism) pair in file order."""
        for b in self.behaviors:
            for m in b.mechanisms:
                yield b, m

    def texts(self) -> list[tuple[str, str]]:
        """(id, text) of every node, for the proximity engine: a behavior's statement, a
        mechanism's strategy and hypothesis."""
        out = []
        for b in self.behaviors:
            out.append((b.id, b.statement))
            out += [(m.id, f"{m.strategy}: {m.hypothesis}") for m in b.mechanisms]
        return out


def slugify(topic: str) -> str:
    """Lowercase kebab-case (letters of any script kept)."""
    return re.sub(r"[^\w]+", "-", topic.casefold()).strip("-_").replace("_", "-") or "topic"


def library_path(root: Path) -> Path:
    return Path(root) / LIBRARY_FILE


def field_path(loc: tuple) -> str:
    """``('behaviors', 2, 'impact', 'score')`` -> ``behaviors[2].impact.score``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def validate_library(raw: object, path: Path) -> Library:
    """The validated model of ``raw``; HypographError naming the file and the first bad field."""
    try:
        return Library.model_validate(raw)
    except ValidationError as e:
        err = e.errors()[0]
        more = f" (and {e.error_count() - 1} more)" if e.error_count() > 1 else ""
        raise HypographError(f"{path}: field {field_path(err['loc'])}: {err['msg']}{more}") from None


def read_library(root: Path) -> tuple[Library, dict] | None:
    """``(model, raw dict)`` of ``<root>/hypothesis_library.json``; None when there is no file."""
    path = library_path(root)
    if not path.exists():
        return None
    try:
        raw = json.loads(read_regular(path, LIBRARY_MAX, follow=True).decode("utf-8"))
    except UnicodeDecodeError:
        raise HypographError(f"{path}: not UTF-8 text") from None
    except json.JSONDecodeError as e:
        raise HypographError(f"{path}: not valid JSON (line {e.lineno}, column {e.colno}: {e.msg})") from None
    except RecursionError:
        raise HypographError(f"{path}: not valid JSON (nested too deeply to read)") from None
    if not isinstance(raw, dict):
        raise HypographError(f"{path}: expected a JSON object with topic, created, updated and behaviors")
    return validate_library(raw, path), raw


def empty_library(topic: str, today: str) -> dict:
    """A new tree ``{topic, topic_slug, created, updated, behaviors: []}`` (raw dict)."""
    return {"topic": topic, "topic_slug": slugify(topic), "created": today, "updated": today, "behaviors": []}
