"""Every message checked for truth (issue 46): a command or flag a user-facing message names exists,
word for word, in that command's parser, and ``--help`` states the bounds the settings models
declare (read from them, so the two cannot drift).

Messages are the string literals (f-strings with their fields as ``X``) of the code a user meets
the output of, docstrings aside: ``hypograph``, ``hypograph_cli``, ``assets``, ``pipelines``,
``resources``.
"""

from __future__ import annotations

import argparse
import ast
import re

import pytest
from conftest import REPO

from hypograph.errors import allowed_range
from hypograph_cli import main as cli
from hypograph_cli import settings

SOURCES = ("hypograph", "hypograph_cli", "assets", "pipelines", "resources")
# `hypograph CMD [SUB] ...` up to where the command ends in prose (a backtick, a clause, a line)
COMMAND = re.compile(r"\bhypograph ([a-z][a-z-]*)((?:[^`;,()\n]|\([^)\n]*\))*)")
FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z-]*)")
PROSE = {"command", "process", "progress", "itself"}  # "a hypograph command ...": not a command line


def _docstrings(tree) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def messages() -> list[tuple[str, str]]:
    """(file:line, text) of every string literal outside docstrings in ``SOURCES``."""
    out = []
    for top in SOURCES:
        for path in sorted((REPO / top).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            skip = _docstrings(tree)
            inside = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
            for node in ast.walk(tree):
                if isinstance(node, ast.JoinedStr):
                    text = "".join(v.value if isinstance(v, ast.Constant) else "X" for v in node.values)
                elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip | inside:
                    text = node.value
                else:
                    continue
                out.append((f"{path.relative_to(REPO)}:{node.lineno}", text))
    return out


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(actions[0].choices) if actions else {}


def command_parser(words: list[str]) -> tuple[argparse.ArgumentParser | None, list[str]]:
    """The parser of ``hypograph WORDS...`` (a case subcommand too) and the words it took."""
    parser = _subcommands(cli.parser(words[:1])).get(words[0])
    taken = words[:1]
    if parser is not None and len(words) > 1 and words[1] in _subcommands(parser):
        parser, taken = _subcommands(parser)[words[1]], words[:2]
    return parser, taken


def _options(parser: argparse.ArgumentParser) -> set[str]:
    return {o for a in parser._actions for o in a.option_strings}


def all_options() -> set[str]:
    from hypograph_cli.prox import _parser as prox_parser

    out = set().union(*(_options(p) for p in _subcommands(prox_parser()).values()))
    for name in _subcommands(cli.parser([])):
        parser, _ = command_parser([name])
        out |= _options(parser)
        for sub in _subcommands(parser).values():
            out |= _options(sub)
    return out


def test_every_command_and_flag_a_message_names_exists():
    """``hypograph CMD ... --flag`` in a message: CMD is a command and --flag one of its options;
    a bare ``--flag`` is an option of some command. (Fails on a message that names a flag no
    parser has, e.g. "pass --attempt-id"; the lists below must be non-empty, so the scan works.)"""
    named, bare, wrong = [], [], []
    for where, text in messages():
        for m in COMMAND.finditer(text):
            words = [m.group(1), *m.group(2).split()]
            if words[0] in PROSE:
                continue
            parser, taken = command_parser(words)
            if parser is None:
                wrong.append(f"{where}: `hypograph {words[0]}`: no such command")
                continue
            named.append(" ".join(taken))
            for flag in FLAG.findall(m.group(2)):
                if flag not in _options(parser):
                    wrong.append(f"{where}: `hypograph {' '.join(taken)}` has no {flag}")
        for flag in FLAG.findall(COMMAND.sub("", text)):
            bare.append(flag)
            if flag not in all_options():
                wrong.append(f"{where}: {flag}: no command has it")
    assert {"batch", "case confirm", "case interpret", "structure", "proximity", "library", "add"} <= set(named)
    assert {"--new-library", "--confirm-topic"} <= set(bare)
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize(
    "command, product",
    [("proximity", "proximity"), ("structure", "proximity"), ("report", "proximity"), ("library", "library")],
)
def test_help_states_the_bounds_the_settings_model_declares(command, product):
    """Each option that sets a bounded field says the model's bounds in ``--help`` (the graph
    threshold: ≥ -1 and ≤ 1, as the check allows; it once said "0 to 1")."""
    import importlib

    module, name = settings.MODELS[product]
    model = getattr(importlib.import_module(module), name)
    parser, _ = command_parser([command])
    flag_of = {flag: field for field, flag in settings.FLAGS.items()}
    checked = 0
    for action in parser._actions:
        field = next((flag_of[o] for o in action.option_strings if o in flag_of), None)
        bounds = allowed_range(model, field) if field in model.model_fields else ""
        if bounds:
            shown = settings.Help(prog="hypograph")._expand_help(action)
            assert bounds in shown, (action.option_strings, shown)
            checked += 1
    assert checked >= 1
    if product == "proximity" and command != "report":
        threshold = next(a for a in parser._actions if "--threshold" in a.option_strings)
        assert "≥ -1 and ≤ 1" in settings.Help(prog="hypograph")._expand_help(threshold)
