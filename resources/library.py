"""Library round settings (docs/library.md), as run config: the Launchpad form for one round."""

from typing import Literal

from dagster import ConfigurableResource
from pydantic import Field

from hypograph.library.rounds import RoundSettings
from hypograph.proximity.embed import Backend


class LibrarySettings(ConfigurableResource):
    """What a new round is asked to do. Leave ``topic`` empty to follow the previous round's settings
    (what the schedule does); a round that already generated always keeps its own."""

    topic: str | None = Field(default=None, description="the library's topic; empty: as the previous round")
    behavior_source: Literal["discover", "given"] = Field(default="discover", description="library rounds mode")
    behavior: str | None = Field(default=None, description="given mode: a behavior id (B3) or one sentence")
    n_behaviors: int = Field(default=10, ge=1, le=100, description="new behaviors per round (discover)")
    web: bool = Field(default=True, description="ground the referees with arXiv and OpenAlex searches")
    search_url: str | None = Field(default=None, description="arXiv Atom endpoint (default arXiv's)")
    openalex_url: str | None = Field(default=None, description="OpenAlex works endpoint (default OpenAlex's)")
    banlist_budget: int = Field(default=6000, ge=200, description="tokens of banlist pasted per generation prompt")
    embedder: Backend = Field(
        default="sbert",
        description="embeddings that pick the neighbours the model judges each candidate against (sbert: MiniLM)",
    )
    strategies_file: str | None = Field(default=None, description="JSON file of lenses and strategies")
    invocation: str | None = Field(
        default=None,
        description="trace folder and batch stamp to share (default: the CLI invocation's, else this run's)",
    )

    def round_settings(self) -> RoundSettings | None:
        if not self.topic:
            return None
        return RoundSettings(
            topic=self.topic,
            behavior_source=self.behavior_source,
            behavior=self.behavior,
            n_behaviors=self.n_behaviors,
            web=self.web,
            banlist_budget=self.banlist_budget,
            embedder=self.embedder,
            strategies_file=self.strategies_file,
        )
