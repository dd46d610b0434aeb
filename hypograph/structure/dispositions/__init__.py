"""Step 4a: merge near-duplicate hypotheses and drop the off-topic, with the seed's bookkeeping.

Decisions (``.hypograph/dispositions.json``, a ledger: a pair or a topic judged once is never
asked again, so a re-run on unchanged input costs no call and changes nothing):

* a pair is a candidate when proximity lists it as a duplicate or when either is among the
  other's nearest neighbours in the embeddings proximity produced (its backend, tfidf or sbert):
  real duplicates are paraphrases across papers and rarely reach the 0.80 lexical cutoff;
* decisions are asked of a policy (``hypograph.llm.policy``). With a model: each candidate pair
  is judged with both nodes and every in-scope observation in view, by the seed's
  discriminability test (MERGE only when no observation would come out differently); each
  active hypothesis is judged on- or off-topic against ``initial_prompt.md``;
* offline (deterministic, conservative): merge only pairs proximity auto-merged (or a person
  marked MERGE in ``proximity/review.json``) when no observation mentions a word that one has and
  the other lacks; drop nothing. A rejected model answer falls back to that offline decision.
  A person's KEEP always wins.
* hypotheses already in a cluster are frozen members (steps 7-8 index them): never re-judged.

Merge mechanics (survivor = lowest id; absorbed -> ``state: merged``, ``merged_into`` one hop,
moved to ``hypotheses/merged/``; survivor gains ``merged_from``, ``additional_sources``, a
per-source ``locator`` list and, if widened, a new statement plus ``generalization_note``) are
applied through the vault journal.

One module per concern: ``ledger`` (the decisions on record), ``candidates`` (which pairs to
judge), ``judging`` (the decisions), ``merge`` (the file changes); ``run_dispositions`` here runs
them in order under the structuring lock.
"""

from __future__ import annotations

from pathlib import Path

from hypograph.errors import HypographError
from hypograph.llm.policy import Policy
from hypograph.paths import HYPOTHESIS_FOLDERS, input_kind
from hypograph.proximity.adjudicate import Decision
from hypograph.proximity.embed import Embeddings
from hypograph.structure import session
from hypograph.structure.baseline import record_baseline
from hypograph.structure.dispositions.amend import repair_ledger
from hypograph.structure.dispositions.by_hand import apply_by_hand
from hypograph.structure.dispositions.candidates import NEIGHBOURS, NET, Candidate, Net, candidate_pairs
from hypograph.structure.dispositions.judging import MERGE_SYSTEM, PAIR_BATCH, TOPIC_SYSTEM, decide
from hypograph.structure.dispositions.ledger import (
    LEDGER,
    Ledger,
    PairDecision,
    TopicDecision,
    pair_key,
    read_ledger,
    write_ledger,
)
from hypograph.structure.dispositions.merge import DispositionReport, apply_dispositions, drop, merge_groups
from hypograph.structure.scope import open_to_4a
from hypograph.vault.locking import structuring_lock
from hypograph.vault.validate import validate_before_structuring
from hypograph.vault.vault import Vault

__all__ = [
    "LEDGER",
    "MERGE_SYSTEM",
    "NEIGHBOURS",
    "NET",
    "PAIR_BATCH",
    "TOPIC_SYSTEM",
    "Candidate",
    "DispositionReport",
    "Ledger",
    "Net",
    "PairDecision",
    "TopicDecision",
    "apply_dispositions",
    "candidate_pairs",
    "decide",
    "drop",
    "merge_groups",
    "pair_key",
    "read_ledger",
    "run_dispositions",
    "write_ledger",
]


