"""Proximity settings shared by the proximity assets and their checks."""

from dagster import ConfigurableResource
from pydantic import Field

from hypograph.proximity.dupes import AUTO_MERGE_THRESHOLD, DEFAULT_DUPE_THRESHOLD
from hypograph.proximity.graph import DEFAULT_THRESHOLD


class ProximitySettings(ConfigurableResource):
    """Embedding backend and the seed's thresholds (graph 0.30, dupes 0.80, auto-merge 0.92)."""

    backend: str = Field(default="tfidf", description="tfidf | sbert")
    model: str | None = Field(default=None, description="sbert model name or local path")
    graph_threshold: float = Field(default=DEFAULT_THRESHOLD, gt=0.0, le=1.0)
    dupe_threshold: float = Field(default=DEFAULT_DUPE_THRESHOLD, ge=0.0, le=1.0)
    auto_merge: float = Field(default=AUTO_MERGE_THRESHOLD, ge=0.0, le=1.0, description="MERGE without a model above this")
    algorithm: str = Field(default="louvain", description="louvain | components")
