"""Persists the proximity assets as prox's own files under ``<root>/proximity/``.

``hypothesis_texts`` has no seed format; its snapshot goes to ``<root>/.hypograph/assets/``.
"""

import json
from pathlib import Path

from dagster import ConfigurableIOManager, InputContext, OutputContext

from hypograph.atomic import write_json
from hypograph.hypotheses import corpus_document, corpus_from_document
from hypograph.proximity import store


class ProximityIOManager(ConfigurableIOManager):
    """``root``: the run directory or vault the assets describe."""

    root: str

    def _texts_path(self) -> Path:
        return Path(self.root) / ".hypograph" / "assets" / "hypothesis_texts.json"

    def handle_output(self, context: OutputContext, obj) -> None:
        root, name = Path(self.root), context.asset_key.path[-1]
        if name == "hypothesis_texts":
            write_json(self._texts_path(), corpus_document(obj))
            paths = [self._texts_path()]
        elif name == "hypothesis_embeddings":
            paths = store.write_embeddings(root, obj)
        elif name == "similarity_graph":
            paths = [store.write_graph(root, obj)]
        elif name == "proximity_clusters":
            paths = store.write_clusters(root, obj)
        elif name == "duplicate_pairs":
            paths = [store.write_dupes(root, obj)]
        elif name == "dedup_verdicts":
            paths = [store.write_verdicts(root, obj)]
        elif name == "cluster_labels":
            paths = [store.write_cluster_names(root, obj)]
        else:
            raise KeyError(f"ProximityIOManager does not persist asset {name!r}")
        context.add_output_metadata({"files": ", ".join(str(p) for p in paths)})

    def load_input(self, context: InputContext):
        root, name = Path(self.root), context.upstream_output.asset_key.path[-1]
        if name == "hypothesis_texts":
            return corpus_from_document(json.loads(self._texts_path().read_text(encoding="utf-8")))
        if name == "hypothesis_embeddings":
            return store.read_embeddings(root)
        if name == "similarity_graph":
            return store.read_graph(root)[0]
        if name == "proximity_clusters":
            return store.read_clusters(root)
        if name == "duplicate_pairs":
            return store.read_dupes(root)
        if name == "dedup_verdicts":
            return store.read_verdicts(root)
        if name == "cluster_labels":
            return store.read_cluster_names(root)
        raise KeyError(f"ProximityIOManager does not load asset {name!r}")
