"""4b without a model (deterministic, heuristic): members grouped by their ``question`` hints
(TF-IDF cosine >= 0.5, connected components), a lone hypothesis joining its most similar group if
its hint is similar enough (>= 0.25), else forming its own cluster; one residual each; every
justification says plainly it is heuristic."""

from __future__ import annotations

from scipy.sparse.csgraph import connected_components

from hypograph.ids import id_sort_key
from hypograph.proximity.embed import embed_tfidf
from hypograph.structure.carving.plan import ClusterPlan
from hypograph.structure.checks import NUMBERISH
from hypograph.vault.node_view import NodeView
from hypograph.vault.nodes import Node

QUESTION_LINK = 0.5
LONE_JOIN = 0.25  # a lone hypothesis joins a group only if its hint is at least this similar
HEURISTIC = "Heuristic (offline, no model):"


def offline_plans(hyps: list[Node]) -> list[ClusterPlan]:
    """Group by question-hint similarity; each group a cluster with a residual; stated as heuristic."""
    if not hyps:
        return []
    hints = [str(NodeView(h).question or NodeView(h).statement or h.title) for h in hyps]
    m, _ = embed_tfidf(hints)
    sims = (m @ m.T).toarray()
    groups = _groups(sims)
    plans = []
    for members in sorted(groups.values(), key=lambda ms: min(id_sort_key(hyps[i].id) for i in ms)):
        nodes = sorted((hyps[i] for i in members), key=lambda h: id_sort_key(h.id))
        question = central_question(nodes, [hints[i] for i in members], sims, members)
        plans.append(_plan(nodes, question))
    return plans


def _groups(sims) -> dict[int, list[int]]:
    """Rows linked by a hint similarity >= ``QUESTION_LINK`` (connected components); a lone row joins
    the group whose hints it is most similar to, if that similarity reaches ``LONE_JOIN``."""
    _, labels = connected_components(sims >= QUESTION_LINK, directed=False)
    groups: dict[int, list[int]] = {}
    for i, g in enumerate(labels):
        groups.setdefault(int(g), []).append(i)
    big = [g for g, members in groups.items() if len(members) > 1]
    for g, members in list(groups.items()):
        if len(members) == 1 and big:
            i = members[0]
            best = max(big, key=lambda b: max(sims[i, j] for j in groups[b]))
            if max(sims[i, j] for j in groups[best]) >= LONE_JOIN:
                groups[best].append(i)
                del groups[g]
    return groups


def _plan(nodes: list[Node], question: str) -> ClusterPlan:
    """The heuristic plan of one group, ``question`` its central question hint."""
    topic = question.rstrip("?").strip()
    return ClusterPlan(
        title=f"Answers to - {topic}" if len(topic) < 110 else f"Answers to - {topic[:105].rsplit(' ', 1)[0]}",
        members=[h.id for h in nodes],
        # A hint like "Did rainfall drop by 30%?" stays out of the number-free step-4 fields.
        question=question if question.endswith("?") and not NUMBERISH.search(question) else None,
        exclusivity=(
            f"{HEURISTIC} the members were posed against the same sub-question "
            "and are read as alternative answers to it, at most one true; not verified."
        ),
        independence=(
            f"{HEURISTIC} assumed to factorize from the other clusters because its sub-question differs; not verified."
        ),
        justification=(
            f"{HEURISTIC} grouped because the papers posed these hypotheses "
            "against similar sub-questions "
            "(question-field similarity); exclusivity, independence and grain have not been judged. "
            "Re-run with a model configured, or review by hand."
        ),
        residual_title=f"The answer is not listed here - {topic}"[:140],
        residual_statement=(
            f'The answer to "{question}" is something none of '
            f"{', '.join(h.id for h in nodes)} states "
            "— a cause, mechanism or outcome that no source in this vault proposed."
        ),
        residual_note=(
            f"{HEURISTIC} catch-all so that exactly one member of the cluster is true; "
            "it names no concrete escape because none was judged."
        ),
    )


def central_question(nodes: list[Node], hints: list[str], sims, members: list[int]) -> str:
    """The members' question hint most similar to the others (ties: lowest id)."""
    best = max(range(len(members)), key=lambda k: (sum(sims[members[k], j] for j in members), -k))
    return next((str(NodeView(n).question) for n in nodes if NodeView(n).question == hints[best]), hints[best])
