"""Case packages around the builder: config, checks, the example, a vault as a case, the CLI and
minting a batch into a vault."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest
from case_support import builder_for, changed, files, make_case, package_id, reply, valid_answer
from cli_helper import hypograph_main as main  # what `hypograph` runs: batch goes through Dagster
from conftest import REPO
from llm_stub import answer, llm_env, llm_offline, llm_server  # noqa: F401

from hypograph.case import CasePackage, HypothesisConfig, Status
from hypograph.case.batch import escape
from hypograph.case.checks import run_checks
from hypograph.case.context import verified_interpretation
from hypograph.errors import HypographError

H = "analysis/hypotheses/0001"
EXAMPLE_CASE = REPO / "examples" / "case"


# -- config ----------------------------------------------------------------------------------------


def test_config_defaults_and_example(tmp_path):
    cfg = HypothesisConfig.load(REPO / "config" / "analysis.example.toml")
    assert (cfg.policy.min_hypotheses, cfg.policy.max_hypotheses, cfg.policy.initial_budget) == (3, 5, 100)
    limits = cfg.limits
    assert (limits.context_bytes, limits.prior_documents, limits.output_bytes, limits.summary_bytes) == (
        1 << 20,
        32,
        2 << 20,
        2 << 20,
    )
    assert cfg.retry.rounds == 10 and cfg.endpoints == ()
    empty = tmp_path / "empty.toml"
    empty.write_text("")
    assert HypothesisConfig.load(empty) == HypothesisConfig()


@pytest.mark.parametrize(
    "text, message",
    [
        ("[hypotheses]\nmin_hypotheses = 0\n", "hypotheses.min_hypotheses: must be ≥ 1 (got 0)"),
        ("[hypotheses]\nmax_hypotheses = 2.5\n", "hypotheses.max_hypotheses: must be a whole number ≥ 1 (got 2.5)"),
        ("[hypotheses]\ninitial_budget = true\n", "hypotheses.initial_budget: must be a whole number ≥ 1 (got True)"),
        ("[hypotheses]\nmin_hypotheses = 6\n", "hypotheses.max_hypotheses: 5 is below hypotheses.min_hypotheses 6"),
        ("[hypotheses]\nmax_hypothesis = 4\n", "hypotheses.max_hypothesis: not a setting of HypothesisPolicy"),
        ("[limits]\noutput_bytes = -1\n", "limits.output_bytes: must be ≥ 1"),
        ("[retry]\nrounds = 0\n", "retry.rounds: must be ≥ 1"),
        ("[retry]\nfactor = 11\n", "retry.factor: must be > 0 and ≤ 10 (got 11)"),
        ("[retry]\nmax_delay_seconds = nan\n", "retry.max_delay_seconds: must be > 0 and ≤ 604800 (got nan)"),
        ("[model]\nreasks = 11\n", "model.reasks: must be ≥ 0 and ≤ 10 (got 11)"),
        ("[[endpoints]]\nbase_url = 'http://x/v1'\n", "endpoints[0].model: field required"),
        ("[[endpoints]]\nmodel = ' '\n", "endpoints[0].model: a model name is required"),
        ("[archives]\nmax_ratio = 0\n", "archives.max_ratio: must be ≥ 1 (got 0)"),
        ("[hypothesis]\n", "hypothesis: not a setting of HypothesisConfig (it has hypotheses, limits, retry"),
        ("[hypotheses\n", "not valid TOML"),
    ],
)
def test_config_errors_name_the_file_and_key(tmp_path, text, message):
    path = tmp_path / "analysis.local.toml"
    path.write_text(text)
    with pytest.raises(HypographError, match=str(path).replace(".", r"\.") + ".*" + _re(message)):
        HypothesisConfig.load(path)


def _re(text: str) -> str:
    import re

    return re.escape(text)


def test_local_config_is_git_ignored():
    assert "config/analysis.local.toml" in (REPO / ".gitignore").read_text().split()


# -- checks ----------------------------------------------------------------------------------------


@pytest.fixture
def published(tmp_path, llm_server):
    case = make_case(tmp_path)
    llm_server.script(reply(changed(valid_answer(), 1, title="Valve *bold* [x](y) <b>|#")))
    result = asyncio.run(builder_for(case, [llm_server.url]).build(case.name, package_id(case)))
    assert result.status is Status.COMPLETED
    return case


def _edit(case: Path, rel: str, change) -> None:
    doc = json.loads((case / rel).read_text())
    change(doc)
    (case / rel).write_text(json.dumps(doc, indent=2))


@pytest.mark.parametrize(
    "rel, change, check, reason",
    [
        ("registry.json", lambda d: d.update(created_count=2), "registry_consistent", "created_count 2 != 3"),
        ("registry.json", lambda d: d.update(next_id="H3"), "registry_consistent", "next_id H3 != H4"),
        ("registry.json", lambda d: d.update(remaining_slots=5), "registry_consistent", "remaining_slots 5"),
        (
            "registry.json",
            lambda d: d["creations"].__setitem__(2, dict(d["creations"][1])),
            "registry_consistent",
            "more than one creation",
        ),
        (
            "registry.json",
            lambda d: d["creations"][0]["budget_allocation"].update(initial=99),
            "budget_equal",
            "registry allocation",
        ),
        (
            "registry.json",
            lambda d: d.update(creations=[], created_count=0, next_id="H1", remaining_slots=5),
            "registry_consistent",
            "no creation history",
        ),
        (
            "hypotheses.json",
            lambda d: d["hypotheses"][2]["budget_allocation"].update(initial=150),
            "budget_equal",
            "{'initial': 150",
        ),
        ("hypotheses.json", lambda d: d["hypotheses"][1].update(source_ids=["GONE"]), "references_resolve", "'GONE'"),
        (
            "hypotheses.json",
            lambda d: d["hypotheses"][0].update(interpretation_ids=["I1"]),
            "h1_grounded",
            "must cite I4",
        ),
        (
            "hypotheses.json",
            lambda d: d["hypotheses"][2].update(title=d["hypotheses"][0]["title"].upper()),
            "no_duplicates",
            "duplicates the title of H1",
        ),
        ("hypotheses.md", None, "checked_together", "hypotheses.md is not the rendering"),
    ],
)
def test_blocking_checks_find_tampering(published, rel, change, check, reason):
    pkg = CasePackage(published)
    assert all(v == [] for v in run_checks(pkg).values())
    if change is None:
        (published / H / rel).write_text("# edited by hand\n")
    else:
        _edit(published, f"{H}/{rel}", change)
    found = run_checks(pkg)
    assert any(reason in r for _i, r in found[check]), found[check]
    assert found["checked_together"] or rel == "hypotheses.md"  # any edit breaks the manifest's hash
    with pytest.raises(HypographError, match="the published batch fails"):
        asyncio.run(builder_for(published, ["http://127.0.0.1:9/v1"]).build(published.name, package_id(published)))


def test_summary_is_escaped_and_deterministic(published):
    md = (published / H / "hypotheses.md").read_text()
    assert "## H2: Valve \\*bold\\* \\[x\\](y) \\<b\\>\\|\\#" in md
    assert escape("a\nb  *c*") == "a b \\*c\\*"


def test_example_case_is_complete_and_replays_without_a_call(tmp_path):
    pkg = CasePackage(EXAMPLE_CASE)
    m = pkg.manifest()
    interp, catalogue = verified_interpretation(pkg, m)
    assert interp.confirmed
    assert {s.kind for s in catalogue.sources} >= {"human_observation", "comment", "technical_fact"}
    assert all(v == [] for v in run_checks(pkg).values())
    copy = Path(shutil.copytree(EXAMPLE_CASE, tmp_path / "case"))
    before = files(copy)
    result = asyncio.run(builder_for(copy, ["http://127.0.0.1:9/v1"]).build("case", m["package_id"]))
    assert result.status is Status.COMPLETED and result.reused and files(copy) == before


# -- a vault as a case, the CLI, minting ------------------------------------------------------------


def vault_answer(body: dict):
    """A valid answer for a case made from the example vault: H1 cites an observation and the
    reported behavior (the last alias)."""
    prompt = [m["content"] for m in body["messages"] if m["role"] == "user"][0]
    aliases = [a for a in json.loads(prompt.split("<interpretation>")[1].split("</interpretation>")[0])["statements"]]
    last = aliases[-1]["alias"]
    hyps = [
        {
            "title": "Drought cut the palace grain surplus",
            "mechanism": "Failing rains cut harvests below what the palaces redistributed.",
            "source_ids": ["O-1", "O-2"],
            "interpretation_ids": ["I1", last],
        },
        {
            "title": "Earthquakes destroyed the centres",
            "mechanism": "A sequence of earthquakes ruined the palace buildings.",
            "source_ids": ["O-4", "S-3"],
            "interpretation_ids": ["I4"],
        },
        {
            "title": "Tin supply broke down",
            "mechanism": "Lost tin routes starved bronze production.",
            "source_ids": ["O-6"],
            "interpretation_ids": ["I6"],
        },
    ]
    common = {
        "rationale": "The cited records date it.",
        "distinction": "Different cause.",
        "expected_evidence": ["x"],
        "falsifying_evidence": ["y"],
        "open_questions": [],
    }
    hyps = [{**common, **h, "distinction": f"Only this one: {h['title']}"} for h in hyps]
    return answer(json.dumps({"hypotheses": hyps}))


def test_vault_case_confirm_batch_into_vault(example_vault, tmp_path, llm_server, llm_env, capsys):
    case = tmp_path / "cases" / "lba"
    _from_vault_reads_only(example_vault, case, capsys)

    llm_env(llm_server)
    llm_server.always(vault_answer)
    assert main(["batch", str(case)]) == 2
    assert "not confirmed" in capsys.readouterr().err and llm_server.requests == []
    assert main(["case", "confirm", str(case), "--by", "ana"]) == 0
    assert main(["case", "from-vault", str(example_vault), str(case)]) == 0
    assert "unchanged" in capsys.readouterr().out

    assert main(["batch", str(case), "--into", str(example_vault)]) == 0
    out = capsys.readouterr().out
    assert "COMPLETED: published 3 hypotheses" in out and "3 H nodes minted, 0 already there" in out
    _minted_as_step_3_nodes(example_vault)

    after = files(example_vault)
    assert main(["batch", str(case), "--into", str(example_vault)]) == 0
    assert "0 H nodes minted, 3 already there" in capsys.readouterr().out
    assert files(example_vault) == after and len(llm_server.requests) == 1


def _from_vault_reads_only(example_vault: Path, case: Path, capsys) -> None:
    """``case from-vault``: revision 1 of the vault's question and statements, the vault only read."""
    vault_before = files(example_vault, skip_state=False)
    assert main(["case", "from-vault", str(example_vault), str(case)]) == 0
    assert "revision 1 recorded, unconfirmed" in capsys.readouterr().out
    assert files(example_vault, skip_state=False) == vault_before  # the vault is only read
    prompt = (example_vault / "initial_prompt.md").read_bytes()
    assert (case / "case/r0001/vault/initial_prompt.md").read_bytes() == prompt
    interp = json.loads((case / "analysis/interpretation/0001/interpretation.json").read_text())
    assert interp["question"].startswith("What caused the Late Bronze Age collapse") and not interp["confirmed"]
    assert len(interp["statements"]) == 8 and interp["statements"][0]["source_ids"] == ["O-1", "S-1"]


