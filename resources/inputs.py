"""Where each input lives: a partition key is a registered input's id (``hypograph/inputs.py``).

The registry (id -> folder, kind) is kept in the Dagster instance's own key-value storage (the
``kvs`` table of its run storage, where Dagster keeps its own cursors: SQLite on one machine,
PostgreSQL for a team), so every process that opens the instance -- the CLI, the daemon, a run, a
Celery worker on another machine -- reads the same one; nothing of it is a local file. A registry
left as ``$DAGSTER_HOME/inputs.json`` by an earlier version is moved into the instance on first
use (the file is renamed ``inputs.json.moved-to-instance``).
"""

import contextlib
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from dagster import ConfigurableResource, DagsterInstance, InitResourceContext
from pydantic import Field, PrivateAttr

from hypograph import environment
from hypograph.errors import HypographError
from hypograph.inputs import REGISTRY_MAX, InputRecord, Registry, split_sub_key
from hypograph.locks import file_lock
from hypograph.paths import OURS
from hypograph.paths import state_dir as checked_state_dir

REGISTRY_FILE = "inputs.json"  # the registry of earlier versions, moved into the instance on first use
REGISTRY_KEY = "hypograph/inputs"  # its key in the instance's key-value storage
MOVED_SUFFIX = ".moved-to-instance"


def dagster_home() -> Path:
    """``$DAGSTER_HOME`` if set, else ``~/.hypograph/dagster``: the instance every command and the
    UI share, and beside it the input registry."""
    return Path(environment.other("DAGSTER_HOME") or Path.home() / OURS / "dagster").resolve()


class InstanceStore:
    """The registry as one JSON value of ``instance``'s key-value storage
    (``run_storage.get_cursor_values`` / ``set_cursor_values``), read bounded (``REGISTRY_MAX``).

    The key-value storage has no compare-and-set: a registration (read, add, write) is serialized
    by a lock file on this machine only. Two machines registering new inputs in the same second
    can lose one of the two entries; an input under ``HYPOGRAPH_WORKSPACE`` is then registered
    again by the ``inputs_discovered`` sensor's next tick, another is ``hypograph add``ed again.
    """

    def __init__(self, instance: DagsterInstance):
        self.instance = instance
        self.name = f"the input registry in the Dagster instance (key {REGISTRY_KEY})"

    def read(self) -> bytes | None:
        value = self.instance.run_storage.get_cursor_values({REGISTRY_KEY}).get(REGISTRY_KEY)
        if value is None:
            return self._migrate()
        raw = value.encode("utf-8")
        if len(raw) > REGISTRY_MAX:
            raise HypographError(f"{self.name}: {len(raw)} bytes, over {REGISTRY_MAX}; not read")
        return raw

    def write(self, entries: dict) -> None:
        self.instance.run_storage.set_cursor_values({REGISTRY_KEY: json.dumps(entries, sort_keys=True)})

    def lock(self):
        storage = self._storage_identity()
        return file_lock(Path(tempfile.gettempdir()) / f"hypograph-inputs-{storage}.lock")

    def _storage_identity(self) -> str:
        """A digest of the instance's run storage configuration (the same on every machine of a
        team: the ``env:`` references, not their values), so one machine's processes share a lock."""
        try:
            ref = self.instance.get_ref().run_storage_data
            text = f"{ref.module_name}:{ref.class_name}:{ref.config_yaml}:{self.instance.root_directory}"
        except Exception:  # noqa: BLE001 - an ephemeral instance has no ref: its own process only
            text = f"ephemeral:{os.getpid()}:{id(self.instance)}"
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def _migrate(self) -> bytes | None:
        """An earlier version's ``$DAGSTER_HOME/inputs.json``, copied into the instance and
        renamed; None when there is none. Idempotent when two processes do it at once."""
        try:
            legacy = Path(self.instance.root_directory) / REGISTRY_FILE
        except Exception:  # noqa: BLE001 - an ephemeral instance has no folder, so no old file
            return None
        raw = Registry(legacy).store.read()
        if raw is None:
            return None
        entries = Registry(legacy)._read()  # a malformed file: one line naming it, nothing moved
        self.write(entries)
        with contextlib.suppress(FileNotFoundError):  # another process moved it first
            os.replace(legacy, legacy.with_name(REGISTRY_FILE + MOVED_SUFFIX))
        return json.dumps(entries).encode("utf-8")


def instance_registry(instance: DagsterInstance) -> Registry:
    """The input registry kept in ``instance``."""
    return Registry(InstanceStore(instance))


class Inputs(ConfigurableResource):
    """Resolves partition keys (input ids, ``<id>/r0001`` for rounds and revisions) to folders;
    ``workspace`` is where the ``inputs_discovered`` sensor looks for new inputs."""

    workspace: str | None = Field(
        default=None,
        description="folder whose sub-folders the inputs_discovered sensor registers as inputs",
    )
    registry_file: str | None = Field(
        default=None,
        description="a JSON file as the input registry (id -> folder), for tests and single-user "
        "setups; default: the registry kept in the Dagster instance, which every host sees",
    )
    _instance: Any = PrivateAttr(default=None)

    def setup_for_execution(self, context: InitResourceContext) -> None:
        self._instance = context.instance  # the run's (or sensor's) instance: the registry is in it

    def registry(self) -> Registry:
        if self.registry_file:
            return Registry(Path(self.registry_file))
        if self._instance is None:  # used outside a run or sensor: the instance of DAGSTER_HOME
            self._instance = DagsterInstance.from_config(str(dagster_home()))
        return instance_registry(self._instance)

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
