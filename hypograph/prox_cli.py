"""``prox``: the seed-003 command line, drop-in. Calls the domain functions directly (no Dagster),
so each command starts fast. Every error exits non-zero with one line on stderr.

    prox embed    --run-dir D [--backend tfidf|sbert] [--model NAME_OR_PATH]
    prox graph    --run-dir D [--threshold 0.3]
    prox clusters --run-dir D [--algorithm louvain|components]
    prox dupes    --run-dir D [--threshold 0.80]
    prox adjudicate --run-dir D [--auto-merge 0.92] [--llm offline]
    prox label    --run-dir D [--llm offline]

``--run-dir`` is a prox run directory (hypotheses/H-*.json) or a vault (hypotheses/*.md).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from hypograph.errors import HypographError

# Each subcommand imports the modules it runs inside its function, so `prox` starts fast.


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line on stderr (exit 2), like every other prox error."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: {message}\n")


def _run_dir(value: str) -> Path:
    path = Path(value)
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"{value}: no such directory")
    return path


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="prox", description="Proximity pipeline: embed, graph, clusters, dupes.")
    sub = p.add_subparsers(dest="command", required=True)

    def command(name: str, help: str) -> argparse.ArgumentParser:
        c = sub.add_parser(name, help=help)
        c.add_argument("--run-dir", type=_run_dir, required=True, help="run directory or vault")
        return c

    c = command("embed", "vectorise hypothesis texts -> proximity/embeddings.npz, embedding-ids.json")
    c.add_argument("--backend", choices=["tfidf", "sbert"], default="tfidf")
    c.add_argument("--model", default=None, help="sbert model name or local path (default all-MiniLM-L6-v2, offline)")
    c = command("graph", "similarity graph -> proximity/graph.json")
    c.add_argument("--threshold", type=float, default=0.30)
    c = command("clusters", "communities -> proximity/clusters.json, cluster fields in graph.json")
    c.add_argument("--algorithm", choices=["louvain", "components"], default="louvain")
    c = command("dupes", "near-duplicate pairs as a JSON array on stdout (and proximity/dupes.json)")
    c.add_argument("--threshold", type=float, default=0.80)
    c = command("adjudicate", "MERGE/KEEP/FLAG each duplicate pair -> proximity/verdicts.json")
    c.add_argument("--auto-merge", type=float, default=0.92, help="similarity above which a pair merges without a model")
    c.add_argument("--llm", choices=["auto", "offline"], default="auto", help="offline: never call a model")
    c = command("label", "descriptive cluster names -> proximity/cluster-labels.json")
    c.add_argument("--llm", choices=["auto", "offline"], default="auto", help="offline: keyword labels only")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        from hypograph.hypotheses import check_input

        check_input(args.run_dir)  # no command reads or writes through a forbidden symlink
        return COMMANDS[args.command](args)
    except HypographError as e:
        print(f"prox {args.command}: {e}", file=sys.stderr)
        return 1
    except Exception as e:  # a corrupt file deep in numpy or zipfile: still one line, no traceback
        print(f"prox {args.command}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}", file=sys.stderr)
        return 1


def _embed(args) -> int:
    from hypograph.hypotheses import load_corpus
    from hypograph.proximity.embed import embed
    from hypograph.proximity.store import write_embeddings

    corpus = load_corpus(args.run_dir)
    for w in corpus.warnings:
        print(f"warning: {w}", file=sys.stderr)
    emb = embed(corpus.ids, corpus.texts, args.backend, args.model)
    paths = write_embeddings(args.run_dir, emb)
    print(f"embedded {len(emb.ids)} hypotheses with {emb.backend} ({emb.model}, dim {emb.dim}) -> {paths[0]}")
    return 0


def _graph(args) -> int:
    from hypograph.proximity.graph import similarity_graph
    from hypograph.proximity.store import read_embeddings, write_graph

    emb = read_embeddings(args.run_dir)
    graph = similarity_graph(emb.ids, emb.matrix, args.threshold, {"backend": emb.backend, "model": emb.model})
    path = write_graph(args.run_dir, graph)
    print(f"graph: {len(graph.ids)} nodes, {graph.num_edges} edges at similarity >= {graph.threshold} -> {path}")
    return 0


def _clusters(args) -> int:
    from hypograph.hypotheses import load_corpus
    from hypograph.proximity.communities import labelled_clusters, report_lines
    from hypograph.proximity.store import read_embeddings, read_graph, write_clusters

    graph, _ = read_graph(args.run_dir)
    corpus = load_corpus(args.run_dir)
    clusters = labelled_clusters(graph, dict(zip(corpus.ids, corpus.texts)), args.algorithm, terms=read_embeddings(args.run_dir))
    paths = write_clusters(args.run_dir, clusters)
    print(f"{clusters.num_clusters} clusters ({clusters.algorithm}) -> {paths[0]}")
    for line in report_lines(clusters):
        print(line)
    return 0


def _dupes(args) -> int:
    from hypograph.proximity.dupes import duplicate_pairs
    from hypograph.proximity.store import dupes_document, read_graph, write_dupes

    graph, _ = read_graph(args.run_dir)
    pairs = duplicate_pairs(graph, args.threshold)
    write_dupes(args.run_dir, pairs)
    print(json.dumps(dupes_document(pairs), indent=2))
    return 0


def _llm_client(args, task: str):
    from hypograph.llm import LLMClient, LLMConfig

    return LLMClient(LLMConfig.from_env(offline=args.llm == "offline"), args.run_dir / ".hypograph", task)


def _adjudicate(args) -> int:
    from hypograph.hypotheses import load_corpus
    from hypograph.proximity.adjudicate import adjudicate, read_reviews, review_queue
    from hypograph.proximity.store import read_dupes, write_verdicts

    pairs = read_dupes(args.run_dir)
    corpus = load_corpus(args.run_dir)
    client = _llm_client(args, "dedup_verdicts")
    decisions = adjudicate(pairs, {h.id: h for h in corpus.hypotheses}, read_reviews(args.run_dir), client, args.auto_merge)
    path = write_verdicts(args.run_dir, decisions)
    usage = client.usage
    print(f"{len(decisions)} decisions (llm: {client.config.describe()}; {usage.calls} calls, {usage.cached} cached, "
          f"{usage.rejected} rejected) -> {path}")
    for d in decisions:
        print(f"  {d.verdict:<5} {d.pair[0]} {d.pair[1]} {d.similarity:.4f} [{d.decided_by}]")
    queue = review_queue(decisions)
    if queue:
        print(f"review queue: {len(queue)} pair(s) — record verdicts in {args.run_dir / 'proximity' / 'review.json'}")
    return 0


def _label(args) -> int:
    from hypograph.hypotheses import load_corpus
    from hypograph.proximity.cluster_names import name_clusters
    from hypograph.proximity.store import read_clusters, write_cluster_names

    clusters = read_clusters(args.run_dir)
    corpus = load_corpus(args.run_dir)
    client = _llm_client(args, "cluster_labels")
    names = name_clusters(clusters, {h.id: h for h in corpus.hypotheses}, client)
    path = write_cluster_names(args.run_dir, names)
    print(f"{len(names)} cluster names (llm: {client.config.describe()}) -> {path}")
    for label, members in clusters.clusters.items():
        print(f"{label}: {names[label]['label']} ({', '.join(members)})")
    return 0


COMMANDS = {"embed": _embed, "graph": _graph, "clusters": _clusters, "dupes": _dupes,
            "adjudicate": _adjudicate, "label": _label}

if __name__ == "__main__":
    sys.exit(main())
