"""Step 4 end to end: ``hypograph structure`` (4a merge/drop, 4b clusters, the map) on vaults.

* the bundled example vault, offline, through the CLI, then re-run: nothing more changes;
* the two real vaults (already structured by hand): the run must leave them as they are;
* an offline merge with the seed's bookkeeping, a pair an observation separates, and unmerge;
* the seed's micro-example (``fixtures/sahul``) with a model served by the local LLM stub;
* crash safety: a merge interrupted between journal steps, a cluster interrupted before its residual.

Every test works on a private copy; nothing here writes into examples/ or tests/fixtures/.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from cli_helper import hypograph, in_process
from conftest import (
    EXAMPLE_VAULT,
    RECORDED_STRUCTURE,
    SHARED_VAULTS,
    copy_tree,
    execute,
    node_markdown,
    snapshot,
    structure_record,
)
from llm_stub import (  # noqa: F401
    adjudication_answer,
    answer,
    asked_clusters,
    asked_pairs,
    cluster_label_answer,
    llm_env,
    llm_server,
    merge_answer,
    merge_pairs,
)

import hypograph.journal as journal_module
import hypograph.structure.carving.apply as carving_apply
from hypograph.environment import llm_config
from hypograph.journal import JOURNAL
from hypograph.llm import LLMClient, OfflinePolicy, policy_for
from hypograph.proximity.adjudicate import Decision
from hypograph.proximity.store import read_verdicts
from hypograph.structure.baseline import read_baseline
from hypograph.structure.carving import CARVE_SYSTEM, run_clusters
from hypograph.structure.checks import all_checks
from hypograph.structure.dispositions import (
    LEDGER,
    MERGE_SYSTEM,
    TOPIC_SYSTEM,
    TopicDecision,
    apply_dispositions,
    read_ledger,
    run_dispositions,
)
from hypograph.structure.structure_map import MAP, structure_counts
from hypograph.vault.nodes import link_target
from hypograph.vault.vault import open_vault

SAHUL = Path(__file__).resolve().parents[2] / "fixtures" / "sahul"
QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
TOOL_DIRS = (".hypograph", "proximity")
REAL_VAULTS = ("covid1", "eggs1")


# -- running and reading ----------------------------------------------------------------------------


def run_job(root: Path, offline: bool = True):
    """The Dagster ``structure`` job in this process (so monkeypatches reach it)."""
    return execute(root, "structure", offline=offline)


def failures(root: Path) -> dict[int, list]:
    """The step-4 checks that fail on ``root``, with their violations."""
    return {n: v for n, v in all_checks(open_vault(root), read_baseline(root)).items() if v}


def hypotheses(root: Path) -> dict:
    return {h.id: h for h in open_vault(root).of_type("hypothesis")}


def clusters(root: Path) -> dict:
    return {hc.id: hc for hc in open_vault(root).of_type("hypothesis-cluster")}


def members(hc) -> list[str]:
    return [link_target(link) for link in hc.meta["hypotheses"]]


def node_files(root: Path) -> list[str]:
    """Relative paths of every markdown file outside the tool's own folders."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*.md") if p.relative_to(root).parts[0] not in TOOL_DIRS)


def frontmatter_lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").split("---\n")[1].splitlines(keepends=True)


def shared_copy(name: str, dst: Path) -> Path:
    """A private copy of the real vault ``name`` (skip the test if it is not available)."""
    if not (SHARED_VAULTS / name / "hypotheses").is_dir():
        pytest.skip(f"{SHARED_VAULTS / name} is not available")
    return copy_tree(SHARED_VAULTS / name, dst)


def without(snap: dict, prefixes: tuple[str, ...]) -> dict:
    return {k: v for k, v in snap.items() if not k.startswith(prefixes)}


# -- building small vaults --------------------------------------------------------------------------

BEE_QUESTION = "Why do honeybee colonies die over winter?"
SOURCES = {
    "S-1": "S-1 - Okafor 2019 - Mite loads and winter losses",
    "S-2": "S-2 - Lind 2020 - Autumn brood and Varroa reproduction",
    "S-3": "S-3 - Brandt 2018 - Sowing dust and forager homing",
    "S-4": "S-4 - Moreau 2021 - Neonicotinoid drift from drilled fields",
    "S-5": "S-5 - Sato 2017 - Nosema in winter bees",
}
SOWING = (
    "Neonicotinoid dust drifting from freshly sown {crop} fields impairs forager homing, so foragers fail "
    "to return and the colonies dwindle before winter."
)
WARM_TITLE = "Warm autumns let Varroa mites keep breeding"
WARM = (
    "Warm autumns let Varroa mites keep breeding in capped brood, so mite loads peak just before winter "
    "and the colonies collapse."
)


def write_node(root: Path, folder: str, node_id: str, title: str, body: str = "", **meta) -> Path:
    """``<root>/<folder>/<id> - <title>.md`` with ``type`` (from the folder) and ``id`` first."""
    node_type = {"hypotheses": "hypothesis", "sources": "source", "observations-and-facts": "observation"}[
        folder.split("/", 1)[0]
    ]
    path = root / folder / f"{node_id} - {title}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(node_markdown({"type": node_type, "id": node_id, **meta}, body), encoding="utf-8")
    return path


def write_hypothesis(root: Path, node_id: str, title: str, statement: str, source: str, locator: str) -> Path:
    return write_node(
        root,
        "hypotheses",
        node_id,
        title,
        statement=statement,
        question=BEE_QUESTION,
        source=f"[[{SOURCES[source]}]]",
        locator=locator,
    )


