"""Hostile copies of a case package (issue 23): every path a package names stays inside it and is a
regular file; wrong shapes and malformed JSON are one line naming the file; the CLI contract
(DEFERRED, "not confirmed" before "needs a model", a published batch needs no model); no temp
file of a killed write survives recovery. Each refusal ends in one line and an unchanged package."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import signal
import threading

import pytest
from case_support import builder_for, candidate, files, make_case, package_id, reply, valid_answer
from cli_helper import hypograph_main as main
from llm_stub import llm_env, llm_offline, llm_server  # noqa: F401

from hypograph.case import CasePackage, CaseStore, HypothesisBuilder, HypothesisConfig, Status
from hypograph.case.bridge import mint_batch
from hypograph.case.checks import CHECKS, run_checks
from hypograph.case.gateway import NEEDS_MODEL, NeedsModel
from hypograph.case.models import Answer
from hypograph.case.package import CaseBusy
from hypograph.case.revision import confirm
from hypograph.errors import HypographError, exit_code
from hypograph_cli.outcome import error_line

H = "analysis/hypotheses/0001"
INTERP = "analysis/interpretation/0001/interpretation.json"
CAT = "analysis/interpretation/0001/catalogue.json"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def load(case, rel):
    return json.loads((case / rel).read_text())


def dump(case, rel, doc) -> None:
    (case / rel).write_text(json.dumps(doc, indent=2) + "\n")


def rehash(case) -> None:
    """After a hand edit of catalogue or interpretation: every hash pointing at them made true again,
    so only the hostile path itself is wrong."""
    interp = load(case, INTERP)
    interp["bindings"]["catalogue"]["sha256"] = sha((case / CAT).read_bytes())
    dump(case, INTERP, interp)
    m = load(case, "manifest.json")
    m["artifacts"]["catalogue"]["sha256"] = sha((case / CAT).read_bytes())
    m["artifacts"]["interpretation"]["sha256"] = sha((case / INTERP).read_bytes())
    dump(case, "manifest.json", m)


def refused_in_one_line(case, llm_server, match: str, pid: str | None = None) -> str:
    """A dispatch on ``case`` refuses with one line matching ``match``, asks no model, changes nothing."""
    before, calls = files(case), len(llm_server.requests)
    with pytest.raises(HypographError) as e:
        asyncio.run(builder_for(case, [llm_server.url]).build(case.name, pid or package_id(case)))
    line = str(e.value)
    assert "\n" not in line and match in line, line
    assert len(llm_server.requests) == calls and files(case) == before
    return line


@pytest.fixture
def case(tmp_path):
    return make_case(tmp_path / "cases")


@pytest.fixture
def outside(tmp_path):
    """A file outside the package holding another case's interpretation (a question it must never see)."""
    folder = tmp_path / "outside"
    folder.mkdir()
    return folder


# -- confinement ------------------------------------------------------------------------------------


def _point_interpretation_at(case, path: str, target) -> None:
    doc = load(case, INTERP)
    doc["question"] = "OUTSIDE QUESTION"
    target.write_text(json.dumps(doc, indent=2) + "\n")
    m = load(case, "manifest.json")
    m["artifacts"]["interpretation"] = {"path": path, "sha256": sha(target.read_bytes())}
    dump(case, "manifest.json", m)


def test_an_artifact_path_with_dotdot_is_refused(case, outside, llm_server):
    _point_interpretation_at(case, "../../outside/interp.json", outside / "interp.json")
    line = refused_in_one_line(case, llm_server, "artifacts.interpretation.path")
    assert "leaves the package" in line and "OUTSIDE" not in line


def test_an_absolute_artifact_path_is_refused(case, outside, llm_server):
    _point_interpretation_at(case, str(outside / "interp.json"), outside / "interp.json")
    assert "absolute path" in refused_in_one_line(case, llm_server, "artifacts.interpretation.path")


def test_an_artifact_symlinked_out_of_the_package_is_refused(case, outside, llm_server):
    target = outside / "interp.json"
    _point_interpretation_at(case, INTERP, target)
    (case / INTERP).unlink()
    (case / INTERP).symlink_to(target)
    line = refused_in_one_line(case, llm_server, "outside the package")
    assert "manifest artifacts.interpretation" in line


