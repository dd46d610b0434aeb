"""What a proximity run is asked to do: the one settings model that ``hypograph proximity``'s
flags, the Launchpad's run config and a sensor's run request all become, validated before a run.

Only pydantic is imported here, so a command refuses a bad value before it loads anything else.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from hypograph.proximity.defaults import (
    AUTO_MERGE_THRESHOLD,
    DEFAULT_DUPE_THRESHOLD,
    DEFAULT_MAX_NEIGHBOURS,
    DEFAULT_THRESHOLD,
    Backend,
)

__all__ = ["Backend", "ProximitySettings"]


class ProximitySettings(BaseModel):
    """Embedding backend, the original prox's thresholds (graph 0.30, dupes 0.80, auto-merge 0.92), the
    community finder and how many row ranges the embedding and the graph are split into."""

    model_config = ConfigDict(extra="forbid")

    backend: Backend = Field(default="tfidf", description="tfidf (as the original prox) or sbert (MiniLM, offline)")
    model: str | None = Field(default=None, description="tfidf: seed (default) or tuned; sbert: model name or path")
    graph_threshold: float = Field(
        default=DEFAULT_THRESHOLD, ge=-1.0, le=1.0, allow_inf_nan=False, description="edge at or above"
    )
    max_neighbours: int = Field(
        default=DEFAULT_MAX_NEIGHBOURS,
        ge=0,
        description="strongest edges kept per node (pairs >= dupe threshold always); 0: all, the original prox's "
        "graph (prox graph's default; here a cap, so a large input's graph stays small)",
    )
    dupe_threshold: float = Field(
        default=DEFAULT_DUPE_THRESHOLD, ge=0.0, le=1.0, allow_inf_nan=False, description="duplicate pair at or above"
    )
    auto_merge: float = Field(
        default=AUTO_MERGE_THRESHOLD,
        ge=0.0,
        le=1.0,
        allow_inf_nan=False,
        description="MERGE without a model above this",
    )
    algorithm: Literal["louvain", "components"] = Field(default="louvain", description="community finder")
    skip_bad_files: bool = Field(
        default=False,
        description="a run directory's hypothesis file that cannot be read is skipped, named in a warning "
        "and in the summary, instead of stopping the run (exit 1, nothing written); a vault's never is",
    )
    shards: int = Field(
        default=1,
        ge=1,
        le=1024,
        description="row ranges embedded (sbert) and graphed as separate steps: 1 uses this "
        "machine's cores in one step; N lets the run's executor spread N steps "
        "over processes (multiprocess) or machines (k8s, celery)",
    )
