"""Persists each proximity asset's value in its seed format inside the partition's input folder.

One table says how each asset is written and read; one path function (``Inputs.root``) turns the
partition key (an input id) into the folder. It is the only writer of these files; the step-4,
library and case assets write through their domain's journal instead and return
``MaterializeResult``. ``hypothesis_texts`` has no seed format: its snapshot goes to
``<input>/.hypograph/assets/hypothesis_texts.json``.
"""

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from dagster import ConfigurableIOManager, InputContext, MetadataValue, OutputContext

from hypograph.atomic import write_json
from hypograph.hypotheses import corpus_document, corpus_from_document
from hypograph.paths import TEXTS_SNAPSHOT
from hypograph.proximity import store
from resources.inputs import Inputs

TEXTS = TEXTS_SNAPSHOT


class Codec(NamedTuple):
    write: Callable[[Path, Any], list[Path]]  # (input root, value) -> files written
    read: Callable[[Path], Any]  # input root -> value


def _write_texts(root: Path, corpus) -> list[Path]:
    write_json(root / TEXTS, corpus_document(corpus))
    return [root / TEXTS]


def _read_texts(root: Path):
    return corpus_from_document(json.loads((root / TEXTS).read_text(encoding="utf-8")))


CODECS: dict[str, Codec] = {
    "hypothesis_texts": Codec(_write_texts, _read_texts),
    "hypothesis_embeddings": Codec(store.write_embeddings, store.read_embeddings),
    "similarity_graph": Codec(lambda r, g: [store.write_graph(r, g)], lambda r: store.load_graph(r)[0]),
    "proximity_clusters": Codec(store.write_clusters, store.read_clusters),
    "duplicate_pairs": Codec(lambda r, p: [store.write_dupes(r, p)], store.read_dupes),
    "dedup_verdicts": Codec(lambda r, v: [store.write_verdicts(r, v)], store.read_verdicts),
    "cluster_labels": Codec(lambda r, n: [store.write_cluster_names(r, n)], store.read_cluster_names),
}


class HypographIOManager(ConfigurableIOManager):
    """Writes and reads asset values as files in the input folder named by the partition key."""

    inputs: Inputs

    def handle_output(self, context: OutputContext, obj) -> None:
        root, name = self.inputs.root(context.partition_key), context.asset_key.path[-1]
        paths = _codec(name).write(root, obj)
        context.add_output_metadata(
            {"path": MetadataValue.path(str(paths[0])), "files": MetadataValue.md("\n".join(f"- `{p}`" for p in paths))}
        )

    def load_input(self, context: InputContext):
        root, name = self.inputs.root(context.partition_key), context.upstream_output.asset_key.path[-1]
        return _codec(name).read(root)


def _codec(name: str) -> Codec:
    try:
        return CODECS[name]
    except KeyError:
        raise KeyError(f"HypographIOManager has no format for asset {name!r}") from None
