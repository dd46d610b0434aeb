"""Command-line flags into the products' settings models, validated before anything else loads:
a bad value is one line naming the flag and what it allows, exit 1, and no run exists.

A flag that sets a model field is added by ``option``: argparse gives it no default, type or
help of its own. Its value is the text typed (None when absent: the model's default), converted
and checked by the model (``validated``); its ``--help`` line is the field's description, its
range and its default, read from the model by ``Help`` only when help is shown, so ``hypograph
--help``, an argument error and a run's parsing load neither pydantic nor a model. ``prox``,
which loads the model on every run anyway, asks for ``typed`` options: argparse's own type,
choices and default, all read from the field when its parser is built.
"""

from __future__ import annotations

import argparse
import importlib
import types
import typing

from hypograph.errors import FLAGS, HypographError, settings_line

MODELS = {  # the settings model of each product, imported only when a command's help is shown
    "proximity": ("hypograph.proximity.settings", "ProximitySettings"),
    "library": ("hypograph.library.settings", "LibrarySettings"),
    "library-command": ("hypograph.library.settings", "LibraryCommand"),
    "case": ("hypograph.case.settings", "CaseSettings"),
}

__all__ = ["FLAGS", "MODELS", "Help", "option"]

DESCRIBED = "(the field's description)"  # an option's help until ``Help`` reads the model's


def model_of(product: str):
    """``product``'s settings model class (its module imported now)."""
    module, name = MODELS[product]
    return getattr(importlib.import_module(module), name)


def field_of(action):
    """The (model, field name) an ``option`` sets, or None for any other argparse action."""
    of = getattr(action, "field_of", None)
    return (model_of(of[0]), of[1]) if of else None


def option(parser, flag: str, product: str, field: str, help: str | None = None, typed: bool = False, **kwargs):
    """Add ``flag`` to ``parser`` as ``field`` of ``product``'s settings model (``MODELS``) and
    return its action. A bool field is an on/off switch (``kwargs`` may say ``store_false`` for a
    ``--no-…`` flag). ``help`` replaces the field's description where the flag says it its own way
    (never its range or default). ``typed``: the model is imported now and argparse converts the
    value (type, choices of a Literal, the field's default); else the value stays text, None when
    the flag is absent. ``kwargs``: ``metavar``, ``dest``, a ``type`` that only reshapes text
    (``Path``), a ``default`` only for ``prox``'s seed numbers the model keeps apart."""
    if typed:
        info = model_of(product).model_fields[field]
        kwargs = {**_typed(info), **kwargs}
    elif kwargs.get("action") in ("store_true", "store_false"):
        kwargs.setdefault("default", None)  # absent: the model's default, not argparse's False/True
    action = parser.add_argument(flag, help=help or DESCRIBED, **kwargs)
    action.field_of = (product, field)  # marked after adding: argparse formats the option once as it adds it
    return action


def _typed(info) -> dict:
    """argparse's type, choices and default for the pydantic field ``info``."""
    annotation = info.annotation
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and len(args) == 1:  # ``str | None``
        annotation = args[0]
    if annotation is bool:
        return {"action": "store_true", "default": info.default}
    if typing.get_origin(annotation) is typing.Literal:
        return {"choices": list(typing.get_args(annotation)), "default": info.default}
    return {"type": annotation, "default": info.default}


def help_suffix(model, field: str, default=None) -> str:
    """``≥ -1 and ≤ 1; default 0.3``: the field's range and default (``default``: the flag's own,
    a ``prox`` seed number) as its ``--help`` ends; no default for an on/off switch or none."""
    from hypograph.errors import allowed_range

    default = model.model_fields[field].default if default is None else default
    parts = [allowed_range(model, field)]
    if default is not None and not isinstance(default, bool):
        parts.append(f"default {default}")
    return "; ".join(p for p in parts if p)


class Help(argparse.HelpFormatter):
    """An ``option``'s help line: the field's description (or the flag's own words), then its
    range and default in parentheses; a Literal field's choices as its metavar. The model is
    imported here, when help is shown, and never to parse a command line."""

    def _expand_help(self, action) -> str:
        of = field_of(action)
        if of is None:
            return super()._expand_help(action)
        model, field = of
        text = model.model_fields[field].description or "" if action.help is DESCRIBED else action.help
        suffix = help_suffix(model, field, action.default)
        return f"{text} ({suffix})" if suffix else text

    def _metavar_formatter(self, action, default_metavar):
        of = field_of(action) if action.choices is None and action.metavar is None and action.nargs != 0 else None
        if of is not None:
            choices = _choices(of[0].model_fields[of[1]].annotation)
            default_metavar = "{" + ",".join(choices) + "}" if choices else default_metavar
        return super()._metavar_formatter(action, default_metavar)


def _choices(annotation) -> list[str]:
    """The values of a ``Literal`` annotation (also inside ``X | None``), else none."""
    if typing.get_origin(annotation) is typing.Literal:
        return [str(a) for a in typing.get_args(annotation)]
    return [c for a in typing.get_args(annotation) if a is not type(None) for c in _choices(a)]


def validated(model, /, **values):
    """``model`` from the flags given (None: the model's default); HypographError in one line."""
    from pydantic import ValidationError

    try:
        return model(**{k: v for k, v in values.items() if v is not None})
    except ValidationError as e:
        raise HypographError(settings_line(model, e, FLAGS)) from None


def proximity(args):
    from hypograph.proximity.settings import ProximitySettings

    return validated(
        ProximitySettings,
        backend=getattr(args, "backend", None),
        model=getattr(args, "model", None),
        graph_threshold=getattr(args, "threshold", None),
        dupe_threshold=getattr(args, "dupe_threshold", None),
        skip_bad_files=getattr(args, "skip_bad_files", None),
    )


def library(args):
    """The round settings of ``hypograph library``'s flags (the mode resolved by the seed's table);
    None for ``--report`` and ``--check``, which run no round. ``args.rounds`` becomes its number;
    ``--new-library`` is not set here: ``run_library`` sets it on the first round's settings only,
    and that round's run moves the old file aside."""
    from hypograph.library.modes import resolve_mode
    from hypograph.library.settings import LibraryCommand, LibrarySettings

    if args.report or args.check:
        return None
    args.rounds = validated(LibraryCommand, rounds=args.rounds).rounds
    if not args.topic or not args.topic.strip():
        raise HypographError('a topic is required: --topic "…"')
    resolution = resolve_mode(args.behavior_source, args.behavior, args.mode)
    args.notes = resolution.notes
    return validated(
        LibrarySettings,
        topic=args.topic.strip(),
        behavior_source=resolution.source,
        behavior=resolution.behavior,
        n_behaviors=args.n_behaviors,
        web=args.web,
        banlist_budget=args.banlist_budget,
        strategies_file=args.strategies,
        embedder=args.embedder,
        confirm_topic=args.confirm_topic,
        search_url=args.search_url,
        openalex_url=args.openalex_url,
    )


def case(args):
    """The case settings of a case command's ``--config`` (the file read and checked now)."""
    from pathlib import Path

    from hypograph.case.settings import CaseSettings

    config = getattr(args, "config", None)
    return validated(CaseSettings, config_file=str(Path(config).resolve()) if config else None)
