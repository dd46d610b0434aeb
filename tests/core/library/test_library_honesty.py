"""Library rounds say what they did not do (issue 34), through the paths users take: the
``hypograph library`` command and the ``library_round`` job, against the local model stub and
local search servers.

* A round whose dedup answers were rejected is not saturated: it exits 2 saying how many
  candidates went unjudged and why, records no decision, and a re-run judges them, asking the
  model again only what was rejected (valid answers come from the model-answer cache).
* ``--check`` fails a ``+web`` stamp whose closest prior work is not a paper the round retrieved,
  named by its id; the example library passes.
* A dead search endpoint (a listening socket that never answers, a refused port) is asked once in
  an invocation, and the report says which behaviors went ungrounded and why.
"""

from __future__ import annotations

import json
import shutil
import socket
import threading
from pathlib import Path

import pytest
from cli_helper import in_process
from conftest import REPO, offline_env
from dagster import DagsterInstance
from library_stub import AtomServer, LibraryModel, OpenAlexServer, behavior, task
from llm_stub import answer, llm_env, llm_server, unused_port  # noqa: F401  (fixtures)

from assets.errors import SKIPPED_TAG
from assets.partitions import ROUNDS
from hypograph.library.schema import library_path, read_library
from hypograph.library.settings import LibrarySettings
from pipelines.definitions import defs
from pipelines.instance import register
from pipelines.launch import run_config, skips

TOPIC = "LLM sycophancy"
S1 = "Chat models echo a user's stated political leaning when the user mentions their party first."
S2 = "Speech assistants repeat a caller's misheard word back when the caller sounds annoyed."
S3 = "Code assistants keep a user's variable naming even when asked to follow a style guide."
S4 = "Translation models soften a user's blunt wording when the user says the text is for a manager."
ROUND = "r0001"


class Rejecting(LibraryModel):
    """A LibraryModel whose dedup answers are invalid (no judgement at all) while ``reject`` says so
    for the request's layer ("behavior" or "mechanism")."""

    def __init__(self, reject: set[str], **kw):
        super().__init__(**kw)
        self.reject = reject

    def __call__(self, body):
        if task(body) == "dedup" and layer(body) in self.reject:
            return answer({"judgements": []})
        return super().__call__(body)


def layer(body: dict) -> str:
    prompt = next(m["content"] for m in body["messages"] if m["role"] == "user")
    return "behavior" if "behavior item" in prompt else "mechanism"


def asked(stub, kind: str, since: int = 0, of_layer: str | None = None) -> int:
    return sum(
        1 for r in stub.requests[since:] if task(r.body) == kind and (of_layer is None or layer(r.body) == of_layer)
    )


@pytest.fixture
def cli_env(llm_server, llm_env):
    env = {**offline_env(), **llm_env(llm_server, timeout=5.0), "NO_PROXY": "127.0.0.1"}
    env.pop("HYPOGRAPH_LLM")
    return env


@pytest.fixture
def lib(tmp_path) -> Path:
    return Path(shutil.copytree(REPO / "examples" / "library", tmp_path / "lib"))


def round_files(root: Path) -> list[str]:
    d = root / ".hypograph/library/rounds" / ROUND
    return sorted(p.name for p in d.iterdir()) if d.is_dir() else []


# -- a round not judged is not saturated --------------------------------------------------------------------------


def test_an_all_rejected_dedup_round_exits_2_and_a_rerun_judges_it(lib, llm_server, cli_env):
    model = Rejecting({"behavior", "mechanism"}, rounds=[{"behaviors": [behavior(S1, tag="a"), behavior(S2, tag="b")]}])
    llm_server.always(model)
    before = library_path(lib).read_bytes()
    args = ("library", lib, "--topic", TOPIC, "--n-behaviors", "2", "--no-web")

    first = in_process(*args, env=cli_env)
    assert first.returncode == 2, first.stderr
    assert "2 of 2 candidate behaviors unjudged" in first.stderr and "rejected" in first.stderr
    assert "expected exactly one judgement for each item" in first.stderr  # why: the rejection's reason
    assert "stopped early" not in first.stdout + first.stderr  # not "saturated"
    assert library_path(lib).read_bytes() == before
    assert round_files(lib) == ["candidates.json"]  # no dedup.json, no persist.json: no decision recorded
    assert asked(llm_server, "dedup") == 3  # the question and its two re-asks

    model.reject = set()
    calls = len(llm_server.requests)
    again = in_process(*args, env=cli_env)
    assert again.returncode == 0, again.stderr
    assert [b.statement for b in read_library(lib)[0].behaviors][-2:] == [S1, S2]
    assert asked(llm_server, "generation", calls) == 0 and asked(llm_server, "topic", calls) == 0  # cached
    assert asked(llm_server, "dedup", calls, "behavior") == 1  # the rejected question, asked again
    assert "stopped early" not in again.stdout


