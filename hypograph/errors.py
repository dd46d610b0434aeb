"""The one exception type the tool raises for bad input or bad state.

``exit_code`` is what ``hypograph`` exits with when the error reaches it: 1 for refused input
(the default), 2 for ``NotDone`` — nothing wrong with the input, but the step is not done yet or
needs something first (a model, a person's confirmation, the lock another run holds) — and 130 for
``Interrupted`` (Ctrl-C or SIGTERM during a run, as a shell reports an interrupted command).
"""


class HypographError(Exception):
    """A user-facing error: the message names the file (and field) and what is wrong."""

    exit_code = 1


class NotDone(HypographError):
    """Not done yet, or needs something first (a model, a confirmation, a free lock): exit 2."""

    exit_code = 2


class ModelRequired(NotDone):
    """Raised, before anything is written, when a step needs a model and none is configured."""


class Interrupted(HypographError):
    """The command was interrupted (Ctrl-C, SIGTERM) while its run went on: exit 130."""

    exit_code = 130


_BOUNDS = {"ge": "≥", "gt": ">", "le": "≤", "lt": "<"}


def settings_line(model, error, names: dict[str, str] | None = None) -> str:
    """A pydantic ``ValidationError`` of settings ``model`` as one line: each bad field by the
    name the user gave it (``names``: field -> flag, e.g. ``--threshold``), what it allows, and the
    value given: ``--threshold: must be ≥ -1 and ≤ 1 (got 30.0)``."""
    parts = []
    for e in error.errors():
        field = ".".join(str(x) for x in e["loc"]) or "settings"
        name = (names or {}).get(field, field)
        allowed = allowed_range(model, field)
        if e["type"] == "extra_forbidden":
            what = f"not a setting of {model.__name__} (it has {', '.join(model.model_fields)})"
        elif allowed and e["type"] in (
            "greater_than",
            "greater_than_equal",
            "less_than",
            "less_than_equal",
            "finite_number",
        ):
            what = f"must be {allowed}"
        else:
            what = e["msg"][:1].lower() + e["msg"][1:]
        parts.append(
            f"{name}: {what} (got {e['input']!r})" if "input" in e and e["type"] != "missing" else f"{name}: {what}"
        )
    return "; ".join(parts) or str(error).splitlines()[0]


def allowed_range(model, field: str) -> str:
    """``≥ -1 and ≤ 1``: the bounds declared on ``model.field`` (empty when it has none); what a
    refusal says and what ``--help`` shows, read from the model so neither can drift from it."""
    info = getattr(model, "model_fields", {}).get(field)
    bounds = [
        f"{sign} {getattr(m, attr):g}"
        for m in (info.metadata if info else [])
        for attr, sign in _BOUNDS.items()
        if getattr(m, attr, None) is not None
    ]
    return " and ".join(bounds)
