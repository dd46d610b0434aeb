"""The one text normaliser: two texts that differ only in presentation (Unicode form, case,
punctuation, symbols, spacing) compare equal after it. Used wherever "the same text" decides
something: library dedup's exact layer, the library's distinct-text checks and given-mode
lookup, and the case batch's no-duplicates rule. It catches presentation differences only, not
two wordings of one idea (a model or a person decides those).

And ``printable``: text from a file name, an archive member or a model made safe to print on one
line of a terminal (control characters escaped)."""

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


_BIDI = {chr(c) for c in (*range(0x200E, 0x2010), *range(0x202A, 0x202F), *range(0x2066, 0x206A))}


def printable(text: str) -> str:
    """``text`` with each control character (ESC, BEL, a newline, CR, DEL, C1), line or paragraph
    separator and bidirectional override escaped as Python writes it (``\\x1b``, ``\\n``,
    ``\\u202e``): one name stays one line, and never moves the cursor, recolours or reorders the
    terminal. Other text is unchanged."""
    return "".join(repr(c)[1:-1] if c in _BIDI or unicodedata.category(c) in ("Cc", "Zl", "Zp") else c for c in text)


def printable_lines(text: str) -> str:
    """``printable`` line by line: a message's own line breaks stay, whatever a name in it holds is escaped."""
    return "\n".join(printable(line) for line in text.split("\n"))