def test_the_library_job_ends_not_done_and_its_rerun_asks_only_what_was_rejected(tmp_path, llm_server, llm_env):
    llm_env(llm_server, timeout=5.0)
    model = Rejecting({"mechanism"}, rounds=[{"behaviors": [behavior(S1, tag="a"), behavior(S2, tag="b")]}])
    llm_server.always(model)
    root = tmp_path / "lib"
    root.mkdir()
    instance = DagsterInstance.ephemeral()
    key = f"{register(instance, root, 'library').id}/{ROUND}"
    instance.add_dynamic_partitions(ROUNDS, [key])
    config = run_config({"library": LibrarySettings(topic=TOPIC, n_behaviors=2, web=False)}, offline=False)
    job = defs.resolve_job_def("library_round")

    result = job.execute_in_process(instance=instance, partition_key=key, run_config=config, raise_on_error=False)
    assert result.success  # not done yet: the step ends with no output, nothing red (issue 43)
    [line] = skips(result)  # its one line, which the command turns into exit 2
    assert line.startswith("round_dedup: ") and "candidate mechanisms unjudged" in line, line
    assert instance.get_run_by_id(result.run_id).tags[SKIPPED_TAG] == "NOT_DONE"
    assert not library_path(root).exists() and round_files(root) == ["candidates.json"]
    behaviors_asked = asked(llm_server, "dedup", of_layer="behavior")
    assert behaviors_asked >= 1 and asked(llm_server, "dedup", of_layer="mechanism") == 3

    model.reject = set()
    calls = len(llm_server.requests)
    rerun = job.execute_in_process(instance=instance, partition_key=key, run_config=config, raise_on_error=False)
    assert rerun.success
    assert asked(llm_server, "dedup", calls, "behavior") == 0  # valid before: from the cache
    assert asked(llm_server, "dedup", calls, "mechanism") == 1 and asked(llm_server, "generation", calls) == 0
    library = read_library(root)[0]
    assert [b.statement for b in library.behaviors] == [S1, S2]
    assert all(len(b.mechanisms) == 4 for b in library.behaviors)


# -- honest stamps ----------------------------------------------------------------------------------------------


def edit(root: Path, change) -> None:
    path = library_path(root)
    raw = json.loads(path.read_text())
    change(raw)
    path.write_text(json.dumps(raw, indent=2, ensure_ascii=False))


def stamp_web(raw: dict) -> None:
    b1 = raw["behaviors"][0]
    b1["impact"]["method"] = "llm-chat+web"
    b1["mechanisms"][0]["novelty"]["method"] = "llm-chat+web"  # its closest: "Sharma et al. 2023, …", no id


def test_a_web_stamp_without_a_retrieved_paper_fails_check(lib):
    ok = in_process("library", lib, "--check")
    assert ok.returncode == 0 and ok.stdout.count("ok  ") == 5 and "web_grounded" in ok.stdout
    edit(lib, stamp_web)
    bad = in_process("library", lib, "--check")
    assert bad.returncode == 1 and "FAIL web_grounded" in bad.stdout
    assert "B1-M1: novelty stamped llm-chat+web, but its closest prior work is not a retrieved paper" in bad.stdout
    assert "B1: impact stamped llm-chat+web, but no paper was retrieved for it" in bad.stdout
    # A hand-written closest that names a paper by its id is what a file from elsewhere can show.
    edit(lib, lambda r: r["behaviors"][0]["mechanisms"][0]["novelty"].update(closest="Sharma et al., arXiv:2310.13548"))
    assert in_process("library", lib, "--check").returncode == 0


