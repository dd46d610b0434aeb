"""Every flag that sets a field of a product's settings model is declared by that field (issue 45):
argparse gives it no default, type or choices of its own (``prox``'s are read from the field), and
its ``--help`` states the range and the default the model declares, so the two cannot drift. The
expected range and default are read here from the pydantic fields themselves, not through the
code that writes the help line."""

from __future__ import annotations

import argparse
import re
import typing
from pathlib import Path

import pytest

from hypograph.errors import FLAGS
from hypograph_cli import main as cli
from hypograph_cli import settings
from hypograph_cli.prox import _parser as prox_parser

# prox is the seed tool's drop-in: where the seed's number is not the model's, it is named here,
# with the constant that holds it (hypograph/proximity/defaults.py), and nowhere else.
SEED_DEFAULTS = {("prox graph", "--max-neighbours"): 0}
SIGNS = {"ge": "≥", "gt": ">", "le": "≤", "lt": "<"}


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(actions[0].choices) if actions else {}


def every_parser() -> list[tuple[str, argparse.ArgumentParser]]:
    """(``hypograph library``, its parser) for every command and sub-command of ``hypograph`` (each
    lazy one built as the command line naming it builds it) and of ``prox``."""
    out = []
    for name in _subcommands(cli.parser([])):
        parser = _subcommands(cli.parser([name]))[name]
        subs = _subcommands(parser)
        out += [(f"hypograph {name} {s}", p) for s, p in subs.items()] or [(f"hypograph {name}", parser)]
    out += [(f"prox {name}", p) for name, p in _subcommands(prox_parser()).items()]
    return out


def field_options() -> list[tuple[str, argparse.Action, type, str]]:
    """(command, action, model, field) of every option that sets a settings field."""
    out = []
    for where, parser in every_parser():
        for action in parser._actions:
            of = settings.field_of(action)
            if of is not None:
                out.append((where, action, *of))
    return out


def flag(action) -> str:
    return action.option_strings[-1]


def test_the_walk_sees_every_product_model():
    """The checks below cover the proximity, library (rounds included) and case models, through
    ``hypograph`` and ``prox`` (an empty walk would pass them all)."""
    seen = {(model.__name__, where.split()[0]) for where, _, model, _ in field_options()}
    assert {
        ("ProximitySettings", "hypograph"),
        ("ProximitySettings", "prox"),
        ("LibrarySettings", "hypograph"),
        ("LibraryCommand", "hypograph"),
        ("CaseSettings", "hypograph"),
    } <= seen, seen


def test_every_flag_that_names_a_settings_field_is_declared_by_the_field():
    """A ``hypograph`` option spelled as a field's flag (``FLAGS``: what error lines call it) is an
    ``option`` of that very field; so a flag added with ``add_argument`` and a literal default of
    its own, beside the model, fails here."""
    field_of_flag = {f: field for field, f in FLAGS.items()}
    wrong = []
    for where, parser in every_parser():
        if where.startswith("prox"):
            continue
        for action in parser._actions:
            names = [o for o in action.option_strings if o in field_of_flag]
            of = getattr(action, "field_of", None)
            if names and (of is None or of[1] != field_of_flag[names[0]]):
                wrong.append(f"{where} {names[0]}: sets {field_of_flag[names[0]]}, not declared by it ({of})")
            if of is not None and FLAGS.get(of[1], flag(action)) != flag(action):
                wrong.append(f"{where} {flag(action)}: {of[1]} is {FLAGS[of[1]]} in every error line")
    assert not wrong, "\n".join(wrong)


def test_no_flag_has_a_default_type_or_choices_of_its_own():
    """``hypograph``: absent is None (the model's default), the value is converted and checked by
    the model (no argparse type but one that only reshapes text, no choices). ``prox``: argparse's
    type, choices and default are the field's, the seed's own numbers aside (``SEED_DEFAULTS``)."""
    wrong = []
    for where, action, model, field in field_options():
        info = model.model_fields[field]
        if where.startswith("prox"):
            expected = SEED_DEFAULTS.get((where, flag(action)), info.default)
            literal = typing.get_origin(info.annotation) is typing.Literal
            if action.default != expected:
                wrong.append(f"{where} {flag(action)}: default {action.default!r}, the model's {expected!r}")
            if literal and list(action.choices) != list(typing.get_args(info.annotation)):
                wrong.append(f"{where} {flag(action)}: choices {action.choices}, the model's {info.annotation}")
            if (
                not literal
                and action.nargs != 0
                and action.type not in (info.annotation, *typing.get_args(info.annotation))
            ):
                wrong.append(f"{where} {flag(action)}: type {action.type}, the model's {info.annotation}")
        else:
            if action.default is not None:
                wrong.append(f"{where} {flag(action)}: default {action.default!r} of its own")
            if action.choices is not None or action.type not in (None, Path):
                wrong.append(f"{where} {flag(action)}: type {action.type} / choices {action.choices} of its own")
    assert not wrong, "\n".join(wrong)


