"""Vault safety under hostile and unusual input (issue 13).

Each test builds the hostile input itself and asserts a one-line error naming the file (or the
documented safe outcome), that no file outside the input is touched, that no node is lost, and that
the next run on the repaired input completes. Step 4 runs in-process (``structure``) where the
command line adds nothing; the CLIs run as subprocesses where their one-line output is the point.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helper import HYPOGRAPH, PROX, hypograph, in_process, prox, run, start_hypograph
from conftest import build_run_dir, build_vault, node_markdown, offline_env, write_vault_node

from hypograph.errors import HypographError
from hypograph.hypotheses import load_corpus
from hypograph.journal import JOURNAL
from hypograph.llm import OfflinePolicy
from hypograph.paths import MAX_NAME_BYTES, NAME_MAX
from hypograph.structure.baseline import read_baseline
from hypograph.structure.carving import run_clusters
from hypograph.structure.checks import all_checks
from hypograph.structure.dispositions import run_dispositions
from hypograph.vault.mint import create_node, highest_id
from hypograph.vault.nodes import clean_title
from hypograph.vault.vault import open_vault

QUESTION = "Why do honeybee colonies die over winter?"


# -- helpers --------------------------------------------------------------------------------------


def tree(root: Path) -> dict[str, bytes | str]:
    """relative path -> bytes of every file (a symlink -> ``"-> target"``), links never followed."""
    out: dict[str, bytes | str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            rel = str(path.relative_to(root))
            if path.is_symlink():
                out[rel] = f"-> {os.readlink(path)}"
            elif name in filenames:
                out[rel] = path.read_bytes()
    return out


def nodes_of(root: Path) -> dict[str, bytes | str]:
    """The user's files of an input (the tool's state folder and proximity output left out)."""
    return {k: v for k, v in tree(root).items() if not k.startswith((".hypograph", "proximity", ".create_node"))}


def structure(root: Path) -> None:
    """Step 4a then 4b, offline, in this process (what the ``structure`` job's assets call)."""
    run_dispositions(open_vault(root), [], None, OfflinePolicy())
    run_clusters(open_vault(root), OfflinePolicy())


def failing_checks(root: Path) -> dict[int, list]:
    return {n: v for n, v in all_checks(open_vault(root), read_baseline(root)).items() if v}


def one_line(message: str, *fragments: str) -> None:
    assert "\n" not in message.strip() and "Traceback" not in message, message
    for fragment in fragments:
        assert fragment in message, (fragment, message)


def failed_in_one_line(result: subprocess.CompletedProcess, *fragments: str) -> None:
    assert result.returncode != 0, result.stdout
    one_line(result.stderr, *fragments)


def sound_vault(root: Path) -> Path:
    """conftest's small vault made to pass the step-4 checks: its dropped node given a drop_reason,
    the survivor of its merged node the merged_from and per-source locator of a merge."""
    build_vault(root)
    survivor = root / "hypotheses" / "H-1 - Varroa mites spread deformed wing virus.md"
    survivor.write_text(
        survivor.read_text().replace(
            "locator: Results\n",
            ("locator:\n- 'S-1: Results'\nmerged_from:\n- '[[H-5 - Varroa mites carry deformed wing virus]]'\n"),
        )
    )
    dropped = root / "hypotheses" / "dropped" / "H-6 - Cold snaps kill clusters.md"
    dropped.write_text(dropped.read_text().replace("state: dropped\n", "state: dropped\ndrop_reason: Off topic.\n"))
    return root


@pytest.fixture
def vault(tmp_path) -> Path:
    return sound_vault(tmp_path / "vault")


@pytest.fixture
def outside(tmp_path) -> Path:
    """A folder beside the input, with one file in it that nothing may touch."""
    d = tmp_path / "outside"
    d.mkdir()
    (d / "victim.md").write_text("keep me\n")
    return d


def untouched(outside: Path) -> bool:
    return tree(outside) == {"victim.md": b"keep me\n"}


# -- 1. journal -----------------------------------------------------------------------------------


def hostile_journal(root: Path, node: Path) -> None:
    """A saved plan (as a vault from git, zip or a sync folder could carry) that would overwrite a
    file outside the input and move a node out of it."""
    rel = str(node.relative_to(root))
    (root / JOURNAL).parent.mkdir(exist_ok=True)
    (root / JOURNAL).write_text(
        json.dumps(
            {
                "version": 2,
                "steps": [
                    {
                        "to": "../outside/victim.md",
                        "src": None,
                        "text": "owned\n",
                        "before": {"../outside/victim.md": "absent"},
                    },
                    {
                        "to": "../outside/stolen.md",
                        "src": rel,
                        "text": "gone\n",
                        "before": {"../outside/stolen.md": "absent", rel: "absent"},
                    },
                ],
            }
        )
    )


def test_prox_embed_on_a_vault_with_a_hostile_journal_refuses(vault, outside):
    hostile_journal(vault, next((vault / "hypotheses").glob("H-1 *.md")))
    before = nodes_of(vault)
    failed_in_one_line(
        prox("embed", "--run-dir", vault), str(vault / JOURNAL), "../outside/victim.md", "leaves the input"
    )
    assert untouched(outside) and nodes_of(vault) == before
    (vault / JOURNAL).unlink()  # the repair: inspect and remove the journal
    assert prox("embed", "--run-dir", vault).returncode == 0


def test_a_run_dir_never_rolls_a_journal_forward(run_dir, outside):
    """Documented safe outcome: only a vault is written through a journal, so a run directory's
    journal is never applied — by any command."""
    (run_dir / "H-1.json").write_text("{}")  # a file the hostile plan moves (not a hypothesis file)
    hostile_journal(run_dir, run_dir / "H-1.json")
    journal = (run_dir / JOURNAL).read_bytes()
    result = prox("embed", "--run-dir", run_dir)
    assert result.returncode == 0, result.stderr
    assert untouched(outside) and (run_dir / "H-1.json").exists() and (run_dir / JOURNAL).read_bytes() == journal


# -- 2. symlinks ----------------------------------------------------------------------------------


def test_symlinked_cluster_folder_is_refused_before_anything_is_minted(vault, outside):
    (vault / "hypothesis-clusters").symlink_to(outside, target_is_directory=True)
    before = nodes_of(vault)
    with pytest.raises(HypographError) as err:
        structure(vault)
    one_line(str(err.value), str(vault / "hypothesis-clusters"), "symlinked folder")
    assert untouched(outside) and nodes_of(vault) == before
    with pytest.raises(HypographError, match="symlinked folder"):  # minting by hand refuses too
        create_node(vault, "hypothesis-cluster", "By hand")
    assert untouched(outside)
    failed_in_one_line(prox("embed", "--run-dir", vault), "hypothesis-clusters", "symlinked folder")

    (vault / "hypothesis-clusters").unlink()  # the repair: a real folder (or none)
    structure(vault)
    assert failing_checks(vault) == {} and untouched(outside)
    assert sorted(p.name[:5] for p in (vault / "hypothesis-clusters").iterdir()) == ["HC-1 "]


def test_symlinked_node_leading_outside_is_refused(vault, outside):
    link = vault / "hypotheses" / "H-9 - Linked from elsewhere.md"
    (outside / "H-9 - Linked from elsewhere.md").write_text(
        node_markdown({"type": "hypothesis", "id": "H-9", "statement": "Outside."})
    )
    link.symlink_to(outside / "H-9 - Linked from elsewhere.md")
    snapshot = tree(outside)
    before = nodes_of(vault)
    for attempt in (lambda: open_vault(vault), lambda: structure(vault), lambda: load_corpus(vault)):
        with pytest.raises(HypographError) as err:
            attempt()
        one_line(str(err.value), str(link), "outside the input")
    assert tree(outside) == snapshot and nodes_of(vault) == before
    link.unlink()
    structure(vault)
    assert failing_checks(vault) == {}


def test_symlinked_node_inside_is_written_through_and_stays_a_link(vault):
    """A symlinked file resolving inside the input is read and written through: never replaced
    by a regular copy."""
    node = next((vault / "hypotheses").glob("H-4 *.md"))
    store = vault / "agent-notes" / "store"
    store.mkdir(parents=True)
    real = store / node.name
    real.write_text(node.read_text().replace("state: active\n", ""))  # 4a will rewrite it: state active
    node.unlink()
    node.symlink_to(Path("..") / "agent-notes" / "store" / node.name)
    structure(vault)
    assert node.is_symlink() and "state: active" in real.read_text()
    assert "cluster:" in real.read_text()  # 4b's backlink went through the link as well
    assert failing_checks(vault) == {}


def test_run_dir_symlinks(run_dir, outside):
    """In a run dir a hypothesis file leading outside is skipped with a warning (prox's policy for any
    unreadable file); a symlinked output folder is refused before anything is written."""
    (outside / "secret.json").write_text(json.dumps({"id": "H-7", "title": "Secret outside the run"}))
    (run_dir / "hypotheses" / "H-7.json").symlink_to(outside / "secret.json")
    result = prox("embed", "--run-dir", run_dir)
    assert result.returncode == 0, result.stderr
    assert "warning: hypotheses/H-7.json: skipped:" in result.stderr and "outside the input" in result.stderr
    assert "H-7" not in json.loads((run_dir / "proximity" / "embedding-ids.json").read_text())

    shutil.rmtree(run_dir / "proximity")
    (run_dir / "proximity").symlink_to(outside, target_is_directory=True)
    for command in ("embed", "graph"):
        failed_in_one_line(prox(command, "--run-dir", run_dir), str(run_dir / "proximity"), "symlinked folder")
    assert sorted(tree(outside)) == ["secret.json", "victim.md"]


# -- 3. names near the 255-byte limit --------------------------------------------------------------


def test_titles_are_cut_by_bytes_with_room_for_temporary_names():
    cjk = "蜂" * 180
    assert len(clean_title(cjk).encode()) <= 180 and clean_title(cjk) == "蜂" * 60
    assert clean_title("Answers to - " + cjk) == "Answers to - " + "蜂" * 55  # not cut back to "Answers to -"
    assert clean_title("Varroa mites " * 3) == "Varroa mites Varroa mites Varroa mites"
    assert len(f"HC-123456 - {clean_title(cjk)}.md".encode()) + 17 <= NAME_MAX


def test_long_file_name_is_refused_before_4a_writes_anything(tmp_path):
    root = sound_vault(tmp_path / "vault")
    for n in range(10, 40):  # 30 nodes 4a would rewrite (no state yet) before reaching the long one
        write_vault_node(root, f"H-{n}", f"Bees number {n}", statement=f"Statement {n} on bees.", state=None)
    title = "Ä" * ((MAX_NAME_BYTES + 6 - len("H-99 - .md")) // 2)
    long = write_vault_node(root, "H-99", title, statement="A hypothesis with a very long title.")
    assert MAX_NAME_BYTES < len(long.name.encode()) <= NAME_MAX
    before = nodes_of(root)
    with pytest.raises(HypographError) as err:
        structure(root)
    one_line(str(err.value), str(long), "bytes", "nothing was changed")
    assert nodes_of(root) == before and not (root / JOURNAL).exists()
    long.rename(long.with_name("H-99 - A hypothesis with a long title.md"))  # the repair
    structure(root)
    assert failing_checks(root) == {}
    assert all(len(p.name.encode()) <= MAX_NAME_BYTES for p in root.rglob("*.md"))


def test_long_cjk_question_carves_every_cluster(tmp_path):
    """4b names offline clusters after the members' question: 180 CJK characters (540 bytes) must
    give names that fit, for every cluster and residual."""
    root = tmp_path / "vault"
    for n in range(1, 23):
        question = f"{'为什么蜜蜂在冬天死亡' * 17}第{n}号问题?"  # 11 distinct questions, ~180 characters each
        write_vault_node(
            root,
            f"H-{n}",
            f"Hypothesis {n} on bees",
            statement=f"Bees die because of cause {n}.",
            question=question.replace(f"第{n}号", f"第{(n + 1) // 2}号"),
        )
    structure(root)
    assert failing_checks(root) == {}
    # How many clusters the sentence model makes of questions that differ in one number is its
    # call (it reads CJK poorly); what must hold is that every name fits.
    names = [p.name for p in (root / "hypothesis-clusters").iterdir()]
    assert names and all(len(n.encode()) <= MAX_NAME_BYTES for n in names), names
    structure(root)  # a re-run finds the carve complete and mints nothing
    assert sorted(p.name for p in (root / "hypothesis-clusters").iterdir()) == sorted(names)


# -- 4. two runs at once on a fresh instance, corrupt storage ----------------------------------------


def test_two_structure_runs_at_once_on_a_fresh_instance(tmp_path):
    root = sound_vault(tmp_path / "vault")
    env = {**offline_env(), "DAGSTER_HOME": str(tmp_path / "fresh-dagster-home")}
    procs = [start_hypograph("structure", root, "--llm", "offline", env=env) for _ in range(2)]
    results = [p.communicate(timeout=600) + (p.returncode,) for p in procs]
    assert any(code == 0 for _, _, code in results), results
    for _, stderr, code in results:
        if code:
            one_line(stderr)  # the loser says why in one line
    assert failing_checks(root) == {}
    again = hypograph("add", root, env=env)  # the instance stays usable
    assert again.returncode == 0 and again.stderr == "", again.stderr


@pytest.mark.parametrize("damage", ["history/runs.db", "dagster.yaml"])
def test_corrupt_dagster_storage_is_one_line(tmp_path, vault, damage):
    env = {**offline_env(), "DAGSTER_HOME": str(tmp_path / "dagster-home")}
    assert hypograph("add", vault, env=env).returncode == 0
    (tmp_path / "dagster-home" / damage).write_text("garbage: [\x00 not a database")
    before = nodes_of(vault)
    failed_in_one_line(
        hypograph("add", vault, env=env), str(tmp_path / "dagster-home"), "unreadable", "move the folder aside"
    )
    assert nodes_of(vault) == before
    shutil.move(tmp_path / "dagster-home", tmp_path / "aside")  # the repair the message names
    assert hypograph("add", vault, env=env).returncode == 0


# -- 5. one bad JSON file never stops a run directory --------------------------------------------

BAD_JSON = {
    "H-20.json": "[" * 100_000 + "]" * 100_000,
    "H-21.json": '{"id": "H-21", "title": "Lone \\ud800 surrogate"}',
    "H-22.json": '{"id": "H-22", "title": "Fine title", "notes": {"\\udfff": 1}}',
    "H-23.json": '{"id": "H-23", "title": "Huge number", "n": ' + "9" * 5000 + "}",
    "H-24.json": json.dumps({"id": "H-24", "title": "Deep extra", "x": json.loads("[" * 200 + "]" * 200)}),
    "H-25.json": "\ufeff{not json",
}


def bad_run_dir(root: Path) -> Path:
    build_run_dir(root)
    for name, text in BAD_JSON.items():
        (root / "hypotheses" / name).write_text(text, encoding="utf-8")
    os.mkfifo(root / "hypotheses" / "H-26.json")  # reading it would block forever
    return root


def assert_each_bad_file_warned(stderr: str) -> None:
    for name in [*BAD_JSON, "H-26.json"]:
        lines = [line for line in stderr.splitlines() if f"hypotheses/{name}: skipped:" in line]
        assert len(lines) == 1 and lines[0].startswith("warning: "), (name, stderr)
    assert "Traceback" not in stderr and "RecursionError" not in stderr


def test_prox_embed_skips_each_malformed_file_with_a_warning(tmp_path):
    root = bad_run_dir(tmp_path / "run")
    result = prox("embed", "--run-dir", root)
    assert result.returncode == 0, result.stderr
    assert_each_bad_file_warned(result.stderr)
    embedded = json.loads((root / "proximity" / "embedding-ids.json").read_text())
    assert embedded == ["H-1", "H-2", "H-3", "H-4", "H-5", "H-10"]


def test_hypograph_proximity_prints_the_same_warnings(tmp_path):
    root = bad_run_dir(tmp_path / "run")
    result = in_process("proximity", root, "--llm", "offline", "--skip-bad-files")  # what it prints
    assert result.returncode == 0, result.stderr
    assert_each_bad_file_warned(result.stderr)
    assert (root / ".hypograph" / "assets" / "hypothesis_texts.json").is_file()


# -- smaller --------------------------------------------------------------------------------------


def test_4a_refuses_an_inconsistent_node_before_its_first_write(tmp_path):
    root = sound_vault(tmp_path / "vault")
    for n in range(10, 39):  # 29 nodes 4a would rewrite first
        write_vault_node(root, f"H-{n}", f"Bees number {n}", statement=f"Statement {n} on bees.", state=None)
    bad = write_vault_node(
        root, "H-7", "Merged but nowhere", folder="hypotheses/merged", statement="Orphan.", state="merged"
    )
    before = nodes_of(root)
    with pytest.raises(HypographError) as err:
        structure(root)
    one_line(str(err.value), str(bad), "field 'merged_into'", "nothing was changed")
    assert nodes_of(root) == before
    (root / "hypotheses" / "dropped").mkdir(exist_ok=True)  # the repair: the person drops it instead
    bad.rename(root / "hypotheses" / "dropped" / bad.name)
    fixed = root / "hypotheses" / "dropped" / bad.name
    fixed.write_text(fixed.read_text().replace("state: merged\n", "state: dropped\ndrop_reason: A duplicate.\n"))
    structure(root)
    assert failing_checks(root) == {}


def test_duplicate_yaml_keys_are_refused_naming_file_and_key(vault):
    node = next((vault / "hypotheses").glob("H-3 *.md"))
    node.write_text(node.read_text().replace("statement:", "statement: The first statement.\nstatement:", 1))
    before = nodes_of(vault)
    for attempt in (lambda: open_vault(vault), lambda: structure(vault)):
        with pytest.raises(HypographError) as err:
            attempt()
        one_line(str(err.value), "H-3 - ", "duplicate key 'statement'")
    assert nodes_of(vault) == before
    failed_in_one_line(prox("embed", "--run-dir", vault), "H-3 - ", "duplicate key 'statement'")


@pytest.mark.parametrize(
    "nested", ["[" * 5000 + "]" * 5000, "{a: " * 5000 + "1" + "}" * 5000, "[" * 100 + "]" * 100, '"\\ud800"']
)
def test_deep_or_unwritable_yaml_is_one_line_naming_the_file(vault, nested):
    node = next((vault / "hypotheses").glob("H-2 *.md"))
    node.write_text(node.read_text().replace("locator: Results", f"locator: {nested}"))
    with pytest.raises(HypographError) as err:
        open_vault(vault)
    one_line(str(err.value), str(node.relative_to(vault)))
    failed_in_one_line(prox("embed", "--run-dir", vault), "H-2 - ")


def test_zero_padded_id_colliding_with_another_is_refused(tmp_path, vault):
    dup = write_vault_node(vault, "H-01", "Padded twin", statement="Padded.")
    for attempt in (lambda: open_vault(vault), lambda: load_corpus(vault)):
        with pytest.raises(HypographError) as err:
            attempt()
        one_line(str(err.value), "H-01", "H-1 - Varroa mites spread")
    dup.unlink()
    assert "H-1" in open_vault(vault).nodes

    run = build_run_dir(tmp_path / "run")
    (run / "hypotheses" / "H-0001.json").write_text(json.dumps({"id": "H-0001", "title": "Padded varroa twin"}))
    failed_in_one_line(prox("embed", "--run-dir", run), "H-0001", "H-1.json")
    (run / "hypotheses" / "H-0001.json").unlink()
    # Zero-padded ids alone are prox's own style (H-0001): read as they are.
    (run / "hypotheses" / "H-0042.json").write_text(json.dumps({"id": "H-0042", "title": "Padded and alone"}))
    assert "H-0042" in load_corpus(run).ids


def test_lowercase_hypothesis_file_is_named_in_a_warning(run_dir):
    (run_dir / "hypotheses" / "h-11.json").write_text(json.dumps({"id": "H-11", "title": "Lower case file"}))
    (run_dir / "hypotheses" / "H-12.JSON").write_text(json.dumps({"id": "H-12", "title": "Upper case suffix"}))
    warnings = load_corpus(run_dir).warnings
    assert [w.split(":")[0] for w in warnings] == ["hypotheses/H-12.JSON", "hypotheses/h-11.json"]
    assert all("H-<number>.json" in w for w in warnings)


def test_leftover_temporary_files_of_a_killed_run_are_ignored_or_cleaned(vault):
    hyp = vault / "hypotheses"
    (hyp / ".H-1 - Varroa mites spread deformed wing virus.md.k2j4h5g6.tmp").write_text("---\nid: H-1\n")
    (hyp / "._H-2 - Varroa mites transmit deformed wing virus.md").write_bytes(b"\x00\x05\x16\x07\xff AppleDouble")
    (vault / "hypothesis-clusters").mkdir()
    (vault / "hypothesis-clusters" / ".HC-7 - Half written.md.4242.tmp").write_text("---\nid: HC-7\n")
    (vault / ".hypograph").mkdir()
    journal_tmp = vault / ".hypograph" / ".journal.json.abcd1234.tmp"
    journal_tmp.write_text('{"version": 2, "st')
    assert sorted(open_vault(vault).nodes) == ["H-1", "H-2", "H-3", "H-4", "H-5", "H-6", "S-1"]
    assert highest_id(vault, "HC") == 0
    assert prox("embed", "--run-dir", vault).returncode == 0
    vault_nodes = {k for k in nodes_of(vault) if k.endswith(".md")}
    structure(vault)
    assert not journal_tmp.exists()  # the journal cleans its own temp files when it next writes
    assert vault_nodes <= {k for k in nodes_of(vault)}  # nothing lost, the leftovers left alone
    assert sorted(p.name[:5] for p in (vault / "hypothesis-clusters").glob("HC-*")) == ["HC-1 "]
    assert failing_checks(vault) == {}


# -- read-only input ------------------------------------------------------------------------------


def read_only(root: Path, *command) -> subprocess.CompletedProcess:
    """``command`` with ``root`` mounted read-only for it alone (a private mount namespace)."""
    script = f'mount --bind "{root}" "{root}" && mount -o remount,ro,bind "{root}" && exec "$@"'
    return run("unshare", "--mount", "sh", "-c", script, "sh", *command)


def can_mount_read_only(tmp_path) -> bool:
    if not shutil.which("unshare") or sys.platform != "linux":
        return False
    probe = tmp_path / "probe"
    probe.mkdir()
    result = read_only(probe, "touch", str(probe / "x"))
    return result.returncode != 0 and "Read-only file system" in result.stderr


def test_read_only_vault_is_one_line(tmp_path, vault):
    if not can_mount_read_only(tmp_path):
        pytest.skip("needs unshare and mount (a private read-only bind mount)")
    before = tree(vault)
    failed_in_one_line(
        read_only(vault, PROX, "embed", "--run-dir", vault), "proximity/embedding", "Read-only file system"
    )
    failed_in_one_line(read_only(vault, HYPOGRAPH, "unmerge", vault, "H-5"), "structure.lock", "Read-only")
    failed_in_one_line(
        read_only(vault, HYPOGRAPH, "structure", vault, "--llm", "offline"),
        str(vault),
        "cannot write (Read-only file system)",
    )
    assert tree(vault) == before
    assert hypograph("structure", vault, "--llm", "offline").returncode == 0  # writable again: completes
    assert failing_checks(vault) == {}
