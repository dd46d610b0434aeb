"""Where each input lives: a partition key is a registered input's id (``hypograph/inputs.py``)."""

from pathlib import Path

from dagster import ConfigurableResource
from pydantic import Field

from hypograph import environment
from hypograph.inputs import InputRecord, Registry, split_sub_key
from hypograph.paths import OURS
from hypograph.paths import state_dir as checked_state_dir

REGISTRY_FILE = "inputs.json"


def dagster_home() -> Path:
    """``$DAGSTER_HOME`` if set, else ``~/.hypograph/dagster``: the instance every command and the
    UI share, and beside it the input registry."""
    return Path(environment.other("DAGSTER_HOME") or Path.home() / OURS / "dagster").resolve()


class Inputs(ConfigurableResource):
    """Resolves partition keys (input ids, ``<id>/r0001`` for rounds and revisions) to folders;
    ``workspace`` is where the ``inputs_discovered`` sensor looks for new inputs."""

    workspace: str | None = Field(
        default=None,
        description="folder whose sub-folders the inputs_discovered sensor registers as inputs",
    )
    registry_file: str | None = Field(
        default=None,
        description="the input registry (id -> folder); default $DAGSTER_HOME/inputs.json",
    )

    def registry(self) -> Registry:
        return Registry(Path(self.registry_file) if self.registry_file else dagster_home() / REGISTRY_FILE)

    def root(self, partition_key: str) -> Path:
        """The folder of input ``partition_key``; a one-line error if it is unknown or gone."""
        return self.registry().resolve(partition_key)

    def record(self, partition_key: str) -> InputRecord:
        """The registered input ``partition_key`` (id, folder, kind); an error as ``root``'s."""
        self.root(partition_key)
        return self.registry().get(partition_key)

    def sub_root(self, partition_key: str) -> tuple[Path, str]:
        """(input folder, ``r0001``) of a round or revision key ``<id>/r0001``."""
        where = split_sub_key(partition_key)
        return self.root(where.input), where.sub

    @staticmethod
    def state_dir(root: Path) -> Path:
        """The tool's own state inside an input: ``<root>/.hypograph``, refused (one line) when
        it is a symlink (``hypograph.paths.state_dir``)."""
        return checked_state_dir(root)
