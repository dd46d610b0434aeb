"""Sizes in tokens: the schema as sent to a server (``wire_schema``), the longest answer it admits
(``answer_budget``), a prompt's tokens (``estimate_tokens``) and the context length a server's
refusal names (``context_limit_named``). Pure functions of their arguments: no I/O."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass

CHARS_PER_TOKEN = 3.0  # the prompt estimate: fewer characters a token than English's ~4, on the safe side
GRAMMAR_MAX_LENGTH = 240  # longest string bound sent to a server (llama.cpp's grammar builder dies on 2,000)
MIN_BUDGET, MAX_BUDGET = 192, 8192
CONTEXT_ERROR_RE = re.compile(
    r"context (?:length|window|size)|n_ctx|maximum context|too many tokens|prompt is too long", re.I
)
CONTEXT_NUMBER_RES = (
    re.compile(r"maximum context length is (\d+)", re.I),
    re.compile(r"context (?:window|length|size) of (\d+)", re.I),
    re.compile(r"n_ctx\D{0,12}(\d+)", re.I),
    re.compile(r"context (?:window|length|size)\D{0,24}(\d+)", re.I),
)


def wire_schema(schema: dict, items: int | None = None) -> dict:
    """``schema`` as sent to a server: every ``maxLength`` above GRAMMAR_MAX_LENGTH lowered to it
    (and a ``minLength`` with it), ``pattern`` and ``format`` dropped — what grammar builders choke
    on; with ``items``, the answer's list (a top-level array property) holds exactly that many, so
    a constrained model cannot run on past the question. Any answer it admits that meets the real
    bounds still validates against the real model."""
    out = _bounded(schema)
    if items and isinstance(out, dict):
        lists = [
            k for k, v in (out.get("properties") or {}).items() if isinstance(v, dict) and v.get("type") == "array"
        ]
        if len(lists) == 1:
            out["properties"][lists[0]] = {**out["properties"][lists[0]], "minItems": items, "maxItems": items}
    return out


def _bounded(schema):
    if isinstance(schema, list):
        return [_bounded(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {}
    for k, v in schema.items():
        if k in ("pattern", "format") and isinstance(v, str):
            continue
        if k in ("properties", "$defs", "definitions") and isinstance(v, dict):
            out[k] = {name: _bounded(s) for name, s in v.items()}
        else:
            out[k] = _bounded(v)
    if isinstance(out.get("maxLength"), int) and out["maxLength"] > GRAMMAR_MAX_LENGTH:
        out["maxLength"] = GRAMMAR_MAX_LENGTH
        if isinstance(out.get("minLength"), int):
            out["minLength"] = min(out["minLength"], GRAMMAR_MAX_LENGTH)
    return out


def answer_budget(schema: dict, items: int | None = None) -> int:
    """Tokens an answer matching ``schema`` (as sent: ``wire_schema``) needs at most, with margin:
    strings at their bound (120 characters when unbounded), the outermost list at ``items``
    entries (else its ``maxItems``, else 8), inner lists at their ``maxItems`` (else 4). Between
    MIN_BUDGET and MAX_BUDGET: a pair verdict needs a few hundred, a carving a few thousand."""
    sizer = _Sizer(schema.get("$defs") or schema.get("definitions") or {}, items)
    # every string at its bound is already the worst case: JSON runs ~3.5 characters a token
    tokens = sizer.chars(schema, 0, True) / 3.5 + 32
    return int(min(MAX_BUDGET, max(MIN_BUDGET, math.ceil(tokens))))


@dataclass
class _Sizer:
    """The longest JSON text a schema admits, in characters (``answer_budget``)."""

    defs: dict
    items: int | None

    def chars(self, s: dict, depth: int, outer_list: bool) -> float:
        """The longest text of schema ``s`` at ``depth``: a reference or combination resolved, else its type's."""
        if depth > 12 or not isinstance(s, dict):
            return 16
        if "$ref" in s:
            return self.chars(self.defs.get(s["$ref"].rsplit("/", 1)[-1], {}), depth + 1, outer_list)
        for key in ("anyOf", "oneOf"):
            if key in s:
                return max(self.chars(o, depth + 1, outer_list) for o in s[key])
        if "allOf" in s:
            return sum(self.chars(o, depth + 1, outer_list) for o in s["allOf"])
        return self.typed(s, depth, outer_list)

    def typed(self, s: dict, depth: int, outer_list: bool) -> float:
        """The longest text of a schema that is no reference or combination: by its values or its type."""
        if "enum" in s:
            return max((len(json.dumps(v)) for v in s["enum"]), default=4)
        if "const" in s:
            return len(json.dumps(s["const"]))
        kind = s.get("type")
        if isinstance(kind, list):
            kind = next((k for k in kind if k != "null"), "null")
        if kind == "object" or "properties" in s:
            props = s.get("properties") or {}
            return 2 + sum(len(name) + 4 + self.chars(p, depth + 1, outer_list) for name, p in props.items())
        if kind == "array":
            return self.array(s, depth, outer_list)
        return {"string": (s.get("maxLength") or 120) + 2, "integer": 10, "number": 10, "boolean": 5}.get(kind, 4)

    def array(self, s: dict, depth: int, outer_list: bool) -> float:
        if "prefixItems" in s:
            return 2 + sum(self.chars(p, depth + 1, False) + 2 for p in s["prefixItems"])
        bound = s.get("maxItems")
        n = (self.items or bound or 8) if outer_list else (bound or 4)
        return 2 + n * (self.chars(s.get("items") or {}, depth + 1, False) + 2)


def estimate_tokens(messages: list[dict]) -> int:
    """The prompt's tokens, estimated on the safe side (CHARS_PER_TOKEN, 8 a message for roles)."""
    return sum(math.ceil(len(str(m.get("content") or "")) / CHARS_PER_TOKEN) + 8 for m in messages)


def context_limit_named(message: str) -> int | None:
    """The context length a server's error names (0 when it names a context limit but no number),
    None when the error is about something else."""
    if not CONTEXT_ERROR_RE.search(message):
        return None
    for pattern in CONTEXT_NUMBER_RES:
        m = pattern.search(message)
        if m and int(m.group(1)) >= 64:
            return int(m.group(1))
    return 0


def first_budget(budget: int, prompt_tokens: int, limit: int | None) -> int:
    """The first attempt's budget when sized from the schema: its worst case is no need when the
    context cannot take it beside the prompt; what the context leaves will do, unless it is under
    a quarter of that (the answer would be cut off)."""
    if limit and prompt_tokens + budget > limit:
        return max(budget // 4, MIN_BUDGET, limit - prompt_tokens)
    return budget


def fitted_budget(budget: int, prompt_tokens: int, limit: int) -> int | None:
    """A budget under ``budget`` that fits a context length just learnt beside the prompt, or None
    when the room left is under a quarter of ``budget`` (or MIN_BUDGET)."""
    room = limit - prompt_tokens
    return room if max(budget // 4, MIN_BUDGET) <= room < budget else None


def grown_budget(budget: int, prompt_tokens: int, limit: int | None) -> int | None:
    """The budget to re-ask an answer cut off at ``budget`` with: doubled, as far as the context
    leaves room beside the re-ask's ``prompt_tokens``; None when it cannot grow."""
    room = limit - prompt_tokens if limit else budget * 2
    grown = min(budget * 2, MAX_BUDGET * 2, room)
    return grown if grown > budget else None
