"""What a library round is asked to do: ``RoundSettings`` (stored with each round, in its
``candidates.json``), and ``LibrarySettings``, the one model that ``hypograph library``'s flags, the
Launchpad's run config and the ``next_library_round`` sensor all become, validated before a run.

Only pydantic is imported here, so a command refuses a bad value before it loads anything else.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from hypograph.proximity.settings import Backend

DEFAULT_N_BEHAVIORS = 10
DEFAULT_BANLIST_BUDGET = 6000  # tokens of banlist pasted into one generation prompt
# Nearest existing nodes shown to the dedup judge at the least; a larger library shows more
# (dedup.shown_count: 7.5 x sqrt(nodes), chosen on the tuning half of benchmarks/library_recall.py's pairs).
DEFAULT_NEIGHBOURS = 15
MIN_NEIGHBOURS = 10


class RoundSettings(BaseModel):
    """What a round is asked to do. ``behavior`` is the given-mode target (id or free text)."""

    topic: str = Field(min_length=1, description="the library's topic")
    behavior_source: Literal["discover", "given"] = Field(default="discover", description="library rounds mode")
    behavior: str | None = Field(default=None, description="given mode: a behavior id (B3) or one sentence")
    n_behaviors: int = Field(default=DEFAULT_N_BEHAVIORS, ge=1, le=100, description="new behaviors per round")
    web: bool = Field(default=True, description="ground the referees with arXiv and OpenAlex searches")
    banlist_budget: int = Field(
        default=DEFAULT_BANLIST_BUDGET, ge=200, description="tokens of banlist pasted per generation prompt"
    )
    strategies_file: str | None = Field(default=None, description="JSON file of lenses and strategies")
    embedder: Backend = Field(
        default="sbert",
        description="embeddings that pick the neighbours the model judges each candidate against (sbert: MiniLM)",
    )
    neighbours: int = Field(default=DEFAULT_NEIGHBOURS, ge=1, le=50, description="nearest nodes shown to the judge")
    # One invocation (a CLI run of R rounds, however many Dagster steps): one trace folder and one
    # batch run index. Not part of what a round is asked to do, so never stored with the round.
    invocation: str | None = Field(
        default=None,
        exclude=True,
        description="trace folder and batch stamp to share (default: the command's, else this run's)",
    )


class LibraryCommand(BaseModel):
    """What one ``hypograph library`` invocation is asked for beside the rounds' settings."""

    model_config = ConfigDict(extra="forbid")

    rounds: int = Field(default=1, ge=0, description="rounds to run in this invocation")


class LibrarySettings(RoundSettings):
    """A round's settings as a run is given them. ``topic`` empty: follow the previous round's
    settings (what the sensor does); a round that already generated always keeps its own. The
    cross-topic guard refuses a topic the library is not about unless ``confirm_topic``;
    ``new_library`` moves the old file aside instead (a round given a topic, not yet generated)."""

    model_config = ConfigDict(extra="forbid")

    topic: str | None = Field(default=None, description="the library's topic; empty: as the previous round")
    confirm_topic: bool = Field(default=False, description="add to the library despite a topic mismatch")
    new_library: bool = Field(
        default=False,
        description="move the library file aside (renamed, never deleted) and start a new library with this topic",
    )
    search_url: str | None = Field(default=None, description="arXiv Atom endpoint (default arXiv's)")
    openalex_url: str | None = Field(default=None, description="OpenAlex works endpoint (default OpenAlex's)")

    def round_settings(self) -> RoundSettings | None:
        """The settings a new round stores, or None to follow the previous round's."""
        if not self.topic or not self.topic.strip():
            return None
        fields = self.model_dump(include=set(RoundSettings.model_fields) - {"invocation"})  # new_library: not stored
        return RoundSettings(**{**fields, "topic": self.topic.strip()}, invocation=self.invocation)
