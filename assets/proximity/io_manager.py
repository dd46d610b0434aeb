"""Persists each proximity asset's value in its seed format inside the partition's input folder.

One table says how each asset is written and read; one path function (``Inputs.root``) turns the
partition key (an input id) into the folder. It is the only writer of these files; the step-4,
library and case assets write through their domain's journal instead and return
``MaterializeResult``. ``hypothesis_texts`` has no seed format: its snapshot goes to
``<input>/.hypograph/assets/hypothesis_texts.json``.

A step of a run that is no longer the newest of its partition, or has ended, writes nothing: it
fails with one line (``fence.py``), asked and written under the input's publish lock.
"""

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from dagster import ConfigurableIOManager, InputContext, MetadataValue, OutputContext

from assets.errors import Unloaded
from assets.proximity.fence import publish
from hypograph.atomic import DATA_MAX, read_regular, write_atomic
from hypograph.errors import HypographError
from hypograph.hypotheses import Corpus, corpus_from_json, corpus_json
from hypograph.paths import TEXTS_SNAPSHOT
from hypograph.proximity import store
from resources.inputs import Inputs

TEXTS = TEXTS_SNAPSHOT


class Codec(NamedTuple):
    write: Callable[[Path, Any], list[Path]]  # (input root, value) -> files written
    read: Callable[[Path], Any]  # input root -> value
    file: str  # the file whose absence means the asset was never made for this input


def _write_texts(root: Path, corpus: Corpus) -> list[Path]:
    path = root / TEXTS
    raw = corpus_json(corpus)
    write_atomic(path, lambda fh: fh.write(raw))
    _LAST_TEXTS.clear()
    _LAST_TEXTS[_identity(path)] = corpus
    return [path]


def _read_texts(root: Path) -> Corpus:
    """The snapshot's corpus, parsed once per process while the file stays the same: every step of
    a run that takes the texts (five in the proximity job) would otherwise parse all of them again."""
    path = root / TEXTS
    key = _identity(path)
    if key not in _LAST_TEXTS:
        corpus = corpus_from_json(read_regular(path, DATA_MAX, follow=True))
        _LAST_TEXTS.clear()
        _LAST_TEXTS[key] = corpus
    return _LAST_TEXTS[key]


# The one snapshot last written or read in this execution, by its file's identity (cleared when
# the IO manager is torn down, at the end of a run, or of a step in a process of its own).
_LAST_TEXTS: dict[tuple, Corpus] = {}


def _identity(path: Path) -> tuple:
    """What changes when the file is replaced (``write_atomic`` renames a new inode into place)."""
    st = os.stat(path)
    return (str(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


CODECS: dict[str, Codec] = {
    "hypothesis_texts": Codec(_write_texts, _read_texts, TEXTS),
    "hypothesis_embeddings": Codec(store.write_embeddings, store.read_embeddings, "proximity/embeddings.npz"),
    "similarity_graph": Codec(
        lambda r, g: [store.write_graph(r, g)], lambda r: store.load_graph(r)[0], "proximity/graph.json"
    ),
    "proximity_clusters": Codec(store.write_clusters, store.read_clusters, "proximity/clusters.json"),
    "duplicate_pairs": Codec(lambda r, p: [store.write_dupes(r, p)], store.read_dupes, "proximity/dupes.json"),
    "dedup_verdicts": Codec(lambda r, v: [store.write_verdicts(r, v)], store.read_verdicts, "proximity/verdicts.json"),
    "cluster_labels": Codec(
        lambda r, n: [store.write_cluster_names(r, n)], store.read_cluster_names, "proximity/cluster-labels.json"
    ),
}
MAKER = "proximity"  # the job that makes every asset above (the command: `hypograph proximity`)


class HypographIOManager(ConfigurableIOManager):
    """Writes and reads asset values as files in the input folder named by the partition key."""

    inputs: Inputs

    def handle_output(self, context: OutputContext, obj) -> None:
        root, name = self.inputs.root(context.partition_key), context.asset_key.path[-1]
        codec = _codec(name)
        try:
            paths = publish(
                context.step_context.instance, context.run_id, context.asset_key, root, lambda: codec.write(root, obj)
            )
        except HypographError as e:
            context.log.error(str(e))
            raise
        context.add_output_metadata(
            {"path": MetadataValue.path(str(paths[0])), "files": MetadataValue.md("\n".join(f"- `{p}`" for p in paths))}
        )

    def load_input(self, context: InputContext):
        """The upstream asset's value, read from its files. An input declared ``dagster_type=Any``
        (one made by another job) is given ``Unloaded`` instead of an error, so its step ends in
        one line: nothing red when the asset was never made for this input."""
        key, name = context.partition_key, context.upstream_output.asset_key.path[-1]
        root = self.inputs.root(key)
        if context.dagster_type.key != "Any":
            return _codec(name).read(root)
        try:
            return never_made(root, key, name) or _codec(name).read(root)
        except HypographError as e:
            return Unloaded(str(e), missing=False)

    def teardown_after_execution(self, context) -> None:
        _LAST_TEXTS.clear()  # a long-lived worker process holds no corpus between runs


def never_made(root: Path, key: str, name: str) -> Unloaded | None:
    """``Unloaded`` when asset ``name`` was never made for input ``root`` (partition ``key``): its
    line names the job that makes it and the command that runs that job."""
    file = _codec(name).file
    if (root / file).exists():
        return None
    return Unloaded(
        f"{file}: missing — launch the `{MAKER}` job on {key} first (its Materialize button), "
        f"or run `hypograph {MAKER} {root}`",
        missing=True,
    )


def _codec(name: str) -> Codec:
    try:
        return CODECS[name]
    except KeyError:
        raise KeyError(f"HypographIOManager has no format for asset {name!r}") from None
