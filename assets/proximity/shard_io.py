"""Where the values between the steps of a sharded run travel when steps run in processes of their
own: files under ``HYPOGRAPH_SHARD_STORAGE`` (any UPath) or ``$DAGSTER_HOME/storage/``, one per
step output, at the paths Dagster's ``FilesystemIOManager`` gives them (``<run id>/<step>/…``), in
``hypograph.proximity.shard_values``' format instead of pickles: a file someone with write access
to the storage plants between two steps is refused in one line, never run as code. In a
one-process run they stay in memory (``shard_io_manager``: the resource the sharded steps name).
"""

from __future__ import annotations

import os
from pathlib import Path

from dagster import FilesystemIOManager, InitResourceContext, InMemoryIOManager, InputContext, OutputContext
from dagster._core.storage.fs_io_manager import PickledObjectFilesystemIOManager  # its paths; not exported

from hypograph import environment
from hypograph.atomic import open_regular, write_atomic
from hypograph.errors import HypographError
from hypograph.proximity import shard_values

MAX_SHARD_BYTES = 16 << 30  # an edge block or the embeddings of millions of rows; a larger file is not read


class ShardFiles(PickledObjectFilesystemIOManager):
    """``FilesystemIOManager``'s layout, ``shard_values``' format. Each file records where it belongs
    (``<run id>/<step>/<output>`` under the storage), so a copy found at another run's or step's
    place is refused; a local file is read only if it is a regular file (a FIFO never blocks a
    step, a symlink is not followed out of the storage)."""

    def _at(self, path) -> str:
        return path.relative_to(self._base_path).as_posix()

    def dump_to_path(self, context: OutputContext, obj, path) -> None:
        data = shard_values.dump(obj, self._at(path))
        if path.protocol in ("", "file"):  # a shared folder: a reader sees the whole file or none
            write_atomic(Path(path.path), lambda fh: fh.write(data))
        else:  # object storage: an object appears whole when written
            with path.open("wb") as f:
                f.write(data)

    def load_from_path(self, context: InputContext, path):
        local = path.protocol in ("", "file")
        with os.fdopen(open_regular(Path(path.path)), "rb") if local else path.open("rb") as f:
            size = f.seek(0, 2)
            if size > MAX_SHARD_BYTES:
                raise HypographError(f"{path}: {size} bytes, over the {MAX_SHARD_BYTES}-byte shard limit; not read")
            f.seek(0)
            return shard_values.load(f, str(path), self._at(path))


class ShardIOManager(FilesystemIOManager):
    """``FilesystemIOManager`` (same ``base_dir`` setting and default) writing ``ShardFiles``."""

    def create_io_manager(self, context: InitResourceContext) -> ShardFiles:
        return ShardFiles(base_dir=self.base_dir or context.instance.storage_directory())


def shard_storage(instance) -> str:
    """Where ``shard_io_manager`` writes a run's ranges when not in memory: ``HYPOGRAPH_SHARD_STORAGE``,
    else the instance's ``storage/`` folder (``FilesystemIOManager``'s default)."""
    return environment.current().shard_storage or instance.storage_directory()


class _RunMemory(InMemoryIOManager):
    """The ranges of a one-process run, kept in memory; a step that finds none of its input ran in
    another process than the step that made it, so the deployment's variables disagree."""

    def load_input(self, context: InputContext) -> object:
        try:
            return super().load_input(context)
        except KeyError:
            raise RuntimeError(
                f"{context.upstream_output.step_key}'s output is not in this process: every process of "
                f"this deployment (daemon, web server, Celery workers) needs the same HYPOGRAPH_EXECUTOR"
            ) from None


def shard_io_manager():
    """Where the row ranges of a sharded step travel: in memory when the run is one process (nothing
    written), else files under ``HYPOGRAPH_SHARD_STORAGE`` (any UPath: ``s3://…``, ``gs://…``, a
    folder every worker mounts) or ``$DAGSTER_HOME/storage/<run id>/`` (delete a finished run's
    folder at will), in a format loading cannot execute (``ShardFiles``)."""
    if environment.current().executor == "in_process":  # the executor ``pipelines/executor.py`` chose
        return _RunMemory()
    return ShardIOManager(base_dir=environment.current().shard_storage)
