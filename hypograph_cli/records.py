"""The record a command leaves: what it did, as the runs it launched recorded it. ``--json`` prints
it as one JSON document on stdout (every ``hypograph`` and ``prox`` command; the prose goes to
stderr), so an agent calls Hypograph without parsing prose.

One envelope, ``Record``, for every command: ``schema_version`` (raised when a field changes
meaning or goes away; a new field keeps it), the command, its exit code and what the code means,
the one-line error of a refusal, the Dagster runs it launched, and ``result``: the command's own
record, one model per kind (``KINDS``: command -> model). docs/json.md is generated from these
models (``reference()``) and a test holds it to them.

Imported only with ``--json`` or when a command records its result (pydantic: never for
``--help`` or an argument error without ``--json``).
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from hypograph.errors import STATUS

SCHEMA_VERSION = 1


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Run(_Model):
    """A Dagster run the command launched (``hypograph ui``: Runs, by its id)."""

    job: str
    run_id: str
    success: bool
    why: str | None = Field(None, description="why it ran (structure: the reason the flow started it)")


class Violation(_Model):
    id: str = Field(description="the node, behavior or mechanism")
    reason: str


class Check(_Model):
    """One check and what it found (``passed``: no violation)."""

    name: str
    number: int | None = Field(None, description="the step-4 check's number (vault checks)")
    passed: bool
    violations: list[Violation] = []


class Pair(_Model):
    a: str
    b: str
    similarity: float
    verdict: str | None = Field(None, description="MERGE, KEEP or FLAG; None: not judged")
    decided_by: str | None = Field(None, description="auto, model, human or offline")
    a_title: str | None = Field(None, description="review queue: a's title")
    b_title: str | None = Field(None, description="review queue: b's title")


class Cluster(_Model):
    id: str
    label: str
    size: int
    members: list[str] = Field(description="its first members (12); all of them: proximity/clusters.json")


class Proximity(_Model):
    """``hypograph proximity``: the run's counts, the largest clusters, top pairs and review queue."""

    path: str
    hypotheses: int
    files_read: int | None
    skipped: list[str] = Field(description="input files the run skipped (--skip-bad-files), each with why")
    edges: int
    threshold: float | int = Field(description="the similarity graph's threshold")
    algorithm: str
    clusters_total: int
    clusters_of_two_or_more: int
    singletons: int
    clusters: list[Cluster] = Field(description="the largest clusters (20), largest first; all: clusters.json")
    backend: str
    duplicate_pairs: int
    top_pairs: list[Pair] = Field(description="the most similar duplicate pairs (10), with their verdicts")
    human_verdicts: list[Pair] = Field(description="a person's verdicts on pairs not among top_pairs")
    review_waiting: int = Field(description="FLAG pairs waiting for a person's verdict")
    review_queue: list[Pair] = Field(description="the most similar of them (20), with both titles")
    directory: str = Field(description="where the files are")
    files: list[str] = Field(description="the files written there")


class Step(_Model):
    job: str
    why: str = Field(description="why the flow ran it")


class Structure(_Model):
    """``hypograph structure``: what step 4 changed, the vault after it, the checks, the review queue.
    The vault's fields are None when step 4 did not run (the vault was current)."""

    path: str
    ran: list[Step] = Field(description="the jobs the flow ran, in order, and why")
    merged: int
    dropped: int
    clusters_created: int
    minted: int = Field(description="residuals and complements step 4 minted")
    by_hand: list[str] = Field(description="a person's MERGE applied or refused, a decision amended")
    active: int | None = Field(None, description="active hypotheses after the run")
    vault_clusters: dict[str, list[str]] | None = Field(None, description="cluster node -> its hypotheses' links")
    merged_into: dict[str, str] | None = Field(None, description="merged hypothesis -> its survivor")
    dropped_why: dict[str, str] | None = Field(None, description="dropped hypothesis -> why")
    checks: list[Check] | None = Field(None, description="the step-4 checks the run evaluated")
    top_pairs: list[Pair] = Field(description="the latest proximity run's most similar pairs (10)")
    human_verdicts: list[Pair] = Field([], description="a person's verdicts on pairs not among top_pairs")
    review_waiting: int
    review_queue: list[Pair]
    structure_map: str


class Report(_Model):
    """``hypograph report``: the pictures written."""

    path: str
    headline: str
    files: list[str]


class VaultCheck(_Model):
    """``hypograph check``: the step-4 checks on the vault as it is."""

    path: str
    passed: bool
    checks: list[Check]
    journal: str | None = Field(None, description="an interrupted write the next structuring completes")


class Unmerge(_Model):
    path: str
    id: str
    summary: str


class CreateNode(_Model):
    id: str
    path: str


class Input(_Model):
    id: str
    kind: str
    path: str


class Add(_Model):
    """``hypograph add``: each input registered."""

    inputs: list[Input]


class Ui(_Model):
    """``hypograph ui``: the address served (Dagster's own output then goes to stderr)."""

    url: str
    inputs: list[str]


class Library(_Model):
    """``hypograph library``: the rounds' report (``--report`` and rounds), or ``--check``'s checks."""

    path: str
    report: dict[str, Any] | None = Field(
        None, description="the library report: totals, rounds, distributions (hypograph/library/report.py)"
    )
    checks: list[Check] | None = None


class Case(_Model):
    """``hypograph case new|add|from-vault|interpret|confirm|show``."""

    case_dir: str
    package_id: str | None = None
    revision: int | None = Field(None, description="the case's analysis revision")
    message: str
    created: bool | None = Field(None, description="confirm: a new confirmation was recorded")