def run_dispositions(
    vault: Vault | Path,
    verdicts: list[Decision],
    embeddings: Embeddings | None,
    policy: Policy,
    net: Net = NET,
    batch_size: int = PAIR_BATCH,
) -> DispositionReport:
    """4a end to end under the structuring lock: a person's MERGEs of clustered hypotheses, the
    ledger's stored decisions checked against the vault, candidates, decisions, the vault changes.

    ``vault``: the vault's root (or a Vault: only its root is used; the vault is read under the
    lock, once); ``verdicts``: proximity's adjudicated duplicate pairs; ``embeddings``: the
    hypotheses' embeddings proximity produced (any backend; may be None when ``net.k`` is 0 or the
    policy is offline: offline, only proximity's pairs are candidates); ``policy``: who decides
    (``hypograph.llm.policy``); ``batch_size``: candidate pairs per model question.

    The structuring marker (``hypograph.structure.session``) is written before the first change
    and, with the hypotheses judged, once the decisions are on the ledger: a later 4a, before 4b
    has clustered them, judges none of them again (it applies the ledger, which changes nothing).
    """
    root = Path(vault.root if isinstance(vault, Vault) else vault)
    if input_kind(root, HYPOTHESIS_FOLDERS) != "vault":
        raise HypographError(f"{root}: step 4 structures a vault (hypotheses/*.md), not a run directory")
    with structuring_lock(root):
        try:
            report = _run_dispositions(root, verdicts, embeddings, policy, net, batch_size)
        except BaseException:
            session.forget(root)
            raise
        return report


def _run_dispositions(
    root: Path, verdicts: list[Decision], embeddings: Embeddings | None, policy: Policy, net: Net, batch_size: int
) -> DispositionReport:
    vault = session.open_for_step(root)  # as it is now that this run holds the lock
    validate_before_structuring(vault)  # refuse what 4a cannot fix before its first write
    marker, who, frozen = _resume(root, vault, policy)
    baseline = record_baseline(vault)
    ledger = read_ledger(root)
    by_hand = apply_by_hand(vault, verdicts, ledger)
    amended = repair_ledger(ledger, vault, baseline)  # decisions an earlier version stored as given
    to_judge = [h for h in open_to_4a(vault) if h.id not in frozen]
    # Offline, only proximity's own pairs: the offline policy merges nothing else anyway.
    candidates = candidate_pairs(to_judge, verdicts, embeddings, Net(k=0) if policy.offline else net)
    ledger, judged, amended_now = decide(vault, candidates, ledger, policy, batch_size, frozen)
    write_ledger(root, ledger)
    if marker is not None:  # the decisions are final: no later 4a judges these again before 4b
        session.mark(root, "4b", [h.id for h in to_judge], policy=who)
    report = apply_dispositions(vault, ledger)
    report.candidates, report.judged = len(candidates), judged
    report.amended[:0] = amended + amended_now
    report.by_hand, report.refused = by_hand.applied, by_hand.refused
    if frozen:
        report.resumed = (
            f"4a of {session.who(marker)} had recorded its decisions on {len(frozen)} hypotheses; "
            "applied them, judged none of those again"
        )
    for survivor, absorbed in by_hand.merged:
        report.merged.setdefault(survivor, []).append(absorbed)
    session.keep(vault)
    return report


def _resume(root: Path, vault: Vault, policy: Policy) -> tuple[dict | None, str, set[str]]:
    """Mark the structuring as under way (when there is anything to do) and say what an unfinished
    one's 4a judged already. Returns (the marker as read, or ``{}`` once marked now; None when
    nothing is marked; who decides, "offline" or "model"; the ids judged already)."""
    marker = session.read_marker(root)
    who = "offline" if policy.offline else "model"
    # what the unfinished structuring's 4a judged, under the same kind of policy (a model now asked
    # where the offline policy decided is a new structuring: it may judge those pairs again)
    frozen = set(marker.get("judged", [])) if marker and marker.get("policy", who) == who else set()
    if not (open_to_4a(vault) or marker):
        return None, who, frozen
    session.mark(root, marker["phase"] if marker and frozen else "4a", policy=who)
    return marker or {}, who, frozen