class MemoryForSecond(LibraryModel):
    """Scores with the retrieved P1 for the first mechanism, the model's memory for the others."""

    def score_answer(self, body):
        out = super().score_answer(body)
        for n in out["novelty"][1:]:
            n.update(closest_paper=None, closest_memory="Perez et al. 2022, model-written evaluations")
        return out


def test_a_tool_written_web_stamp_names_a_paper_its_round_retrieved(tmp_path, llm_server, cli_env):
    llm_server.always(MemoryForSecond(rounds=[{"behaviors": [behavior(S3, tag="c")]}]))
    atom, openalex = AtomServer(), OpenAlexServer()
    root = tmp_path / "lib"
    root.mkdir()
    try:
        out = in_process(
            "library", root, "--topic", TOPIC, "--n-behaviors", "1",
            "--search-url", atom.url, "--openalex-url", openalex.url, env=cli_env,
        )  # fmt: skip
    finally:
        atom.close()
        openalex.close()
    assert out.returncode == 0, out.stderr
    b = read_library(root)[0].behaviors[0]
    assert b.impact.method == "llm-chat+web"
    assert [m.novelty.method for m in b.mechanisms] == ["llm-chat+web", "llm-chat", "llm-chat", "llm-chat"]
    assert in_process("library", root, "--check").returncode == 0
    # The same stamp citing a paper no search of its round retrieved (however paper-like its id) fails.
    edit(
        root, lambda r: r["behaviors"][0]["mechanisms"][0]["novelty"].update(closest="A Paper (2024), arXiv:2401.00001")
    )
    bad = in_process("library", root, "--check")
    assert bad.returncode == 1 and "B1-M1: novelty stamped llm-chat+web" in bad.stdout


# -- search that gives up -----------------------------------------------------------------------------------------


class Silent:
    """A listening socket that accepts connections, counts them, and never answers."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.accepted: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                self.accepted.append(self.sock.accept()[0])
            except OSError:
                return

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}/api/query"

    def close(self):
        for c in self.accepted:
            c.close()
        self.sock.close()


def search_records(root: Path) -> list[dict]:
    traces = root / ".hypograph/traces/hypothesis-batch"
    return [s for p in sorted(traces.rglob("*search-*.json")) for s in json.loads(p.read_text())["searches"]]


def test_a_dead_search_endpoint_is_asked_once_per_invocation(tmp_path, llm_server, cli_env):
    rounds = [
        {"behaviors": [behavior(S1, tag="a"), behavior(S2, tag="b")]},
        {"behaviors": [behavior(S3, tag="c"), behavior(S4, tag="d")]},
    ]
    llm_server.always(LibraryModel(rounds=rounds))
    silent, refused = Silent(), f"http://127.0.0.1:{unused_port()}/works"
    root = tmp_path / "lib"
    root.mkdir()
    try:
        out = in_process(
            "library", root, "--topic", TOPIC, "--rounds", "2", "--n-behaviors", "2",
            "--search-url", silent.url, "--openalex-url", refused, env=cli_env,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
        assert len(silent.accepted) == 1  # 2 rounds x 2 behaviors x 2 queries: asked once
    finally:
        silent.close()
    records = search_records(root)
    assert len(records) == 16  # every search is recorded, asked or not
    for source, why in (("arxiv", "timed out"), ("openalex", "Connection refused")):
        mine = [r["error"] for r in records if r["source"] == source]
        assert sum("unreachable" in e for e in mine) == 1 and all(why in e for e in mine)
        assert sum("not asked:" in e for e in mine) == 7
    library = read_library(root)[0]
    assert {b.impact.method for b in library.behaviors} == {"llm-chat"} and len(library.behaviors) == 4
    for bid in ("B1", "B2", "B3", "B4"):  # the report names each ungrounded behavior and why
        line = next(x for x in out.stdout.splitlines() if f": {bid} ungrounded (scored llm-chat): " in x)
        assert "arxiv: " in line and "timed out" in line and "Connection refused" in line
