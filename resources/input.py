"""The input a code location works on: a prox run directory or a vault."""

from pathlib import Path

from dagster import ConfigurableResource


class HypographInput(ConfigurableResource):
    """``path``: the run directory or vault. Tool state goes to ``<path>/.hypograph/``."""

    path: str

    @property
    def root(self) -> Path:
        return Path(self.path).resolve()

    @property
    def state_dir(self) -> Path:
        return self.root / ".hypograph"
