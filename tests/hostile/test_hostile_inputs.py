"""Issue 32, items 3, 4, 7 and 8, through the paths a user takes (``hypograph add``, ``proximity``,
``case add``, and the discovery sensor evaluated as the daemon or the UI's preview does):

* state is never written through a symlinked ``.hypograph/``, nor an id file read through a link;
* the registry and an id file are read as regular files under a size cap (``/dev/zero`` or 200 MB
  is one line, at once);
* evaluating ``inputs_discovered`` writes nothing: registering is the run it requests;
* a copy of an input never takes the original's id (and with it its history)."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from pathlib import Path

import pytest
from case_support import make_case
from cli_helper import in_process
from conftest import REPO, build_run_dir, build_vault, offline_env
from dagster import DagsterInstance, SensorResult, build_sensor_context

from assets.sources import inputs_discovered, register_inputs
from hypograph.errors import HypographError
from hypograph.inputs import ID_FILE, REGISTRY_MAX, Registry, stored_id
from hypograph.library.schema import LIBRARY_MAX
from hypograph.library.strategies import load_strategies
from hypograph.proximity.adjudicate import REVIEWS_MAX
from hypograph.vault.nodes import MAX_NODE_BYTES
from resources import Inputs


def own_home(tmp_path: Path) -> dict:
    """The environment of a command on an instance (and registry) of its own."""
    return {**offline_env(), "DAGSTER_HOME": str(tmp_path / "home")}


def one_line(result, *needles: str) -> None:
    assert result.returncode != 0, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert all(n in lines[0] for n in needles), lines[0]


def failed_check(result, needle: str) -> None:
    """``--check`` failed on the file's validation, naming the file and why."""
    assert result.returncode == 1, result
    assert "FAIL file_validates" in result.stdout and needle in result.stdout, result.stdout


def snapshot(*roots: Path) -> dict:
    """Every file and folder under ``roots``: its kind, size, mtime and bytes' digest."""
    out = {}
    for root in roots:
        for here, dirs, files in os.walk(root):
            for name in dirs + files:
                p = Path(here) / name
                st = p.lstat()
                digest = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() and not p.is_symlink() else ""
                out[str(p)] = (st.st_mode, st.st_size, st.st_mtime_ns, digest)
    return out


# -- 3. state written through symlinks ---------------------------------------------------------


def test_add_and_proximity_refuse_a_symlinked_state_folder(tmp_path):
    run = build_run_dir(tmp_path / "run")
    outside = tmp_path / "outside"
    outside.mkdir()
    (run / ".hypograph").symlink_to(outside)
    for command in ("add", "proximity"):
        one_line(in_process(command, run), str(run / ".hypograph"), "symlinked folder")
        assert list(outside.iterdir()) == [], command  # no input-id, no state written there


