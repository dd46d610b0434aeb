"""``prox``: the proximity tool's command line, drop-in. Calls the domain functions directly (no Dagster),
so each command starts fast. Every error exits non-zero with one line on stderr.

    prox embed    --run-dir D [--backend tfidf|sbert] [--model seed|tuned|NAME_OR_PATH]
    prox graph    --run-dir D [--threshold 0.3] [--max-neighbours K]
    prox clusters --run-dir D [--algorithm louvain|components]
    prox dupes    --run-dir D [--threshold 0.80]
    prox adjudicate --run-dir D [--auto-merge 0.92] [--llm offline]
    prox label    --run-dir D [--llm offline]

``--run-dir`` is a prox run directory (hypotheses/H-*.json) or a vault (hypotheses/*.md). Every
subcommand takes ``--json``: its record (``hypograph_cli/records.py``: ``Prox``) as one JSON
document on stdout, its lines on stderr; exit codes unchanged (``hypograph_cli/outcome.py``, but a
usage error is 2, as the original tool's).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import signal
import sys
import threading
from pathlib import Path

from hypograph.errors import HypographError
from hypograph.paths import OURS
from hypograph.proximity.defaults import DEFAULT_DUPE_THRESHOLD, SEED_MAX_NEIGHBOURS
from hypograph_cli import settings

# Each subcommand imports the modules it runs inside its function, so `prox` starts fast.


USAGE = 2  # prox's own code for a usage error (the original tool's, through argparse); a refusal is 1


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line on stderr (exit 2), like every other prox error."""

    draft = None  # the command's record (``outcome.Draft``): it keeps the line for --json

    def error(self, message: str):
        if self.draft is not None:
            self.draft.error, self.draft.status = message, "refused"  # 2 here is no "not done"
        self.exit(USAGE, f"{self.prog}: {message}\n")


def _run_dir(value: str) -> Path:
    path = Path(value)
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"{value}: no such directory")
    return path


def _parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="prox", description="Proximity pipeline: embed, graph, clusters, dupes.", formatter_class=settings.Help
    )
    sub = p.add_subparsers(dest="command", required=True)

    def command(name: str, help: str) -> argparse.ArgumentParser:
        c = sub.add_parser(name, help=help, formatter_class=settings.Help)
        c.add_argument("--run-dir", type=_run_dir, required=True, help="run directory or vault")
        return c

    def field(c, flag: str, name: str, **kwargs):  # argparse's type, choices and default: the model's
        return settings.option(c, flag, "proximity", name, typed=True, **kwargs)

    c = command("embed", "vectorise hypothesis texts -> proximity/embeddings.npz, embedding-ids.json")
    field(c, "--backend", "backend")
    field(
        c,
        "--model",
        "model",
        help="tfidf: seed (default: the original prox's TfidfVectorizer() defaults) or tuned "
        "(English stop words dropped, sublinear tf); sbert: model name or local path "
        "(default all-MiniLM-L6-v2, offline)",
    )
    c = command("graph", "similarity graph -> proximity/graph.json (and graph.npz for the next steps)")
    field(c, "--threshold", "graph_threshold", help="edge when cosine >= this; 0: every pair")
    field(
        c,
        "--max-neighbours",
        "max_neighbours",
        default=SEED_MAX_NEIGHBOURS,  # the seed's graph; the model's cap is the Dagster assets'
        metavar="K",
        help=f"keep only each node's K strongest edges, and every pair >= {DEFAULT_DUPE_THRESHOLD:.2f} whatever K; "
        "0: every edge at or above the threshold, the original prox's graph",
    )
    c = command("clusters", "communities -> proximity/clusters.json, cluster fields in graph.json")
    field(c, "--algorithm", "algorithm")
    c = command("dupes", "near-duplicate pairs as a JSON array on stdout (and proximity/dupes.json)")
    field(c, "--threshold", "dupe_threshold")
    c = command("adjudicate", "MERGE/KEEP/FLAG each duplicate pair -> proximity/verdicts.json")
    field(c, "--auto-merge", "auto_merge", help="similarity above which a pair merges without a model")
    c.add_argument("--llm", choices=["auto", "offline"], default="auto", help="offline: never call a model")
    c = command("label", "descriptive cluster names -> proximity/cluster-labels.json")
    c.add_argument("--llm", choices=["auto", "offline"], default="auto", help="offline: keyword labels only")
    for parser in (p, *sub.choices.values()):
        parser.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help=JSON_HELP)
    return p


JSON_HELP = "print the command's record as one JSON document on stdout (docs/json.md), the rest on stderr"


