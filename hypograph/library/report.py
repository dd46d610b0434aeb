"""The library report: every round so far, from tool state and the library file (works offline).

``round_ledger(L, key)`` is one round's line: generated, removed per dedup layer (exact /
model / unjudged; ``prefilter`` only for rounds made before the model decided every drop),
unscored, added, unique yield (survivors / generated — behaviors in discover, mechanisms in given).
``build_report`` aggregates rounds; ``Report.text()`` is what the CLI
prints, ``Report.metadata()`` a JSON-able dict for asset metadata.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path

from hypograph.library.persist import round_plan
from hypograph.library.rounds import BehaviorScores, RoundCandidates, RoundDedup, RoundScores
from hypograph.library.schema import Library, library_path, read_library
from hypograph.library.state import read_model, round_dir
from hypograph.paths import OURS

REMINDER = (
    "Promotion is manual: set a chosen node's status to queued yourself and take it on in your own "
    "pipeline (this tool never does; it only ever writes status: candidate)."
)


@dataclass
class RoundLedger:
    round: str
    batch: str = ""
    source: str = ""
    banlist: str = ""
    generated_behaviors: int = 0
    generated_mechanisms: int = 0
    removed: dict[str, dict[str, int]] = field(default_factory=dict)  # layer -> {exact, model, unjudged}
    unscored: int = 0
    added_behaviors: int = 0
    added_mechanisms: int = 0
    unique_yield: float | None = None
    persisted: bool = False
    warnings: list[str] = field(default_factory=list)
    embedder: str = ""  # what chose the neighbours the dedup judge saw (sbert, or tfidf and why)

    def line(self, totals: tuple[int, int]) -> str:
        rm = (
            ", ".join(
                f"{layer} -{d['exact']} exact -{d['model']} model"
                + (f" -{d['prefilter']} prefilter" if d.get("prefilter") else "")
                + (f" -{d['unjudged']} unjudged" if d["unjudged"] else "")
                for layer, d in self.removed.items()
            )
            or "no dedup"
        )
        yld = f"{self.unique_yield:.0%}" if self.unique_yield is not None else "n/a"
        state = "" if self.persisted else " (not persisted yet)"
        return (
            f"{self.round}: generated {self.generated_behaviors}B/{self.generated_mechanisms}M "
            f"[{self.banlist}] → {rm}"
            + (f", {self.unscored} unscored" if self.unscored else "")
            + f" → added {self.added_behaviors}B/{self.added_mechanisms}M, yield {yld} "
            f"→ total {totals[0]}B/{totals[1]}M{state}"
        )


def round_ledger(root: Path, key: str) -> RoundLedger:
    """Round ``key``'s line of the report, from its cached steps (an empty line before it generated)."""
    d = round_dir(root, key)
    out = RoundLedger(round=key)
    cands = read_model(d / "candidates.json", RoundCandidates)
    if cands is None:
        return out
    _ledger_generated(out, cands)
    dedup = read_model(d / "dedup.json", RoundDedup)
    if dedup is not None:
        _ledger_dedup(out, key, dedup)
    scores = read_model(d / "scores.json", RoundScores)
    plan = round_plan(root, key)
    if scores is not None:
        out.unscored = sum(1 for s in scores.behaviors if s.rejected)
        out.warnings += list(scores.warnings)
        if scores.warnings:  # web grounding was on and not every behavior got a paper: which, and why
            names = {**(plan.ids if plan else {}), **(plan.targets if plan else {})}
            out.warnings += [
                f"{key}: {names.get(b.key, b.key)} ungrounded (scored llm-chat): {ungrounded_reason(b)}"
                for b in scores.behaviors
                if not b.papers
            ]
    if plan is not None:
        out.added_behaviors, out.added_mechanisms = plan.added_behaviors, plan.added_mechanisms
        out.persisted = plan.complete
    return out


def ungrounded_reason(b: BehaviorScores) -> str:
    """Why behavior ``b``'s searches showed its referees no paper: each endpoint's failure, once."""
    if not b.searches:
        return "no search was made (its search queries were rejected)"
    failed = list(dict.fromkeys(f"{r.source or 'search'}: {r.error}" for r in b.searches if not r.ok))
    return "; ".join(failed) or "no paper matched its queries"


