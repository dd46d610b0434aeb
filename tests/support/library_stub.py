"""A "smart" model for library rounds behind the LLM stub, and a local Atom search server.

``LibraryModel`` answers the library tasks from what the request asks (never the network), as a
careful person who knows the answers would:

* generation: the next scripted answer of ``rounds`` (a list of DiscoverAnswer / GivenAnswer
  dicts, one per generation call; ``behavior()`` and ``mechanisms()`` build them);
* dedup: reads each item and its numbered neighbours out of the prompt; an item whose text maps
  to a neighbour's text in ``paraphrases`` (the duplicates it knows) is a duplicate of that
  neighbour, anything else is new;
* topic guard: two topics are the same when ``topics`` puts them in one group;
* search queries: the first content words of the behavior and of its first mechanism;
* scoring: impact (with its dimensions) when the prompt asks for it, one novelty per numbered
  mechanism, closest = the retrieved paper P1 when papers were shown, else a known work.

``AtomServer`` serves an Atom feed (or an error status) at ``/api/query`` and records queries;
``OpenAlexServer`` serves OpenAlex works JSON at ``/works``.
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from llm_stub import RecordedRequest, Reply, answer

STRATEGIES = [
    "Mechanistic evidence",
    "Capability / editing",
    "Complete account",
    "Explaining a model",
    "Decision reliability",
]
LENSES = ["Cross-domain transfer", "Borrow from the human sciences", "Cross-modal transfer", "Reuse past CS results"]
BLOCK_RE = re.compile(r"<(candidate|neighbours|mechanisms|papers|behaviors|topics)[^>]*>\n(.*?)\n</\1>", re.S)
SAME_TOPICS = [
    {
        "LLM sycophancy",
        "sycophancy in large language models",
        "sycophancy in language models",
        "sycophancy of chat models",
    }
]
# words that carry no topic (a space-separated list: easier to read than 36 quoted items)
STOP_WORDS = (
    "a an and the of in on for to with by from is are be as at that this which into its it or not when than "
    "more less after their they user users model models"
)
STOP = set(STOP_WORDS.split())


def mechanism(strategy: str, text: str) -> dict:
    return {
        "strategy": strategy,
        "hypothesis": text,
        "boring_null": "A surface-feature shortcut explains the effect.",
        "data": {
            "provenance": "existing",
            "source": "SycophancyEval",
            "used_n": "n_pairs=500",
            "note": "Paired prompts with and without a stated user opinion.",
        },
        "model": ["Llama-3-8B"],
    }


OBJECTS = [
    [
        "a late-layer residual direction",
        "attention heads in layers 14-18",
        "an SAE feature family",
        "MLP neurons in the middle layers",
        "a linear probe direction",
    ],
    [
        "the key-value memory of early MLP blocks",
        "induction circuits spanning two heads",
        "a sparse set of gating units",
        "the unembedding subspace of agreement tokens",
        "a cross-layer transcoder feature",
    ],
]
TEMPLATES = [
    "For {tag}, {obj} causally carries the effect: ablating it removes the behavior with a dose-response "
    "under steering ({s}).",
    "Patching {obj} from a neutral run into the {tag} run localizes the shift; its rank-one edit flips outcomes ({s}).",
]


def mechanisms(tag: str, skip_last: bool = True, variant: int = 0) -> tuple[list[dict], list[dict]]:
    """One mechanism per strategy (the last skipped with a reason), texts made unique by ``tag``;
    ``variant`` 1 words them differently throughout."""
    used = STRATEGIES[:-1] if skip_last else STRATEGIES
    mechs = [mechanism(s, TEMPLATES[variant].format(tag=tag, obj=OBJECTS[variant][k], s=s)) for k, s in enumerate(used)]
    skipped = [{"strategy": STRATEGIES[-1], "reason": "No decision to audit for this behavior."}] if skip_last else []
    return mechs, skipped


def behavior(statement: str, lens: str = LENSES[0], tag: str | None = None, gaps: list[str] | None = None) -> dict:
    mechs, skipped = mechanisms(tag or statement[:40])
    return {
        "discovery_strategy": lens,
        "discovery_strategy_detail": f"Borrowed via {lens.lower()} from a known finding.",
        "statement": statement,
        "five_bars": {
            "real": "Seen in pilot logs.",
            "nonobvious": "Not predicted by scale alone.",
            "specific": "Names the trigger.",
            "robust": "Holds across prompts.",
            "tractable": "Testable on open models.",
        },
        "gaps": gaps or [],
        "mechanisms": mechs,
        "skipped": skipped,
    }


def given(tag: str, variant: int = 0) -> dict:
    mechs, skipped = mechanisms(tag, variant=variant)
    return {"mechanisms": mechs, "skipped": skipped}


def blocks(body: dict) -> dict[str, list]:
    out: dict[str, list] = {}
    for tag, text in BLOCK_RE.findall(RecordedRequest("", {}, body).prompt):
        out.setdefault(tag, []).append(json.loads(text))
    return out


def task(body: dict) -> str:
    system = RecordedRequest("", {}, body).system
    if system.startswith("You generate"):
        return "generation"
    if system.startswith("You judge"):
        return "dedup"
    if system.startswith("You are two referees"):
        return "score"
    if system.startswith("You write literature-search"):
        return "queries"
    if system.startswith("You decide whether two research topics"):
        return "topic"
    return "other"


def terms(text: str, n: int = 3) -> list[str]:
    words = [w for w in re.findall(r"[A-Za-z][A-Za-z\-]{3,}", text.lower()) if w not in STOP]
    return list(dict.fromkeys(words))[:n]


class LibraryModel:
    """Callable responder for ``LLMStub.always``; ``calls`` counts requests per task."""

    def __init__(
        self,
        rounds: list[dict] | None = None,
        paraphrases: dict[str, str] | None = None,
        impact: int = 7,
        novelty: int = 8,
        topics: list[set[str]] | None = None,
    ):
        self.rounds = list(rounds or [])
        self.paraphrases = dict(paraphrases or {})
        self.impact, self.novelty = impact, novelty
        self.topics = topics or SAME_TOPICS
        self.calls = {"generation": 0, "dedup": 0, "score": 0, "queries": 0, "topic": 0, "other": 0}
        self.queries: list[dict] = []
        self.generation_prompts: list[str] = []
        self.dedup_items: list[dict] = []
        self.lock = threading.Lock()

    def __call__(self, body: dict) -> Reply:
        kind = task(body)
        with self.lock:
            self.calls[kind] += 1
        handlers = {
            "generation": self.generation_answer,
            "dedup": self.dedup_answer,
            "score": self.score_answer,
            "queries": self.queries_answer,
            "topic": self.topic_answer,
        }
        if kind not in handlers:
            return Reply(status=500, error="library stub: unknown task")
        return answer(handlers[kind](body))

    def generation_answer(self, body: dict) -> dict:
        if len(body.get("messages", [])) > 2:  # a re-ask: the same round's answer again
            return self.last_generation
        self.generation_prompts.append(RecordedRequest("", {}, body).prompt)
        self.last_generation = self.rounds.pop(0) if self.rounds else {"behaviors": []}
        return self.last_generation

    def topic_answer(self, body: dict) -> dict:
        pair = blocks(body)["topics"][0]
        a, b = pair["library_topic"], pair["run_topic"]
        same = any(a in group and b in group for group in self.topics)
        return {"same": same, "reason": "the same phenomenon" if same else "another phenomenon"}

    def queries_answer(self, body: dict) -> dict:
        items = blocks(body)["behaviors"][0]
        out = [
            {
                "behavior": int(k),
                "behavior_terms": terms(v["behavior"]),
                "mechanism_terms": terms(v["mechanism_angle"][0].split(": ", 1)[-1])
                if v["mechanism_angle"]
                else terms(v["behavior"], 2),
            }
            for k, v in items.items()
        ]
        self.queries += out
        return {"queries": out}

    def dedup_answer(self, body: dict) -> dict:
        found = blocks(body)
        out = []
        for n, (cand, neigh) in enumerate(zip(found.get("candidate", []), found.get("neighbours", []), strict=True), 1):
            self.dedup_items.append({"text": cand["text"], "neighbours": list(neigh.values())})
            original = self.paraphrases.get(cand["text"])
            match = next((int(k) for k, v in neigh.items() if original and v == original), None)
            out.append(
                {"item": n, "verdict": "duplicate", "neighbour": match, "nuance": "Adds the expertise framing."}
                if match
                else {"item": n, "verdict": "new"}
            )
        return {"judgements": out}

    def score_answer(self, body: dict) -> dict:
        prompt = RecordedRequest("", {}, body).prompt
        found = blocks(body)
        mechs = found.get("mechanisms", [{}])[0]
        papers = found.get("papers", [{}])[0]
        impact = (
            {
                "importance": 8,
                "builders": "Alignment and evaluation teams.",
                "tractability": 7,
                "null_risk": 4,
                "score": self.impact,
                "rationale": "Matters for deployed assistants; alignment teams build on it.",
                "recommendation": "PROCEED",
            }
            if "Give the impact of the behavior" in prompt
            else None
        )
        closest = (
            {"closest_paper": 1}
            if papers
            else {"closest_paper": None, "closest_memory": "Perez et al. 2022, model-written evaluations"}
        )
        return {
            "impact": impact,
            "novelty": [
                {
                    "mechanism": int(k),
                    "score": self.novelty,
                    **closest,
                    "differentiation": "Localizes the effect instead of only measuring it.",
                }
                for k in mechs
            ],
        }


EMPTY_FEED = """<?xml version="1.0" encoding="UTF-8"?>
<feed xmlns="http://www.w3.org/2005/Atom"><title>ArXiv Query</title></feed>
"""
ATOM_FEED = """<?xml version="1.0" encoding="UTF-8"?>
<feed xmlns="http://www.w3.org/2005/Atom">
  <title>ArXiv Query</title>
  <entry>
    <id>http://arxiv.org/abs/2310.13548v1</id>
    <published>2023-10-20T17:00:00Z</published>
    <title>Towards Understanding Sycophancy in Language Models</title>
    <summary>Human feedback may encourage model responses that match user beliefs over truthful ones.</summary>
    <link href="http://arxiv.org/abs/2310.13548v1" rel="alternate" type="text/html"/>
  </entry>
  <entry>
    <id>http://arxiv.org/abs/2308.03958v1</id>
    <published>2023-08-07T00:00:00Z</published>
    <title>Simple synthetic data reduces sycophancy in large language models</title>
    <summary>Synthetic data intervention reduces sycophancy.</summary>
    <link href="http://arxiv.org/abs/2308.03958v1" rel="alternate" type="text/html"/>
  </entry>