def _minted_as_step_3_nodes(example_vault: Path) -> None:
    """The batch's three H nodes in the vault, each as an extracted step-3 hypothesis."""
    from hypograph.hypotheses import load_corpus
    from hypograph.structure.checks import all_checks
    from hypograph.vault.vault import open_vault

    vault = open_vault(example_vault)
    minted = [n for n in vault.of_type("hypothesis") if n.meta.get("case_creation")]
    assert [n.id for n in minted] == ["H-31", "H-32", "H-33"]
    batch_source = vault.nodes[minted[0].meta["source"].split(" - ")[0].strip("[")]
    assert batch_source.meta["source_type"] == "case-hypothesis-batch"
    assert minted[0].meta["locator"] == f"{H}/registry.json#/creations/0"
    assert minted[0].meta["case_creation"].endswith("/r0001/H1") and minted[0].meta["case_role"] == "tester_primary"
    assert "[[O-1 - " in minted[0].body  # a cited vault node becomes a link
    corpus_ids = {h.id for h in load_corpus(example_vault).hypotheses}
    assert {"H-31", "H-32", "H-33"} <= corpus_ids  # step-3 nodes: proximity and structure read them
    # Before step 4 the checks see a minted node exactly as an extracted one (H-1): same findings.
    found = [v for vs in all_checks(vault, None).values() for v in vs]
    assert {r for i, r in found if i in ("H-31", "H-32", "H-33")} == {r for i, r in found if i == "H-1"}
    assert not [v for v in found if v[0] == batch_source.id]