def _ledger_generated(out: RoundLedger, cands: RoundCandidates) -> None:
    """What generation asked for and produced: batch, mode, banlist, behaviors and mechanisms."""
    out.batch, out.source = cands.batch, cands.settings.behavior_source
    ban = cands.banlist
    out.banlist = f"banlist {ban.mode} {ban.shown}/{ban.items} items, ~{ban.tokens} tok"
    out.generated_behaviors = sum(1 for b in cands.behaviors if not b.existing_id)
    out.generated_mechanisms = sum(len(b.mechanisms) for b in cands.behaviors)


def _ledger_dedup(out: RoundLedger, key: str, dedup: RoundDedup) -> None:
    """What dedup removed per layer and how, and the unique yield (survivors / generated)."""
    out.embedder = dedup.embedder
    if dedup.embedder.startswith("tfidf ("):  # the sentence model was missing: say so
        out.warnings.append(f"{key}: dedup neighbours chosen by {dedup.embedder}")
    layers = ["behavior", "mechanism"] if out.source == "discover" else ["mechanism"]
    out.removed = {layer: _removed(dedup, layer) for layer in layers}
    if out.source == "discover":
        out.unique_yield = _ratio(len(dedup.survivors), out.generated_behaviors)
    else:
        out.unique_yield = _ratio(sum(len(b.mechanisms) for b in dedup.survivors), out.generated_mechanisms)


def _removed(dedup: RoundDedup, layer: str) -> dict[str, int]:
    """``layer``'s drops by exact match, by the model, unjudged (and by the legacy prefilter, if any)."""
    out = {"exact": dedup.removed(layer, "exact"), "model": dedup.removed(layer, "model")}
    out["unjudged"] = dedup.removed(layer, "rejected")
    if dedup.removed(layer, "prefilter"):
        out["prefilter"] = dedup.removed(layer, "prefilter")
    return out


def _ratio(kept: int, generated: int) -> float:
    return kept / generated if generated else 0.0


@dataclass
class Report:
    topic: str
    behavior_source: str
    rounds_requested: int
    rounds_run: int
    early_stop: str | None
    rounds: list[RoundLedger]
    totals: dict[str, int]
    duplicates_dropped: dict[str, int]
    impact: dict[str, float | int | None]
    novelty: dict[str, float | int | None]
    paths: dict[str, str]
    notes: list[str] = field(default_factory=list)

    def text(self) -> str:
        """What the CLI prints: the rounds (or that there are none), totals, scores, paths."""
        t = self.totals
        if self.rounds or self.rounds_requested:
            lines = [f"topic: {self.topic}", *self._round_lines()]
        else:  # a library written elsewhere (or by hand): say what is there, not "0 of 0"
            lines = [
                f"topic: {self.topic}",
                "rounds: none run here yet: the library is its file as written "
                f'(new rounds need a model: hypograph library {Path(self.paths["library"]).parent} --topic "…")',
                *[f"  {note}" for note in self.notes],
                f"behaviors {t['behaviors']}; mechanisms {t['mechanisms']}",
            ]
        lines += [
            f"impact (all behaviors): min {self.impact['min']} / median {self.impact['median']} / max "
            f"{self.impact['max']} (n={self.impact['count']})",
            f"novelty (all mechanisms): min {self.novelty['min']} / median {self.novelty['median']} / max "
            f"{self.novelty['max']}, {self.novelty['at_least_8']} scored >= 8 (n={self.novelty['count']})",
        ]
        lines += [f"{name}: {path}" for name, path in self.paths.items()]
        lines.append(REMINDER)
        return "\n".join(lines)

    def _round_lines(self) -> list[str]:
        """The mode, the rounds run of those requested, one line per round, what they added and dropped."""
        lines = [
            f"behavior source: {self.behavior_source}",
            f"rounds: {self.rounds_run} run of {self.rounds_requested} requested"
            + (
                f" — stopped early: {self.early_stop} added nothing after dedup: saturated (the topic is "
                "saturated for this run)"
                if self.early_stop
                else ""
            ),
        ]
        lines += [f"  {note}" for note in self.notes]
        t, d = self.totals, self.duplicates_dropped
        running = [t["behaviors"] - t["behaviors_added"], t["mechanisms"] - t["mechanisms_added"]]
        for r in self.rounds:
            running[0] += r.added_behaviors
            running[1] += r.added_mechanisms
            lines.append("  " + r.line(tuple(running)))
        return [
            *lines,
            f"behaviors added {t['behaviors_added']} / total {t['behaviors']}; mechanisms added "
            f"{t['mechanisms_added']} / total {t['mechanisms']}",
            f"semantic duplicates dropped: {d['total']} (behaviors {d['behavior']}, mechanisms {d['mechanism']}; "
            f"exact {d['exact']}, model {d['model']})"
            f"{'; unjudged ' + str(d['unjudged']) if d['unjudged'] else ''}",
        ]

    def metadata(self) -> dict:
        return {**asdict(self), "rounds": [asdict(r) for r in self.rounds], "reminder": REMINDER}


