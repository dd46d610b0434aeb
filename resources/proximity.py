"""Proximity settings shared by the proximity assets and their checks."""

from dagster import ConfigurableResource
from pydantic import Field

from hypograph.proximity.dupes import DEFAULT_DUPE_THRESHOLD
from hypograph.proximity.graph import DEFAULT_THRESHOLD


class ProximitySettings(ConfigurableResource):
    """Embedding backend and the seed's thresholds (graph 0.30, dupes 0.80)."""

    backend: str = Field(default="tfidf", description="tfidf | sbert")
    model: str | None = Field(default=None, description="sbert model name or local path")
    graph_threshold: float = Field(default=DEFAULT_THRESHOLD, ge=0.0, le=1.0)
    dupe_threshold: float = Field(default=DEFAULT_DUPE_THRESHOLD, ge=0.0, le=1.0)
    algorithm: str = Field(default="louvain", description="louvain | components")
