"""Hostile input, issue 32, item 10, each through the path a user takes (the ``hypograph``
command, a sensor evaluated as the daemon does):

* exit codes: a model outage ends ``library`` with 2, as it ends ``batch``; a reader refused
  because a structuring holds the vault (``check``, ``structure``) exits 2, not 1;
* ``case show`` prints a name's control characters escaped, one name on one line;
* a ZIP whose member lies about its CRC: ``case new`` refuses it, ``case interpret`` (of one already
  in a package) says so in one line naming the archive and the member;
* the temp files a killed write left are removed by the next holder of the folder's lock
  (structuring, library, case), never while another process holds it;
* a registered input whose folder was deleted is passed over by every sensor, and the nightly
  schedule, in one logged line.
"""

from __future__ import annotations

import datetime
import shutil
import subprocess
import sys
import zipfile
import zlib
from pathlib import Path

from case_support import make_case
from cli_helper import hypograph, in_process
from conftest import EXAMPLE_LIBRARY, build_run_dir, build_vault, offline_env
from dagster import DagsterInstance, build_schedule_context, build_sensor_context
from llm_stub import unused_port

REPO = Path(__file__).resolve().parents[2]
STALE = ".{}.k3x9_q2a.tmp"  # the name an atomic write of {} killed half-way leaves


def dead_model_env(**extra) -> dict[str, str]:
    """A command's environment with a model configured at a port nobody listens on (no retry)."""
    env = {k: v for k, v in offline_env().items() if k != "HYPOGRAPH_LLM"}
    return {
        **env,
        "HYPOGRAPH_LLM_BASE_URL": f"http://127.0.0.1:{unused_port()}/v1",
        "HYPOGRAPH_LLM_MODEL": "m",
        "HYPOGRAPH_LLM_API_KEY": "k",
        "HYPOGRAPH_LLM_MAX_RETRIES": "0",
        "HYPOGRAPH_LLM_TIMEOUT": "5",
        **extra,
    }


def one_line(result, code: int, *needles: str) -> str:
    lines = result.stderr.strip().splitlines()
    assert result.returncode == code and len(lines) == 1, (result.returncode, result.stderr)
    assert all(n in lines[0] for n in needles), lines[0]
    return lines[0]