@pytest.mark.parametrize("bound", ["/dev/zero", "case/r0001/zero"])
def test_a_bound_device_is_refused_before_a_byte_is_read(case, llm_server, bound):
    """/dev/zero was read whole before its hash was compared (MemoryError at 3.5 GB)."""
    if bound.startswith("case/"):
        (case / bound).symlink_to("/dev/zero")
    doc = load(case, INTERP)
    doc["bindings"]["inputs"][bound] = "0" * 64
    dump(case, INTERP, doc)
    rehash(case)
    line = refused_in_one_line(case, llm_server, "bindings.inputs")
    assert ("absolute path" in line) if bound.startswith("/") else ("outside the package" in line)


def _alarm(seconds: int):
    def hang(*_):
        raise AssertionError("hung on a FIFO")

    signal.signal(signal.SIGALRM, hang)
    signal.alarm(seconds)


def test_a_fifo_among_the_inputs_is_refused_without_hanging(case, llm_server):
    (case / "case/r0001/sensor-log.csv").unlink()
    os.mkfifo(case / "case/r0001/sensor-log.csv")
    _alarm(20)
    try:
        line = refused_in_one_line(case, llm_server, "is a FIFO, not a regular file")
    finally:
        signal.alarm(0)
    assert "sensor-log.csv" in line


def test_a_catalogue_origin_outside_the_package_is_refused(case, llm_server):
    doc = load(case, CAT)
    doc["sources"][0]["origin"] = "../../outside/x.md"
    dump(case, CAT, doc)
    rehash(case)
    line = refused_in_one_line(case, llm_server, "sources[0].origin (OBS1)")
    assert "leaves the package" in line


def test_a_catalogue_origin_that_is_no_bound_input_is_refused(case, llm_server):
    (case / "case/r0001/extra.md").write_text("not bound\n")
    doc = load(case, CAT)
    doc["sources"][0]["origin"] = "case/r0001/extra.md"
    dump(case, CAT, doc)
    rehash(case)
    refused_in_one_line(case, llm_server, "not one of the interpretation's bound inputs")


def test_a_manifest_nested_100000_deep_is_one_line(case, llm_server):
    pid = package_id(case)
    (case / "manifest.json").write_text("[" * 100_000 + "]" * 100_000)
    refused_in_one_line(case, llm_server, "manifest.json: not usable JSON", pid)
    with pytest.raises(HypographError, match="nested too deep|nested deeper") as e:
        confirm(case, by="ana")
    assert "\n" not in str(e.value)


def test_a_package_json_over_its_size_limit_is_refused_before_reading(case, llm_server):
    pkg = CasePackage(case)
    pkg.max_json_bytes = 100
    with pytest.raises(HypographError, match=r"bytes, over the 100-byte limit"):
        pkg.manifest()


# -- shapes ------------------------------------------------------------------------------------------


@pytest.fixture
def published(tmp_path, llm_server):
    case = make_case(tmp_path / "cases")
    llm_server.script(reply(valid_answer()))
    result = asyncio.run(builder_for(case, [llm_server.url]).build(case.name, package_id(case)))
    assert result.status is Status.COMPLETED
    return case


@pytest.mark.parametrize(
    "rel, change, pointer",
    [
        (
            "hypotheses.json",
            lambda d: d["hypotheses"].__setitem__(0, 7),
            "/hypotheses/0: expected an object, got an integer",
        ),
        ("hypotheses.json", [], "/: expected an object, got an array"),
        (
            "hypotheses.json",
            lambda d: d["hypotheses"][1].update(source_ids="TEC1"),
            "/hypotheses/1/source_ids: expected an array, got a string",
        ),
        (
            "hypotheses.json",
            lambda d: d["hypotheses"][2].pop("open_questions"),
            "/hypotheses/2/open_questions: missing",
        ),
        (
            "registry.json",
            lambda d: d["creations"].__setitem__(1, "H2"),
            "/creations/1: expected an object, got a string",
        ),
        ("registry.json", lambda d: d["creations"][0].update(id=["H1"]), "/creations/0/id: expected a string, number"),
        ("context.json", lambda d: d.update(anchor=None), "/anchor: expected an object, got null"),
        ("policy.json", 5, "/: expected an object, got an integer"),
    ],
)
def test_a_published_file_of_another_shape_is_a_violation_naming_file_and_pointer(
    published, llm_server, rel, change, pointer
):
    doc = load(published, f"{H}/{rel}")
    if callable(change):
        change(doc)
    dump(published, f"{H}/{rel}", doc if callable(change) else change)
    found = run_checks(CasePackage(published))
    assert set(found) == set(CHECKS)
    for violations in found.values():  # every blocking check fails, each naming the file and the pointer
        assert (f"{H}/{rel}", pointer) in [(i, r[: len(pointer)]) for i, r in violations], violations
    line = refused_in_one_line(published, llm_server, "the published batch fails")
    assert pointer in line
    with pytest.raises(HypographError, match="fails its checks") as e:
        mint_batch(published, published.parent)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("text", ["{", "\xff", "[" * 100_000])