def start_vault(root: Path) -> Path:
    """The run's question and the sources, nothing else yet."""
    (root / "initial_prompt.md").parent.mkdir(parents=True, exist_ok=True)
    (root / "initial_prompt.md").write_text(f'Main question (verbatim): "{BEE_QUESTION}"\n', encoding="utf-8")
    for sid, stem in SOURCES.items():
        write_node(root, "sources", sid, stem.split(" - ", 1)[1], body="Invented source.\n")
    return root


def build_bee_vault(root: Path) -> Path:
    """Step-3 vault: H-9/H-10 word for word the same (no observation can separate them; H-9 is the
    lower id although "H-10" sorts first as text); H-3/H-4 the same but for the crop, and O-1 names
    only H-3's crop; H-5 unrelated."""
    start_vault(root)
    write_hypothesis(root, "H-9", WARM_TITLE, WARM, "S-1", "Results")
    write_hypothesis(root, "H-10", WARM_TITLE, WARM, "S-2", "Table 2")
    write_hypothesis(
        root, "H-3", "Sowing dust impairs forager homing", SOWING.format(crop="maize"), "S-3", "Discussion"
    )
    write_hypothesis(
        root, "H-4", "Sowing dust impairs forager homing", SOWING.format(crop="rapeseed"), "S-4", "Abstract"
    )
    write_hypothesis(
        root,
        "H-5",
        "Nosema shortens the life of winter bees",
        "Nosema ceranae infections shorten the lifespan of winter bees so the cluster shrinks below a "
        "viable size by February.",
        "S-5",
        "Results",
    )
    write_node(
        root,
        "observations-and-facts",
        "O-1",
        "Forager losses only beside maize",
        statement="Forager losses were recorded only beside freshly sown maize.",
        source=f"[[{SOURCES['S-3']}]]",
        locator="Figure 2",
    )
    return root


# -- the example vault through the CLI, and the real vaults ---------------------------------------


@pytest.fixture(scope="module")
def cli_runs(tmp_path_factory):
    """``hypograph structure --llm offline`` on copies of the example vault and both real vaults,
    through the command's ``main`` in this process (the console script's run of the same commands
    is tests/cli/test_golden_outputs.py's). name -> (root, snapshot before, completed process)."""
    base = tmp_path_factory.mktemp("cli")
    sources = {"example": EXAMPLE_VAULT, **{name: SHARED_VAULTS / name for name in REAL_VAULTS}}
    out = {}
    for name, src in sources.items():
        if (src / "hypotheses").is_dir():
            root = copy_tree(src, base / name)
            before = snapshot(root)
            out[name] = (root, before, in_process("structure", root, "--llm", "offline"))
    return out


def cli_run(cli_runs, name):
    if name not in cli_runs:
        pytest.skip(f"{name} is not available")
    return cli_runs[name]


def test_structure_cli_on_example_vault(cli_runs):
    root, before, proc = cli_run(cli_runs, "example")
    assert proc.returncode == 0, proc.stderr
    assert failures(root) == {}
    assert hypograph("check", root).returncode == 0
    assert_step3_files_kept(before, snapshot(root))
    hcs, hyps = clusters(root), hypotheses(root)
    assert hcs
    for hc in hcs.values():
        assert_well_formed_cluster(hc, hyps)
        assert hc.id in proc.stdout
    assert_map_counts((root / MAP).read_text(encoding="utf-8"), before, hcs, hyps)


def assert_step3_files_kept(before: dict, after: dict) -> None:
    """Every step-3 file is still there: hypotheses moved at most, everything else byte-identical."""
    for rel, (data, _mtime) in before.items():
        if rel.startswith("hypotheses/"):
            name = Path(rel).name
            assert any(
                f"{folder}/{name}" in after for folder in ("hypotheses", "hypotheses/merged", "hypotheses/dropped")
            ), rel
        else:
            assert after[rel][0] == data, rel


def assert_well_formed_cluster(hc, hyps: dict) -> None:
    """In its folder, named by its id, its residual (minted, sourceless) last, every member's backlink naming it."""
    assert hc.path.parent == Path("hypothesis-clusters")
    assert hc.path.name.startswith(f"{hc.id} - ")
    ids = members(hc)
    assert [hyps[i].meta.get("residual") is True for i in ids] == [False] * (len(ids) - 1) + [True]
    assert hyps[ids[-1]].meta["origin"] == "step-4-residual" and not hyps[ids[-1]].meta["source"]
    assert all(hyps[i].meta["cluster"] == hc.link for i in ids)


def assert_map_counts(text: str, before: dict, hcs: dict, hyps: dict) -> None:
    """The structure map: dated, every cluster linked, the counts of the vault as it is."""
    assert re.search(r"^generated: \d{4}-\d{2}-\d{2}$", text, re.M)
    for hc in hcs.values():
        assert f"[[{hc.path.stem}]]" in text
    states = [h.meta["state"] for h in hyps.values()]
    assert f"| active | {states.count('active')} |" in text
    assert f"| merged | {states.count('merged')} |" in text
    assert f"| dropped | {states.count('dropped')} |" in text
    assert f"| clusters | {len(hcs)} |" in text
    minted = sum(1 for h in hyps.values() if h.meta.get("origin"))
    assert f"| hypotheses minted at 4b (residuals, complements) | {minted} |" in text
    assert f"| H in (step 3) | {sum(1 for p in before if p.startswith('hypotheses/'))} |" in text