def _number(text: str) -> float:
    return float(text.rstrip(".,;)"))


def help_problems(where: str, action, model, field: str) -> list[str]:
    """What the help line of ``action`` (an option of ``field``) says that its model does not."""
    info, name = model.model_fields[field], f"{where} {flag(action)}"
    shown = settings.Help(prog="x")._expand_help(action)
    own = SEED_DEFAULTS.get((where, flag(action)))
    return [
        f"{name}: {line}: {shown!r}" for line in (*range_problems(info, shown), *default_problems(info, own, shown))
    ]


def range_problems(info, shown: str) -> list[str]:
    bounds = {SIGNS[a]: float(getattr(m, a)) for m in info.metadata for a in SIGNS if getattr(m, a, None) is not None}
    stated = {sign: _number(n) for sign, n in re.findall(r"([≥≤<>]) (-?[\d.]+)", shown)}
    wrong = [] if stated == bounds else [f"help states {stated}, the model {bounds}"]
    if re.search(r"\d\s*(to|-|…)\s*-?\d", shown):
        wrong.append("a range in words of its own")
    return wrong


def default_problems(info, own, shown: str) -> list[str]:
    expected = [] if info.default is None or isinstance(info.default, bool) else [info.default]
    expected = expected if own is None else [own]
    defaults = [_number(d) for d in re.findall(r"default:? (-?\d[\d.]*)", shown)]
    wrong = [] if defaults == [float(v) for v in expected if isinstance(v, int | float)] else [f"defaults {defaults}"]
    if isinstance(info.default, str) and f"default {info.default}" not in shown:
        wrong.append(f"default {info.default} not shown")
    return wrong


def test_help_states_the_range_and_default_the_model_declares():
    """Each such option's help names every bound of its field and its default (as ``--help``
    prints it), and states no other bound or default: a help text that says "0 to 1" or
    "(default 10)" of its own, or a model changed under it, fails here."""
    wrong = [line for option in field_options() for line in help_problems(*option)]
    assert not wrong, "\n".join(wrong)


def test_a_literal_field_shows_its_values_in_the_usage_line():
    """``--backend {tfidf,sbert}`` in ``hypograph proximity --help``: the model's values."""
    text = cli.parser(["proximity"])._subparsers._group_actions[0].choices["proximity"].format_help()
    assert "--backend {tfidf,sbert}" in text, text
    assert "(≥ -1 and ≤ 1; default 0.3)" in " ".join(text.split()), text


@pytest.mark.parametrize(
    "argv, product",
    [
        (["proximity", "X"], "proximity"),
        (["structure", "X"], "proximity"),
        (["report", "X"], "proximity"),
        (["library", "X", "--topic", "t"], "library"),
    ],
    ids=lambda v: v[0] if isinstance(v, list) else v,
)
def test_flags_left_out_give_the_models_defaults(argv, product):
    """A command line naming no flag gives exactly the model's own settings (the topic aside)."""
    args = cli.parser(argv).parse_args(argv)
    made = args.settings_of(args)
    model = settings.model_of(product)
    expected = model(**({"topic": "t"} if product == "library" else {}))
    assert made == expected
    if product == "library":
        assert args.rounds == settings.model_of("library-command")().rounds == 1


def test_a_bad_value_is_refused_by_the_model_naming_the_flag_and_its_range():
    args = cli.parser(["library", "X", "--topic", "t", "--n-behaviors", "0"]).parse_args(
        ["library", "X", "--topic", "t", "--n-behaviors", "0"]
    )
    with pytest.raises(Exception, match=r"^--n-behaviors: must be ≥ 1 and ≤ 100 \(got '0'\)$"):
        args.settings_of(args)
    args = cli.parser(["library"]).parse_args(["library", "X", "--topic", "t", "--rounds", "-1"])
    with pytest.raises(Exception, match=r"^--rounds: must be ≥ 0 \(got '-1'\)$"):
        args.settings_of(args)


@pytest.mark.parametrize(
    "command, seed",
    [
        ("embed", {"backend": "tfidf", "model": None}),
        ("graph", {"threshold": 0.30, "max_neighbours": 0}),
        ("clusters", {"algorithm": "louvain"}),
        ("dupes", {"threshold": 0.80}),
        ("adjudicate", {"auto_merge": 0.92}),
    ],
)
def test_prox_defaults_are_the_seed_tools(command, seed, tmp_path):
    """The numbers the seed's protocol states (graph 0.30, dupes 0.80, auto-merge 0.92, TF-IDF,
    Louvain, every edge): what ``prox`` runs with when no flag is given, read from the model."""
    args = prox_parser().parse_args([command, "--run-dir", str(tmp_path)])
    assert {k: getattr(args, k) for k in seed} == seed