def test_malformed_published_json_is_one_line_naming_the_file(published, text):
    (published / H / "registry.json").write_bytes(text.encode("latin-1") if text == "\xff" else text.encode())
    with pytest.raises(HypographError) as e:
        run_checks(CasePackage(published))
    assert str(e.value).startswith(str(published / H / "registry.json")) and "\n" not in str(e.value)


@pytest.mark.parametrize(
    "rel, text, match",
    [
        (f"{H}/rounds/1.json", "7", "rounds/1.json: /: expected an object, got an integer"),
        (f"{H}/rounds/1.json", '{"attempt_id": "1", "bindings": [], "answer": {}}', "/bindings: expected an object"),
        (
            f"{H}/dispatch.json",
            '{"analysis_revision": 1, "attempt_id": "1", "failed_rounds": "x"}',
            "dispatch.json: field 'failed_rounds'",
        ),
        (
            f"{H}/dispatch.json",
            '{"analysis_revision": 1, "attempt_id": "1", "status": "RETRY_PENDING", "due_at": "2030-01-01T00:00:00"}',
            "field 'due_at'",
        ),
        (f"{H}/dispatch.json", "[]", "dispatch.json: not a dispatch state"),
        (f"{H}/policy.json", "[]", "policy.json: not a JSON object"),
    ],
)
def test_a_tool_file_of_another_shape_before_publication_is_one_line(case, llm_server, rel, text, match):
    (case / rel).parent.mkdir(parents=True, exist_ok=True)
    (case / rel).write_text(text)
    refused_in_one_line(case, llm_server, match)


# -- the nine fields -----------------------------------------------------------------------------------


def test_all_nine_candidate_fields_are_required():
    for field in ("open_questions", "falsifying_evidence", "title"):
        answer = {"hypotheses": [{k: v for k, v in candidate(n).items() if k != field} for n in (1, 2, 3)]}
        with pytest.raises(ValueError, match=field):
            Answer.model_validate(answer)
    empty = {"hypotheses": [{**candidate(n), "open_questions": []} for n in (1, 2, 3)]}
    assert Answer.model_validate(empty).hypotheses[0].open_questions == []  # present, may be empty


def test_an_answer_without_open_questions_is_rejected_not_published(case, llm_server):
    answer = valid_answer()
    for h in answer["hypotheses"]:
        del h["open_questions"]
    llm_server.script(reply(answer))
    result = asyncio.run(builder_for(case, [llm_server.url]).build(case.name, package_id(case)))
    assert result.status is Status.ERROR and "open_questions" in result.message
    assert not (case / H / "registry.json").exists()


# -- temp files after recovery -----------------------------------------------------------------------


def test_recovery_removes_temp_files_of_killed_writes(case, llm_server):
    """A dispatch killed inside write_atomic leaves ``.dispatch.json.xxxxxxxx.tmp`` (and a round's);
    the next dispatch, holding the lock, removes them."""
    (case / H / "rounds").mkdir(parents=True)
    left = [case / H / ".dispatch.json.a1b2c3d4.tmp", case / H / "rounds" / ".1.json.x_y9z8w7.tmp"]
    for p in left:
        p.write_text("half")
    keep = case / "case/r0001/.notes.md"  # a hidden file that is no temp file stays
    keep.write_text("mine")
    llm_server.script(reply(valid_answer()))
    assert (
        asyncio.run(builder_for(case, [llm_server.url]).build(case.name, package_id(case))).status is Status.COMPLETED
    )
    assert not any(p.exists() for p in left) and keep.read_text() == "mine"
    assert not [p for p in case.rglob("*.tmp")]


# -- the CLI contract ----------------------------------------------------------------------------------


