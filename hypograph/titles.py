"""The titles of some hypotheses of an input, reading as little as possible: for the report's hover
text and the command's review queue, which name a few thousand ids of up to 100k."""

from __future__ import annotations

from pathlib import Path

import orjson

from hypograph.atomic import read_regular
from hypograph.errors import HypographError
from hypograph.hypotheses import _json_hypothesis, _read_files, _run_dir_files
from hypograph.library.corpus import input_corpus
from hypograph.paths import HYPOTHESIS_FOLDERS, TEXTS_SNAPSHOT, input_kind

SNAPSHOT_MAX = 256 << 20  # a courtesy read: past this the ids' own files are read instead


def titles_of(root: Path, ids: list[str]) -> dict[str, str]:
    """id -> title (or statement, whitespace collapsed) for ``ids`` of the input at ``root``: from
    the pipeline's snapshot (one file) when it holds every id, else from the input (in a run
    directory only the files of ``ids``); {} when the input cannot be read now."""
    try:
        hypotheses = orjson.loads(read_regular(root / TEXTS_SNAPSHOT, SNAPSHOT_MAX))["hypotheses"]
        titles = {h["id"]: " ".join((h.get("title") or h.get("statement") or "").split()) for h in hypotheses}
    except (OSError, HypographError, orjson.JSONDecodeError, KeyError, TypeError, AttributeError):
        titles = {}
    if titles and all(i in titles for i in ids):
        return titles
    try:
        if input_kind(root, HYPOTHESIS_FOLDERS) == "run-dir":
            return _run_dir_titles(root, ids)
        corpus = input_corpus(root)
    except HypographError:
        return {}
    return {h.id: " ".join((h.title or h.statement or "").split()) for h in corpus.hypotheses}


def _run_dir_titles(root: Path, ids: list[str]) -> dict[str, str]:
    """The titles of ``ids`` from a run directory's ``hypotheses/<id>.json``: the files the input scan
    lists (a symlink leading outside is never read), parsed and checked as the corpus reads them."""
    warnings: list[str] = []
    names = sorted(set(_run_dir_files(root, warnings)) & {f"{i}.json" for i in ids})
    raws = _read_files(root / "hypotheses", names)
    hyps = [_json_hypothesis(name, raw, warnings) for name, raw in zip(names, raws, strict=True)]
    return {h.id: " ".join((h.title or h.statement or "").split()) for h in hyps if h is not None}
