"""Where a library invocation's traces go: ``L/.hypograph/traces/hypothesis-batch/<date>_run<NN>/r<NN>/``.

One ``TraceRun`` per invocation (a CLI run of R rounds, or one Dagster step); its run folder is
created on first use only, so a fully cached re-run leaves no empty folder behind.
"""

from __future__ import annotations

from pathlib import Path

from hypograph.library.state import TRACE_TASK, state_dir, trace_round_dir
from hypograph.llm.client import LLMClient, new_run_dir


class TraceRun:
    def __init__(self, root: Path):
        self.root = Path(root)
        self._dir: Path | None = None

    @property
    def dir(self) -> Path:
        if self._dir is None:
            self._dir = new_run_dir(state_dir(self.root) / "traces" / TRACE_TASK)
        return self._dir

    @property
    def run_index(self) -> int:
        return int(self.dir.name.rsplit("run", 1)[1])

    def batch(self, date: str, round_key: str) -> str:
        """The seed's batch stamp ``<date>.run<NN>.r<NN>``."""
        return f"{date}.run{self.run_index:02d}.{trace_round_dir(self.dir, round_key).name}"

    def use(self, client: LLMClient, round_key: str) -> Path:
        """Point ``client``'s traces at this run's folder for ``round_key``; returns it."""
        d = trace_round_dir(self.dir, round_key)
        client.trace_to(d)
        return d