@pytest.mark.parametrize("name", ["example", *REAL_VAULTS])
def test_structure_cli_writes_the_recorded_bytes(cli_runs, name):
    """Every file of the structured vault, and the command's output, as recorded before the core
    was refactored (tests/support/record_structure.py re-records, for an intended change only)."""
    root, _, proc = cli_run(cli_runs, name)
    assert proc.returncode == 0, proc.stderr
    recorded = json.loads(RECORDED_STRUCTURE.read_text(encoding="utf-8"))[name]
    fresh = structure_record(root, proc.stdout)
    differ = sorted(rel for rel in fresh.keys() | recorded.keys() if fresh.get(rel) != recorded.get(rel))
    assert [rel for rel in differ if rel != "<stdout>"] == [], [rel for rel in differ if rel != "<stdout>"]
    assert fresh["<stdout>"] == recorded["<stdout>"]


@pytest.fixture(scope="module")
def rerun(cli_runs, tmp_path_factory):
    """A copy of the structured example vault (mtimes kept) before and after a second run."""
    src, _, proc = cli_run(cli_runs, "example")
    assert proc.returncode == 0, proc.stderr
    # under its own folder name: the report's pictures name the folder
    root = Path(shutil.copytree(src, tmp_path_factory.mktemp("rerun") / src.name))
    before = snapshot(root, exclude=(".hypograph",))
    assert run_job(root).success
    return root, before, snapshot(root, exclude=(".hypograph",))


def test_second_run_changes_no_node_and_mints_nothing(rerun):
    root, before, after = rerun
    assert without(after, ("proximity/",)) == without(before, ("proximity/",))  # bytes and mtimes
    assert failures(root) == {}


def test_second_run_changes_no_file_outside_state_dir(rerun):
    _root, before, after = rerun
    assert after == before


def test_third_run_leaves_proximity_untouched(rerun):
    """Once the residuals are embedded, proximity's output is stable too (graph.json kept, mtime included)."""
    root, _, _ = rerun
    before = snapshot(root, exclude=(".hypograph",))
    assert run_job(root).success
    assert snapshot(root, exclude=(".hypograph",)) == before


@pytest.mark.parametrize("name", REAL_VAULTS)
def test_structure_cli_leaves_structured_real_vault_alone(cli_runs, name):
    root, before, proc = cli_run(cli_runs, name)
    assert proc.returncode == 0, proc.stderr
    assert failures(root) == {}
    after = snapshot(root)
    # Evidence links, arguments, reports, hypotheses and clusters: every byte and mtime as it was.
    assert without(after, TOOL_DIRS + (str(MAP),)) == without(before, (str(MAP),))
    assert all(rel.startswith(TOOL_DIRS) for rel in after.keys() - before.keys())
    # Already structured: nothing to merge, drop, carve or mint.
    assert node_files(root) == sorted(p for p in before if p.endswith(".md"))


@pytest.mark.parametrize("name, step3", [("covid1", 5), ("eggs1", 10)])
def test_structured_vault_keeps_its_own_map_and_counts_its_step3_hypotheses(cli_runs, name, step3):
    root, _, _ = cli_run(cli_runs, name)
    # The seed pipeline's own map lists exactly the vault's clusters, so it is left as written.
    assert (root / MAP).read_bytes() == (SHARED_VAULTS / name / MAP).read_bytes()
    assert structure_counts(open_vault(root))["H in (step 3)"] == step3


# -- offline merge, the discriminability test, unmerge ----------------------------------------------


@pytest.fixture(scope="module")
def bee_structured(tmp_path_factory):
    root = build_bee_vault(tmp_path_factory.mktemp("bees") / "vault")
    originals = {p.name: p.read_text(encoding="utf-8") for p in (root / "hypotheses").glob("*.md")}
    assert run_job(root).success
    return root, originals


def test_offline_merge_bookkeeping(bee_structured):
    root, originals = bee_structured
    hyps = hypotheses(root)
    survivor, absorbed = hyps["H-9"], hyps["H-10"]

    assert absorbed.path == Path("hypotheses/merged") / f"H-10 - {WARM_TITLE}.md"
    assert absorbed.meta["state"] == "merged"
    assert absorbed.meta["merged_into"] == survivor.link
    # The absorbed node's step-3 lines stay verbatim; only the two disposition fields are added.
    original = originals[absorbed.path.name].split("---\n")[1].splitlines(keepends=True)
    assert frontmatter_lines(root / absorbed.path) == original + [
        "state: merged\n",
        f'merged_into: "{survivor.link}"\n',
    ]

    assert survivor.path == Path("hypotheses") / f"H-9 - {WARM_TITLE}.md"
    assert survivor.meta["state"] == "active"
    assert survivor.meta["source"] == f"[[{SOURCES['S-1']}]]"
    assert survivor.meta["merged_from"] == [absorbed.link]
    assert survivor.meta["additional_sources"] == [f"[[{SOURCES['S-2']}]]"]
    assert survivor.meta["locator"] == ["S-1: Results", "S-2: Table 2"]
    assert survivor.meta["statement"] == WARM
    assert "generalization_note" not in survivor.meta  # not widened
    assert failures(root) == {}


def test_both_look_alike_pairs_are_auto_merge_candidates(tmp_path):
    """The premise of the two tests around this one: proximity auto-merges both pairs (TF-IDF > 0.92)."""
    root = build_bee_vault(tmp_path / "vault")
    assert execute(root, "proximity").success
    auto = {d.pair for d in read_verdicts(root) if d.verdict == "MERGE" and d.decided_by == "auto"}
    assert auto == {("H-3", "H-4"), ("H-9", "H-10")}


def test_offline_keeps_pair_an_observation_separates(bee_structured):
    root, _ = bee_structured
    hyps = hypotheses(root)
    assert hyps["H-3"].meta["state"] == hyps["H-4"].meta["state"] == "active"
    assert "merged_from" not in hyps["H-3"].meta