def distribution(scores: list[int], high: int | None = None) -> dict:
    out = {
        "count": len(scores),
        "min": min(scores) if scores else None,
        "max": max(scores) if scores else None,
        "median": statistics.median(scores) if scores else None,
    }
    if high is not None:
        out["at_least_8"] = sum(1 for s in scores if s >= high)
    return out


@dataclass(frozen=True)
class RunSummary:
    """What the invocation that ran the rounds knows and tool state does not: rounds requested,
    the mode, the round that stopped it early, its notes, and the topic (before a library exists)."""

    requested: int | None = None
    source: str | None = None
    early_stop: str | None = None
    notes: list[str] = field(default_factory=list)
    topic: str | None = None


def build_report(root: Path, keys: list[str], run: RunSummary | None = None) -> Report:
    """The report over rounds ``keys`` and the library as it stands; ``run`` adds what the
    invocation knows (default: a report of tool state alone)."""
    run = run or RunSummary()
    loaded = read_library(root)
    library = loaded[0] if loaded else None
    rounds = [round_ledger(root, k) for k in keys]
    totals, impact, novelty = _figures(library, rounds)
    return Report(
        topic=library.topic if library else (run.topic or ""),
        behavior_source=run.source or _last_source(rounds),
        rounds_requested=run.requested if run.requested is not None else len(keys),
        rounds_run=sum(1 for r in rounds if r.persisted),
        early_stop=run.early_stop,
        rounds=rounds,
        totals=totals,
        duplicates_dropped=_dropped(rounds),
        impact=impact,
        novelty=novelty,
        paths=_paths(root),
        notes=list(run.notes) + [w for r in rounds for w in r.warnings],
    )


def _figures(library: Library | None, rounds: list[RoundLedger]) -> tuple[dict, dict, dict]:
    """The library's totals (and what ``rounds`` added), its impact and its novelty distributions."""
    behaviors = library.behaviors if library else []
    mechanisms = [m for _, m in library.mechanisms()] if library else []
    totals = {
        "behaviors": len(behaviors),
        "mechanisms": len(mechanisms),
        "behaviors_added": sum(r.added_behaviors for r in rounds),
        "mechanisms_added": sum(r.added_mechanisms for r in rounds),
    }
    impact = distribution([b.impact.score for b in behaviors if b.impact])
    return totals, impact, distribution([m.novelty.score for m in mechanisms if m.novelty], high=8)


def _last_source(rounds: list[RoundLedger]) -> str:
    return rounds[-1].source if rounds else "(no rounds in tool state)"


def _paths(root: Path) -> dict[str, str]:
    """Where the library, its tool state and its traces are."""
    return {
        "library": str(library_path(root)),
        "tool state": str(Path(root) / OURS / "library"),
        "traces": str(Path(root) / OURS / "traces" / "hypothesis-batch"),
    }


def _dropped(rounds: list[RoundLedger]) -> dict[str, int]:
    """Duplicates dropped over ``rounds``, per layer and per way (legacy prefilter drops count as exact)."""
    dropped = {"behavior": 0, "mechanism": 0, "exact": 0, "model": 0, "unjudged": 0}
    for r in rounds:
        for layer, by in r.removed.items():
            legacy = by.get("prefilter", 0)
            dropped[layer] += by["exact"] + by["model"] + legacy
            dropped["exact"] += by["exact"] + legacy
            dropped["model"] += by["model"]
            dropped["unjudged"] += by["unjudged"]
    dropped["total"] = dropped["behavior"] + dropped["mechanism"]
    return dropped
