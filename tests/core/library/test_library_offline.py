"""What works without a model: schema validation, the mode table, the cross-topic guard, the
key-rule checks, the budgeted banlist, LANDSCAPE gaps, the report, and the CLI's offline commands.
Also: with no model configured, a run says so in one line and changes nothing."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from cli_helper import hypograph, in_process
from conftest import REPO, snapshot
from library_stub import LibraryRun, run_library
from llm_stub import llm_env  # noqa: F401  (fixture)

from hypograph.errors import HypographError, NotDone
from hypograph.library.banlist import build_banlist, estimate_tokens
from hypograph.library.checks import check_distinct, check_ids, check_scored, run_checks
from hypograph.library.guard import TopicMismatch, check_topic, move_aside, topic_similarity
from hypograph.library.landscape import read_landscape
from hypograph.library.ledger import IdLedger
from hypograph.library.modes import resolve_mode, resolve_target
from hypograph.library.report import build_report
from hypograph.library.schema import read_library
from hypograph.library.strategies import load_strategies
from hypograph.llm import LLMConfig

EXAMPLE = REPO / "examples" / "library"


@pytest.fixture
def lib(tmp_path) -> Path:
    return Path(shutil.copytree(EXAMPLE, tmp_path / "lib"))


def edit(root: Path, change) -> Path:
    path = root / "hypothesis_library.json"
    raw = json.loads(path.read_text())
    change(raw)
    path.write_text(json.dumps(raw, indent=2))
    return path


# -- schema -------------------------------------------------------------------------------------------


def test_the_example_library_validates_and_keeps_unknown_keys(lib):
    library, raw = read_library(lib)
    assert [b.id for b in library.behaviors] == ["B1", "B2", "B3"]
    assert library.behaviors[0].mechanisms[1].status == "queued"
    assert library.behaviors[0].model_extra["batch"] == "2026-06-23.run01.r01"


@pytest.mark.parametrize(
    "change, field",
    [
        (lambda r: r["behaviors"][1]["impact"].update(score=11), "behaviors[1].impact.score"),
        (lambda r: r["behaviors"][0]["mechanisms"][0].update(status="done"), "behaviors[0].mechanisms[0].status"),
        (lambda r: r["behaviors"][2].update(id="B-3"), "behaviors[2].id"),
        (
            lambda r: r["behaviors"][0]["mechanisms"][0]["data"].update(provenance="scraped"),
            "behaviors[0].mechanisms[0].data.provenance",
        ),
        (lambda r: r.pop("topic"), "topic"),
        (lambda r: r["behaviors"][0]["impact"].update(method="gpt"), "behaviors[0].impact.method"),
    ],
)
def test_an_invalid_file_is_an_error_naming_the_field_and_is_never_overwritten(lib, change, field, llm_env):
    path = edit(lib, change)
    before = path.read_bytes()
    with pytest.raises(HypographError, match="hypothesis_library.json: field " + re.escape(field) + ":"):
        read_library(lib)
    llm_env("http://127.0.0.1:9/v1")  # a model configured (the round's run reads the environment), never reached
    with pytest.raises(HypographError, match="field"):
        run_library(lib, LibraryRun("LLM sycophancy", rounds=1, web=False))
    assert path.read_bytes() == before


def test_library_texts_feed_the_proximity_engine(lib):
    from hypograph.proximity.embed import embed

    texts = read_library(lib)[0].texts()
    assert [i for i, _ in texts] == ["B1", "B1-M1", "B1-M2", "B2", "B2-M1", "B3", "B3-M1"]
    assert embed([i for i, _ in texts], [t for _, t in texts]).rows.shape[0] == 7


def test_not_json_names_the_file_and_line(tmp_path):
    (tmp_path / "hypothesis_library.json").write_text('{"topic": "x",\n "behaviors": [}')
    with pytest.raises(HypographError, match=r"hypothesis_library.json: not valid JSON \(line 2"):
        read_library(tmp_path)


# -- modes ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "source, behavior, expected, note",
    [
        (None, None, ("discover", None), None),
        (None, "B2", ("given", "B2"), None),
        ("discover", None, ("discover", None), None),
        ("discover", "B2", ("discover", None), "mismatch"),
        ("given", "B2", ("given", "B2"), None),
        ("given", "free text behavior", ("given", "free text behavior"), None),
    ],
)
def test_the_mode_table(source, behavior, expected, note):
    r = resolve_mode(source, behavior)
    assert (r.source, r.behavior) == expected
    assert (note in r.notes[0]) if note else not r.notes


def test_given_without_a_behavior_halts_and_asks():
    with pytest.raises(HypographError, match="needs a behavior: pass --behavior B<n>"):
        resolve_mode("given", None)
    with pytest.raises(HypographError, match="needs a behavior"):
        resolve_mode("given", "   ")


def test_mode_is_accepted_and_ignored_with_a_note():
    r = resolve_mode(None, None, mode="converge")
    assert r.source == "discover" and len(r.notes) == 1 and "--mode 'converge' ignored" in r.notes[0]


def test_given_targets_existing_id_unknown_id_and_free_text(lib):
    library = read_library(lib)[0]
    assert resolve_target(library, "B2").existing_id == "B2"
    assert resolve_target(library, " b3 ").existing_id == "B3"
    with pytest.raises(HypographError, match="--behavior B9: no such behavior"):
        resolve_target(library, "B9")
    praise = "Models PRAISE user-written code more when the user says they wrote it"
    assert resolve_target(library, praise).existing_id == "B3"
    assert resolve_target(library, "Something new entirely.").existing_id is None


def test_unknown_id_fails_before_any_model_call(lib, llm_env):
    llm_env("http://127.0.0.1:9/v1")  # a model configured (the round's run reads the environment), never reached
    before = snapshot(lib, exclude=(".hypograph",))
    with pytest.raises(HypographError, match="B9"):
        run_library(lib, LibraryRun("LLM sycophancy", rounds=1, behavior="B9", web=False))
    assert snapshot(lib, exclude=(".hypograph",)) == before  # (tool state: the id file, the library's lock)


# -- without a model -------------------------------------------------------------------------------------


def test_without_a_model_a_run_says_so_and_changes_nothing(lib):
    before = snapshot(lib)
    # the round's run refuses it, in its first step (issue 45: every guard once per path, in the job)
    with pytest.raises(NotDone, match="round_candidates: library rounds need a model: set HYPOGRAPH_LLM_MODEL"):
        run_library(lib, LibraryRun("LLM sycophancy", rounds=2, web=False, llm_config=LLMConfig()))
    with pytest.raises(NotDone, match="rounds need a model"):  # before the old file is moved aside
        run_library(
            lib, LibraryRun("sycophancy in language models", rounds=1, new_library=True, llm_config=LLMConfig())
        )
    # the runs registered the library (its id file), nothing else: no round state, nothing moved aside
    after = snapshot(lib)
    assert after.pop(".hypograph/input-id") and after == before


# -- cross-topic guard --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "a, b, same",
    [
        ("LLM sycophancy", "sycophancy in language models", True),
        ("LLM sycophancy", "Sycophancy in large language models", True),
        ("LLM sycophancy", "sycophantic behaviour of chatbots", True),
        ("LLM sycophancy", "LLM hallucination", False),
        ("LLM sycophancy", "honeybee colony collapse over winter", False),
        ("LLM sycophancy", "reward hacking in RLHF", False),
    ],
)
def test_topic_similarity_judges_meaning_not_strings(a, b, same):
    assert (topic_similarity(a, b) >= 0.30) is same


def test_the_guard_without_a_model_halts_on_plainly_another_topic(lib):
    # (with a model, the model judges: tests/core/library/test_library_meaning.py)
    assert check_topic(lib, "sycophancy in language models").same
    before = snapshot(lib)
    with pytest.raises(TopicMismatch, match="is about 'LLM sycophancy', not 'honeybee colony collapse'"):
        check_topic(lib, "honeybee colony collapse")
    assert snapshot(lib) == before
    assert not check_topic(lib, "honeybee colony collapse", confirm=True).same  # confirmed: no error


def test_moving_aside_renames_the_file_and_its_state_never_deletes(lib):
    (lib / ".hypograph" / "library").mkdir(parents=True)
    (lib / ".hypograph" / "library" / "ids.json").write_text("{}")
    old = (lib / "hypothesis_library.json").read_bytes()
    moved = move_aside(lib)
    assert moved.name.startswith("hypothesis_library.llm-sycophancy.") and moved.read_bytes() == old
    assert not (lib / "hypothesis_library.json").exists()
    assert (lib / ".hypograph" / "library-archive" / moved.stem / "ids.json").exists()


def test_the_guard_works_with_sentence_embeddings_offline():
    pytest.importorskip("sentence_transformers")
    assert topic_similarity("in-context learning in transformers", "how transformers learn in context", "sbert") > 0.5
    assert topic_similarity("LLM sycophancy", "honeybee colony collapse over winter", "sbert") < 0.5


# -- checks ------------------------------------------------------------------------------------------------


def test_checks_pass_on_the_example(lib):
    assert all(not v for v in run_checks(lib).values())


def test_checks_name_each_violation(lib):
    def spoil(r):
        del r["behaviors"][0]["impact"]
        r["behaviors"][0]["mechanisms"][0]["model"] = []
        del r["behaviors"][1]["mechanisms"][0]["novelty"]
        r["behaviors"][2]["mechanisms"][0]["id"] = "B1-M1"
        r["behaviors"][2]["statement"] = r["behaviors"][1]["statement"].upper() + "!!"

    edit(lib, spoil)
    library = read_library(lib)[0]
    assert check_scored(library) == [
        ("B1", "behavior has no impact"),
        ("B1-M1", "mechanism names no target model"),
        ("B2-M1", "mechanism has no novelty"),
    ]
    ids = check_ids(library)
    assert ("B1-M1", "id used more than once") in ids and any("not numbered under its behavior B3" in r for _, r in ids)
    assert check_distinct(library) == [("B3", "behavior text equals B2's after normalisation")]


def test_ids_check_catches_a_reused_id_against_the_ledger(lib):
    library = read_library(lib)[0]
    ledger = IdLedger(behavior_hwm=4, minted={"B3": "2026-06-01.run01.r01"})
    assert check_ids(library, ledger) == [
        ("B3", "id reused: minted for batch 2026-06-01.run01.r01, now on a node of batch 2026-06-23.run01.r02")
    ]


def test_file_check_reports_an_invalid_file(lib):
    edit(lib, lambda r: r["behaviors"][0]["impact"].update(score=0))
    results = run_checks(lib)
    assert "behaviors[0].impact.score" in results["file_validates"][0][1]


# -- banlist ---------------------------------------------------------------------------------------------------


def synthetic_items(n: int) -> list[tuple[str, str]]:
    themes = ["credential deference", "pushback reversal", "code praise", "caption sentiment echo", "opinion mirroring"]
    return [
        (
            f"B{k}",
            f"Models show {themes[k % 5]} variant {k} when prompts mention {themes[(k * 3) % 5]} cues "
            f"in setting {k % 7}.",
        )
        for k in range(1, n + 1)
    ]


def test_banlist_is_pasted_whole_while_it_fits():
    b = build_banlist(synthetic_items(20), budget=6000)
    assert b.stats.mode == "full" and b.stats.shown == 20 and "B20:" in b.text
    assert b.stats.tokens == estimate_tokens(b.text)


def test_banlist_past_the_budget_keeps_one_representative_per_cluster_within_budget():
    items = synthetic_items(400)
    b = build_banlist(items, budget=600)
    assert b.stats.mode == "clustered" and b.stats.tokens <= 600 and b.stats.items == 400
    assert 0 < b.stats.shown <= b.stats.clusters and "theme:" in b.text
    assert sum(1 for i, _ in items if f" {i}: " in b.text) == b.stats.shown


# -- data files --------------------------------------------------------------------------------------------------


def test_strategies_come_from_the_data_file_with_the_seed_defaults(tmp_path):
    s = load_strategies()
    assert s.strategy_names == [
        "Mechanistic evidence",
        "Capability / editing",
        "Complete account",
        "Explaining a model",
        "Decision reliability",
    ]
    assert s.directions("Complete account") == ["Location", "Causal Intervention", "Formation Tracing"]
    assert len(s.lens_names) == 4
    bad = tmp_path / "s.json"
    bad.write_text(
        json.dumps({"discovery_lenses": [{"name": "x"}], "combination_strategies": [{"name": "y", "directions": []}]})
    )
    with pytest.raises(HypographError, match=r"s.json: field combination_strategies\[0\].directions"):
        load_strategies(bad)


def test_landscape_gaps_are_read(lib):
    land = read_landscape(lib)
    assert sorted(land.gaps) == ["G1", "G2", "G3"] and land.gaps["G3"].startswith("Multimodal sycophancy")
    assert not read_landscape(lib / "nowhere").present


# -- report and CLI --------------------------------------------------------------------------------------------------


def test_report_offline_on_a_library_without_rounds(lib):
    r = build_report(lib, [])
    meta = r.metadata()
    assert meta["impact"] == {"count": 3, "min": 6, "max": 8, "median": 7}
    assert meta["novelty"]["at_least_8"] == 2 and json.dumps(meta)
    assert "Promotion is manual" in r.text()


def cli(*args):
    """``hypograph library ARGS`` as a user runs it (exit code and one-line errors as a process shows them)."""
    return hypograph("library", *args, timeout=120)


def test_cli_check_report_and_one_line_errors(lib):
    # what --check and --report print: the command's main, in this process
    ok = in_process("library", lib, "--check")
    assert ok.returncode == 0 and ok.stdout.count("ok  ") == 5
    edit(lib, lambda r: r["behaviors"][0].pop("impact"))
    bad = in_process("library", lib, "--check")
    assert bad.returncode == 1 and "B1: behavior has no impact" in bad.stdout
    rep = in_process("library", lib, "--report", "--json")
    assert rep.returncode == 0 and json.loads(rep.stdout)["result"]["report"]["totals"]["behaviors"] == 3
    given = cli(lib, "--topic", "LLM sycophancy", "--behavior-source", "given")
    assert given.returncode == 1 and given.stderr.count("\n") == 1 and "needs a behavior" in given.stderr
    nomodel = cli(lib, "--topic", "LLM sycophancy", "--mode", "x")
    assert nomodel.returncode == 2 and "HYPOGRAPH_LLM_MODEL" in nomodel.stderr and nomodel.stderr.count("\n") == 1