def test_absorbing_a_survivor_keeps_merged_into_one_hop(tmp_path):
    """H-2 was merged into H-3 earlier; now H-3 is absorbed by H-1: H-2 must point at H-1."""
    root = start_vault(tmp_path / "vault")
    h1 = write_hypothesis(root, "H-1", WARM_TITLE, WARM, "S-1", "Results")
    h3 = write_node(
        root,
        "hypotheses",
        "H-3",
        WARM_TITLE,
        statement=WARM,
        question=BEE_QUESTION,
        source=f"[[{SOURCES['S-3']}]]",
        locator=["S-3: Discussion", "S-2: Table 2"],
        state="active",
        merged_from=[f"[[H-2 - {WARM_TITLE}]]"],
        additional_sources=[f"[[{SOURCES['S-2']}]]"],
    )
    write_node(
        root,
        "hypotheses/merged",
        "H-2",
        WARM_TITLE,
        statement=WARM,
        question=BEE_QUESTION,
        source=f"[[{SOURCES['S-2']}]]",
        locator="Table 2",
        state="merged",
        merged_into=f"[[{h3.stem}]]",
    )
    write_hypothesis(
        root,
        "H-5",
        "Nosema shortens the life of winter bees",
        "Nosema ceranae shortens the life of winter bees.",
        "S-5",
        "Results",
    )

    assert run_job(root).success
    hyps = hypotheses(root)
    assert hyps["H-3"].meta["merged_into"] == hyps["H-2"].meta["merged_into"] == f"[[{h1.stem}]]"
    assert hyps["H-3"].path.parent == hyps["H-2"].path.parent == Path("hypotheses/merged")
    survivor = hyps["H-1"].meta
    assert sorted(map(link_target, survivor["merged_from"])) == ["H-2", "H-3"]
    assert sorted(map(link_target, survivor["additional_sources"])) == ["S-2", "S-3"]
    assert [entry.split(":")[0] for entry in survivor["locator"]] == ["S-1", "S-3", "S-2"]
    assert failures(root) == {}


def test_unmerge_restores_and_is_not_merged_again(bee_structured, tmp_path):
    root = Path(shutil.copytree(bee_structured[0], tmp_path / "vault"))
    step3_locator = read_baseline(root)["H-9"]["locator"]

    proc = hypograph("unmerge", root, "H-10")
    assert proc.returncode == 0, proc.stderr
    assert "H-10" in proc.stdout

    hyps = hypotheses(root)
    restored, survivor = hyps["H-10"], hyps["H-9"]
    assert restored.path == Path("hypotheses") / f"H-10 - {WARM_TITLE}.md"
    assert restored.meta["state"] == "active" and "merged_into" not in restored.meta
    for key in ("merged_from", "additional_sources", "generalization_note"):
        assert key not in survivor.meta
    assert survivor.meta["locator"] == step3_locator
    assert survivor.meta["source"] == f"[[{SOURCES['S-1']}]]"

    assert run_job(root).success
    hyps = hypotheses(root)
    assert hyps["H-10"].meta["state"] == "active" and hyps["H-10"].path.parent == Path("hypotheses")
    assert "merged_from" not in hyps["H-9"].meta
    ledger = json.loads((root / LEDGER).read_text(encoding="utf-8"))
    assert ledger["pairs"]["H-9|H-10"]["decision"] == "KEEP"
    assert ledger["pairs"]["H-9|H-10"]["decided_by"] == "human"
    assert failures(root) == {}


def test_unmerge_refuses_a_node_that_is_not_merged(bee_structured):
    proc = hypograph("unmerge", bee_structured[0], "H-5")
    assert proc.returncode == 1
    assert "H-5" in proc.stderr and "not merged" in proc.stderr


# -- the seed's micro-example with a model (the LLM stub) ---------------------------------------------

WIDENED = "Direct predation by arriving humans, whether on adults or on juveniles, drove the extinction."
GENERALIZATION = "widened 'hunting of juveniles' to 'direct predation'; no in-scope observation separates them"
DROP_REASON = "concerns the taxonomy of one extinct genus only; discriminates no cluster's members"
CLUSTER = {
    "name": "Dominant driver of the extinction pulse",
    "question": "What was the dominant driver of the Sahul megafauna extinction pulse (~45–40 ka)?",
    "exclusivity": "each names a different dominant driver of one pulse; at most one dominated",
    "independence": "the driver question and the arrival-chronology question factorize; "
    "neither answer constrains the other's base rate",
    "relevance": "this is the main question's own sub-question",
    "depends_on": [],
    "exhaustive_by_construction": False,
    "residual_title": "Some driver not listed above dominated",
    "residual_statement": "the answer is something not listed here, "
    "e.g. a disease or trophic cascade no one in this literature has proposed",
    "carving_justification": "The three members name rival dominant drivers of the same pulse; "
    "O-22 separates the human ones.",
}
TAG_RE = re.compile(r"<(\w[\w-]*)((?: \w+=\"[^\"]*\")*)>\n(.*?)\n</\1>", re.S)


def tagged(body: dict, tag: str) -> list[tuple[dict, dict]]:
    """The ``<tag attr="…">{json}</tag>`` blocks of a request's question: (attributes, content)."""
    prompt = next(m["content"] for m in body["messages"] if m["role"] == "user")
    return [
        (dict(re.findall(r'(\w+)="([^"]*)"', attrs)), json.loads(content))
        for name, attrs, content in TAG_RE.findall(prompt)
        if name == tag
    ]