def stale(folder: Path, name: str) -> Path:
    """A temp file as a write of ``folder/name`` killed between its create and its rename leaves."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / STALE.format(name)
    path.write_text("half")
    return path


def hold(code: str, *args) -> subprocess.Popen:
    """Another process running ``code`` (``sys.argv[1:]`` = ``args``), once it printed ``held``."""
    holder = subprocess.Popen(
        [sys.executable, "-c", f"import sys, time; sys.path.insert(0, {str(REPO)!r})\n{code}", *map(str, args)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "held"
    return holder


STRUCTURING = (
    "from hypograph.structure.session import structuring\n"
    "with structuring(sys.argv[1], 'dagster-run-1234'):\n"
    "    print('held', flush=True); time.sleep(60)\n"
)


# -- exit codes ----------------------------------------------------------------------------------


def test_a_model_outage_ends_library_and_batch_with_2_and_the_library_lock_sweeps(tmp_path):
    lib = Path(shutil.copytree(EXAMPLE_LIBRARY, tmp_path / "lib"))
    left = stale(lib, "hypothesis_library.json")
    env = dead_model_env(DAGSTER_HOME=str(tmp_path / "home"))
    done = hypograph("library", lib, "--topic", "LLM sycophancy", "--no-web", "--embedder", "tfidf", env=env)
    one_line(done, 2, "round_candidates", "LLM endpoint", "library_round run")
    assert not left.exists()  # the round took the library lock (then found the model down)
    case = make_case(tmp_path / "cases")
    batch = hypograph("batch", case, env=env)
    assert batch.returncode == 2 and "RETRY_PENDING" in batch.stdout, (batch.stdout, batch.stderr)


def test_readers_refused_by_a_structuring_exit_2_and_its_temp_files_stay(tmp_path):
    vault = build_vault(tmp_path / "vault")
    holder = hold(STRUCTURING, vault)
    ledger = stale(vault / ".hypograph", "dispositions.json")  # the holder's write, under way
    try:
        env = {**offline_env(), "HYPOGRAPH_READ_WAIT": "0.3"}
        checked = hypograph("check", vault, env=env)
        one_line(checked, 2, "run dagster-run-1234 (pid", "is structuring this vault")
        structured = hypograph("structure", vault, env=env)
        one_line(structured, 2, "run dagster-run-1234 (pid", "is structuring this vault", "proximity run")
        assert ledger.exists()  # another process holds the lock: its temp files are not ours
    finally:
        holder.kill()
        holder.wait()


# -- error lines --------------------------------------------------------------------------------


def test_an_error_line_escapes_the_control_characters_of_a_path_it_names(tmp_path):
    """A path given as an argument, refused before a run or by the domain: one line, no raw ESC/BEL."""
    odd = tmp_path / "v\x1b[31mred\x07"
    missing = hypograph("check", odd)
    odd.mkdir()
    not_a_vault = hypograph("structure", odd, "--llm", "offline", env=offline_env())
    for proc in (missing, not_a_vault):
        assert proc.returncode == 1
        [line] = proc.stderr.strip().splitlines()
        assert "\x1b" not in line and "\x07" not in line and "v\\x1b[31mred\\x07" in line, line


# -- what case show prints -----------------------------------------------------------------------


def test_case_show_escapes_control_characters_of_file_and_member_names(tmp_path):
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    (inputs / "bell\a esc\x1b[31mred\nline2.txt").write_text("x")
    with zipfile.ZipFile(inputs / "ctl.zip", "w") as zf:
        zf.writestr("m\x1b]0;title\x07\u202enext\r.txt", "data")
    case = tmp_path / "case"
    assert in_process("case", "new", case, inputs, "--question", "why\x1b[2J?").returncode == 0
    shown = in_process("case", "show", case)
    assert shown.returncode == 0
    out = shown.stdout
    assert not any(c in out for c in "\x1b\x07\r\u202e"), repr(out)
    assert "  IN1 (report, unread): inputs/bell\\x07 esc\\x1b[31mred\\nline2.txt [" in out
    assert "ctl.zip: m\\x1b]0;title\\x07\\u202enext\\r.txt [" in out
    assert "question: why\\x1b[2J?" in out
    assert len(out.splitlines()) == 10  # one line per item: no name split a line


# -- archives whose members lie ------------------------------------------------------------------


def liar_zip(path: Path, data: bytes = b"moisture 18%\n" * 50) -> Path:
    """A ZIP whose member ``liar.bin`` declares a CRC-32 its bytes do not have."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("ok.txt", "fine\n")
        zf.writestr("liar.bin", data)
    good = zlib.crc32(data).to_bytes(4, "little")
    raw = path.read_bytes()
    assert raw.count(good) == 2  # local header and central directory
    path.write_bytes(raw.replace(good, (zlib.crc32(data) ^ 0xFFFF).to_bytes(4, "little")))
    return path


