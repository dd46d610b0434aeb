"""Traces on disk: one JSON file a record, ``<root>/<date>_runNN/NNNN-<name>.json``, numbered in
the order written, with the API key redacted.

Every trace is capped, here, the one place traces are written: a string longer than
``2 * TRACE_KEEP`` characters keeps its first and last ``TRACE_KEEP`` and says how many were left
out and how long it was, so a server answering 50 MB a request leaves about 128 KiB a string (a
record holds a few: the answer, a re-ask quoting it), never the 50 MB; a record that still
serialises past ``TRACE_MAX`` bytes (many long strings) is replaced by its head and tail as text."""

from __future__ import annotations

import datetime as dt
import json
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path

from hypograph.atomic import write_json
from hypograph.llm.config import LLMConfig

TRACE_KEEP = 64 * 1024  # characters a trace keeps at each end of a longer string
TRACE_TEXT = 2 * TRACE_KEEP  # the longest string a trace keeps whole
TRACE_MAX = 4 << 20  # bytes of one trace file's record, whatever it holds
PLACEHOLDER_KEYS = {  # keys local servers take, which are no secret
    "none",
    "empty",
    "ollama",
    "lm-studio",
    "lmstudio",
    "dummy",
    "sk-no-key-required",
    "not-needed",
    "key",
}


@dataclass
class Trace:
    """The traces of one client: its run folder is made at the first record (``new_run_dir``)."""

    root: Path
    config: LLMConfig
    dir: Path | None = None
    seq: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def write(self, name: str, record: dict) -> None:
        with self.lock:
            if self.dir is None:
                self.dir = new_run_dir(self.root)
            self.seq += 1
            path = self.dir / f"{self.seq:04d}-{safe_name(name)}.json"
        write_json(path, capped(redact_tree(record, self.config)))

    def to(self, directory: Path) -> None:
        """Write the next records into ``directory`` (numbering continues after its files)."""
        with self.lock:
            self.dir = directory
            self.seq = len(list(directory.glob("*.json"))) if directory.is_dir() else 0


def new_run_dir(root: Path) -> Path:
    """``<root>/<date>_runNN`` with NN one past the highest for today, created exclusively."""
    today = dt.date.today().isoformat()
    root.mkdir(parents=True, exist_ok=True)
    numbers = (p.name.rsplit("run", 1)[1] for p in root.glob(f"{today}_run*"))
    n = max((int(k) for k in numbers if k.isdigit()), default=0)
    while True:
        n += 1
        try:
            (root / f"{today}_run{n:02d}").mkdir()
            return root / f"{today}_run{n:02d}"
        except FileExistsError:
            continue


def safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[:80]


def redact(text: str, config: LLMConfig) -> str:
    key = config.api_key.get_secret_value()
    # Local servers take placeholder keys ("ollama", "EMPTY"): those are no secret, and replacing
    # such a common word would mangle ordinary text. Real keys are long.
    return text.replace(key, "***") if key.lower() not in PLACEHOLDER_KEYS and len(key) >= 3 else text


def redact_tree(value, config: LLMConfig):
    if isinstance(value, str):
        return redact(value, config)
    if isinstance(value, dict):
        return {k: redact_tree(v, config) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_tree(v, config) for v in value]
    return value


def capped(record: dict) -> dict:
    """``record`` with every long string cut (``cut``); if it still serialises past ``TRACE_MAX``
    bytes, its JSON text's head and tail instead, with its size."""
    record = _cut(record)
    text = json.dumps(record, ensure_ascii=False, default=str)
    size = len(text.encode("utf-8"))
    if size <= TRACE_MAX:
        return record
    return {"truncated": True, "size_bytes": size, "text": cut(text)}


def cut(text: str) -> str:
    """``text`` when at most ``TRACE_TEXT`` characters; else its first and last ``TRACE_KEEP``
    around a note of what was left out and how long it was."""
    if len(text) <= TRACE_TEXT:
        return text
    left_out = len(text) - 2 * TRACE_KEEP
    return f"{text[:TRACE_KEEP]} […{left_out} characters left out of {len(text)} characters…] {text[-TRACE_KEEP:]}"


def _cut(value):
    if isinstance(value, str):
        return cut(value)
    if isinstance(value, dict):
        return {k: _cut(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_cut(v) for v in value]
    return value