class Batch(_Model):
    """``hypograph batch``: the dispatch's status line, the files it published, the nodes minted."""

    case_dir: str
    status: str | None = Field(None, description="the dispatch's status: COMPLETED, RETRY_PENDING, DEFERRED, …")
    line: str | None
    paths: dict[str, str] = {}
    minted: str | None = Field(None, description="--into: the nodes minted in the vault")


class Prox(_Model):
    """``prox embed|graph|clusters|dupes|adjudicate|label``: what the step wrote and its figures."""

    run_dir: str
    path: str = Field(description="the main file written")
    counts: dict[str, int] = Field(description="e.g. hypotheses, edges, clusters, pairs, decisions")
    lines: list[str] = Field(description="what the command prints without --json")
    data: list[Any] | dict[str, Any] | None = Field(
        None, description="dupes: the pairs; adjudicate: the decisions; clusters and label: cluster -> members/name"
    )


KINDS: dict[str, type[_Model]] = {
    "hypograph proximity": Proximity,
    "hypograph structure": Structure,
    "hypograph report": Report,
    "hypograph check": VaultCheck,
    "hypograph unmerge": Unmerge,
    "hypograph create-node": CreateNode,
    "hypograph add": Add,
    "hypograph ui": Ui,
    "hypograph library": Library,
    "hypograph case new": Case,
    "hypograph case add": Case,
    "hypograph case from-vault": Case,
    "hypograph case interpret": Case,
    "hypograph case show": Case,
    "hypograph case confirm": Case,
    "hypograph batch": Batch,
    **{f"prox {c}": Prox for c in ("embed", "graph", "clusters", "dupes", "adjudicate", "label")},
}


class Record(_Model):
    """What ``--json`` prints: one of these, whatever the command and however it ended."""

    schema_version: Literal[1] = SCHEMA_VERSION
    command: str = Field(description="as typed, without its arguments: `hypograph proximity`, `prox dupes`")
    exit_code: int
    status: Literal["done", "refused", "not_done", "interrupted"] = Field(
        description="what the exit code means: 0 done, 1 refused or failed, 2 not done yet (prox: a usage "
        "error, refused), 130 interrupted"
    )
    error: str | None = Field(None, description="the refusal's line (the first line on stderr), else None")
    runs: list[Run] = Field([], description="the Dagster runs launched, in order")
    result: dict[str, Any] | None = Field(None, description="the command's record: its kind's model (KINDS)")


def dumps(draft, code: int) -> str:
    """The ``Record`` of a command that exits ``code`` (``draft``: its ``hypograph_cli.outcome.Draft``)
    as one JSON document and a newline. A result recorded before it stopped is kept (a batch's
    dispatch status)."""
    result = draft.result.model_dump(mode="json") if draft.result is not None else None
    record = Record(
        command=draft.command,
        exit_code=code,
        status=draft.status or STATUS.get(code, "refused"),
        error=draft.error,
        runs=[Run(**run) for run in draft.runs],
        result=result,
    )
    return json.dumps(record.model_dump(mode="json"), ensure_ascii=False, indent=2) + "\n"


def reference() -> str:
    """docs/json.md: the envelope and each kind, field by field, from the models."""
    out = [
        "# `--json`: the record every command prints",
        "",
        "<!-- generated from hypograph_cli/records.py by `python -m hypograph_cli.records`; "
        "tests/cli/test_json.py holds it to the models -->",
        "",
        "Every `hypograph` and `prox` command takes `--json`: it then prints one JSON document on stdout "
        "and nothing else there (the lines it prints without `--json` go to stderr), whatever the exit code. "
        f"The schema version is {SCHEMA_VERSION}: it is raised when a field changes meaning or goes away; "
        "a new field keeps it.",
        "",
        *_fields(Record),
        "",
        "## `result`, by command",
        "",
        "| command | kind |",
        "|---|---|",
        *(f"| `{command}` | [{model.__name__}](#{model.__name__.lower()}) |" for command, model in KINDS.items()),
    ]
    nested = [Run, Step, Check, Violation, Pair, Cluster, Input]
    for model in dict.fromkeys([*KINDS.values(), *nested]):
        out += ["", f"### {model.__name__}", "", *_fields(model)]
    return "\n".join(out) + "\n"


def _fields(model: type[BaseModel]) -> list[str]:
    doc = (model.__doc__ or "").strip()
    lines = [doc, ""] if doc and not doc.startswith("A base class") else []
    lines += ["| field | type | meaning |", "|---|---|---|"]
    for name, info in model.model_fields.items():
        lines.append(f"| `{name}` | {_type(info.annotation)} | {info.description or ''} |")
    return lines


def _type(annotation) -> str:
    """``list of Pair``, ``int or None``: a field's type in words (a table cell holds no ``|``)."""
    import types
    import typing

    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type(a) for a in args)
    if origin is typing.Literal:
        return " or ".join(f"`{a!r}`" for a in args)
    if origin in (list, dict):
        return f"list of {_type(args[0])}" if origin is list else f"object of {_type(args[0])} to {_type(args[1])}"
    name = {type(None): "null", typing.Any: "any"}.get(annotation)
    if name:
        return name
    name = getattr(annotation, "__name__", str(annotation))
    return f"[{name}](#{name.lower()})" if isinstance(annotation, type) and issubclass(annotation, BaseModel) else name


if __name__ == "__main__":
    print(reference(), end="")