def test_a_zip_whose_member_lies_is_refused_by_case_new_and_named_by_interpret(tmp_path):
    liar = liar_zip(tmp_path / "liar.zip")
    refused = hypograph("case", "new", tmp_path / "new", liar, "--question", "why?")
    one_line(refused, 1, f"{liar}: member 'liar.bin'", "Bad CRC-32")
    assert not (tmp_path / "new").exists()
    # a package made before this check (or edited since): interpret names the archive and member
    honest = tmp_path / "liar.zip.orig"
    with zipfile.ZipFile(honest, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("ok.txt", "fine\n")
        zf.writestr("liar.bin", b"moisture 18%\n" * 50)
    case = tmp_path / "case"
    shutil.copy(honest, tmp_path / "logs.zip")
    assert hypograph("case", "new", case, tmp_path / "logs.zip", "--question", "why?").returncode == 0
    shutil.copy(liar, case / "case" / "r0001" / "logs.zip")
    env = dead_model_env()  # the excerpts are read before any call
    drafted = hypograph("case", "interpret", case, env=env)
    one_line(drafted, 1, f"{case.resolve()}/case/r0001/logs.zip: member 'liar.bin'", "Bad CRC-32")


# -- temp files of killed writes -----------------------------------------------------------------


def test_structure_removes_the_temp_files_killed_writes_left(example_vault):
    vault = example_vault
    ours = [
        stale(vault / "hypotheses", "H-1 - Light drives growth.md"),
        stale(vault / "hypotheses" / "merged", "H-5 - x.md"),
        stale(vault / ".hypograph", "dispositions.json"),
        stale(vault / ".hypograph" / "traces" / "hypothesis_dispositions", "call-1.json"),
    ]
    not_ours = [
        vault / "hypotheses" / ".notes.tmp",  # not the project's pattern
        stale(vault / "proximity", "graph.json"),  # proximity's: written without the structuring lock
        stale(vault / ".hypograph", "input-id"),  # `hypograph add`'s
        stale(vault / ".hypograph" / "cache" / "llm" / "ab", "abcd.json"),  # shared with proximity's calls
    ]
    not_ours[0].write_text("mine")
    done = in_process("structure", vault)
    assert done.returncode == 0, done.stderr
    assert [p for p in ours if p.exists()] == []
    assert all(p.exists() for p in not_ours)


def test_a_minter_holding_its_lock_keeps_its_temp_files(tmp_path):
    """create-node (or batch --into) mints under its own lock, not the structuring one: while it
    holds it, the node folders' temp files are live and stay; the structuring's own are removed."""
    from hypograph.vault.locking import structuring_lock

    vault = build_vault(tmp_path / "vault")
    minted = stale(vault / "hypotheses", "H-9 - New.md")
    ledger = stale(vault / ".hypograph", "dispositions.json")
    holder = hold(
        "from hypograph.vault.mint import minting\nwith minting(sys.argv[1]):\n"
        "    print('held', flush=True); time.sleep(60)\n",
        vault,
    )
    try:
        with structuring_lock(vault):
            pass
        assert minted.exists() and not ledger.exists()
    finally:
        holder.kill()
        holder.wait()
    with structuring_lock(vault):
        pass
    assert not minted.exists()


def test_a_case_step_sweeps_under_the_case_lock_and_never_while_another_holds_it(tmp_path):
    case = make_case(tmp_path / "cases")
    left = stale(case / "analysis" / "hypotheses" / "0001", "registry.json")
    holder = hold(
        "from hypograph.case.package import CasePackage\nwith CasePackage(sys.argv[1]).lock():\n"
        "    print('held', flush=True); time.sleep(60)\n",
        case,
    )
    try:
        busy = hypograph("batch", case, env=dead_model_env())
        assert busy.returncode == 2 and "DEFERRED" in busy.stderr + busy.stdout
        assert left.exists()
    finally:
        holder.kill()
        holder.wait()
    again = hypograph("batch", case, env=dead_model_env())
    assert again.returncode == 2 and "RETRY_PENDING" in again.stdout
    assert not left.exists()


# -- a deleted input -----------------------------------------------------------------------------


def test_every_sensor_passes_over_a_deleted_input_in_one_logged_line(tmp_path, capfd):
    from assets.case.jobs import case_retries_due
    from assets.library.jobs import next_library_round
    from assets.proximity.jobs import nightly_proximity
    from assets.sources import inputs_discovered
    from assets.structure.flow import hypotheses_changed
    from resources import Inputs

    ws = tmp_path / "workspace"
    inputs = Inputs(workspace=str(ws), registry_file=str(tmp_path / "inputs.json"))
    build_vault(ws / "vault")
    registry = inputs.registry()
    for kind, root in (
        (None, ws / "vault"),
        (None, build_run_dir(ws / "gone-run")),
        ("case", make_case(ws, "gone-case")),
        ("library", Path(shutil.copytree(EXAMPLE_LIBRARY, ws / "gone-lib"))),
    ):
        registry.add(root, kind)
    for name in ("gone-run", "gone-case", "gone-lib"):
        shutil.rmtree(ws / name)
    instance = DagsterInstance.ephemeral()
    sensors = {
        hypotheses_changed: ["gone-run"],
        next_library_round: ["gone-lib"],
        case_retries_due: ["gone-case"],
        inputs_discovered: ["gone-run", "gone-case", "gone-lib"],
    }
    for sensor, names in sensors.items():
        capfd.readouterr()
        sensor(build_sensor_context(instance=instance), inputs=inputs)  # does not raise
        logged = [line for line in capfd.readouterr().err.splitlines() if "folder is gone" in line]
        for name in names:
            lines = [line for line in logged if f"{ws / name}: skipped" in line]
            assert len(lines) == 1, (sensor.name, logged)
    (tmp_path / "home").mkdir()
    with DagsterInstance.local_temp(str(tmp_path / "home")) as home:  # a schedule's context needs one on disk
        home.add_dynamic_partitions("hypothesis_inputs", ["vault", "gone-run"])
        capfd.readouterr()
        now = datetime.datetime.now(datetime.UTC)
        nightly = nightly_proximity(build_schedule_context(instance=home, scheduled_execution_time=now), inputs=inputs)
    assert [r.partition_key for r in nightly] == ["vault"]
    assert len([line for line in capfd.readouterr().err.splitlines() if f"{ws / 'gone-run'}: skipped" in line]) == 1
