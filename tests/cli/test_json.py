"""``--json`` on every command (issue 45): one JSON document on stdout, whatever the exit code,
that validates as ``hypograph_cli.records.Record`` and its result as the command's kind; the
exit code is the one the command exits with without ``--json``; docs/json.md is generated from
the models. Every command is run at least once with ``--json``: an argument error for each, and
what it records when it works or refuses (a missing input, a setting out of range, a decision).
"""

from __future__ import annotations

import argparse
import json
import socket
from pathlib import Path

import pytest
from case_support import make_case
from cli_helper import hypograph, in_process, prox_in_process
from conftest import EXAMPLE_LIBRARY, EXAMPLE_RUN, EXAMPLE_VAULT, REPO, copy_tree

from hypograph_cli import records
from hypograph_cli.main import parser as hypograph_parser
from hypograph_cli.prox import _parser as prox_parser


def record(proc, code: int | None = None, status: str | None = None) -> records.Record:
    """``proc``'s stdout as the one Record it must be (its result as its command's kind)."""
    rec = records.Record.model_validate(json.loads(proc.stdout))  # one document, nothing else
    assert rec.exit_code == proc.returncode, (rec, proc.stderr)
    if code is not None:
        assert proc.returncode == code, proc.stderr
    if status is not None:
        assert rec.status == status, rec
    if rec.result is not None:
        records.KINDS[rec.command].model_validate(rec.result)
    return rec


