"""One seam for every decision a model may make: ask a policy, get decisions back.

A decision kind (a duplicate pair's verdict, a 4a merge or topic judgement, a 4b carving, a
cluster label; next: generation, dedup, scoring) is put to a ``Policy`` as a list of ``Ask``:

* ``request``: the question for a model (``hypograph.llm.client.Request``: prompt, pydantic
  schema, semantic ``check``). Untrusted text inside it is delimited with ``untrusted()``.
* ``accept(answer, decided_by)``: the decision made from a validated answer; ``decided_by`` is
  ``model:<name>``.
* ``offline(note)``: the deterministic decision. ``note`` is None when no model is asked at all,
  else the one phrase saying why the model's answer was not used (``"the model's answer was
  rejected (<reason>)"``); the decision records ``decided_by="policy"`` (``OFFLINE``) and puts
  ``note`` in its rationale or justification.

* ``split()`` (optional): the same question as two smaller asks whose decisions, concatenated,
  are this ask's (``R`` a list); used when the prompt cannot fit the endpoint's context, or the
  answer cannot fit its token budget.

``OfflinePolicy`` answers every ask with ``offline(None)``. ``ModelPolicy`` asks the model (the
client caches by content hash, re-asks on invalid answers, runs asks concurrently) and accepts
each valid answer. An item the model does not answer falls back to ``offline(note)``, here, in one
place, counted in the client's ``usage.fallback`` (asset metadata ``llm_fallback``): a rejected
answer, a prompt over the context length that cannot be split further, and an outage (the
endpoint gave no usable answer: the item is decided offline, not cached, so a later run asks
again). The run goes on either way. Decisions come back in the order of the asks.

``policy_for(client)`` picks the policy from the configured client: no model -> offline.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from hypograph.llm.client import LLMClient, LLMUnavailable, Rejected, Request
from hypograph.progress import stage

T = TypeVar("T")  # the model's answer (a pydantic model)
R = TypeVar("R")  # the decision the caller keeps

OFFLINE = "policy"  # decided_by of every offline decision, fallbacks included
SMALLER = ("context", "budget")  # rejections a smaller question may avoid: the ask is split where it can be


class Note(str):
    """The phrase a fallback records (a ``str``), and ``declined_by``: the model whose answer it
    stands in for (rejected, or a question it cannot take), which asked the same again would answer
    the same, so a step that keeps the decision need not ask it again; None after an outage (the
    endpoint gave nothing: a later run asks again)."""

    declined_by: str | None

    def __new__(cls, text: str, declined_by: str | None = None) -> Note:
        note = super().__new__(cls, text)
        note.declined_by = declined_by
        return note


def fallback_note(reason: str, declined_by: str | None = None) -> Note:
    """The phrase every fallback records: why the model's answer was not used."""
    return Note(f"the model's answer was rejected ({reason})", declined_by)


def outage_note(reason: str) -> Note:
    """The phrase a fallback records when the endpoint gave no usable answer."""
    return Note(f"the model gave no usable answer ({reason[:240]})")


def refused_note(reason: str, declined_by: str | None = None) -> Note:
    """The phrase a fallback records for a prompt the endpoint cannot take."""
    return Note(f"the question was not asked: {reason}", declined_by)


@dataclass(frozen=True)
class Ask(Generic[T, R]):
    """One decision to make: the model's question and both ways to decide it."""

    request: Request[T]
    accept: Callable[[T, str], R]
    offline: Callable[[str | None], R]
    split: Callable[[], tuple[Ask, Ask]] | None = None


class Policy(ABC):
    """Decides asks of one kind at a time (``kind`` names them in traces and counts)."""

    @property
    @abstractmethod
    def offline(self) -> bool:
        """Whether no model is asked (so an offline decision is final, not a stand-in)."""

    @abstractmethod
    def decide(self, kind: str, asks: list[Ask[T, R]]) -> list[R]:
        """One decision per ask, in order."""

    @abstractmethod
    def reconsiders(self, declined_by: str | None) -> bool:
        """Whether an item decided offline before is put to this policy again; ``declined_by`` is
        its fallback's ``Note.declined_by`` (None: no model was asked, or an outage)."""


class OfflinePolicy(Policy):
    """The deterministic heuristics: no model, no call, same input -> same decisions."""

    @property
    def offline(self) -> bool:
        return True

    def decide(self, kind: str, asks: list[Ask[T, R]]) -> list[R]:
        return [a.offline(None) for a in asks]

    def reconsiders(self, declined_by: str | None) -> bool:
        return False


class ModelPolicy(Policy):
    """Validated model answers; a rejected one falls back to the offline decision."""

    def __init__(self, client: LLMClient):
        if client.offline:
            raise ValueError("ModelPolicy needs a client with a model; use OfflinePolicy")
        self.client = client

    @property
    def offline(self) -> bool:
        return False

    def decide(self, kind: str, asks: list[Ask[T, R]]) -> list[R]:
        with stage(f"model calls ({kind})", total=len(asks), unit="calls"):
            answers = self.client.ask_all([a.request for a in asks])
        out = []
        for a, answer in zip(asks, answers, strict=True):
            if isinstance(answer, Rejected) and answer.kind in SMALLER and a.split is not None:
                first, second = a.split()
                out.append(list(self.decide(kind, [first])[0]) + list(self.decide(kind, [second])[0]))
            elif isinstance(answer, LLMUnavailable):
                self.client.count_fallback()
                out.append(a.offline(outage_note(str(answer))))
            elif isinstance(answer, Rejected):
                self.client.count_fallback()
                note = refused_note if answer.kind == "context" else fallback_note
                out.append(a.offline(note(answer.reason, self.client.decider)))
            else:
                out.append(a.accept(answer, self.client.decider))
        return out

    def reconsiders(self, declined_by: str | None) -> bool:
        """Yes, but for an item this model declined (asked again, it would answer the same) unless
        ``retry_rejected`` is set; such an item is counted (``llm_declined``), the usage line says
        how to ask again."""
        if declined_by != self.client.decider or self.client.config.retry_rejected:
            return True
        self.client.count_declined()
        return False


def policy_for(client: LLMClient | Policy) -> Policy:
    """The policy a configured client stands for (a policy is returned as it is)."""
    if isinstance(client, Policy):
        return client
    return OfflinePolicy() if client.offline else ModelPolicy(client)
