"""Traces on disk: one JSON file a record, ``<root>/<date>_runNN/NNNN-<name>.json``, numbered in
the order written, with the API key redacted and every string cut at TRACE_TEXT characters (a
runaway answer or body never writes an unbounded file)."""

from __future__ import annotations

import datetime as dt
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path

from hypograph.atomic import write_json
from hypograph.llm.config import LLMConfig

TRACE_TEXT = 1_000_000  # characters of one string a trace keeps (a prompt fits; a runaway answer is cut)
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
        write_json(path, _cut(redact_tree(record, self.config)))

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


def _cut(value):
    if isinstance(value, str) and len(value) > TRACE_TEXT:
        return value[:TRACE_TEXT] + f" […{len(value) - TRACE_TEXT} more characters]"
    if isinstance(value, dict):
        return {k: _cut(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_cut(v) for v in value]
    return value
