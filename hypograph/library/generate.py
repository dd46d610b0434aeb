"""Phase 3: one generation call per round, its prompt carrying the banlist of the library as it stands.

``generate_round(L, round_key, settings, client)`` returns the round's ``RoundCandidates``:

* cached: a round is generated once; its candidates are kept in tool state and returned as they are
  on every later call (no model call, no regeneration, whatever changed since);
* ordered: round N is generated only after rounds 1..N-1 persisted, so its banlist holds every
  behavior (discover) or mechanism (given) they added — whatever order a backfill asks in;
* validated for what makes an answer unusable only: the schema (planned data and models included),
  the count asked for, lenses and strategies from the data file with every strategy covered (a
  mechanism or a one-line skip reason), gap ids of LANDSCAPE.md; otherwise it is re-asked, then
  rejected (an error: nothing is written, nothing cached, a re-run asks again). A repeated or
  banned statement is *not* invalid: it is a duplicate, dropped and counted by dedup (Phase 4).
  Free text is data, never screened by word lists: it reaches later prompts only inside escaped,
  delimited blocks, and ids are minted by the tool;
* checked first, once each: a model configured (``ModelRequired``: nothing is changed), the
  caller's ``start`` (a new library: the old one moved aside), the library passing its own checks
  (``checks.require_sound``), all before the model is asked (the cross-topic guard is the
  caller's, before this: offline the embeddings decide, so it answers before "needs a model").
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from hypograph.errors import HypographError, ModelRequired
from hypograph.library.banlist import build_banlist
from hypograph.library.checks import require_sound
from hypograph.library.landscape import read_landscape
from hypograph.library.modes import resolve_target
from hypograph.library.persist import require_previous_rounds
from hypograph.library.prompts import prompt
from hypograph.library.rounds import CandidateBehavior, CandidateMechanism, RoundCandidates, RoundSettings, Skip
from hypograph.library.schema import Data, FiveBars, Library, Provenance, read_library
from hypograph.library.state import library_lock, library_state, read_model, round_dir, write_model
from hypograph.library.strategies import Strategies, load_strategies
from hypograph.library.traces import TraceRun
from hypograph.llm.client import LLMClient, Rejected, Request, untrusted

GIVEN_LENS = "User-supplied"
GIVEN_DETAIL = "Taken as given from --behavior (no five-bars mining)."


def require_model(client: LLMClient, what: str) -> None:
    if client.offline:
        raise ModelRequired(
            f"library {what}: set HYPOGRAPH_LLM_MODEL (and HYPOGRAPH_LLM_BASE_URL); nothing was changed "
            "(validate, report and check work offline)"
        )


class GenData(BaseModel):
    model_config = ConfigDict(extra="forbid")

    provenance: Provenance
    source: str = Field(min_length=1, max_length=300)
    used_n: str | int = Field(description="planned size or split; for interventions e.g. n_pairs")
    note: str = Field(min_length=3, max_length=600)


class GenFiveBars(BaseModel):
    model_config = ConfigDict(extra="forbid")

    real: str = Field(min_length=3, max_length=400)
    nonobvious: str = Field(min_length=3, max_length=400)
    specific: str = Field(min_length=3, max_length=400)
    robust: str = Field(min_length=3, max_length=400)
    tractable: str = Field(min_length=3, max_length=400)


class GenMechanism(BaseModel):
    strategy: str
    hypothesis: str = Field(min_length=10, max_length=1500, description="internal object + predicted causal relation")
    boring_null: str = Field(min_length=3, max_length=600)
    data: GenData
    model: list[str] = Field(min_length=1, max_length=5, description="target model ids with size")


class GenBehavior(BaseModel):
    discovery_strategy: str
    discovery_strategy_detail: str = Field(min_length=10, max_length=800)
    statement: str = Field(min_length=10, max_length=600)
    five_bars: GenFiveBars
    gaps: list[str] = Field(default_factory=list)
    mechanisms: list[GenMechanism]
    skipped: list[Skip] = Field(default_factory=list)


class DiscoverAnswer(BaseModel):
    behaviors: list[GenBehavior]


class GivenAnswer(BaseModel):
    mechanisms: list[GenMechanism]
    skipped: list[Skip] = Field(default_factory=list)


def generate_round(
    root: Path,
    round_key: str,
    settings: RoundSettings,
    client: LLMClient,
    traces: TraceRun | None = None,
    start: Callable[[], None] | None = None,
) -> RoundCandidates:
    """The candidates of ``round_key`` (cached in ``rounds/<key>/candidates.json``). ``start`` (a
    new library: the old file and its state moved aside) runs once a model is known to be there,
    and the cache is read after it."""
    path = round_dir(root, round_key) / "candidates.json"
    if start is None and (cached := read_model(path, RoundCandidates)) is not None:
        return cached
    require_model(client, "rounds need a model")
    if start is not None:
        start()
        if (cached := read_model(path, RoundCandidates)) is not None:
            return cached
    with library_lock(root):
        require_previous_rounds(root, round_key)
        require_sound(root)
        loaded = read_library(root)
        library = loaded[0] if loaded else None
        strategies = load_strategies(Path(settings.strategies_file) if settings.strategies_file else None)
        landscape = read_landscape(root)
        target = resolve_target(library, settings.behavior) if settings.behavior_source == "given" else None
        items = _banlist_items(library, settings, target.existing_id if target else None)
        banlist = build_banlist(items, settings.banlist_budget, settings.embedder, library_state(root) / "embeddings")
        traces = traces or TraceRun(root, settings.invocation)
        traces.use(client, round_key)
        request = generation_request(settings, strategies, banlist.text, landscape, target)
        answer = client.ask(request)
        traces.cap_if_rejected(answer, request.name)
        if isinstance(answer, Rejected):
            raise HypographError(
                f"round {round_key}: the model's generation answer was rejected ({answer.reason}); nothing was written"
            )
        today = dt.date.today().isoformat()
        candidates = RoundCandidates(
            round=round_key,
            settings=settings,
            date=today,
            batch=traces.batch(today, round_key),
            model=client.config.model or "",
            banlist=banlist.stats,
            gaps_grounded=sorted(landscape.gaps),
            behaviors=_candidates(answer, strategies, target),
        )
        write_model(path, candidates)
        return candidates


def _banlist_items(library: Library | None, settings: RoundSettings, target_id: str | None) -> list[tuple[str, str]]:
    """discover: every behavior statement; given: the target behavior's mechanisms."""
    if library is None:
        return []
    if settings.behavior_source == "discover":
        return [(b.id, b.statement) for b in library.behaviors]
    node = library.behavior(target_id) if target_id else None
    return [
        (m.id, f"[{m.strategy}; {' -> '.join(m.directions)}] {m.hypothesis}") for m in (node.mechanisms if node else [])
    ]