def test_case_add_refuses_a_symlinked_state_folder(tmp_path):
    case = make_case(tmp_path / "cases")
    shutil.rmtree(case / ".hypograph", ignore_errors=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (case / ".hypograph").symlink_to(outside)
    note = tmp_path / "note.txt"
    note.write_text("the plants wilt at noon\n")
    one_line(in_process("case", "add", case, note), str(case / ".hypograph"), "symlinked folder")
    assert list(outside.iterdir()) == []  # neither case.lock nor input-id


def test_add_never_reads_an_id_file_through_a_symlink(tmp_path):
    run = build_run_dir(tmp_path / "run")
    secret = tmp_path / "secret"
    secret.write_text("stolen-id\n")  # a valid id: read through the link, it would be taken
    (run / ".hypograph").mkdir(exist_ok=True)
    (run / ID_FILE).symlink_to(secret)
    one_line(in_process("add", run, env=own_home(tmp_path)), str(run / ID_FILE), "symlink")
    (run / ID_FILE).unlink()
    (run / ID_FILE).symlink_to("/etc/passwd")
    one_line(in_process("add", run, env=own_home(tmp_path)), str(run / ID_FILE), "symlink")
    assert Registry(tmp_path / "home" / "inputs.json").records() == []


# -- 4. unbounded reads ------------------------------------------------------------------------


def test_an_id_file_that_is_a_device_a_fifo_or_huge_is_refused_unread(tmp_path):
    run = build_run_dir(tmp_path / "run")
    (run / ".hypograph").mkdir(exist_ok=True)
    id_file = run / ID_FILE
    id_file.symlink_to("/dev/zero")
    one_line(in_process("add", run, env=own_home(tmp_path)), str(id_file), "symlink")
    id_file.unlink()
    os.mkfifo(id_file)  # opened without O_NONBLOCK, a reader would wait for a writer forever
    one_line(in_process("add", run, env=own_home(tmp_path)), str(id_file), "FIFO")
    id_file.unlink()
    with open(id_file, "wb") as fh:
        fh.truncate(200 << 20)  # 200 MB (sparse)
    one_line(in_process("add", run, env=own_home(tmp_path)), str(id_file), "over the 256-byte limit")


def test_a_registry_that_is_a_device_or_huge_is_refused_unread(tmp_path):
    """The registry file an earlier version left (moved into the instance at first use) is read
    bounded, never through a link; the registry in the instance is bounded too."""
    run = build_run_dir(tmp_path / "run")
    env = own_home(tmp_path)
    registry = tmp_path / "home" / "inputs.json"
    registry.parent.mkdir()
    registry.symlink_to("/dev/zero")
    one_line(in_process("add", run, env=env), str(registry), "symlink")
    registry.unlink()
    with open(registry, "wb") as fh:
        fh.truncate(200 << 20)
    one_line(in_process("add", run, env=env), str(registry), f"over the {REGISTRY_MAX}-byte limit")
    registry.unlink()
    from dagster import DagsterInstance

    from resources.inputs import REGISTRY_KEY

    with DagsterInstance.from_config(str(registry.parent)) as instance:
        instance.run_storage.set_cursor_values({REGISTRY_KEY: "{" + " " * REGISTRY_MAX + "}"})
    one_line(in_process("add", run, env=env), "the input registry in the Dagster instance", f"over {REGISTRY_MAX}")


def test_a_huge_vault_node_is_refused_unread_and_nothing_is_written(tmp_path):
    vault = build_vault(tmp_path / "vault")
    huge = vault / "hypotheses" / "H-9 - Huge.md"
    with open(huge, "wb") as fh:
        fh.truncate(200 << 20)  # 200 MB (sparse): read whole, it would be parsed as one node
    before = snapshot(vault)
    for command in ("proximity", "structure"):
        one_line(
            in_process(command, vault, env=own_home(tmp_path)),
            "hypotheses/H-9 - Huge.md",
            f"over the {MAX_NODE_BYTES}-byte limit",
        )
    assert {k: v for k, v in snapshot(vault).items() if "/.hypograph" not in k} == {
        k: v for k, v in before.items() if "/.hypograph" not in k
    }


def test_a_huge_note_that_is_no_node_is_left_unread_and_the_vault_structures(tmp_path):
    vault = Path(shutil.copytree(REPO / "tests" / "fixtures" / "vaults" / "eggs1", tmp_path / "eggs1"))
    (vault / "notes").mkdir()
    with open(vault / "notes" / "Interview transcript.md", "wb") as fh:
        fh.truncate(200 << 20)  # a node's file name starts with its id: this one is a note
    done = in_process("structure", vault, env=own_home(tmp_path))
    assert done.returncode == 0, done.stderr


def test_a_library_file_a_review_file_or_a_strategies_file_that_is_huge_or_a_fifo_is_refused_unread(tmp_path):
    lib = Path(shutil.copytree(REPO / "examples" / "library", tmp_path / "lib"))
    library = lib / "hypothesis_library.json"
    library.unlink()
    os.mkfifo(library)  # read as before, the command would wait for a writer forever
    failed_check(in_process("library", lib, "--check"), f"{library}: is a FIFO")
    library.unlink()
    with open(library, "wb") as fh:
        fh.truncate(LIBRARY_MAX + 1)
    failed_check(in_process("library", lib, "--check"), f"{library}: {LIBRARY_MAX + 1} bytes, over the")

    run = build_run_dir(tmp_path / "run")
    review = run / "proximity" / "review.json"
    review.parent.mkdir(exist_ok=True)
    with open(review, "wb") as fh:
        fh.truncate(REVIEWS_MAX + 1)
    one_line(in_process("proximity", run, env=own_home(tmp_path)), str(review), f"over the {REVIEWS_MAX}-byte limit")

    strategies = tmp_path / "strategies.json"
    os.mkfifo(strategies)  # read when a round starts (a model is needed to get there)
    with pytest.raises(HypographError, match=re.escape(f"{strategies}: is a FIFO")):
        load_strategies(strategies)


# -- 7. evaluating the discovery sensor writes nothing -----------------------------------------


def test_evaluating_the_discovery_sensor_writes_nothing(tmp_path):
    ws, home = tmp_path / "workspace", tmp_path / "home"
    build_run_dir(ws / "run"), build_vault(ws / "vault"), make_case(ws)
    home.mkdir()
    Registry(home / "inputs.json").add(ws / "run")  # one registered already, two new
    before = snapshot(ws, home)
    inputs = Inputs(workspace=str(ws), registry_file=str(home / "inputs.json"))
    with DagsterInstance.ephemeral() as instance:
        for _ in range(2):  # a preview, then the tick the daemon evaluates
            result = inputs_discovered(build_sensor_context(instance=instance), inputs=inputs)
            assert snapshot(ws, home) == before  # not a file written, touched or created
        assert isinstance(result, SensorResult) and len(result.run_requests) == 1
        assert not any(
            r.partition_keys for r in result.dynamic_partitions_requests if r.partitions_def_name == "vaults"
        )
        run = result.run_requests[0]
        assert register_inputs.execute_in_process(
            run_config=run.run_config, instance=instance, resources={"inputs": inputs}
        ).success  # the run registers: only now are files written
        assert {r.path.name for r in Registry(home / "inputs.json").records()} == {"run", "vault", "tomatoes"}
        assert instance.get_dynamic_partitions("vaults") == [stored_id(ws / "vault")]


# -- 8. a copy never takes the original's id ---------------------------------------------------


def test_a_copy_never_takes_the_originals_id_even_once_the_original_moved(tmp_path):
    env = own_home(tmp_path)
    orig = build_run_dir(tmp_path / "orig")
    first = in_process("add", orig, env=env)
    assert first.returncode == 0 and first.stdout.startswith("orig: run-dir"), first
    copy = tmp_path / "copy"
    shutil.copytree(orig, copy)  # cp -r: the id file comes along
    moved = tmp_path / "orig-moved"
    orig.rename(moved)
    added = in_process("add", copy, env=env)
    assert added.returncode == 0, added
    assert not added.stdout.startswith("orig:"), added.stdout  # was "orig: run-dir .../copy"
    assert added.stdout.startswith("copy: run-dir"), added.stdout
    assert "written for another folder" in added.stderr and str(copy / ID_FILE) in added.stderr
    back = in_process("add", moved, env=env)  # the original, moved: its id and history
    assert back.returncode == 0 and back.stdout.startswith("orig: run-dir"), back
    from dagster import DagsterInstance

    from resources.inputs import instance_registry

    with DagsterInstance.from_config(str(tmp_path / "home")) as instance:
        registry = instance_registry(instance)
        assert registry.resolve("orig") == moved.resolve() and registry.resolve("copy") == copy.resolve()
    assert stored_id(copy) == "copy" and stored_id(moved) == "orig"


def test_an_id_file_of_the_older_form_still_follows_a_moved_folder(tmp_path):
    registry = Registry(tmp_path / "inputs.json")
    old = build_run_dir(tmp_path / "old" / "run")
    assert registry.add(old).id == "run"
    (old / ID_FILE).write_text("run\n")  # as written before the folder was recorded
    new = tmp_path / "new"
    new.mkdir()
    old.rename(new / "run")
    assert registry.add(new / "run").id == "run"  # a move: the old path is gone
    assert (new / "run" / ID_FILE).read_text().startswith("run\nfolder ")  # upgraded
