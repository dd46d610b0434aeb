"""``HypothesisBuilder``: one dispatch of a case's initial batch, in three durable phases.

1. ``GENERATING_HYPOTHESES``: policy.json and context.json saved (one journal plan) before any
   model request; the policy is then pinned for the revision.
2. The model round (``CaseGateway``: ordered failover, no sleeping); a valid answer is saved as
   ``rounds/<attempt>.json`` bound to the context and policy by hash, before publication.
3. hypotheses.json, registry.json and hypotheses.md published together with the manifest
   pointers in one journal plan; ``package_generation`` increments.

Every dispatch holds the case lock (non-blocking: a second dispatch returns DEFERRED at once)
and starts by rolling forward a plan a crash left behind, so a crash at any point replays
without a new model call, id or allocation. ``hook`` is the explicit test hook (see publish.py).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field

from hypograph.atomic import write_text
from hypograph.case import rules
from hypograph.case.batch import assemble, paths
from hypograph.case.checks import SCALAR, run_checks, shape_violations
from hypograph.case.config import HypothesisConfig
from hypograph.case.context import build_context, verified_interpretation
from hypograph.case.dispatch import DispatchState, Status
from hypograph.case.gateway import CaseGateway, NeedsModel
from hypograph.case.guards import attempt_for, new_attempt, pinned_policy, refuse_undeclared
from hypograph.case.models import Answer
from hypograph.case.package import (
    HYPOTHESIS_POINTERS,
    PHASE_GENERATING,
    CaseBusy,
    CasePackage,
    CaseStore,
    json_text,
    rev_dir,
    sha_text,
)
from hypograph.case.prompt import build_request
from hypograph.case.publish import Hook, prefixed
from hypograph.errors import HypographError
from hypograph.ids import numbered_key
from hypograph.journal import Step

log = logging.getLogger("hypograph.case")
# What a recorded round must hold before it is verified (the answer itself is validated by pydantic).
ROUND_SHAPE = {"attempt_id": SCALAR, "bindings": {"context": dict, "policy?": dict}, "answer": dict}


def _check_round(pkg: CasePackage, round_path: str, round_doc) -> None:
    wrong = shape_violations(round_doc, ROUND_SHAPE, round_path)
    if wrong:
        raise HypographError(f"{pkg.root / round_path}: {wrong[0][1]} (a recorded round of another shape)")


@dataclass
class BuildResult:
    status: Status
    case_id: str
    package_id: str
    analysis_revision: int
    message: str
    attempt_id: str | None = None
    hypothesis_ids: list[str] = field(default_factory=list)
    paths: dict[str, str] = field(default_factory=dict)
    due_at: str | None = None
    reused: bool = False
    llm: dict = field(default_factory=dict)

    def line(self) -> str:
        return f"{self.case_id} {numbered_key(self.analysis_revision)}: {self.status.value}: {self.message}"


@dataclass
class _Attempt:
    """One attempt at revision ``rev``'s batch, from phase 1 to publishing: its dispatch state, the
    round file, the context (text as written) and the package generation it was built from, how a
    result is made, and the model's usage so far."""

    rev: int
    state: DispatchState
    round_path: str
    context: dict
    context_text: str
    generation: int
    result: Callable
    llm: dict = field(default_factory=dict)


