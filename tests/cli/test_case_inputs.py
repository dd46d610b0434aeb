"""Cases from raw inputs (issue 23): ``case new`` / ``case add`` from files, folders and ZIP archives
(copied byte for byte, archives kept whole and checked before anything is extracted), the
interpreter's draft (scripted model, or an offline template a person fills in), ``case show`` and
``case confirm``, and the whole way on to a batch minted into a vault and structured."""

from __future__ import annotations

import json
import os
import stat
import zipfile
from pathlib import Path

import pytest
from case_support import files
from cli_helper import hypograph_main as main
from llm_stub import answer, llm_env, llm_offline, llm_server  # noqa: F401

from hypograph.case.config import HypothesisConfig
from hypograph.case.interpret import draft_interpretation

I1 = "analysis/interpretation/0001"
QUESTION = "Why do the tomato plants in house 3 wilt every afternoon?"
REPORT = "Plants in house 3 wilt every afternoon since 2 June; they recover overnight.\n"
MAINT = "Valve 3B was replaced on 1 June by the irrigation contractor.\n"
SENSOR = "time,moisture\n2030-06-02T14:00,18%\n2030-06-03T14:00,17%\n"
PUMP = "pump on 06:00\npump off 06:20\n"


@pytest.fixture
def raw(tmp_path) -> dict[str, Path]:
    """A folder of text files and a ZIP archive of logs, outside any package."""
    folder = tmp_path / "inputs" / "reports"
    folder.mkdir(parents=True)
    (folder / "grower-report.md").write_text(REPORT)
    (folder / "maintenance.txt").write_text(MAINT)
    (folder / ".DS_Store").write_bytes(b"\0\1hidden")  # hidden: never an input
    (folder / ".hypograph").mkdir()  # another input's tool state: never an input either
    (folder / ".hypograph" / "case.lock").write_text("")
    archive = tmp_path / "inputs" / "logs.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("sensor.csv", SENSOR)
        zf.writestr("pump/", "")
        zf.writestr("pump/pump.log", PUMP)
    return {"folder": folder, "zip": archive}


def new_case(tmp_path, raw, capsys, *extra) -> Path:
    case = tmp_path / "cases" / "tomatoes"
    assert main(["case", "new", str(case), "--question", QUESTION, str(raw["folder"]), str(raw["zip"]), *extra]) == 0
    assert "revision 1 recorded, unconfirmed" in capsys.readouterr().out
    return case


def catalogue(case, rev=1):
    return json.loads((case / f"analysis/interpretation/{rev:04d}/catalogue.json").read_text())["sources"]


# -- case new / case add ------------------------------------------------------------------------------


def test_case_new_copies_inputs_byte_for_byte_and_catalogues_each(tmp_path, raw, capsys):
    case = new_case(tmp_path, raw, capsys)
    assert (case / "case/r0001/reports/grower-report.md").read_bytes() == REPORT.encode()
    assert (case / "case/r0001/logs.zip").read_bytes() == raw["zip"].read_bytes()  # kept whole
    assert not (case / "case/r0001/sensor.csv").exists() and not (case / "case/r0001/reports/.DS_Store").exists()
    assert not (case / "case/r0001/reports/.hypograph").exists()
    assert [(s["id"], s["title"], s["kind"], s["read"], s["origin"], s.get("member")) for s in catalogue(case)] == [
        ("IN1", "reports/grower-report.md", "report", False, "case/r0001/reports/grower-report.md", None),
        ("IN2", "reports/maintenance.txt", "report", False, "case/r0001/reports/maintenance.txt", None),
        ("IN3", "logs.zip: sensor.csv", "report", False, "case/r0001/logs.zip", "sensor.csv"),
        ("IN4", "logs.zip: pump/pump.log", "report", False, "case/r0001/logs.zip", "pump/pump.log"),
    ]
    interp = json.loads((case / f"{I1}/interpretation.json").read_text())
    assert interp["question"] == QUESTION and interp["statements"] == [] and not interp["confirmed"]
    assert interp["reported_behavior"]["text"] == QUESTION
    assert set(interp["bindings"]["inputs"]) == {
        "case/r0001/reports/grower-report.md",
        "case/r0001/reports/maintenance.txt",
        "case/r0001/logs.zip",
    }
    assert main(["case", "new", str(case), "--question", QUESTION, str(raw["zip"])]) == 1
    assert "already a case package" in capsys.readouterr().err