</feed>
"""


class AtomServer:
    """``url`` is the query endpoint; ``status`` != 200 makes every answer that error;
    ``respond(search_query) -> feed`` picks the feed per query (default: always ``body``)."""

    def __init__(self, body: str = ATOM_FEED, status: int = 200, respond=None):
        self.body, self.status, self.queries, self.respond = body, status, [], respond
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                parts = urlsplit(self.path)
                query = parse_qs(parts.query)
                server.queries.append(query)
                text = server.respond(query.get("search_query", [""])[0]) if server.respond else server.body
                data = text.encode("utf-8")
                self.send_response(server.status if parts.path == "/api/query" else 404)
                self.send_header("Content-Type", "application/atom+xml")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/api/query"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


OPENALEX_WORKS = {
    "results": [
        {
            "id": "https://openalex.org/W4387245120",
            "doi": "https://doi.org/10.48550/arxiv.2310.13548",
            "display_name": "Towards Understanding Sycophancy in Language Models",
            "publication_year": 2023,
            "abstract_inverted_index": {"Human": [0], "feedback": [1], "encourages": [2], "sycophancy.": [3]},
        },
        {
            "id": "https://openalex.org/W4391000001",
            "doi": None,
            "display_name": "Sycophancy to Subterfuge: Investigating Reward Tampering",
            "publication_year": 2024,
        },
    ]
}


class OpenAlexServer:
    """``url`` is the works endpoint; ``status`` != 200 makes every answer that error;
    ``respond(search) -> works`` picks the answer per query (default: always ``works``)."""

    def __init__(self, works: dict | None = None, status: int = 200, respond=None):
        self.works, self.status, self.queries, self.respond = works or OPENALEX_WORKS, status, [], respond
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                parts = urlsplit(self.path)
                query = parse_qs(parts.query)
                server.queries.append(query)
                works = server.respond(query.get("search", [""])[0]) if server.respond else server.works
                data = json.dumps(works).encode("utf-8")
                self.send_response(server.status if parts.path == "/works" else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/works"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


# -- running a command's rounds as `hypograph library` does ------------------------------------------


def LibraryRun(topic: str, rounds: int = 1, new_library: bool = False, llm_config=None, mode=None, **fields) -> dict:  # noqa: N802 - reads as the command's invocation
    """What ``hypograph library`` would be asked, as the tests spell it: ``fields`` are
    ``LibrarySettings``' (the mode resolved by the seed's table, as the command resolves it)."""
    from hypograph.library.modes import resolve_mode
    from hypograph.library.settings import LibrarySettings

    resolution = resolve_mode(fields.pop("behavior_source", None), fields.pop("behavior", None), mode)
    settings = LibrarySettings(topic=topic, behavior_source=resolution.source, behavior=resolution.behavior, **fields)
    return {
        "settings": settings,
        "rounds": rounds,
        "new_library": new_library,
        "llm": llm_config,
        "notes": resolution.notes,
    }


def run_library(root, run: dict):
    """The rounds through the ``library_round`` job, in this process (``pipelines/launch.py``)."""
    from hypograph_cli.library import run_library as launch

    report, _runs = launch(root, **run)
    return report
