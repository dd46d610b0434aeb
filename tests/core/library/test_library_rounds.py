"""Library rounds end to end through the real openai client against the local stub (library rounds).

Discover over three rounds (a reworded round-1 behavior caught by the model in round 2, saturated
in round 3), given by id and by free text, re-runs that cost no call, a crash between generation
and persist, and web grounding against local arXiv and OpenAlex servers and dead endpoints.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from library_stub import AtomServer, LibraryModel, LibraryRun, OpenAlexServer, behavior, given, run_library
from llm_stub import llm_env, llm_server, unused_port  # noqa: F401  (fixtures)

from hypograph.environment import llm_config
from hypograph.errors import HypographError
from hypograph.library import dedup as dedup_mod
from hypograph.library.checks import run_checks
from hypograph.library.dedup import dedup_round
from hypograph.library.generate import generate_round
from hypograph.library.ledger import read_ledger
from hypograph.library.persist import persist_round
from hypograph.library.rounds import RoundDedup
from hypograph.library.schema import read_library
from hypograph.library.score import score_round
from hypograph.llm import LLMClient

TOPIC = "LLM sycophancy"
S1 = "Language models agree with a user's stated opinion more often when the user claims expertise."
S2 = "Chat models abandon a correct answer after the user pushes back twice in a multi-turn dialogue."
S3 = "Models flatter the quality of user-written code more when the user says they wrote it."
S1_REWORDED = "When users claim expertise, language models more often agree with the opinions those users state."
S4 = "Vision-language models echo a caption's sentiment when the user says they wrote the caption."


def three_round_model() -> LibraryModel:
    return LibraryModel(
        rounds=[
            {
                "behaviors": [
                    behavior(S1, tag="r1a"),
                    behavior(S2, "Borrow from the human sciences", tag="r1b"),
                    behavior(S3, "Reuse past CS results", tag="r1c"),
                ]
            },
            {"behaviors": [behavior(S1_REWORDED, tag="r2a"), behavior(S4, "Cross-modal transfer", tag="r2b")]},
            {"behaviors": [behavior(S1_REWORDED + " ", tag="r3a")]},
        ],
        paraphrases={S1_REWORDED: S1, S1_REWORDED + " ": S1},
    )


@pytest.fixture
def model(llm_server, llm_env):
    llm_env(llm_server, timeout=5.0)
    m = three_round_model()
    llm_server.always(m)
    return m


def client(root: Path) -> LLMClient:
    return LLMClient(llm_config(), root / ".hypograph", "hypothesis-batch")


def test_three_discover_rounds_catch_a_reworded_duplicate_and_stop_early(tmp_path, model, llm_server):
    report = run_library(tmp_path, LibraryRun(TOPIC, rounds=5, n_behaviors=3, web=False))
    library = read_library(tmp_path)[0]
    _four_behaviors_minted(library)
    # Round 2's prompt carried round 1's statements as its banlist; round 3's carried round 2's too.
    assert all(s in model.generation_prompts[1] for s in (S1, S2, S3)) and S4 not in model.generation_prompts[1]
    assert S4 in model.generation_prompts[2]
    # The reworded behavior: B1 was the nearest of the neighbours shown, the model called it a duplicate of B1.
    r2 = RoundDedup.model_validate_json((tmp_path / ".hypograph/library/rounds/r0002/dedup.json").read_text())
    v = next(v for v in r2.verdicts if v.layer == "behavior" and v.key == "c1")
    assert (v.verdict, v.of, v.decided_by) == ("duplicate", "B1", "model") and v.neighbours[0] == "B1"
    assert "Adds the expertise framing." in library.behaviors[0].notes
    assert v.model == "stub-model" and sorted(v.neighbours) == ["B1", "B2", "B3"]  # every library behavior
    _three_rounds_reported(report)
    assert model.calls["generation"] == 3 and model.calls["score"] == 4
    assert all(not v for v in run_checks(tmp_path).values())
    assert (tmp_path / "MANIFEST.md").read_text().count("hypothesis_library.json") == 1
    runs = list((tmp_path / ".hypograph/traces/hypothesis-batch").iterdir())
    assert len(runs) == 1 and sorted(p.name for p in runs[0].iterdir()) == ["r01", "r02", "r03"]
    assert any("generation" in p.name for p in (runs[0] / "r02").iterdir())


def _four_behaviors_minted(library) -> None:
    """Rounds 1 and 2 added B1..B4 (B4 in round 2's batch), every mechanism a candidate."""
    assert [b.statement for b in library.behaviors] == [S1, S2, S3, S4]
    assert [b.id for b in library.behaviors] == ["B1", "B2", "B3", "B4"]
    assert all(m.status == "candidate" and m.novelty.method == "llm-chat" for _, m in library.mechanisms())
    assert [m.id for m in library.behaviors[0].mechanisms] == ["B1-M1", "B1-M2", "B1-M3", "B1-M4"]
    assert library.behaviors[3].model_extra["batch"].endswith(".run01.r02")


def _three_rounds_reported(report) -> None:
    """Round 3 added nothing: the loop stopped and the report says so, with each round's figures."""
    assert (report.rounds_requested, report.rounds_run, report.early_stop) == (5, 3, "r0003")
    assert [(r.added_behaviors, r.added_mechanisms) for r in report.rounds] == [(3, 12), (1, 4), (0, 0)]
    assert report.rounds[1].removed["behavior"] == {"exact": 0, "model": 1, "unjudged": 0}
    assert report.rounds[1].unique_yield == 0.5 and report.duplicates_dropped["behavior"] == 2
    assert "stopped early: r0003" in report.text() and "saturated" in report.text()
    assert "Promotion is manual" in report.text()
    assert report.novelty["at_least_8"] == 16 and report.impact["median"] == 7


def test_rerunning_a_persisted_round_costs_no_call_and_changes_nothing(tmp_path, model, llm_server):
    run_library(tmp_path, LibraryRun(TOPIC, rounds=1, n_behaviors=3, web=False))
    before = (tmp_path / "hypothesis_library.json").read_bytes()
    calls = len(llm_server.requests)
    c = client(tmp_path)
    cands = generate_round(tmp_path, "r0001", None, c)
    d = dedup_round(tmp_path, "r0001", cands, c)
    s = score_round(tmp_path, "r0001", c)
    persist_round(tmp_path, "r0001", d, s)
    assert len(llm_server.requests) == calls and c.usage.calls == 0
    assert (tmp_path / "hypothesis_library.json").read_bytes() == before


def test_round_n_waits_for_the_rounds_before_it(tmp_path, model):
    from hypograph.errors import HypographError
    from hypograph.library.rounds import RoundSettings

    with pytest.raises(HypographError, match="before round r0001 has persisted"):
        generate_round(tmp_path, "r0002", RoundSettings(topic=TOPIC, web=False), client(tmp_path))
    assert model.calls["generation"] == 0


def test_given_by_id_appends_mechanisms_only(tmp_path, model, llm_server):
    run_library(tmp_path, LibraryRun(TOPIC, rounds=1, n_behaviors=3, web=False))
    model.rounds = [given("second pass", variant=1)]
    report = run_library(tmp_path, LibraryRun(TOPIC, rounds=1, behavior="B2", web=False))
    library = read_library(tmp_path)[0]
    assert len(library.behaviors) == 3 and report.behavior_source == "given"
    assert [m.id for m in library.behaviors[1].mechanisms][-4:] == ["B2-M5", "B2-M6", "B2-M7", "B2-M8"]
    prompt = model.generation_prompts[-1]
    assert "The fixed behavior" in prompt and library.behaviors[1].mechanisms[0].hypothesis[:40] in prompt
    assert S1 not in prompt  # given: the banlist is the target's mechanisms, not every behavior
    score_prompt = [r for r in llm_server.requests if "two referees" in r.system][-1].prompt
    assert "impact to null" in score_prompt and library.behaviors[1].impact.score == 7


def test_given_free_text_creates_one_given_behavior_then_reuses_it(tmp_path, model):
    text = "Models keep their first-turn stance across a multi-turn dialogue."
    model.rounds = [given("free one"), given("free two", variant=1)]
    run_library(tmp_path, LibraryRun(TOPIC, rounds=1, behavior=text, web=False))
    run_library(tmp_path, LibraryRun(TOPIC, rounds=1, behavior=text, behavior_source="given", web=False))
    library = read_library(tmp_path)[0]
    assert [(b.id, b.source, b.statement) for b in library.behaviors] == [("B1", "given", text)]
    assert len(library.behaviors[0].mechanisms) == 8 and library.behaviors[0].impact is not None


def test_crash_after_generation_completes_without_a_second_call_or_id(tmp_path, model, monkeypatch):
    def crash(*a, **k):
        raise RuntimeError("killed after generation")

    original = dedup_mod.dedup_round
    monkeypatch.setattr(dedup_mod, "dedup_round", crash)  # the asset imports it when it runs
    with pytest.raises(HypographError, match="round_dedup: killed after generation"):
        run_library(tmp_path, LibraryRun(TOPIC, rounds=1, n_behaviors=3, web=False))
    assert not (tmp_path / "hypothesis_library.json").exists()
    monkeypatch.setattr(dedup_mod, "dedup_round", original)
    report = run_library(tmp_path, LibraryRun(TOPIC, rounds=1, n_behaviors=3, web=False))
    assert model.calls["generation"] == 1 and report.rounds[0].round == "r0001"
    assert [b.id for b in read_library(tmp_path)[0].behaviors] == ["B1", "B2", "B3"]


def test_crash_inside_persist_reuses_the_planned_ids(tmp_path, model, monkeypatch):
    from hypograph.library import persist as persist_mod

    real = persist_mod.write_json

    def crash(path, value):
        if Path(path).name == "hypothesis_library.json":
            raise RuntimeError("killed before the library write")
        return real(path, value)

    monkeypatch.setattr(persist_mod, "write_json", crash)
    with pytest.raises(HypographError, match="hypothesis_library: killed before the library write"):
        run_library(tmp_path, LibraryRun(TOPIC, rounds=1, n_behaviors=3, web=False))
    planned = json.loads((tmp_path / ".hypograph/library/rounds/r0001/persist.json").read_text())
    assert planned["complete"] is False and planned["ids"]["c3"] == "B3"
    monkeypatch.setattr(persist_mod, "write_json", real)
    run_library(tmp_path, LibraryRun(TOPIC, rounds=1, n_behaviors=3, web=False))
    ledger = read_ledger(tmp_path)
    assert ledger.behavior_hwm == 3 and sorted(b.id for b in read_library(tmp_path)[0].behaviors) == ["B1", "B2", "B3"]
    assert model.calls["generation"] == 1


def test_ids_are_never_reused_after_the_highest_node_is_deleted(tmp_path, model):
    run_library(tmp_path, LibraryRun(TOPIC, rounds=1, n_behaviors=3, web=False))
    path = tmp_path / "hypothesis_library.json"
    raw = json.loads(path.read_text())
    raw["behaviors"] = raw["behaviors"][:2]  # the user deletes B3 by hand
    raw["behaviors"][0]["my_rating"] = "great"
    raw["behaviors"][0]["mechanisms"][0]["status"] = "queued"
    raw["owner"] = "ana"
    path.write_text(json.dumps(raw, indent=2))
    model.rounds = [{"behaviors": [behavior(S4, "Cross-modal transfer", tag="after delete")]}]
    run_library(tmp_path, LibraryRun(TOPIC, rounds=1, n_behaviors=3, web=False))
    raw = json.loads(path.read_text())
    assert [b["id"] for b in raw["behaviors"]] == ["B1", "B2", "B4"]
    assert raw["owner"] == "ana" and raw["behaviors"][0]["my_rating"] == "great"
    assert raw["behaviors"][0]["mechanisms"][0]["status"] == "queued"


@pytest.fixture
def atom():
    server = AtomServer()
    yield server
    server.close()


@pytest.fixture
def openalex():
    server = OpenAlexServer()
    yield server
    server.close()


def dead_url() -> str:
    return f"http://127.0.0.1:{unused_port()}/api/query"


def test_web_grounding_through_arxiv_and_openalex_servers(tmp_path, model, llm_server, atom, openalex):
    model.rounds = [{"behaviors": [behavior(S1, tag="web")]}]
    report = run_library(
        tmp_path, LibraryRun(TOPIC, rounds=1, n_behaviors=1, web=True, search_url=atom.url, openalex_url=openalex.url)
    )
    b = read_library(tmp_path)[0].behaviors[0]
    assert b.impact.method == "llm-chat+web" and {m.novelty.method for m in b.mechanisms} == {"llm-chat+web"}
    # The model wrote the queries: one from the behavior, one from its mechanism angle, on each resource.
    assert model.calls["queries"] == 1 and len(atom.queries) == 2 and len(openalex.queries) == 2
    behavior_terms = model.queries[0]["behavior_terms"]
    assert atom.queries[0]["search_query"][0] == " AND ".join(f"all:{t}" for t in behavior_terms)
    assert openalex.queries[1]["search"][0] == " ".join(model.queries[0]["mechanism_terms"])
    score_prompt = [r for r in llm_server.requests if "two referees" in r.system][0].prompt
    assert "Towards Understanding Sycophancy in Language Models" in score_prompt
    assert "arXiv:2310.13548v1" in score_prompt
    assert "Sycophancy to Subterfuge" in score_prompt and "openalex:W4391000001" in score_prompt
    assert score_prompt.count("Towards Understanding Sycophancy") == 1  # the same paper from both is shown once
    _closest_is_the_retrieved_paper(b)
    trace_dir = next((tmp_path / ".hypograph/traces/hypothesis-batch").iterdir()) / "r01"
    assert any("search-c1" in p.name for p in trace_dir.iterdir()) and not report.notes


def _closest_is_the_retrieved_paper(b) -> None:
    """closest names the retrieved paper P1 with its id and URL, marked as retrieved."""
    m = b.mechanisms[0]
    assert m.novelty.closest.startswith(
        "Towards Understanding Sycophancy in Language Models (2023), arXiv:2310.13548v1"
    )
    assert m.novelty.model_extra["closest_source"] == "retrieved"
    assert m.novelty.model_extra["closest_id"] == "http://arxiv.org/abs/2310.13548v1"
    assert set(b.impact.model_extra["dimensions"]) == {"importance", "builders", "tractability", "null_risk"}


def test_dead_search_endpoints_warn_once_and_score_without_web(tmp_path, model):
    model.rounds = [{"behaviors": [behavior(S1, tag="dead a"), behavior(S2, tag="dead b")]}]
    report = run_library(
        tmp_path, LibraryRun(TOPIC, rounds=1, n_behaviors=2, web=True, search_url=dead_url(), openalex_url=dead_url())
    )
    library = read_library(tmp_path)[0]
    assert {b.impact.method for b in library.behaviors} == {"llm-chat"} and len(library.behaviors) == 2
    assert len(report.notes) == 3 and "web search gave no paper for 2 of 2" in report.notes[0]
    assert "unreachable" in report.notes[0]
    assert [n.split(" ungrounded")[0] for n in report.notes[1:]] == ["r0001: B1", "r0001: B2"]
    m = library.behaviors[0].mechanisms[0].novelty
    assert m.model_extra["closest_source"] == "memory" and "from the model's memory" in m.closest


def test_a_search_server_error_is_a_warning_too(tmp_path, model):
    server = AtomServer(status=503)
    try:
        model.rounds = [{"behaviors": [behavior(S1, tag="503")]}]
        report = run_library(
            tmp_path,
            LibraryRun(TOPIC, rounds=1, n_behaviors=1, web=True, search_url=server.url, openalex_url=dead_url()),
        )
    finally:
        server.close()
    assert "HTTP 503" in report.notes[0] and read_library(tmp_path)[0].behaviors[0].impact.method == "llm-chat"


def test_rescoring_with_web_restamps_scores_without_regenerating_or_new_ids(tmp_path, model, atom, openalex):
    run_library(tmp_path, LibraryRun(TOPIC, rounds=1, n_behaviors=3, web=False))
    path = tmp_path / "hypothesis_library.json"
    raw = json.loads(path.read_text())
    del raw["behaviors"][2]["mechanisms"][3]  # a person deletes B3-M4 by hand: re-scoring must not bring it back
    path.write_text(json.dumps(raw, indent=2))
    ids = [(b.id, [m.id for m in b.mechanisms]) for b in read_library(tmp_path)[0].behaviors]
    assert "B3-M4" not in ids[2][1]
    model.impact = 9
    c = client(tmp_path)
    from hypograph.library.search import web_search

    score_round(tmp_path, "r0001", c, web_search(atom.url, openalex.url), web=True)
    persist_round(tmp_path, "r0001")
    library = read_library(tmp_path)[0]
    assert [(b.id, [m.id for m in b.mechanisms]) for b in library.behaviors] == ids
    assert {(b.impact.score, b.impact.method) for b in library.behaviors} == {(9, "llm-chat+web")}
    assert model.calls["generation"] == 1


def test_given_mechanism_equal_to_an_existing_one_is_dropped_unasked(tmp_path, model):
    run_library(tmp_path, LibraryRun(TOPIC, rounds=1, n_behaviors=3, web=False))
    existing = read_library(tmp_path)[0].behaviors[1].mechanisms[0]
    answer = given("third pass", variant=1)
    answer["mechanisms"][0]["hypothesis"] = existing.hypothesis
    model.rounds = [answer]
    report = run_library(tmp_path, LibraryRun(TOPIC, rounds=1, behavior="B2", web=False))
    assert report.rounds[0].removed["mechanism"]["exact"] == 1 and report.rounds[0].added_mechanisms == 3
    hyps = [m.hypothesis for m in read_library(tmp_path)[0].behaviors[1].mechanisms]
    assert hyps.count(existing.hypothesis) == 1


def test_landscape_gaps_ground_generation_and_only_known_gap_ids_are_accepted(tmp_path, model, llm_server):
    (tmp_path / "idea-stage").mkdir()
    (tmp_path / "idea-stage" / "LANDSCAPE.md").write_text(
        "# Landscape\n\n- **G1**: no causal test of credential cues.\n"
    )
    bad = {"behaviors": [behavior(S1, tag="gap", gaps=["G9"])]}
    good = {"behaviors": [behavior(S1, tag="gap", gaps=["G1"])]}
    calls = iter([bad, good])
    original = model.__call__

    def respond(body):
        from library_stub import task
        from llm_stub import answer

        if task(body) == "generation":
            model.calls["generation"] += 1
            return answer(next(calls))
        return original(body)

    llm_server.always(respond)
    run_library(tmp_path, LibraryRun(TOPIC, rounds=1, n_behaviors=1, web=False))
    gen = [r for r in llm_server.requests if "You generate" in r.system]
    assert "no causal test of credential cues" in gen[0].prompt and "G9" in gen[1].last_user
    assert read_library(tmp_path)[0].behaviors[0].gaps == ["G1"]


def test_the_cli_runs_rounds_prints_the_report_and_notes_an_ignored_mode(tmp_path, llm_server, llm_env):
    from cli_helper import in_process
    from conftest import offline_env

    env_vars = llm_env(llm_server, timeout=5.0)
    llm_server.always(LibraryModel(rounds=[{"behaviors": [behavior(S1, tag="cli")]}]))
    env = {**offline_env(), **env_vars, "NO_PROXY": "127.0.0.1"}
    env.pop("HYPOGRAPH_LLM")
    args = ["library", tmp_path, "--topic", TOPIC, "--mode", "fast", "--no-web", "--n-behaviors", "1"]
    out = in_process(*args, env=env)  # what the command prints: its main, in this process
    assert out.returncode == 0, out.stderr
    assert "--mode 'fast' ignored" in out.stdout and "r0001: generated 1B/4M" in out.stdout
    assert "behaviors added 1 / total 1" in out.stdout and read_library(tmp_path)[0].behaviors[0].id == "B1"