def test_show_of_a_new_case_says_to_interpret_it_before_confirming(tmp_path, raw, capsys):
    """No statement yet and every source unread: the next step is ``case interpret``, not confirm."""
    case = new_case(tmp_path, raw, capsys)
    assert main(["case", "show", str(case)]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.startswith("nothing to confirm yet (no statement; 4 of 4 sources unread): draft the interpretation")
    assert f"hypograph case interpret {case}, then" in last
    assert not last.startswith("confirm it with")


def test_case_add_is_a_new_revision_that_keeps_the_prior_package(tmp_path, raw, capsys):
    case = new_case(tmp_path, raw, capsys)
    before = files(case)
    log = tmp_path / "controller.log"
    log.write_text("firmware 2.1 loaded\n")
    assert main(["case", "add", str(case), "--kind", "technical_fact", str(log)]) == 0
    after = files(case)
    assert {k: v for k, v in after.items() if k in before and k != "manifest.json"} == {
        k: v for k, v in before.items() if k != "manifest.json"
    }  # the prior package, archive included, as it was
    sources = catalogue(case, 2)
    assert [s["id"] for s in sources] == ["IN1", "IN2", "IN3", "IN4", "IN5"]
    assert sources[4] == {
        "id": "IN5",
        "kind": "technical_fact",
        "title": "controller.log",
        "summary": "",
        "origin": "case/r0002/controller.log",
        "read": False,
    }
    assert sources[2]["origin"] == "case/r0001/logs.zip"  # earlier inputs stay where they are, bound again
    interp = json.loads((case / "analysis/interpretation/0002/interpretation.json").read_text())
    assert len(interp["bindings"]["inputs"]) == 4


def _zip(path: Path, members: list[tuple[str, bytes]], link: str | None = None) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members:
            zf.writestr(name, data)
        if link:
            info = zipfile.ZipInfo(link)
            info.create_system = 3
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            zf.writestr(info, "/etc/passwd")
    return path


@pytest.mark.parametrize(
    "limit_case",  # (members, link, config, member, limit)
    [
        ([("ok.txt", b"x"), ("../evil.txt", b"x")], None, "", "../evil.txt", "zip slip"),
        ([("/etc/cron.d/x", b"x")], None, "", "/etc/cron.d/x", "absolute member name"),
        ([("ok.txt", b"x")], "passwd", "", "passwd", "a symbolic link"),
        ([("bomb.bin", b"\0" * 5_000_000)], None, "", "bomb.bin", "over archives.max_ratio=100"),
        (
            [("a.txt", b"a"), ("b.txt", b"b"), ("c.txt", b"c")],
            None,
            "max_members = 2",
            "c.txt",
            "over archives.max_members=2",
        ),
        (
            [("a.txt", b"a" * 60), ("b.txt", b"b" * 60)],
            None,
            "max_total_bytes = 100",
            "b.txt",
            "over archives.max_total_bytes=100",
        ),
        ([("a.txt", b"abc" * 100)], None, "max_member_bytes = 200", "a.txt", "over archives.max_member_bytes=200"),
    ],
)
def test_an_archive_over_a_limit_is_refused_in_one_line_before_anything_is_written(tmp_path, capsys, limit_case):
    members, link, config, member, limit = limit_case
    archive = _zip(tmp_path / "logs.zip", members, link)
    cfg = tmp_path / "analysis.toml"
    cfg.write_text(f"[archives]\n{config}\n")
    case = tmp_path / "cases" / "c"
    assert main(["case", "new", str(case), "--question", "q?", "--config", str(cfg), str(archive)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(archive) in err and f"member {member!r}" in err and limit in err, err
    assert not case.exists()


@pytest.mark.parametrize("kind", ["fifo", "symlink out"])
def test_a_folder_with_a_special_file_or_a_link_out_is_refused(tmp_path, raw, capsys, kind):
    if kind == "fifo":
        os.mkfifo(raw["folder"] / "pipe")
    else:
        (tmp_path / "secret.txt").write_text("outside\n")
        (raw["folder"] / "secret.txt").symlink_to(tmp_path / "secret.txt")
    case = tmp_path / "cases" / "c"
    assert main(["case", "new", str(case), "--question", "q?", str(raw["folder"])]) == 1
    err = capsys.readouterr().err
    want = "pipe: not a regular file" if kind == "fifo" else "outside the input"
    assert err.count("\n") == 1 and want in err, err
    assert not case.exists()


def test_a_case_from_a_vault_names_it_as_its_target(example_vault, tmp_path, capsys):
    from hypograph.case import CasePackage

    case = tmp_path / "cases" / "lba"
    assert main(["case", "from-vault", str(example_vault), str(case)]) == 0
    assert CasePackage(case).target_vault() == example_vault.resolve()
    assert json.loads((case / "manifest.json").read_text())["target_vault"] == str(example_vault.resolve())


def test_a_busy_case_is_deferred_on_the_cli(tmp_path, raw, capsys):
    import threading

    from hypograph.case import CasePackage

    case = new_case(tmp_path, raw, capsys)
    held, release = threading.Event(), threading.Event()

    def hold():
        with CasePackage(case).lock():
            held.set()
            release.wait(10)

    t = threading.Thread(target=hold)
    t.start()
    held.wait(5)
    try:
        assert main(["case", "confirm", str(case)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "DEFERRED: " in err and "another dispatch holds the case lock" in err
    finally:
        release.set()
        t.join()


def test_an_archive_inside_an_input_folder_is_checked_too(tmp_path, raw, capsys):
    _zip(raw["folder"] / "old-logs.zip", [("../../etc/x", b"x")])
    case = tmp_path / "cases" / "c"
    assert main(["case", "new", str(case), "--question", "q?", str(raw["folder"])]) == 1
    err = capsys.readouterr().err
    assert "old-logs.zip: member '../../etc/x'" in err and "zip slip" in err and not case.exists()


def test_an_add_interrupted_after_its_copies_is_added_again(tmp_path, raw, capsys):
    """Inputs are copied before the revision's journal plan: a crash in between leaves case/r0002/
    that no manifest names. The same add again completes; other bytes there are refused."""
    case = new_case(tmp_path, raw, capsys)
    log = tmp_path / "controller.log"
    log.write_text("firmware 2.1 loaded\n")
    (case / "case/r0002").mkdir()
    (case / "case/r0002/controller.log").write_text("firmware 2.1 loaded\n")  # the crashed add's copy
    assert main(["case", "add", str(case), str(log)]) == 0
    assert json.loads((case / "manifest.json").read_text())["analysis_revision"] == 2
    other = tmp_path / "other.log"
    other.write_text("new\n")
    (case / "case/r0003").mkdir()
    (case / "case/r0003/other.log").write_text("something else\n")
    before = files(case)
    assert main(["case", "add", str(case), str(other)]) == 1
    assert "is no revision's input" in capsys.readouterr().err and files(case) == before


def test_an_input_whose_name_cannot_be_written_safely_is_refused(tmp_path, capsys):
    long = tmp_path / ("n" * 240 + ".txt")
    long.write_text("x\n")
    case = tmp_path / "cases" / "c"
    assert main(["case", "new", str(case), "--question", "q?", str(long)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "file name is 244 bytes" in err and not case.exists()


# -- the interpreter ------------------------------------------------------------------------------------


def _tagged(prompt: str, tag: str) -> dict:
    return json.loads(prompt.split(f"<{tag}")[1].split(">", 1)[1].split(f"</{tag}>", maxsplit=1)[0])


def interpreter(body: dict):
    """A careful reader: states what the excerpts say, citing the source each claim comes from."""
    prompt = [m["content"] for m in body["messages"] if m["role"] == "user"][0]
    by_title = {s["title"]: s["id"] for s in _tagged(prompt, "case_catalogue")["sources"]}
    shown = {e["source_id"]: e["text"] for e in _tagged(prompt, "excerpts")["excerpts"]}
    report, maint = by_title["reports/grower-report.md"], by_title["reports/maintenance.txt"]
    sensor = by_title["logs.zip: sensor.csv"]
    assert "wilt every afternoon" in shown[report] and "18%" in shown[sensor]
    return answer(
        json.dumps(
            {
                "question": QUESTION,
                "statements": [
                    {"text": "Plants in house 3 wilt every afternoon and recover overnight.", "source_ids": [report]},
                    {"text": "Substrate moisture was 18% at 14:00 on 2 June.", "source_ids": [sensor]},
                ],
                "first_known_divergence": {
                    "text": "Wilting began on 2 June, the day after valve 3B was replaced.",
                    "source_ids": [report, maint],
                },
                "failure_stage": None,
                "reported_behavior": {"text": "Afternoon wilting in house 3.", "source_ids": [report]},
                "source_summaries": [
                    {"source_id": report, "summary": "The grower reports afternoon wilting since 2 June."},
                    {"source_id": maint, "summary": "Valve 3B was replaced on 1 June."},
                ],
            }
        )
    )


def hypotheses(body: dict):
    """A valid batch for the interpreted case: H1 cites the grower's report and the divergence."""
    prompt = [m["content"] for m in body["messages"] if m["role"] == "user"][0]
    ids = {s["title"]: s["id"] for s in _tagged(prompt, "case_catalogue")["sources"]}
    aliases = {s["json_pointer"]: s["alias"] for s in _tagged(prompt, "interpretation")["statements"]}
    report, maint, sensor = ids["reports/grower-report.md"], ids["reports/maintenance.txt"], ids["logs.zip: sensor.csv"]
    common = {
        "rationale": "The timing matches.",
        "expected_evidence": ["x"],
        "falsifying_evidence": ["y"],
        "open_questions": ["Was the valve calibrated?"],
    }
    hyps = [
        {
            "title": "New valve under-delivers",
            "mechanism": "Valve 3B delivers less water than the old one.",
            "source_ids": [report, maint],
            "interpretation_ids": [aliases["/statements/0"], aliases["/first_known_divergence"]],
        },
        {
            "title": "Substrate dries by noon",
            "mechanism": "The substrate holds too little water for the afternoon.",
            "source_ids": [sensor],
            "interpretation_ids": [aliases["/statements/1"]],
        },
        {
            "title": "Pump runs too early",
            "mechanism": "The only irrigation is at 06:00, spent by 14:00.",
            "source_ids": [sensor],
            "interpretation_ids": [aliases["/statements/1"]],
        },
    ]
    return answer(json.dumps({"hypotheses": [{**common, **h, "distinction": f"Only: {h['title']}"} for h in hyps]}))


def test_interpret_drafts_from_bounded_excerpts_and_confirm_adopts_it(tmp_path, raw, capsys, llm_server, llm_env):
    case = new_case(tmp_path, raw, capsys)
    llm_env(llm_server)
    llm_server.script(interpreter)
    assert main(["case", "interpret", str(case)]) == 0
    assert "draft written" in capsys.readouterr().out
    prompt = llm_server.requests[0].body["messages"][1]["content"]
    assert "PK\\u0003\\u0004" not in prompt and "PK\x03\x04" not in prompt  # never the raw archive
    assert PUMP.splitlines()[0] in prompt  # a member's text, decompressed in a stream
    draft = json.loads((case / f"{I1}/draft.json").read_text())
    assert draft["drafted_by"] == "model" and not draft["confirmed"]
    assert sorted(draft["read"]) == ["IN1", "IN2", "IN3", "IN4"]  # each shown whole
    before = files(case)
    assert main(["case", "interpret", str(case)]) == 0  # a re-run: the draft is kept, no call
    assert "draft kept" in capsys.readouterr().out and len(llm_server.requests) == 1 and files(case) == before
    _show_and_confirm_adopt_the_draft(case, capsys)


def _show_and_confirm_adopt_the_draft(case, capsys) -> None:
    """``case show`` prints the draft; ``case confirm`` adopts it, its summaries into the catalogue."""
    assert main(["case", "show", str(case)]) == 0
    shown = capsys.readouterr().out
    assert "draft, unconfirmed" in shown and "I1. Plants in house 3 wilt every afternoon" in shown
    assert "first known divergence: Wilting began on 2 June" in shown
    assert "IN2 (report): reports/maintenance.txt [case/r0001/reports/maintenance.txt] - Valve 3B" in shown
    assert main(["case", "confirm", str(case), "--by", "ana"]) == 0
    assert "adopting" in capsys.readouterr().out
    interp = json.loads((case / f"{I1}/interpretation.json").read_text())
    assert interp["confirmed"] and interp["statements"][0]["source_ids"] == ["IN1"]
    cat = catalogue(case)
    assert cat[1]["summary"] == "Valve 3B was replaced on 1 June." and cat[1]["read"]


@pytest.mark.parametrize(
    "bad_case",  # (break the answer, the reason named)
    [
        (lambda d: d["statements"][0].update(source_ids=["IN9"]), "'IN9' is not a source"),
        (lambda d: d.update(first_known_divergence=None, reported_behavior=None), "at least one is needed"),
        (lambda d: d.update(confidence=0.9), "not accepted from the model"),
        (lambda d: d.pop("failure_stage"), "failure_stage"),
    ],
)
def test_an_invalid_draft_answer_is_refused_and_nothing_is_written(
    tmp_path, raw, capsys, llm_server, llm_env, bad_case
):
    bad, reason = bad_case
    case = new_case(tmp_path, raw, capsys)
    llm_env(llm_server)

    def broken(body):
        doc = json.loads(interpreter(body).content)
        bad(doc)
        return answer(json.dumps(doc))

    llm_server.always(broken)
    before = files(case)
    assert main(["case", "interpret", str(case)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "rejected" in err and reason in err, err
    assert files(case) == before


def test_offline_interpret_writes_a_template_a_person_fills_in(tmp_path, raw, capsys, llm_offline):
    case = new_case(tmp_path, raw, capsys)
    assert main(["case", "interpret", str(case)]) == 0
    assert "template written" in capsys.readouterr().out
    path = case / f"{I1}/draft.json"
    template = json.loads(path.read_text())
    assert template["drafted_by"] == "template" and template["statements"] == [{"text": "", "source_ids": []}]
    assert set(template["source_summaries"]) == {"IN1", "IN2", "IN3", "IN4"}
    assert main(["case", "confirm", str(case)]) == 1
    assert "statements.0.text': blank; fill in the template" in capsys.readouterr().err
    template["statements"] = [{"text": "Plants wilt every afternoon.", "source_ids": ["IN1"]}]
    template["source_summaries"]["IN1"] = "The grower's report."
    template["read"] = ["IN1"]
    path.write_text(json.dumps(template, indent=2))
    assert main(["case", "confirm", str(case), "--by", "ana"]) == 0
    interp = json.loads((case / f"{I1}/interpretation.json").read_text())
    assert interp["confirmed"] and interp["statements"][0]["text"] == "Plants wilt every afternoon."
    assert catalogue(case)[0]["read"] and not catalogue(case)[1]["read"]


def test_the_interpreters_context_stays_within_its_limit(tmp_path, raw, capsys, llm_server):
    from case_support import endpoint

    from hypograph.case.gateway import CaseGateway
    from hypograph.errors import HypographError

    case = new_case(tmp_path, raw, capsys)
    (tmp_path / "big.txt").write_text("moisture 18%\n" * 5000)
    assert main(["case", "add", str(case), str(tmp_path / "big.txt")]) == 0
    small = HypothesisConfig.from_mapping({"limits": {"context_bytes": 4000}})
    llm_server.always(lambda body: answer("{}"))
    with pytest.raises(HypographError):  # answer invalid; what matters is what was sent
        draft_interpretation(case, small, CaseGateway([endpoint(llm_server.url)]))
    sent = llm_server.requests[0].body["messages"][1]["content"]
    assert len(sent.encode()) < 4000 + 1500  # the context (4000) plus the prompt's own words
    assert '"complete": false' in sent
    with pytest.raises(HypographError, match="limits.context_bytes=300"):
        draft_interpretation(
            case,
            HypothesisConfig.from_mapping({"limits": {"context_bytes": 300}}),
            CaseGateway([endpoint(llm_server.url)]),
        )


# -- the whole way ---------------------------------------------------------------------------------------


def test_raw_inputs_to_a_structured_vault(tmp_path, raw, capsys, llm_server, llm_env, example_vault):
    """case new -> case interpret (scripted) -> case confirm -> batch -> batch --into VAULT -> structure."""
    case = new_case(tmp_path, raw, capsys)
    llm_env(llm_server)
    llm_server.script(interpreter, hypotheses)
    assert main(["case", "interpret", str(case)]) == 0
    assert main(["case", "confirm", str(case), "--by", "ana"]) == 0
    capsys.readouterr()
    assert main(["batch", str(case)]) == 0
    assert "COMPLETED: published 3 hypotheses" in capsys.readouterr().out
    assert main(["batch", str(case), "--into", str(example_vault)]) == 0
    out = capsys.readouterr().out
    assert "already published" in out and "3 H nodes minted" in out and len(llm_server.requests) == 2
    assert main(["structure", str(example_vault), "--llm", "offline"]) == 0
    from hypograph.vault.vault import open_vault

    minted = [n for n in open_vault(example_vault).nodes.values() if n.meta.get("case_creation")]
    assert len(minted) == 3 and all("/r0001/H" in n.meta["case_creation"] for n in minted)
    assert (example_vault / "agent-notes" / "structure.md").exists()
    # each step a Dagster run (or, for `case new`, an observation) on the case revision's partition
    import os

    from dagster import AssetKey, AssetRecordsFilter, DagsterInstance, DagsterRunStatus, RunsFilter

    from hypograph.inputs import stored_id

    key = f"{stored_id(case)}/r0001"
    with DagsterInstance.from_config(os.environ["DAGSTER_HOME"]) as instance:
        runs = instance.get_runs(filters=RunsFilter(tags={"dagster/partition": key}))
        observed = instance.fetch_observations(
            AssetRecordsFilter(asset_key=AssetKey("case_package"), asset_partitions=[key]), limit=10
        ).records
    assert sorted((r.job_name, r.status) for r in runs) == sorted(
        (job, DagsterRunStatus.SUCCESS)
        for job in ("case_interpret", "case_confirmed", "case_batch", "case_batch_into_vault")
    )
    assert observed  # case new recorded the package's first version


# -- a person's words (issue 46) ------------------------------------------------------------------------

MODEL_QUESTION = "What makes the tomato plants of house 3 wilt in the afternoon?"


def rewording_interpreter(body: dict):
    """The careful reader, who also words the question its own way."""
    doc = json.loads(interpreter(body).content)
    return answer(json.dumps({**doc, "question": MODEL_QUESTION}))


def test_the_persons_question_stays_as_typed_through_interpret_confirm_and_publish(
    tmp_path, raw, capsys, llm_server, llm_env
):
    """The model's wording is kept beside the question as a suggestion (draft.json, `case show`),
    never applied by itself: the confirmed interpretation and the published hypotheses.md carry
    the question the person typed; the real client talks to the local stub server."""
    case = new_case(tmp_path, raw, capsys)
    llm_env(llm_server)
    llm_server.script(rewording_interpreter, hypotheses)
    assert main(["case", "interpret", str(case)]) == 0
    draft = json.loads((case / f"{I1}/draft.json").read_text())
    assert (draft["question"], draft["suggested_question"]) == (QUESTION, MODEL_QUESTION)
    capsys.readouterr()
    assert main(["case", "show", str(case)]) == 0
    shown = capsys.readouterr().out.splitlines()
    assert f"question: {QUESTION}" in shown
    assert any(line.startswith("suggested question") and line.endswith(MODEL_QUESTION) for line in shown)
    assert "--use-suggested-question" in next(line for line in shown if line.startswith("suggested question"))
    assert main(["case", "confirm", str(case), "--by", "ana"]) == 0
    interp = json.loads((case / f"{I1}/interpretation.json").read_text())
    assert interp["confirmed"] and interp["question"] == QUESTION
    capsys.readouterr()
    assert main(["batch", str(case)]) == 0
    published = [p.read_text(encoding="utf-8") for p in case.glob("analysis/hypotheses/*/hypotheses.md")]
    assert len(published) == 1 and QUESTION in published[0] and MODEL_QUESTION not in published[0]


def test_the_models_question_is_used_only_by_a_persons_explicit_choice(tmp_path, raw, capsys, llm_server, llm_env):
    case = new_case(tmp_path, raw, capsys)
    llm_env(llm_server)
    llm_server.script(rewording_interpreter)
    assert main(["case", "interpret", str(case)]) == 0
    assert main(["case", "confirm", str(case), "--by", "ana", "--use-suggested-question"]) == 0
    assert "the question as the model suggested it" in capsys.readouterr().out
    assert json.loads((case / f"{I1}/interpretation.json").read_text())["question"] == MODEL_QUESTION


def test_no_suggestion_to_use_is_refused_in_one_line(tmp_path, raw, capsys, llm_server, llm_env):
    """The model worded the question as the person did: nothing to take, said, nothing confirmed."""
    case = new_case(tmp_path, raw, capsys)
    llm_env(llm_server)
    llm_server.script(interpreter)
    assert main(["case", "interpret", str(case)]) == 0
    assert "suggested_question" not in json.loads((case / f"{I1}/draft.json").read_text())
    before = files(case)
    capsys.readouterr()
    assert main(["case", "confirm", str(case), "--use-suggested-question"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "draft.json: field 'suggested_question': none" in err[0], err
    assert files(case) == before


def test_a_draft_edited_after_confirmation_is_refused_not_passed_over(tmp_path, raw, capsys, llm_server, llm_env):
    """Issue 46: the person's files are part of "unchanged": a question edited in draft.json after
    `case confirm` is not "already confirmed" (exit 0, the edit dropped) but one line naming the
    file, the field and what to do; nothing is written. Confirming again unedited changes nothing."""
    case = new_case(tmp_path, raw, capsys)
    llm_env(llm_server)
    llm_server.script(rewording_interpreter)
    assert main(["case", "interpret", str(case)]) == 0
    assert main(["case", "confirm", str(case), "--by", "ana"]) == 0
    assert main(["case", "confirm", str(case), "--by", "ana"]) == 0
    assert "already confirmed" in capsys.readouterr().out
    draft = case / f"{I1}/draft.json"
    doc = json.loads(draft.read_text())
    draft.write_text(json.dumps({**doc, "question": "Why did house 3 wilt on 2 June only?"}))
    before = files(case)
    assert main(["case", "confirm", str(case), "--by", "ana"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and f"{draft}: field 'question' was edited after revision 1 was confirmed" in err[0], err
    assert "hypograph case add" in err[0] and files(case) == before