def main(argv: list[str] | None = None) -> int:
    """The exit code of ``prox ARGV``; with ``--json``, its record alone on stdout (its lines on stderr)."""
    from hypograph_cli import EARLY_SIGNALS
    from hypograph_cli.outcome import Draft

    if threading.current_thread() is threading.main_thread():  # prox dies by SIGTERM, as it always did
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if EARLY_SIGNALS:  # one that came while importing (the package's handler kept it)
            os.kill(os.getpid(), signal.SIGTERM)
    argv = sys.argv[1:] if argv is None else argv
    words = [a for a in argv if not a.startswith("-")]
    draft = Draft(" ".join(["prox", *words[:1]]), "--json" in argv)
    if not draft.as_json:
        return _parsed(argv, draft)
    out, lines = sys.stdout, io.StringIO()
    with contextlib.redirect_stdout(lines):
        code = _parsed(argv, draft)
    sys.stderr.write(lines.getvalue())
    if draft.result is not None:
        draft.result.lines = lines.getvalue().splitlines()
    out.write(draft.dumps(code))
    return code


def _parsed(argv: list[str], draft) -> int:
    from hypograph.text import printable_output

    parser = _parser()
    for p in (parser, *parser._subparsers._group_actions[0].choices.values()):
        p.draft = draft
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help (0) or a usage error (2, its line said)
        return e.code if isinstance(e.code, int) else USAGE
    args.draft = draft
    with printable_output():  # what a command prints from data (titles, ids, paths, errors): escaped
        return _main(args)


def _main(args) -> int:
    try:
        from hypograph import environment
        from hypograph.paths import check_input

        environment.current()  # every HYPOGRAPH_* variable parsed and bounded before any file is read

        # No command reads or writes through a forbidden symlink. A run dir's hypotheses/ is
        # scanned by load_corpus in the commands that read it (100k files: 0.25 s per scan).
        check_input(args.run_dir, folders=("proximity", OURS))
        return COMMANDS[args.command](args)
    except BrokenPipeError:  # `| head` stopped reading: the rest goes to /dev/null, quietly, exit 0
        return os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno()) and 0
    except HypographError as e:
        return args.draft.failed(e)
    except Exception as e:  # a corrupt file deep in numpy or zipfile: still one line, no traceback
        return args.draft.refuse(f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}", 1)


def _note(lines: list[str]) -> None:
    for line in lines:
        print(f"note: {line}", file=sys.stderr)


def _embed(args) -> int:
    from hypograph.hypotheses import load_corpus
    from hypograph.proximity.embed import embed
    from hypograph.proximity.store import write_embeddings

    corpus = load_corpus(args.run_dir)
    for w in corpus.warnings:
        print(f"warning: {w}", file=sys.stderr)
    emb = embed(corpus.ids, corpus.texts, args.backend, args.model)
    paths = write_embeddings(args.run_dir, emb)
    _record(args, paths[0], hypotheses=len(emb.ids), dim=emb.dim)
    print(f"embedded {len(emb.ids)} hypotheses with {emb.backend} ({emb.model}, dim {emb.dim}) -> {paths[0]}")
    return 0


def _graph(args) -> int:
    from hypograph.proximity.graph import DEFAULT_DUPE_THRESHOLD, similarity_graph
    from hypograph.proximity.store import read_embeddings, write_graph

    emb = read_embeddings(args.run_dir)
    _note(emb.notes)
    graph = similarity_graph(emb.ids, emb.rows, args.threshold, args.max_neighbours, DEFAULT_DUPE_THRESHOLD)
    graph.embedding = emb.describe()
    path = write_graph(args.run_dir, graph)
    capped = graph.info.get("capped_rows", 0)
    _record(args, path, nodes=len(graph.ids), edges=graph.num_edges, capped=capped)
    print(
        f"graph: {len(graph.ids)} nodes, {graph.num_edges} edges at similarity >= {graph.threshold} "
        f"({graph.info.get('method')}; "
        + (
            f"{capped} nodes kept their {args.max_neighbours} strongest edges "
            f"and every pair >= {DEFAULT_DUPE_THRESHOLD}"
            if capped
            else "no node capped"
        )
        + f") -> {path}"
    )
    return 0


def _clusters(args) -> int:
    from hypograph.proximity.communities import find_communities, keyword_labels, report_lines
    from hypograph.proximity.store import load_graph, write_clusters

    graph, _ = load_graph(args.run_dir)
    clusters = find_communities(graph, args.algorithm)
    terms, texts = _label_sources(args.run_dir, graph.ids)
    clusters.keywords = keyword_labels(graph, clusters, terms, texts)
    paths = write_clusters(args.run_dir, clusters, graph)
    _record(args, paths[0], dict(clusters.clusters), clusters=clusters.num_clusters)
    print(f"{clusters.num_clusters} clusters ({clusters.algorithm}) -> {paths[0]}")
    for line in report_lines(clusters):
        print(line)
    return 0