def pair_answer(body: dict) -> dict:
    """The seed's micro-example, pair by pair: H-3/H-127 merge (widened), O-22 separates H-3/H-11."""
    o22 = [int(a["number"]) for a, c in tagged(body, "observation") if "five thousand years" in c["statement"]]

    def judge(a: str, b: str) -> dict:
        if {a, b} == {"H-3", "H-127"}:
            return {
                "decision": "MERGE",
                "widened_statement": WIDENED,
                "generalization_note": GENERALIZATION,
                "rationale": "Same core claim: people killed the megafauna directly.",
            }
        if {a, b} == {"H-3", "H-11"}:
            return {
                "discriminating_observations": o22,
                "rationale": "O-22: survival past arrival fits a slow squeeze, not a rapid kill-off.",
            }
        return {"rationale": "Different cores: these name different drivers or topics."}

    return merge_answer(body, judge)


def is_taxonomy(content: dict) -> bool:
    return "Genyornis" in content["title"]


def topic_answer(body: dict) -> dict:
    return {
        "items": [
            {
                "hypothesis": int(a["number"]),
                "off_topic": is_taxonomy(c),
                "drop_reason": DROP_REASON if is_taxonomy(c) else None,
            }
            for a, c in tagged(body, "hypothesis")
        ]
    }


def carve_answer(body: dict, extra_member: int | None = None) -> dict:
    hyps = tagged(body, "hypothesis")
    numbers = [int(a["number"]) for a, c in hyps if not is_taxonomy(c)]
    return {
        "clusters": [{**CLUSTER, "members": numbers + ([extra_member] if extra_member else [])}],
        "stragglers": [{"hypothesis": int(a["number"]), "drop_reason": DROP_REASON} for a, c in hyps if is_taxonomy(c)],
    }


def bad_carve_answer(body: dict) -> dict:
    """Names hypothesis number 99, which the question does not have."""
    return carve_answer(body, extra_member=99)


def system_of(body: dict) -> str:
    return next(m["content"] for m in body["messages"] if m["role"] == "system")


def sahul_model(carve=carve_answer):
    """Route each request by its task (the system prompt) and answer as the seed's micro-example does."""

    def respond(body: dict):
        system = system_of(body)
        if system.startswith(MERGE_SYSTEM):
            return answer(pair_answer(body))
        if system.startswith(TOPIC_SYSTEM):
            return answer(topic_answer(body))
        if system.startswith(CARVE_SYSTEM):
            return answer(carve(body))
        if asked_clusters(body):
            return answer(cluster_label_answer(body))
        if asked_pairs(body):
            return answer(adjudication_answer(body, "KEEP"))
        raise AssertionError(f"unexpected request: {system[:80]!r}")

    return respond


def replying(build):
    """A stub responder answering with ``build(body)``."""
    return lambda body: answer(build(body))


def carve_requests(stub) -> list:
    return [r for r in stub.requests if r.system.startswith(CARVE_SYSTEM)]


@pytest.fixture
def sahul(tmp_path) -> Path:
    return Path(shutil.copytree(SAHUL, tmp_path / "sahul"))


def test_micro_example_with_a_model(sahul, llm_server, llm_env):
    llm_env(llm_server)
    llm_server.always(sahul_model())
    step3 = {p.name: p.read_text(encoding="utf-8") for p in (sahul / "hypotheses").glob("*.md")}

    result = run_job(sahul, offline=False)
    assert result.success
    assert failures(sahul) == {}
    hyps = hypotheses(sahul)

    assert_4a_merge_with_the_seeds_bookkeeping(sahul, hyps, step3)
    assert_4a_keep_and_drop(sahul, hyps)
    assert_4b_one_cluster(sahul, hyps)
    # The model saw the hypotheses by number in the carving prompt, never asked for ids.
    (carve,) = carve_requests(llm_server)
    assert [a["number"] for a, _ in tagged(carve.body, "hypothesis")] == ["1", "2", "3"]


def assert_4a_merge_with_the_seeds_bookkeeping(sahul: Path, hyps: dict, step3: dict) -> None:
    """4a: H-127 merged into H-3 with the seed's bookkeeping."""
    h3, h127 = hyps["H-3"], hyps["H-127"]
    assert h127.path.parent == Path("hypotheses/merged")
    assert h127.meta["state"] == "merged" and h127.meta["merged_into"] == h3.link
    assert frontmatter_lines(sahul / h127.path)[:-2] == step3[h127.path.name].split("---\n")[1].splitlines(
        keepends=True
    )
    assert h3.meta["merged_from"] == ["[[H-127 - Hunting of juveniles drove the extinction]]"]
    assert h3.meta["source"] == "[[S-1 - Ardent 2016 - Kill sites and butchered remains of Sahul megafauna]]"
    assert h3.meta["additional_sources"] == [
        "[[S-6 - Esterhuizen 2021 - Age structure of megafaunal death assemblages]]"
    ]
    assert h3.meta["locator"] == ["S-1: §Results", "S-6: §3.2"]
    assert h3.meta["statement"] == WIDENED
    assert h3.meta["generalization_note"] == GENERALIZATION
    assert h3.meta["quote"] == "a blitzkrieg of hunting on naive prey"


def assert_4a_keep_and_drop(sahul: Path, hyps: dict) -> None:
    """H-11 kept (O-22 separates it from H-3); H-133 dropped as off-topic."""
    assert hyps["H-11"].meta["state"] == "active" and "merged_into" not in hyps["H-11"].meta
    ledger = json.loads((sahul / LEDGER).read_text(encoding="utf-8"))
    assert ledger["pairs"]["H-3|H-127"]["decision"] == "MERGE"
    assert ledger["pairs"]["H-3|H-11"]["decision"] == "KEEP"
    assert ledger["pairs"]["H-3|H-11"]["rationale"].startswith("O-22")
    assert ledger["topics"]["H-133"]["drop"] is True
    h133 = hyps["H-133"]
    assert h133.path.parent == Path("hypotheses/dropped")
    assert h133.meta["state"] == "dropped" and h133.meta["drop_reason"] == DROP_REASON