class HypothesisBuilder:
    def __init__(
        self,
        store: CaseStore,
        gateway: CaseGateway | None,
        policy: HypothesisConfig,
        *,
        hook: Hook | None = None,
        clock: Callable[[], dt.datetime] | None = None,
    ):
        self.store, self.gateway, self.config = store, gateway, policy
        self.hook = hook
        self.clock = clock or (lambda: dt.datetime.now(dt.UTC))

    async def build(self, case_id: str, package_id: str, attempt_id: str | None = None) -> BuildResult:
        """Dispatch ``case_id`` once; see the module docstring. Bad input raises HypographError;
        ``gateway`` None (no model) still reuses a published batch or publishes a recorded round,
        and raises NeedsModel (nothing written) where a model call is needed."""
        pkg = self.store.package(case_id)
        try:
            with pkg.lock():
                return await self._build(pkg, package_id, attempt_id)
        except CaseBusy as e:
            rev = pkg.manifest()["analysis_revision"]  # a read: the lock holder writes atomically
            return BuildResult(Status.DEFERRED, case_id, package_id, rev, f"{e}; nothing done")

    # -- the phases -------------------------------------------------------------------------------

    async def _build(self, pkg: CasePackage, package_id: str, attempt_id: str | None) -> BuildResult:
        pkg.roll_forward()
        m = pkg.manifest()
        if m["package_id"] != package_id:
            raise HypographError(
                f"{pkg.root / 'manifest.json'}: field 'package_id': {m['package_id']!r}, not {package_id!r}"
            )
        rev = m["analysis_revision"]
        result = lambda status, msg, **kw: BuildResult(status, pkg.case_id, package_id, rev, msg, **kw)
        p = paths(rev)
        if (pkg.root / p["hypothesis_registry"]).exists():
            return self._reuse(pkg, m, rev, result)
        refuse_undeclared(pkg, m, rev)
        verified_interpretation(pkg, m)
        pinned_policy(pkg, rev, self.config.policy)
        state = DispatchState.load(pkg, rev)
        attempt = attempt_for(pkg, rev, state, attempt_id)
        if state is None or state.attempt_id != attempt:
            state = DispatchState(rev, attempt)
        if state.status == "BLOCKED":
            return result(
                Status.BLOCKED,
                f"attempt {attempt}: {state.failed_rounds} rounds failed "
                f"({state.last_failure}); try again with a new attempt id: {new_attempt(pkg.root)}",
                attempt_id=attempt,
            )
        if state.status == "RETRY_PENDING" and self.clock() < state.due():
            return result(
                Status.RETRY_PENDING,
                f"attempt {attempt}: next round due at {state.due_at}",
                attempt_id=attempt,
                due_at=state.due_at,
            )
        round_path = f"{rev_dir('hypotheses', rev)}/rounds/{attempt}.json"
        self._before_phase_1(pkg, round_path)
        m, context, context_text = self._context_phase(pkg, m)
        run = _Attempt(rev, state, round_path, context, context_text, m["package_generation"], result)
        round_doc = pkg.read_optional(round_path)
        if round_doc is None:
            round_doc = await self._generate(pkg, run)
            if isinstance(round_doc, BuildResult):
                return round_doc
        self._verify_round(pkg, round_path, round_doc, context, context_text)
        return self._publish(pkg, round_doc, run)

    async def _generate(self, pkg: CasePackage, run: _Attempt) -> dict | BuildResult:
        """Phase 1: ask the model for the attempt's round and record it (``rounds/<attempt>.json``);
        the recorded round, or the result of a round that failed (outage, rejection, stale input)."""
        rev, state, attempt, p = run.rev, run.state, run.state.attempt_id, paths(run.rev)
        request = build_request(run.context, attempt, self._rejections(pkg, rev))
        outcome = await asyncio.to_thread(self.gateway.ask, request, pkg.state_dir)
        run.llm = outcome.usage
        if outcome.outage:
            return self._outage(pkg, run, outcome.failures)
        reason = outcome.rejected or self._over_output_limit(outcome.answer)
        if reason:
            return self._reject(pkg, state, reason, outcome.endpoint, run.result, run.llm)
        stale = self._stale(pkg, run.generation, p, run.context_text)
        if stale:
            return run.result(
                Status.ERROR,
                f"attempt {attempt}: result rejected as stale: {stale}; nothing published",
                attempt_id=attempt,
                llm=run.llm,
            )
        round_doc = {
            "analysis_revision": rev,
            "attempt_id": attempt,
            "phase": PHASE_GENERATING,
            "endpoint": outcome.endpoint,
            "bindings": {
                "context": {"path": p["hypothesis_context"], "sha256": sha_text(run.context_text)},
                "policy": run.context["bindings"]["policy"],
                "request_sha256": sha_text(request.system + "\0" + request.user),
            },
            "answer": outcome.answer.model_dump(mode="json"),
        }
        write_text(pkg.root / run.round_path, json_text(round_doc))
        if self.hook:
            self.hook("round-recorded")
        return round_doc

    def _outage(self, pkg: CasePackage, run: _Attempt, failures: list[str]) -> BuildResult:
        """No endpoint answered: the failed round counted (retry due later, or blocked after the last)."""
        state = run.state
        state.fail_round(self.clock(), self.config.retry, "; ".join(failures))
        state.save(pkg)
        log.warning(
            "%s phase %s: model unreachable (round %d): %s",
            pkg.root,
            PHASE_GENERATING,
            state.failed_rounds,
            state.last_failure,
        )
        status = Status.BLOCKED if state.status == "BLOCKED" else Status.RETRY_PENDING
        return run.result(
            status,
            f"attempt {state.attempt_id}: no endpoint answered (round {state.failed_rounds} of "
            f"{self.config.retry.rounds}): {state.last_failure}",
            attempt_id=state.attempt_id,
            due_at=state.due_at,
            llm=run.llm,
        )

    def _before_phase_1(self, pkg: CasePackage, round_path: str) -> None:
        """Refusals due before phase 1 writes anything: a recorded round of another shape; no
        model (NeedsModel) when no round is recorded for the attempt."""
        if os.path.lexists(pkg.root / round_path):
            _check_round(pkg, round_path, pkg.read_json(round_path))
        elif self.gateway is None:
            raise NeedsModel()

    def prepare(self, case_id: str, package_id: str) -> dict:
        """Phase 1 alone (the confirmed-context asset): verify the confirmed interpretation, pin the
        policy and save policy.json and context.json if not saved yet; returns the context. Raises
        CaseBusy while a dispatch holds the case, and NeedsModel (nothing written) when there is no
        ``gateway`` and the revision has no recorded round to publish: a batch job's one model guard,
        before its first write."""
        pkg = self.store.package(case_id)
        with pkg.lock():
            pkg.roll_forward()
            m = pkg.manifest()
            if m["package_id"] != package_id:
                raise HypographError(
                    f"{pkg.root / 'manifest.json'}: field 'package_id': {m['package_id']!r}, not {package_id!r}"
                )
            p = paths(m["analysis_revision"])
            if (pkg.root / p["hypothesis_registry"]).exists():
                return pkg.read_json(p["hypothesis_context"])
            rounds = pkg.root / rev_dir("hypotheses", m["analysis_revision"]) / "rounds"
            if self.gateway is None and not (rounds.is_dir() and any(rounds.glob("*.json"))):
                raise NeedsModel()
            refuse_undeclared(pkg, m, m["analysis_revision"])
            return self._context_phase(pkg, m)[1]

    def _context_phase(self, pkg: CasePackage, m: dict) -> tuple[dict, dict, str]:
        """(manifest after phase 1, context, its text): verified, policy pinned, both saved."""
        interp, catalogue = verified_interpretation(pkg, m)
        policy = pinned_policy(pkg, m["analysis_revision"], self.config.policy)
        context, policy_text = build_context(pkg, m, interp, catalogue, policy, self.config.limits)
        context_text = json_text(context)
        return self._save_context(pkg, m, m["analysis_revision"], policy_text, context_text), context, context_text

    def _save_context(self, pkg: CasePackage, m: dict, rev: int, policy_text: str, context_text: str) -> dict:
        """Phase 1 (once per revision): policy and context saved before any model request."""
        p = paths(rev)
        saved = pkg.sha(p["hypothesis_context"])
        if saved is not None:
            if saved != sha_text(context_text):
                raise HypographError(
                    f"{pkg.root / p['hypothesis_context']}: the case changed since this context was "
                    "saved; start a new analysis revision"
                )
            return m
        arts = {k: v for k, v in m["artifacts"].items() if k not in HYPOTHESIS_POINTERS}
        arts["hypothesis_policy"] = CasePackage.pointer(p["hypothesis_policy"], policy_text)
        arts["hypothesis_context"] = CasePackage.pointer(p["hypothesis_context"], context_text)
        new = {**m, "phase": PHASE_GENERATING, "package_generation": m["package_generation"] + 1, "artifacts": arts}
        pkg.write(
            {p["hypothesis_policy"]: policy_text, p["hypothesis_context"]: context_text},
            new,
            prefixed(self.hook, "context"),
        )
        return new

    def _publish(self, pkg: CasePackage, round_doc: dict, run: _Attempt) -> BuildResult:
        """Phase 2: the batch assembled from the recorded round, published unless its inputs went stale."""
        state, context, context_text, result, llm = run.state, run.context, run.context_text, run.result, run.llm
        rev = context["analysis_revision"]
        p = paths(rev)
        files = assemble(round_doc, run.round_path, context, context_text)
        size = len(files[p["hypotheses_summary"]].encode("utf-8"))
        if size > self.config.limits.summary_bytes:
            raise HypographError(
                f"{pkg.root / p['hypotheses_summary']}: {size} bytes, over limits.summary_bytes="
                f"{self.config.limits.summary_bytes}; raise the limit (nothing is truncated)"
            )
        stale = self._stale(pkg, run.generation, p, context_text)
        if stale:
            return result(
                Status.ERROR,
                f"attempt {state.attempt_id}: result rejected as stale: {stale}",
                attempt_id=state.attempt_id,
                llm=llm,
            )
        m = pkg.manifest()
        arts = dict(m["artifacts"])
        for name in ("hypotheses", "hypothesis_registry", "hypotheses_summary"):
            arts[name] = CasePackage.pointer(p[name], files[p[name]])
        state.status, state.due_at = "COMPLETED", None
        files[p["dispatch"]] = state.text()
        pkg.write(
            files,
            {**m, "package_generation": m["package_generation"] + 1, "artifacts": arts},
            prefixed(self.hook, "publish"),
        )
        if self.hook:
            self.hook("published")
        ids = [h["id"] for h in pkg.read_json(p["hypotheses"])["hypotheses"]]
        return result(
            Status.COMPLETED,
            f"published {len(ids)} hypotheses ({', '.join(ids)})",
            attempt_id=state.attempt_id,
            hypothesis_ids=ids,
            paths=self._paths(pkg, rev),
            llm=llm,
        )

    # -- guards -----------------------------------------------------------------------------------

    def _reuse(self, pkg: CasePackage, m: dict, rev: int, result) -> BuildResult:
        """A published batch is final for its revision: checked, its pointers restored if removed,
        and returned whatever the config or attempt id."""
        p = paths(rev)
        restored = [n for n in HYPOTHESIS_POINTERS if n not in m["artifacts"]]
        if restored:
            arts = dict(m["artifacts"])
            for name in restored:
                arts[name] = {"path": p[name], "sha256": pkg.sha(p[name])}
            pkg.write({}, {**m, "package_generation": m["package_generation"] + 1, "artifacts": arts})
        bad = {k: v for k, v in run_checks(pkg, rev).items() if v}
        if bad:
            raise HypographError(
                f"{pkg.root / p['hypothesis_registry']}: the published batch fails "
                + "; ".join(f"{k}: {rules.describe(v, 3)}" for k, v in bad.items())
            )
        doc = pkg.read_json(p["hypotheses"])
        ids = [h["id"] for h in doc["hypotheses"]]
        note = f"; restored manifest pointers {', '.join(restored)}" if restored else ""
        return result(
            Status.COMPLETED,
            f"already published ({', '.join(ids)}); reused, nothing regenerated{note}",
            attempt_id=doc["attempt_id"],
            hypothesis_ids=ids,
            paths=self._paths(pkg, rev),
            reused=True,
        )

    def _rejections(self, pkg: CasePackage, rev: int) -> list[dict]:
        errors = pkg.root / rev_dir("hypotheses", rev) / "errors"
        if not errors.is_dir():
            return []
        out = []
        for q in sorted(errors.glob("*.json")):
            rel = str(q.relative_to(pkg.root))
            doc = pkg.read_json(rel)
            wrong = shape_violations(doc, {"attempt_id": str, "reason": str}, rel)
            if wrong:
                raise HypographError(f"{q}: {wrong[0][1]} (a rejected attempt's record of another shape)")
            out.append(doc)
        return out

    def _over_output_limit(self, answer: Answer) -> str | None:
        size = len(answer.model_dump_json().encode("utf-8"))
        limit = self.config.limits.output_bytes
        return f"the answer is {size} bytes, over limits.output_bytes={limit}" if size > limit else None

    def _reject(self, pkg, state: DispatchState, reason: str, endpoint, result, llm) -> BuildResult:
        """An invalid answer: kept under errors/, no id, no allocation, no registry."""
        rev = state.analysis_revision
        rel = f"{rev_dir('hypotheses', rev)}/errors/{state.attempt_id}.json"
        doc = {
            "analysis_revision": rev,
            "attempt_id": state.attempt_id,
            "phase": PHASE_GENERATING,
            "endpoint": endpoint,
            "reason": reason,
            "at": self.clock().isoformat(timespec="seconds"),
        }
        state.status = "REJECTED"
        pkg.journal().apply([Step(rel, json_text(doc)), Step(paths(rev)["dispatch"], state.text())])
        log.warning("%s phase %s: attempt %s rejected: %s", pkg.root, PHASE_GENERATING, state.attempt_id, reason)
        return result(
            Status.ERROR,
            f"attempt {state.attempt_id} rejected ({rel}): {reason}",
            attempt_id=state.attempt_id,
            paths={"error": str(pkg.root / rel)},
            llm=llm,
        )

    def _stale(self, pkg: CasePackage, generation: int, p: dict, context_text: str) -> str | None:
        m = pkg.manifest()
        if m["package_generation"] != generation:
            return f"package_generation moved from {generation} to {m['package_generation']} during the dispatch"
        if pkg.sha(p["hypothesis_context"]) != sha_text(context_text):
            return "context.json changed during the dispatch"
        return None

    def _verify_round(self, pkg, round_path: str, round_doc: dict, context: dict, context_text: str) -> None:
        where = pkg.root / round_path
        _check_round(pkg, round_path, round_doc)
        b = round_doc.get("bindings", {})
        if (
            b.get("context", {}).get("sha256") != sha_text(context_text)
            or b.get("policy") != context["bindings"]["policy"]
        ):
            raise HypographError(f"{where}: bound to another context or policy than this revision's")
        try:
            answer = Answer.model_validate(round_doc.get("answer"))
        except ValueError as e:
            raise HypographError(f"{where}: field 'answer': {e}") from None
        bad = rules.candidate_violations([c.model_dump() for c in answer.hypotheses], context)
        if bad:
            raise HypographError(f"{where}: field 'answer': {rules.describe(bad)}")

    @staticmethod
    def _paths(pkg: CasePackage, rev: int) -> dict[str, str]:
        p = paths(rev)
        return {k: str(pkg.root / p[k]) for k in ("hypotheses", "hypothesis_registry", "hypotheses_summary")}
