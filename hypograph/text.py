"""The one text normaliser: two texts that differ only in presentation (Unicode form, case,
punctuation, symbols, spacing) compare equal after it. Used wherever "the same text" decides
something: library dedup's exact layer, the library's distinct-text checks and given-mode
lookup, and the case batch's no-duplicates rule. It catches presentation differences only, not
two wordings of one idea (a model or a person decides those).

And ``printable``: text from a file name, an archive member or a model made safe to print on one
line of a terminal (control characters escaped)."""

from __future__ import annotations

import re
import sys
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager


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


class PrintableStream:
    """A text stream (``sys.stdout``, ``sys.stderr``) whose writes pass through ``printable_lines``:
    whatever a command prints from data (a title, an id, a path, a model's words) reaches the
    terminal with its control characters and bidirectional overrides escaped, wherever it is printed
    from. Everything but ``write`` is the wrapped stream's (``isatty``, ``fileno``, ``flush`` ...)."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(printable_lines(text))
        return len(text)

    def writelines(self, lines) -> None:
        for text in lines:
            self.write(text)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


@contextmanager
def printable_output() -> Iterator[None]:
    """``sys.stdout`` and ``sys.stderr`` as ``PrintableStream``s while the block runs (a command's
    handler: the one place a CLI's output from data is made printable), restored after."""
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = PrintableStream(out), PrintableStream(err)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = out, err
