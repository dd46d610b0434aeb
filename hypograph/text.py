"""The one text normaliser: two texts that differ only in presentation (Unicode form, case,
punctuation, symbols, spacing) compare equal after it. Used wherever "the same text" decides
something: library dedup's exact layer, the library's distinct-text checks and given-mode
lookup, and the case batch's no-duplicates rule. It catches presentation differences only, not
two wordings of one idea (a model or a person decides those)."""

from __future__ import annotations

import re
import unicodedata


def normalise(text: str) -> str:
    """``text`` in NFKC, case folded, each punctuation mark, symbol, separator and control
    character a space, runs of whitespace one space, stripped. Letters, digits and combining marks
    are kept (a vowel sign changes a word)."""
    text = unicodedata.normalize("NFKC", text).casefold()
    text = "".join(" " if unicodedata.category(c)[0] in "PSZC" else c for c in text)
    return re.sub(r"\s+", " ", text).strip()