def assert_the_minted_residual(residual) -> None:
    """H-134: minted at 4b as the cluster's residual, without a source."""
    assert residual.path == Path("hypotheses/H-134 - Some driver not listed above dominated.md")
    assert residual.meta["residual"] is True and residual.meta["origin"] == "step-4-residual"
    assert residual.meta["statement"] == CLUSTER["residual_statement"]
    assert not residual.meta["source"]


def assert_4b_one_cluster(sahul: Path, hyps: dict) -> None:
    """4b: one cluster, members by ascending id, the minted residual last."""
    (hc,) = clusters(sahul).values()
    assert hc.path == Path("hypothesis-clusters/HC-1 - Dominant driver of the extinction pulse.md")
    assert members(hc) == ["H-3", "H-11", "H-21", "H-134"]  # ids minted 1 past the highest, never by the model
    for key in ("question", "exclusivity", "independence", "relevance", "depends_on"):
        assert hc.meta[key] == CLUSTER[key], key
    assert hc.meta["exhaustive_by_construction"] is False
    embeds = [line for line in hc.body.splitlines() if line.startswith("![[")]
    assert [link_target(line) for line in embeds] == members(hc)
    assert_the_minted_residual(hyps["H-134"])
    for h_id in members(hc):
        assert hyps[h_id].meta["cluster"] == hc.link
    assert "[[HC-1 - Dominant driver of the extinction pulse]]" in (sahul / MAP).read_text(encoding="utf-8")


def structure_4b_with_model(root: Path) -> None:
    """4a offline (everything stays active), then 4b with the configured model."""
    run_dispositions(open_vault(root), [], None, OfflinePolicy())
    run_clusters(open_vault(root), policy_for(LLMClient(llm_config(), root / ".hypograph", "4b")))


def test_carving_naming_unknown_hypothesis_is_asked_again(sahul, llm_server, llm_env):
    llm_env(llm_server)
    llm_server.script(replying(bad_carve_answer)).always(replying(carve_answer))
    structure_4b_with_model(sahul)

    first, second = carve_requests(llm_server)
    assert "invalid" in second.last_user and "99" in second.last_user
    (hc,) = clusters(sahul).values()
    assert members(hc) == ["H-3", "H-11", "H-21", "H-127", "H-134"]
    assert hypotheses(sahul)["H-133"].meta["state"] == "dropped"  # the model's straggler
    assert failures(sahul) == {}


def test_persistently_bad_carving_falls_back_to_offline_grouping(sahul, llm_server, llm_env):
    llm_env(llm_server)
    llm_server.always(replying(bad_carve_answer))
    structure_4b_with_model(sahul)

    assert len(carve_requests(llm_server)) == 3  # the question and two re-asks
    hcs = clusters(sahul)
    assert hcs
    for hc in hcs.values():
        assert "this offline grouping stands in" in hc.body
        assert "rejected" in hc.body
    assert failures(sahul) == {}


DEPENDENCE = "a wetter climate would have slowed a burning-driven squeeze"


def two_cluster_answer(body: dict) -> dict:
    """Humans vs climate as two clusters that depend on each other, the first with a constructed complement."""
    number = {c["title"].split()[0]: int(a["number"]) for a, c in tagged(body, "hypothesis")}
    base = {k: v for k, v in CLUSTER.items() if k not in ("name", "question")}
    return {
        "clusters": [
            {
                **base,
                "name": "How people drove the extinction",
                "members": [number["Direct"], number["Indirect"], number["Hunting"]],
                "depends_on": [{"cluster": 2, "note": DEPENDENCE}],
                "constructed": [
                    {
                        "title": "People played no part in the extinction",
                        "statement": "Humans had no causal role in the extinction pulse at all.",
                        "reason": "the complement of the human answers, which no paper stated",
                    }
                ],
            },
            {
                **base,
                "name": "Whether climate drove the extinction",
                "members": [number["Climate-driven"]],
                "depends_on": [{"cluster": 1, "note": "human burning also dried the landscape"}],
            },
        ],
        "stragglers": [{"hypothesis": number["Genyornis"], "drop_reason": DROP_REASON}],
    }


def test_carving_with_a_constructed_member(sahul, llm_server, llm_env):
    llm_env(llm_server)
    llm_server.always(replying(two_cluster_answer))
    structure_4b_with_model(sahul)
    hcs, hyps = clusters(sahul), hypotheses(sahul)
    assert {hc.title: members(hc) for hc in hcs.values()} == {
        "How people drove the extinction": ["H-3", "H-11", "H-127", "H-134", "H-135"],
        "Whether climate drove the extinction": ["H-21", "H-136"],
    }
    constructed = hyps["H-134"]
    assert constructed.title == "People played no part in the extinction"
    assert constructed.meta["origin"] == "step-4-constructed" and not constructed.meta["source"]
    assert "no paper stated" in constructed.body
    assert [hyps[i].meta.get("residual") for i in ("H-134", "H-135", "H-136")] == [None, True, True]
    assert hcs["HC-2"].meta["depends_on"] == ["HC-1: human burning also dried the landscape"]
    assert failures(sahul) == {}


