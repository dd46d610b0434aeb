"""Proximity settings shared by the proximity assets and their checks (run config in the Launchpad)."""

from typing import Literal

from dagster import ConfigurableResource
from pydantic import Field

from hypograph.proximity.dupes import AUTO_MERGE_THRESHOLD, DEFAULT_DUPE_THRESHOLD
from hypograph.proximity.embed import Backend
from hypograph.proximity.graph import DEFAULT_MAX_NEIGHBOURS, DEFAULT_THRESHOLD


class ProximitySettings(ConfigurableResource):
    """Embedding backend and the seed's thresholds (graph 0.30, dupes 0.80, auto-merge 0.92)."""

    backend: Backend = Field(default="tfidf", description="tfidf (seed) or sbert (MiniLM, offline)")
    model: str | None = Field(default=None, description="tfidf: seed (default) or tuned; sbert: model name or path")
    graph_threshold: float = Field(default=DEFAULT_THRESHOLD, ge=-1.0, le=1.0, description="edge at or above")
    max_neighbours: int = Field(
        default=DEFAULT_MAX_NEIGHBOURS,
        ge=0,
        description="strongest edges kept per node (pairs >= dupe threshold always); 0: all, the seed's "
        "graph (prox graph's default; here a cap, so a large input's graph stays small)",
    )
    dupe_threshold: float = Field(
        default=DEFAULT_DUPE_THRESHOLD, ge=0.0, le=1.0, description="duplicate pair at or above"
    )
    auto_merge: float = Field(
        default=AUTO_MERGE_THRESHOLD, ge=0.0, le=1.0, description="MERGE without a model above this"
    )
    algorithm: Literal["louvain", "components"] = Field(default="louvain", description="community finder")
    shards: int = Field(
        default=1,
        ge=1,
        le=1024,
        description="row ranges embedded (sbert) and graphed as separate steps: 1 uses this "
        "machine's cores in one step; N lets the run's executor spread N steps "
        "over processes (multiprocess) or machines (k8s, celery)",
    )
