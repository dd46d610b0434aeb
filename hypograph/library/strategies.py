"""The two generation axes' framing, read from a data file (library rounds, "The Two Axes").

Discovery lenses (behavior axis, discover only) and mechanism-combination strategies (mechanism
axis) are data, not code: the package ships the seed's four lenses and five strategies in
``data/strategies.json``; a project can pass its own file with the same shape. A strategy's
``directions`` are taken from here, never from a model's answer.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from hypograph.atomic import read_regular
from hypograph.errors import HypographError
from hypograph.library.schema import field_path

STRATEGIES_MAX = 1 << 20  # a strategies file is a few kB; a larger one is refused unread


class Lens(BaseModel):
    name: str = Field(min_length=1)
    prompt: str = ""


class CombinationStrategy(BaseModel):
    name: str = Field(min_length=1)
    directions: list[str] = Field(min_length=1)


class Strategies(BaseModel):
    discovery_lenses: list[Lens] = Field(min_length=1)
    combination_strategies: list[CombinationStrategy] = Field(min_length=1)
    five_bars: list[str] = ["real", "nonobvious", "specific", "robust", "tractable"]

    def directions(self, strategy: str) -> list[str]:
        return next(s.directions for s in self.combination_strategies if s.name == strategy)

    @property
    def lens_names(self) -> list[str]:
        return [lens.name for lens in self.discovery_lenses]

    @property
    def strategy_names(self) -> list[str]:
        return [s.name for s in self.combination_strategies]


def load_strategies(path: Path | None = None) -> Strategies:
    """The strategies of ``path``, or the packaged defaults (the seed's four lenses and five strategies)."""
    if path is None:
        text = resources.files("hypograph.library").joinpath("data/strategies.json").read_text(encoding="utf-8")
        where = "hypograph/library/data/strategies.json"
    else:
        try:
            text = read_regular(Path(path), STRATEGIES_MAX, follow=True).decode("utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise HypographError(f"{path}: cannot read the strategies file ({e})") from None
        where = str(path)
    try:
        return Strategies.model_validate_json(text)
    except ValidationError as e:
        err = e.errors()[0]
        raise HypographError(f"{where}: field {field_path(err['loc'])}: {err['msg']}") from None