@pytest.mark.parametrize("when", ["before", "after"])
def test_cluster_interrupted_while_minting_its_constructed_member_is_completed(
    sahul, llm_server, llm_env, monkeypatch, when
):
    """The crash hits the constructed member's minting (before or after its file is written); the
    next run mints it exactly once and the cluster ends whole."""
    llm_env(llm_server)
    llm_server.always(replying(two_cluster_answer))
    real_create_node = carving_apply.create_node

    def crash_at_constructed(vault_root, node_type, title, meta=None, body="", folder=None):
        if (meta or {}).get("origin") != "step-4-constructed":
            return real_create_node(vault_root, node_type, title, meta, body, folder)
        if when == "after":
            real_create_node(vault_root, node_type, title, meta, body, folder)
        raise RuntimeError("injected crash while minting a constructed member")

    monkeypatch.setattr(carving_apply, "create_node", crash_at_constructed)
    with pytest.raises(RuntimeError, match="injected"):
        structure_4b_with_model(sahul)
    monkeypatch.undo()
    structure_4b_with_model(sahul)

    hcs, hyps = clusters(sahul), hypotheses(sahul)
    constructed = [h for h in hyps.values() if h.meta.get("origin") == "step-4-constructed"]
    assert [h.title for h in constructed] == ["People played no part in the extinction"]
    people = next(hc for hc in hcs.values() if hc.title == "How people drove the extinction")
    assert constructed[0].id in members(people) and hyps[members(people)[-1]].meta.get("residual") is True
    assert failures(sahul) == {}


def test_carve_interrupted_right_after_minting_a_cluster_is_completed_as_decided(
    sahul, llm_server, llm_env, monkeypatch
):
    """The crash hits just after the second HC file is written, before its id is on record: the
    next run finishes the saved carve (no second model call, no second HC) with the model's own
    constructed member, residuals, depends_on notes and straggler drop."""
    llm_env(llm_server)
    llm_server.always(replying(two_cluster_answer))
    real_create_node = carving_apply.create_node
    clusters_minted = []

    def crash_after_second_cluster(vault_root, node_type, title, meta=None, body="", folder=None):
        result = real_create_node(vault_root, node_type, title, meta, body, folder)
        if node_type == "hypothesis-cluster":
            clusters_minted.append(result[0])
            if len(clusters_minted) == 2:
                raise RuntimeError("injected crash right after minting a cluster")
        return result

    monkeypatch.setattr(carving_apply, "create_node", crash_after_second_cluster)
    with pytest.raises(RuntimeError, match="injected"):
        structure_4b_with_model(sahul)
    monkeypatch.undo()
    calls = len(carve_requests(llm_server))
    structure_4b_with_model(sahul)

    assert len(carve_requests(llm_server)) == calls  # the saved carve is finished, not asked again
    hcs, hyps = clusters(sahul), hypotheses(sahul)
    assert sorted(hcs) == ["HC-1", "HC-2"]
    assert [h.title for h in hyps.values() if h.meta.get("origin") == "step-4-constructed"] == [
        "People played no part in the extinction"
    ]
    assert hcs["HC-1"].meta["depends_on"] == [f"HC-2: {DEPENDENCE}"]
    assert hcs["HC-2"].meta["depends_on"] == ["HC-1: human burning also dried the landscape"]
    assert hyps["H-133"].meta["state"] == "dropped"
    for hc in hcs.values():
        residual = hyps[members(hc)[-1]]
        assert residual.meta.get("residual") is True and residual.meta["statement"] == CLUSTER["residual_statement"]
    assert failures(sahul) == {}


def test_depends_on_a_later_cluster_is_kept(sahul, llm_server, llm_env):
    llm_env(llm_server)
    llm_server.always(replying(two_cluster_answer))
    structure_4b_with_model(sahul)
    assert clusters(sahul)["HC-1"].meta["depends_on"] == [f"HC-2: {DEPENDENCE}"]


def keep_except(merge: set[str]):
    """A model that merges exactly the pair ``merge``, keeps every other pair and drops nothing."""

    def respond(body: dict):
        system = system_of(body)
        if system.startswith(MERGE_SYSTEM):
            return answer(merge_answer(body, lambda a, b: {"decision": "MERGE"} if {a, b} == merge else {}))
        if system.startswith(TOPIC_SYSTEM):
            return answer(
                {
                    "items": [
                        {"hypothesis": int(a["number"]), "off_topic": False, "drop_reason": None}
                        for a, _ in tagged(body, "hypothesis")
                    ]
                }
            )
        return sahul_model()(body)

    return respond


def test_model_run_on_structured_vault_keeps_its_clusters_whole(tmp_path, llm_server, llm_env):
    root = shared_copy("eggs1", tmp_path / "eggs1")
    llm_env(llm_server)
    llm_server.always(keep_except({"H-9", "H-10"}))
    result = run_job(root, offline=False)
    assert failures(root) == {}
    assert result.success


def test_dropping_a_survivor_takes_what_it_absorbed_along(tmp_path):
    """A survivor judged off-topic later (say, once a model is configured) is dropped with the node
    merged into it, which keeps its merge on record as former_merged_into: check 1 still holds."""
    root = build_bee_vault(tmp_path / "vault")
    auto = Decision(
        pair=("H-9", "H-10"),
        similarity=1.0,
        verdict="MERGE",
        rationale="Auto-merge candidate.",
        recommended_action="Retire H-10",
        decided_by="auto",
    )
    run_dispositions(open_vault(root), [auto], None, OfflinePolicy())
    assert survivors(root) == {"H-9": ["H-10"]}
    ledger = read_ledger(root)
    ledger.topics["H-9"] = TopicDecision(id="H-9", drop=True, drop_reason="Off the question.", decided_by="model:m")
    apply_dispositions(open_vault(root), ledger)

    hyps = hypotheses(root)
    assert hyps["H-9"].path.parent == Path("hypotheses/dropped")
    assert hyps["H-10"].path.parent == Path("hypotheses/dropped")
    assert hyps["H-10"].meta["state"] == "dropped" and "merged_into" not in hyps["H-10"].meta
    assert link_target(hyps["H-10"].meta["former_merged_into"]) == "H-9"
    assert "H-9" in hyps["H-10"].meta["drop_reason"]
    assert all_checks(open_vault(root), read_baseline(root))[1] == []


