"""A library's behaviors and mechanisms as a proximity corpus, so the proximity assets cluster and
pair them like any other input's hypotheses (ids ``B3`` and ``B3-M2`` as the library writes them)."""

from __future__ import annotations

from pathlib import Path

from hypograph.errors import HypographError
from hypograph.hypotheses import Corpus, Hypothesis, load_corpus
from hypograph.library.schema import LIBRARY_FILE, library_path, read_library
from hypograph.paths import WITH_HYPOTHESES, input_kind


def library_corpus(root: Path) -> Corpus:
    """Every behavior (its statement) and mechanism (strategy: hypothesis) of the library in ``root``."""
    loaded = read_library(root)
    if loaded is None:
        raise HypographError(f"{library_path(root)}: no library here")
    hypotheses = [Hypothesis(id=node_id, statement=text, path=LIBRARY_FILE) for node_id, text in loaded[0].texts()]
    if not hypotheses:
        raise HypographError(f"{library_path(root)}: the library has no behavior yet")
    return Corpus(root=Path(root), kind="library", hypotheses=hypotheses)


def input_corpus(root: Path, skip_bad: bool = True) -> Corpus:
    """The hypotheses of any input: a library's nodes, else a run directory's or a vault's
    (``skip_bad``: see ``load_corpus``)."""
    return library_corpus(root) if input_kind(root, WITH_HYPOTHESES) == "library" else load_corpus(root, skip_bad)
