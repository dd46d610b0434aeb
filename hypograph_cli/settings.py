"""Command-line flags into the products' settings models, validated before anything else loads:
a bad value is one line naming the flag and what it allows, exit 1, and no run exists. (pydantic
and the models are imported when a command is validated, so ``--help`` loads neither.)"""

from __future__ import annotations

from hypograph.errors import FLAGS, HypographError, settings_line

MODELS = {  # the settings model of each product, imported only when a command's help is shown
    "proximity": ("hypograph.proximity.settings", "ProximitySettings"),
    "library": ("hypograph.library.settings", "LibrarySettings"),
}


def bounded(action, product: str, field: str):
    """Mark ``action`` (an argparse option) as setting ``field`` of ``product``'s settings model:
    its ``--help`` line then ends with the bounds the model declares (``help_bounds``)."""
    action.bounds_of = (product, field)
    return action


def help_bounds(product: str, field: str) -> str:
    """``≥ -1 and ≤ 1``: what the model's field allows, read from its constraints."""
    import importlib

    from hypograph.errors import allowed_range

    module, name = MODELS[product]
    return allowed_range(getattr(importlib.import_module(module), name), field)


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
        skip_bad_files=getattr(args, "skip_bad_files", None) or None,
    )


def library(args):
    """The round settings of ``hypograph library``'s flags (the mode resolved by the seed's table);
    None for ``--report`` and ``--check``, which run no round."""
    from hypograph.library.modes import resolve_mode
    from hypograph.library.settings import LibrarySettings

    if args.report or args.check:
        return None
    if args.rounds < 0:
        raise HypographError(f"--rounds: must be ≥ 0 (got {args.rounds})")
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
    from hypograph.case.settings import CaseSettings

    config = getattr(args, "config", None)
    return validated(CaseSettings, config_file=str(config.resolve()) if config else None)