def survivors(root: Path) -> dict[str, list[str]]:
    """Survivor -> absorbed ids, read off the vault."""
    return {
        h.id: [link_target(m) for m in h.meta["merged_from"]]
        for h in hypotheses(root).values()
        if h.meta.get("merged_from")
    }


# -- crash safety -------------------------------------------------------------------------------------


def ids_on_disk(root: Path) -> list[str]:
    """The id of every node file (from its name), with repeats if a node sits in two places."""
    return sorted(
        re.match(r"[A-Z]+-\d+", Path(p).name).group(0)
        for p in node_files(root)
        if re.match(r"[A-Z]+-\d+ - ", Path(p).name)
    )


def test_merge_interrupted_between_journal_steps_is_completed_by_next_run(tmp_path, monkeypatch):
    root = build_bee_vault(tmp_path / "vault")
    before = ids_on_disk(root)
    real_apply_step = journal_module.apply_step
    calls = []

    def crash_after_first_step(vault_root, step):
        calls.append(step)
        if len(calls) > 1:
            raise RuntimeError("injected crash between journal steps")
        return real_apply_step(vault_root, step)

    monkeypatch.setattr(journal_module, "apply_step", crash_after_first_step)
    assert not run_job(root).success
    assert len(calls) == 2
    assert ids_on_disk(root) == before  # nothing lost, nothing in two places
    assert (root / JOURNAL).exists()

    monkeypatch.undo()
    assert run_job(root).success
    assert not (root / JOURNAL).exists()
    after = ids_on_disk(root)
    assert len(after) == len(set(after)) and set(before) <= set(after)
    hyps = hypotheses(root)
    assert hyps["H-10"].meta["state"] == "merged" and hyps["H-10"].path.parent == Path("hypotheses/merged")
    assert hyps["H-9"].meta["merged_from"] == [hyps["H-10"].link]
    assert failures(root) == {}


@pytest.mark.parametrize("when", ["before", "after"])
def test_cluster_interrupted_before_its_residual_is_completed_by_next_run(tmp_path, monkeypatch, when):
    """The crash hits the residual's minting: before the file is written, or after it is written but
    before the cluster lists it. The next run must end with exactly one residual per cluster."""
    root = build_bee_vault(tmp_path / "vault")
    real_create_node = carving_apply.create_node

    def crash_at_residual(vault_root, node_type, title, meta=None, body="", folder=None):
        if not (meta or {}).get("residual"):
            return real_create_node(vault_root, node_type, title, meta, body, folder)
        if when == "after":
            real_create_node(vault_root, node_type, title, meta, body, folder)
        raise RuntimeError("injected crash while minting a residual")

    monkeypatch.setattr(carving_apply, "create_node", crash_at_residual)
    assert not run_job(root).success
    hcs_after_crash = sorted(clusters(root))
    assert hcs_after_crash
    orphans = [h for h in hypotheses(root).values() if h.meta.get("residual")]
    assert len(orphans) == (1 if when == "after" else 0)

    monkeypatch.undo()
    assert run_job(root).success
    hcs = clusters(root)
    assert sorted(hcs) == hcs_after_crash  # no cluster minted twice
    residuals = [h.id for h in hypotheses(root).values() if h.meta.get("residual")]
    assert len(residuals) == len(hcs)
    for hc in hcs.values():
        assert members(hc)[-1] in residuals
        assert sum(m in residuals for m in members(hc)) == 1
    assert failures(root) == {}


def test_same_source_locators_merge_place_by_place():
    from hypograph.structure.dispositions.merge import absorb
    from hypograph.vault.nodes import Node, parse_node

    def node(node_id: str, locator) -> Node:
        meta = {
            "type": "hypothesis",
            "id": node_id,
            "statement": "s",
            "source": "[[S-1 - Okafor 2019]]",
            "locator": locator,
        }
        return parse_node(node_markdown(meta), Path(f"hypotheses/{node_id} - T.md"))

    survivor = node("H-1", "p. 4; fig. 2")
    absorb(survivor, [node("H-2", "p. 4; fig. 2"), node("H-3", "p. 1")], None)
    assert survivor.meta["locator"] == ["S-1: p. 4; fig. 2; p. 1"]
    assert "additional_sources" not in survivor.meta  # one paper: nothing to add beside its own source


def test_a_hypothesis_missing_from_the_embeddings_is_embedded_with_their_own_analyzer():
    """4a embeds a hypothesis the embeddings lack into their space: the seed's vectorizer keeps the
    words the tuned one drops (stop words), so the row is not that of the wrong analyzer."""
    from hypograph.proximity.embed import embed
    from hypograph.structure.dispositions.candidates import embed_like

    texts = ["the bees die over the winter", "the mites carry the virus"]
    for model, keeps_the in (("seed", True), ("tuned", False)):
        emb = embed(["H-1", "H-2"], texts, "tfidf", model)
        row = embed_like(emb, ["the winter"]).toarray()[0]
        assert ("the" in emb.vocabulary) is keeps_the
        assert row[emb.vocabulary.index("winter")] > 0
        if keeps_the:
            assert row[emb.vocabulary.index("the")] > 0