def _label_sources(root: Path, ids: list[str]):
    """What the keyword labels can come from: our own TF-IDF rows of exactly these ids, else the
    hypothesis texts when the run directory has them; (None, None) for a graph.json alone."""
    from hypograph.hypotheses import load_corpus
    from hypograph.paths import check_input
    from hypograph.proximity.store import read_embeddings

    try:
        terms = read_embeddings(root)
        if terms.vocabulary is not None and terms.ids == ids and not terms.notes:
            return terms, None
    except HypographError:
        pass
    if not (root / "hypotheses").is_dir():
        return None, None
    check_input(root, folders=("hypotheses",))  # a symlinked folder is refused, not read around
    try:
        corpus = load_corpus(root)
    except HypographError:
        return None, None
    return None, dict(zip(corpus.ids, corpus.texts, strict=True))


def _dupes(args) -> int:
    from hypograph.proximity.dupes import pairs_at
    from hypograph.proximity.store import dupes_json, load_graph, read_embeddings, write_dupes

    def embeddings():  # read only below what the graph holds
        emb = read_embeddings(args.run_dir)
        _note(emb.notes)
        return emb

    graph, _ = load_graph(args.run_dir)
    pairs = pairs_at(graph, embeddings, args.threshold)
    path = write_dupes(args.run_dir, pairs)
    text = dupes_json(pairs).decode()
    _record(args, path, json.loads(text), pairs=len(pairs))
    print(text)
    return 0


def _llm_client(args, task: str):
    from hypograph.environment import llm_config
    from hypograph.llm import LLMClient

    return LLMClient(llm_config(offline=args.llm == "offline"), args.run_dir / OURS, task)


def _adjudicate(args) -> int:
    from hypograph.hypotheses import load_corpus
    from hypograph.proximity.adjudicate import (
        AdjudicationSettings,
        adjudicate,
        read_reviews,
        review_queue,
        unapplied_reviews,
    )
    from hypograph.proximity.embed import pair_similarity
    from hypograph.proximity.store import read_dupes, read_embeddings, write_verdicts

    pairs = read_dupes(args.run_dir)
    hypotheses = {h.id: h for h in load_corpus(args.run_dir).hypotheses}
    reviews = read_reviews(args.run_dir, hypotheses)
    for line in unapplied_reviews(reviews, hypotheses):
        print(f"warning: {line}", file=sys.stderr)
    client = _llm_client(args, "dedup_verdicts")
    # as the dedup_verdicts asset: a person's verdict on a pair below the dupe threshold gets its cosine
    decisions = adjudicate(
        pairs,
        hypotheses,
        reviews,
        client,
        AdjudicationSettings(auto_merge=args.auto_merge),
        similarity=pair_similarity(read_embeddings(args.run_dir)),
    )
    path = write_verdicts(args.run_dir, decisions)
    data = [
        {"a": d.pair[0], "b": d.pair[1], "similarity": float(d.similarity), "verdict": d.verdict} for d in decisions
    ]
    _record(args, path, data, decisions=len(decisions), review_queue=len(review_queue(decisions)))
    usage = client.usage
    print(
        f"{len(decisions)} decisions (llm: {client.config.describe()}; {usage.calls} calls, {usage.cached} cached, "
        f"{usage.rejected} rejected) -> {path}"
    )
    for d in decisions:
        print(f"  {d.verdict:<5} {d.pair[0]} {d.pair[1]} {d.similarity:.4f} [{d.decided_by}]")
    _usage(client)
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
    _record(args, path, {label: n["label"] for label, n in names.items()}, clusters=len(names))
    print(f"{len(names)} cluster names (llm: {client.config.describe()}) -> {path}")
    for label, members in clusters.clusters.items():
        print(f"{label}: {names[label]['label']} ({', '.join(members)})")
    _usage(client)
    return 0


def _record(args, path, data=None, **counts) -> None:
    """The command's record for ``--json`` (its lines are added when it returns)."""
    if args.draft.as_json:
        from hypograph_cli.records import Prox

        args.draft.result = Prox(run_dir=str(args.run_dir), path=str(path), counts=counts, lines=[], data=data)


def _usage(client) -> None:
    """How the model did on this command's task (nothing when no model was configured)."""
    from hypograph.llm import usage_line

    if not client.offline:
        print(f"llm {usage_line(client.metadata())}")


COMMANDS = {
    "embed": _embed,
    "graph": _graph,
    "clusters": _clusters,
    "dupes": _dupes,
    "adjudicate": _adjudicate,
    "label": _label,
}

if __name__ == "__main__":
    sys.exit(main())