def generation_request(settings: RoundSettings, strategies: Strategies, banlist: str, landscape, target) -> Request:
    lenses = "\n".join(f"- {lens.name}: {lens.prompt}" for lens in strategies.discovery_lenses)
    combos = "\n".join(f"- {s.name}: {' -> '.join(s.directions)}" for s in strategies.combination_strategies)
    parts = [f"Topic: {settings.topic}"]
    if landscape.present:
        parts.append(
            'Landscape (grounding; behaviors may cite these gap ids in "gaps"):\n'
            + untrusted("landscape", {}, {"gaps": landscape.gaps, "narrative": landscape.narrative})
        )
    parts.append(f"Mechanism combination strategies (use these names exactly):\n{combos}")
    if settings.behavior_source == "discover":
        parts.append(f"Discovery lenses (use these names exactly as discovery_strategy):\n{lenses}")
        parts.append(
            "Banlist: behaviors already in the library (do not repeat them or close variants):\n"
            + untrusted("banlist", {}, {"items": banlist})
        )
        parts.append(
            f"Propose up to {settings.n_behaviors} new, mutually distinct behaviors spanning all the "
            "discovery lenses, each with discovery_strategy_detail (the concrete provenance), five_bars, "
            "and one mechanism per applicable combination strategy. Propose fewer, or none, rather than "
            "near-duplicates."
        )
        schema = DiscoverAnswer
    else:
        parts.append(
            "The fixed behavior (do not change it, propose no new behaviors):\n"
            + untrusted("behavior", {}, {"statement": target.statement})
        )
        parts.append(
            "Banlist: mechanisms this behavior already has (do not repeat them or close variants):\n"
            + untrusted("banlist", {}, {"items": banlist})
        )
        parts.append("Propose new mechanism hypotheses for the fixed behavior, at most one per combination strategy.")
        schema = GivenAnswer
    return Request(
        name="generation",
        system=prompt("generate")[1],
        user="\n\n".join(parts),
        schema=schema,
        check=lambda a: _check(a, settings, strategies, set(landscape.gaps)),
    )