def test_batch_without_a_model_says_so_in_one_line_and_changes_nothing(tmp_path, llm_offline, capsys):
    case = make_case(tmp_path)
    before = files(case, skip_state=False)
    assert main(["batch", str(case)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "needs a model" in err and "nothing was changed" in err
    after = files(case, skip_state=False)
    assert after.pop(".hypograph/input-id") and after == before  # the batch's run registered it, nothing else


# -- the domain API a Dagster layer wraps ------------------------------------------------------------


def test_prepare_and_due_retries(tmp_path, llm_server):
    from hypograph.case import CaseStore, due_retry

    case = make_case(tmp_path / "cases", "a@r1")
    make_case(tmp_path / "cases", "b", confirmed=False)
    store = CaseStore(tmp_path / "cases")
    builder = builder_for(case, [llm_server.url])
    context = builder.prepare("a@r1", package_id(case))  # the confirmed-context asset: no model call
    assert context["anchor"]["alias"] == "I4" and llm_server.requests == []
    assert (case / H / "context.json").exists() and (case / H / "policy.json").exists()
    assert builder.prepare("a@r1", package_id(case)) == context
    with pytest.raises(HypographError, match="not confirmed"):
        builder_for(tmp_path / "cases" / "b", [llm_server.url]).prepare("b", package_id(tmp_path / "cases" / "b"))
    assert [due_retry(store.package(c)) for c in store.cases()] == [None, None]