def _subcommands(p: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    actions = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(actions[0].choices) if actions else {}


def every_command() -> list[str]:
    """Every command the parsers define, as ``records.KINDS`` names them."""
    out = []
    for name in _subcommands(hypograph_parser([])):
        sub = _subcommands(hypograph_parser([name]))[name]
        inner = _subcommands(sub)
        out += [f"hypograph {name} {c}" for c in inner] if inner else [f"hypograph {name}"]
    return out + [f"prox {name}" for name in _subcommands(prox_parser())]


def test_every_command_has_a_record_kind_and_takes_json():
    commands = every_command()
    assert len(commands) > 20 and set(commands) == set(records.KINDS)
    for command in commands:
        words = command.split()
        p = hypograph_parser(words[1:2]) if words[0] == "hypograph" else prox_parser()
        for word in words[1:]:
            p = _subcommands(p)[word]
        assert "--json" in p._option_string_actions, command


def test_docs_json_is_the_models_reference():
    assert (REPO / "docs" / "json.md").read_text(encoding="utf-8") == records.reference(), (
        "docs/json.md is generated: .venv/bin/python -m hypograph_cli.records > docs/json.md"
    )


@pytest.mark.parametrize("command", every_command())
def test_an_argument_error_is_a_refused_record(command):
    words = command.split()[1:]
    run = in_process if command.startswith("hypograph") else prox_in_process
    proc = run(*words, "--no-such-flag", "--json")
    rec = record(proc, 1 if command.startswith("hypograph") else 2, "refused")
    assert rec.error and rec.error in proc.stderr and rec.result is None and not rec.runs


@pytest.mark.parametrize(
    "argv",
    [
        ["proximity"],
        ["structure"],
        ["report"],
        ["check"],
        ["unmerge"],
        ["add"],
        ["batch"],
        ["case", "show"],
        ["case", "interpret"],
        ["case", "confirm"],
        ["case", "add"],
    ],
)
def test_a_missing_input_is_a_refused_record_naming_it(argv, tmp_path):
    missing = tmp_path / "nowhere"
    extra = ["H-1"] if argv == ["unmerge"] else [tmp_path] if argv == ["case", "add"] else []
    proc = in_process(*argv, missing, *extra, "--json")
    rec = record(proc, 1, "refused")
    assert str(missing) in rec.error and not rec.runs


def test_a_setting_out_of_range_is_refused_before_any_run(tmp_path):
    run_dir = copy_tree(EXAMPLE_RUN, tmp_path / "run")
    rec = record(in_process("proximity", run_dir, "--threshold", "5", "--json"), 1, "refused")
    assert rec.error == "--threshold: must be ≥ -1 and ≤ 1 (got '5')" and not rec.runs


def test_a_library_on_another_topic_is_a_decision_exit_2(tmp_path):
    lib = copy_tree(EXAMPLE_LIBRARY, tmp_path / "library")
    rec = record(in_process("library", lib, "--topic", "volcanic soils", "--json"), 2, "not_done")
    assert "--new-library" in rec.error and "--confirm-topic" in rec.error and rec.result is None


def test_proximity_report_and_add_record_what_they_did(tmp_path):
    run_dir = copy_tree(EXAMPLE_RUN, tmp_path / "run")
    proc = in_process("proximity", run_dir, "--json")
    rec = record(proc, 0, "done")
    result = records.Proximity.model_validate(rec.result)
    assert [r.job for r in rec.runs] == ["proximity"] and rec.runs[0].success
    assert result.hypotheses == 30 and result.duplicate_pairs == len(
        json.loads((run_dir / "proximity/dupes.json").read_text())
    )
    assert f"{run_dir}: 30 hypotheses" in proc.stderr  # the prose, on stderr
    report = records.Report.model_validate(record(in_process("report", run_dir, "--json"), 0).result)
    assert report.files and all(Path(f).is_file() for f in report.files)
    add = records.Add.model_validate(record(in_process("add", run_dir, "--json"), 0).result)
    assert add.inputs[0].kind == "run-dir" and add.inputs[0].path == str(run_dir)


def test_structure_check_unmerge_and_create_node_record_what_they_did(tmp_path):
    vault = copy_tree(EXAMPLE_VAULT, tmp_path / "vault")
    rec = record(in_process("structure", vault, "--llm", "offline", "--json"), 0)
    result = records.Structure.model_validate(rec.result)
    assert [r.job for r in rec.runs][:2] == ["proximity", "structure"]
    assert result.checks and all(c.passed for c in result.checks) and result.active
    check = records.VaultCheck.model_validate(record(in_process("check", vault, "--json"), 0).result)
    assert check.passed and [c.number for c in check.checks] == [c.number for c in result.checks]
    if result.merged_into:
        merged = next(iter(result.merged_into))
        unmerge = records.Unmerge.model_validate(record(in_process("unmerge", vault, merged, "--json"), 0).result)
        assert unmerge.id == merged and unmerge.summary
    body = "---\nstate: active\n---\nA body.\n"
    proc = in_process("create-node", vault, "--type", "observation", "--title", "Seen", "--json", stdin=body)
    node = records.CreateNode.model_validate(record(proc, 0).result)
    assert Path(node.path).is_file()


def test_library_check_and_report_record_the_checks_and_the_report(tmp_path):
    lib = copy_tree(EXAMPLE_LIBRARY, tmp_path / "library")
    checked = record(in_process("library", lib, "--check", "--json"), 0)
    assert [r.job for r in checked.runs] == ["library_observe"]
    assert all(c.passed for c in records.Library.model_validate(checked.result).checks)
    report = record(in_process("library", lib, "--report", "--json"), 0)
    assert records.Library.model_validate(report.result).report["totals"]["behaviors"] == 3


def test_case_commands_and_batch_record_each_step(tmp_path):
    case = make_case(tmp_path, confirmed=False)
    shown = record(in_process("case", "show", case, "--json"), 0)
    assert records.Case.model_validate(shown.result).message
    waiting = record(in_process("batch", case, "--json"), 2, "not_done")  # not confirmed: a person's decision
    assert "confirm" in waiting.error
    confirmed = record(in_process("case", "confirm", case, "--by", "ana", "--json"), 0)
    assert records.Case.model_validate(confirmed.result).created is True
    assert [r.job for r in confirmed.runs] == ["case_confirmed"]
    drafted = record(in_process("case", "interpret", case, "--json"), 0)
    assert [r.job for r in drafted.runs] == ["case_interpret"]
    no_model = record(in_process("batch", case, "--json"), 2, "not_done")
    assert "--config" in no_model.error  # the command's wording names its flag
    new = record(in_process("case", "new", tmp_path / "other", "--question", "Why?", REPO / "README.md", "--json"), 0)
    assert records.Case.model_validate(new.result).package_id
    added = record(in_process("case", "add", tmp_path / "other", REPO / "Makefile", "--json"), 0)
    assert records.Case.model_validate(added.result).case_dir == str((tmp_path / "other").resolve())
    vault = copy_tree(EXAMPLE_VAULT, tmp_path / "vault")
    from_vault = record(in_process("case", "from-vault", vault, tmp_path / "third", "--json"), 0)
    assert records.Case.model_validate(from_vault.result).message


def test_prox_commands_record_their_files_and_figures(tmp_path):
    run_dir = copy_tree(EXAMPLE_RUN, tmp_path / "run")
    for command in ("embed", "graph", "clusters", "dupes", "adjudicate", "label"):
        proc = prox_in_process(command, "--run-dir", run_dir, "--json")
        result = records.Prox.model_validate(record(proc, 0, "done").result)
        assert Path(result.path).is_file() and result.lines and result.counts, command
        assert "\n".join(result.lines) in proc.stderr
    dupes = json.loads((run_dir / "proximity" / "dupes.json").read_text())
    assert (
        result
        and len(dupes)
        == records.Prox.model_validate(record(prox_in_process("dupes", "--run-dir", run_dir, "--json")).result).counts[
            "pairs"
        ]
    )


def test_ui_on_a_busy_port_is_a_refused_record():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        rec = record(in_process("ui", "--port", port, "--json"), 1, "refused")
    assert "busy" in rec.error


def test_the_console_script_prints_the_record_alone_on_stdout(tmp_path):
    """As a process: stdout is the document (no stage line, no summary), the prose on stderr."""
    run_dir = copy_tree(EXAMPLE_RUN, tmp_path / "run")
    proc = hypograph("proximity", run_dir, "--json")
    rec = record(proc, 0, "done")
    assert proc.stdout.startswith("{") and proc.stdout.endswith("}\n") and "clusters:" in proc.stderr
    bad = hypograph("proximity", run_dir, "--threshold", "x", "--json")
    assert record(bad, 1, "refused").error.startswith("--threshold: must be a number") and rec.runs