def _check(answer, settings: RoundSettings, strategies: Strategies, gaps: set[str]) -> None:
    """ValueError for what makes the answer unusable (counts, unknown names); repeats are dedup's."""
    if isinstance(answer, GivenAnswer):
        _check_mechanisms("answer", answer.mechanisms, answer.skipped, strategies)
        return
    if len(answer.behaviors) > settings.n_behaviors:
        raise ValueError(f"behaviors: {len(answer.behaviors)} proposed, at most {settings.n_behaviors} asked")
    for k, b in enumerate(answer.behaviors):
        where = f"behaviors[{k}]"
        if b.discovery_strategy not in strategies.lens_names:
            raise ValueError(
                f"{where}.discovery_strategy: {b.discovery_strategy!r} is not one of {strategies.lens_names}"
            )
        unknown = set(b.gaps) - gaps
        if unknown:
            raise ValueError(
                f"{where}.gaps: {sorted(unknown)} are not gap ids of LANDSCAPE.md ({sorted(gaps) or 'none'})"
            )
        _check_mechanisms(where, b.mechanisms, b.skipped, strategies)


def _check_mechanisms(where: str, mechanisms: list[GenMechanism], skipped: list[Skip], strategies: Strategies) -> None:
    names = strategies.strategy_names
    used = [m.strategy for m in mechanisms] + [s.strategy for s in skipped]
    for name in used:
        if name not in names:
            raise ValueError(f"{where}: strategy {name!r} is not one of {names}")
    twice = sorted({n for n in used if used.count(n) > 1})
    if twice:
        raise ValueError(f"{where}: strategy {twice[0]!r} used more than once (one mechanism or one skip each)")
    missing = [n for n in names if n not in used]
    if missing:
        raise ValueError(f"{where}: strategies {missing} have neither a mechanism nor a skip reason")


def _mechanism(key: str, m: GenMechanism, strategies: Strategies) -> CandidateMechanism:
    return CandidateMechanism(
        key=key,
        strategy=m.strategy,
        directions=strategies.directions(m.strategy),
        hypothesis=m.hypothesis,
        boring_null=m.boring_null,
        data=Data(**m.data.model_dump()),
        model=m.model,
    )


def _candidates(answer, strategies: Strategies, target) -> list[CandidateBehavior]:
    if isinstance(answer, GivenAnswer):
        return [
            CandidateBehavior(
                key="c1",
                existing_id=target.existing_id,
                source="given",
                statement=target.statement,
                discovery_strategy="" if target.existing_id else GIVEN_LENS,
                discovery_strategy_detail="" if target.existing_id else GIVEN_DETAIL,
                mechanisms=[_mechanism(f"c1.m{j}", m, strategies) for j, m in enumerate(answer.mechanisms, 1)],
                skipped=answer.skipped,
            )
        ]
    return [
        CandidateBehavior(
            key=f"c{k}",
            source="discover",
            discovery_strategy=b.discovery_strategy,
            discovery_strategy_detail=b.discovery_strategy_detail,
            statement=b.statement,
            five_bars=FiveBars(**b.five_bars.model_dump()),
            gaps=b.gaps,
            mechanisms=[_mechanism(f"c{k}.m{j}", m, strategies) for j, m in enumerate(b.mechanisms, 1)],
            skipped=b.skipped,
        )
        for k, b in enumerate(answer.behaviors, 1)
    ]
