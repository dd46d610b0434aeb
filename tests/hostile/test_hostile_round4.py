"""Hostile input, issue 47 (fourth round), the items of the local commands, each through the path
it was found on (the ``hypograph`` and ``prox`` commands, started as a user starts them):

* item 1, 11: contradictory, self-referencing or unknown-id decisions in ``proximity/review.json``
  refused as a whole, in one line naming the file and the entries, before anything moves;
* item 4: SIGTERM at any moment of ``hypograph structure`` ends it with 130 and no half-written file;
* item 6, 8: a FIFO at a file the tool reads (a person's decisions, its own state) refused in one line;
* item 7: ``kill -9`` of ``hypograph report`` leaves none of its render workers alive;
* item 9: a context length learnt from one HTTP 400 is asked again, so a recovered server is used;
* item 10: no control character, OSC sequence or bidirectional override from a title reaches the
  terminal through any command that prints titles.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from pathlib import Path

import pytest
from cli_helper import hypograph, prox, start_hypograph
from conftest import EXAMPLE_LIBRARY, EXAMPLE_VAULT, copy_tree, offline_env
from llm_stub import (  # noqa: F401 - llm_server, llm_env: fixtures
    MODEL,
    adjudication_responder,
    asked_clusters,
    bad_request,
    cluster_label_responder,
    llm_env,
    llm_server,
    routed,
)

# Each sequence a title could use to take over a terminal: ESC + CSI (recolour, clear, move the
# cursor), an OSC window-title sequence ended by BEL, a C1 CSI, a right-to-left override.
HOSTILE = "\x1b[2J\x1b[31m\x1b]0;pwned\x07\x1b[5A\x9b1m\u202e"
FORBIDDEN = ("\x1b", "\x07", "\x9b", "\u202e")


def _hostile_run(root: Path) -> Path:
    """examples/run with ``HOSTILE`` around the titles of one member of two pairs the review queue
    lists (more would change which pairs are near-duplicates)."""
    for path in (root / "hypotheses" / "H-0013.json", root / "hypotheses" / "H-0021.json"):
        doc = json.loads(path.read_text(encoding="utf-8"))
        doc["title"] = HOSTILE + doc["title"]
        path.write_text(json.dumps(doc), encoding="utf-8")
    return root


def _clean(result, what: str) -> None:
    for stream in (result.stdout, result.stderr):
        found = [c for c in FORBIDDEN if c in stream]
        assert not found, (what, found, stream[:2000])


def test_item10_hostile_titles_never_reach_the_terminal(example_run):
    run = _hostile_run(example_run)
    result = hypograph("proximity", run, "--llm", "offline")
    assert result.returncode == 0, result.stderr
    assert "wait for your review" in result.stdout and "\\x1b]0;pwned\\x07" in result.stdout  # shown, escaped
    _clean(result, "hypograph proximity")
    _clean(hypograph("report", run), "hypograph report")
    for command in (("adjudicate", "--llm", "offline"), ("label", "--llm", "offline"), ("clusters",)):
        result = prox(command[0], "--run-dir", run, *command[1:])
        assert result.returncode == 0, result.stderr
        _clean(result, f"prox {command[0]}")


# -- items 1 and 11: a person's decisions, validated as a whole ----------------------------------------------------


def _review(vault: Path, *entries: tuple[str, str, str]) -> Path:
    path = vault / "proximity" / "review.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = [{"pair": [a, b], "verdict": v, "rationale": f"{v} by the supervisor"} for a, b, v in entries]
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def _refused(result, path: Path, *needles: str) -> None:
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1, (result.returncode, result.stdout, result.stderr)
    assert str(path) in lines[0] and all(n in lines[0] for n in needles), lines[0]


def _hypotheses(vault: Path) -> dict[str, bytes]:
    return {str(p.relative_to(vault)): p.read_bytes() for p in sorted((vault / "hypotheses").rglob("*.md"))}


def test_item01_conflicting_review_refused(example_vault):
    path = _review(example_vault, ("H-1", "H-2", "KEEP"), ("H-3", "H-4", "KEEP"), ("H-1", "H-2", "MERGE"))
    before = _hypotheses(example_vault)
    _refused(hypograph("structure", example_vault, "--llm", "offline"), path, "entries 0 and 2", "H-1/H-2")
    assert _hypotheses(example_vault) == before, "nothing moved"
    _refused(hypograph("check", example_vault), path, "entries 0 and 2", "KEEP and MERGE")
    # the file corrected, the vault structures and its checks pass: nothing was left half-done
    _review(example_vault, ("H-1", "H-2", "KEEP"), ("H-3", "H-4", "KEEP"))
    result = hypograph("structure", example_vault, "--llm", "offline")
    assert result.returncode == 0, result.stderr
    assert hypograph("check", example_vault).returncode == 0


def test_item11_self_pair_and_unknown_id_refused(example_vault):
    path = _review(example_vault, ("H-1", "H-1", "MERGE"), ("H-2", "H-9999", "KEEP"))
    before = _hypotheses(example_vault)
    for command in ("structure", "proximity"):
        _refused(
            hypograph(command, example_vault, "--llm", "offline"),
            path,
            "entry 0 pairs H-1 with itself",
            "entry 1 (H-2/H-9999) names H-9999",
        )
    _refused(hypograph("check", example_vault), path, "entry 0 pairs H-1 with itself")
    _refused(prox("adjudicate", "--run-dir", example_vault, "--llm", "offline"), path, "entry 0 pairs H-1")
    assert _hypotheses(example_vault) == before


# -- items 6 and 8: a FIFO where the tool reads is refused in one line, never waited on -----------------------------


def _fifo(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        path.unlink()
    os.mkfifo(path)
    return path


def _refused_fifo(result, path: Path) -> None:
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1, (result.returncode, result.stderr)
    assert str(path) in lines[0] and "FIFO" in lines[0], lines[0]


@pytest.fixture(scope="module")
def structured(tmp_path_factory) -> Path:
    """examples/vault structured once by ``hypograph structure --llm offline`` (the start of items
    4, 6 and 8; each test structures a copy of its own further)."""
    root = copy_tree(EXAMPLE_VAULT, tmp_path_factory.mktemp("structured") / "vault")
    result = hypograph("structure", root, "--llm", "offline")
    assert result.returncode == 0, result.stderr
    return root


@pytest.fixture
def structured_vault(structured, tmp_path) -> Path:
    """A copy of ``structured`` with its proximity output and tool state (Dagster's storage aside)."""
    return Path(shutil.copytree(structured, tmp_path / "structured", ignore=shutil.ignore_patterns("dagster")))


def test_item06_fifo_review_json_refused_by_check(structured_vault):
    path = _fifo(structured_vault / "proximity" / "review.json")
    _refused_fifo(hypograph("check", structured_vault, timeout=120), path)


def test_item08_fifo_in_the_tools_own_files_refused(structured_vault, example_run, tmp_path):
    path = _fifo(structured_vault / ".hypograph" / "dispositions.json")
    _refused_fifo(hypograph("check", structured_vault, timeout=120), path)

    assert hypograph("proximity", example_run, "--llm", "offline").returncode == 0
    path = _fifo(example_run / "proximity" / "graph.json")
    _refused_fifo(hypograph("report", example_run, timeout=120), path)

    library = copy_tree(EXAMPLE_LIBRARY, tmp_path / "library")
    path = _fifo(library / ".hypograph" / "library" / "ids.json")
    _refused_fifo(hypograph("library", library, "--check", timeout=120), path)


# -- item 9: a context length learnt from one refusal is asked again ------------------------------------------------


def test_item09_learnt_context_length_is_asked_again(example_run, llm_server, llm_env):
    env = {**{k: v for k, v in offline_env().items() if k != "HYPOGRAPH_LLM"}, **llm_env(llm_server, max_retries=0)}
    small = bad_request("This model's maximum context length is 400 tokens. However, you requested 9000 tokens.")
    llm_server.always(routed(small, cluster_label_responder()))
    first = hypograph("proximity", example_run, env=env)
    learnt = [json.loads(p.read_text()) for p in (example_run / ".hypograph").rglob("endpoints/*.json")]
    assert [f.get("context_length") for f in learnt] == [400], (first.stderr, learnt)
    asked = len([r for r in llm_server.requests if not asked_clusters(r.body)])
    assert asked >= 1

    # The server is restarted with a larger context: the next run asks it again, and its answers count.
    llm_server.always(routed(adjudication_responder("KEEP"), cluster_label_responder()))
    again = hypograph("proximity", example_run, env=env)
    assert again.returncode == 0, again.stderr
    verdicts = json.loads((example_run / "proximity" / "verdicts.json").read_text())
    assert {v["decided_by"] for v in verdicts if v["decided_by"] != "auto"} == {f"model:{MODEL}"}, verdicts


# -- item 7: forked render workers die with their parent ------------------------------------------------------------


def _children(pid: int) -> list[int]:
    """The live (not zombie) processes whose parent is ``pid``."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            if int(fields[1]) == pid and fields[0] != "Z":
                out.append(int(entry))
    return out


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_item07_kill_9_of_report_leaves_no_worker(example_run):
    assert hypograph("proximity", example_run, "--llm", "offline").returncode == 0
    for _ in range(3):  # the workers live for about a second: a try that missed them starts again
        proc = start_hypograph("report", example_run)
        workers: list[int] = []
        while proc.poll() is None and not workers:
            workers = [c for c in _children(proc.pid) if c]
            time.sleep(0.005)
        if not workers:
            proc.wait()
            continue
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 10
        while any(_alive(w) for w in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        survivors = [w for w in workers if _alive(w)]
        for w in survivors:  # never leave them behind, even when the test fails
            os.kill(w, signal.SIGKILL)
        assert not survivors, f"render workers {survivors} outlived their killed parent"
        return
    pytest.fail("hypograph report never showed a forked worker")


# -- item 4: SIGTERM at any moment ends the command with 130 -------------------------------------------------------


def test_item04_sigterm_at_any_moment_ends_structure_with_130(structured_vault):
    """SIGTERM sent at a spread of moments of ``hypograph structure`` (importing, opening the
    instance, inside steps, between steps and runs, writing the summary): each that arrives while
    the command runs ends it with 130 and one ``interrupted`` line; afterwards the vault structures
    and checks clean (nothing half-written was left in place)."""
    env, vault = {**offline_env()}, structured_vault
    # the runs signalled below redo proximity only (step 4 is done): timed as they are
    shutil.rmtree(vault / "proximity", ignore_errors=True)
    started = time.monotonic()
    assert hypograph("structure", vault, "--llm", "offline").returncode == 0
    whole = time.monotonic() - started
    delivered = []
    for k in range(5):
        shutil.rmtree(vault / "proximity", ignore_errors=True)  # each run does the whole work again
        proc = start_hypograph("structure", vault, "--llm", "offline", env=env)
        time.sleep(0.4 + whole * k / 5)
        if proc.poll() is not None:
            proc.communicate()
            continue
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
        delivered.append((proc.returncode, err.strip().splitlines()[-1:] if err.strip() else []))
    assert len(delivered) >= 3, delivered
    assert all(code == 130 and lines and "interrupted" in lines[0] for code, lines in delivered), delivered
    assert hypograph("structure", vault, "--llm", "offline").returncode == 0
    assert hypograph("check", vault).returncode == 0