def test_busy_case_is_deferred_exit_2(case, llm_env, llm_server, capsys):
    """The lock is the batch job's guard (issue 45: once per path, in the job): the command's line is
    the run's own, DEFERRED, exit 2, no model asked."""
    llm_env(llm_server)
    pkg = CasePackage(case)
    held, release = threading.Event(), threading.Event()

    def hold():
        with pkg.lock():
            held.set()
            release.wait(10)

    t = threading.Thread(target=hold)
    t.start()
    held.wait(5)
    try:
        assert main(["batch", str(case)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "case_context: DEFERRED: " in err and "case_batch run " in err, err
        with pytest.raises(CaseBusy) as e, pkg.lock():
            pass
        assert exit_code(e.value) == 2 and error_line(e.value).startswith("DEFERRED: ")
        result = asyncio.run(builder_for(case, [llm_server.url]).build(case.name, package_id(case)))
        assert result.status is Status.DEFERRED
    finally:
        release.set()
        t.join()
    assert llm_server.requests == []


def test_not_confirmed_comes_before_needs_a_model(tmp_path, llm_offline, capsys):
    """Each refused by the batch job's own step, once (issue 45: no guard of the command's before it)."""
    case = make_case(tmp_path, confirmed=False)
    before = files(case)
    assert main(["batch", str(case)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "case_interpretation: " in err and "is not confirmed" in err, err
    assert files(case) == before
    confirm(case, by="ana")
    assert main(["batch", str(case)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "case_context: needs a model" in err and "case_batch run " in err, err
    assert "--config" in NEEDS_MODEL and "resources.case" in NEEDS_MODEL  # one line, the command's and the UI's
    assert files(case) != before  # (the confirmation) ...
    after = files(case)
    with pytest.raises(NeedsModel):  # the builder itself, without a gateway: refused before phase 1
        asyncio.run(HypothesisBuilder(_store(case), None, HypothesisConfig()).build(case.name, package_id(case)))
    assert files(case) == after  # ... and nothing else: no model, nothing written


def _store(case):
    return CaseStore(case.parent)


def test_a_published_batch_is_reused_and_minted_without_a_model(published, example_vault, llm_offline):
    result = asyncio.run(
        HypothesisBuilder(_store(published), None, HypothesisConfig()).build(published.name, package_id(published))
    )
    assert result.status is Status.COMPLETED and result.reused
    report = mint_batch(published, example_vault)
    assert len(report.minted) == 3
    pkg = CasePackage(published)
    assert pkg.target_vault() == example_vault.resolve()  # recorded: later mints need no --into
    again = mint_batch(published)
    assert again.minted == [] and len(again.existing) == 3


def test_case_cli_exit_codes(tmp_path, llm_offline, capsys):
    case = make_case(tmp_path, confirmed=False)
    assert main(["case", "show", str(case)]) == 0
    assert "unconfirmed" in capsys.readouterr().out
    (case / "manifest.json").write_text("{")
    assert main(["case", "confirm", str(case)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "manifest.json: not valid UTF-8 JSON" in err


def test_the_batch_cli_says_what_the_api_says(tmp_path, llm_offline, llm_server, example_vault, capsys):
    """`hypograph batch`: not confirmed, then needs a model (naming --config), DEFERRED while the lock is
    held — each exit 2 in one line, nothing changed — and a published batch minted --into offline, exit 0."""
    case = make_case(tmp_path / "a", confirmed=False)
    assert main(["batch", str(case)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not confirmed" in err
    confirm(case, by="ana")
    before = files(case, skip_state=False)
    assert main(["batch", str(case)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "needs a model" in err and "--config file" in err
    assert files(case, skip_state=False) == before
    held, release = threading.Event(), threading.Event()

    def hold():
        with CasePackage(case).lock():
            held.set()
            release.wait(10)

    t = threading.Thread(target=hold)
    t.start()
    held.wait(5)
    try:
        assert main(["batch", str(case)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "DEFERRED: " in err, err
    finally:
        release.set()
        t.join()
    llm_server.script(reply(valid_answer()))
    assert (
        asyncio.run(builder_for(case, [llm_server.url]).build(case.name, package_id(case))).status is Status.COMPLETED
    )
    capsys.readouterr()
    assert main(["batch", str(case), "--into", str(example_vault)]) == 0  # no model configured at all
    out = capsys.readouterr().out
    assert "already published" in out and "3 H nodes minted" in out and len(llm_server.requests) == 1
