"""Where each input partition lives: the partition key is the input folder's absolute path."""

from pathlib import Path

from dagster import ConfigurableResource
from pydantic import Field

from hypograph.errors import HypographError


class Inputs(ConfigurableResource):
    """Resolves partition keys to input folders; ``workspace`` is where the discovery sensor looks."""

    workspace: str | None = Field(
        default=None, description="folder whose sub-folders the inputs_discovered sensor registers as inputs",
    )

    def root(self, partition_key: str | None) -> Path:
        """The input folder of ``partition_key``; an error if the key is not an existing absolute path."""
        if not partition_key:
            raise HypographError("this asset is partitioned by input: pick an input partition (its folder's path)")
        path = Path(partition_key)
        if not path.is_absolute():
            raise HypographError(f"input partition {partition_key!r}: not an absolute path")
        if not path.is_dir():
            raise HypographError(f"input partition {partition_key}: no such directory (moved or deleted?)")
        return path

    @staticmethod
    def state_dir(root: Path) -> Path:
        """The tool's own state inside an input: ``<root>/.hypograph``."""
        return root / ".hypograph"
