"""The one exception type the tool raises for bad input or bad state, and the one mapping of an
error to the exit code a command ends with (``exit_code``; ``STATUS`` names each code).

``exit_code`` is what ``hypograph`` exits with when the error reaches it: 1 for refused input
(the default), 2 for ``NotDone`` — nothing wrong with the input, but the step is not done yet or
needs something first (a model, a person's confirmation, the lock another run holds) — and 130 for
``Interrupted`` (Ctrl-C or SIGTERM during a run, as a shell reports an interrupted command).
"""

DONE, REFUSED, NOT_DONE, INTERRUPTED = 0, 1, 2, 130
STATUS = {DONE: "done", REFUSED: "refused", NOT_DONE: "not_done", INTERRUPTED: "interrupted"}


class HypographError(Exception):
    """A user-facing error: the message names the file (and field) and what is wrong."""

    exit_code = REFUSED


class NotDone(HypographError):
    """Not done yet, or needs something first (a model, a confirmation, a free lock): exit 2."""

    exit_code = NOT_DONE


class SettingRefused(HypographError):
    """A setting out of its range, given where no model checked it first (the Launchpad): exit 1,
    and in a run, its step ends with no output rather than a failure (nothing has run yet)."""


class ModelRequired(NotDone):
    """Raised, before anything is written, when a step needs a model and none is configured."""


class Interrupted(HypographError):
    """The command was interrupted (Ctrl-C, SIGTERM) while its run went on: exit 130."""

    exit_code = INTERRUPTED


def exit_code(error: BaseException) -> int:
    """The exit code a command ends with when ``error`` reaches it: its class's, else 1."""
    return error.exit_code if isinstance(error, HypographError) else REFUSED


def step_status(code: int) -> str:
    """``NOT_DONE`` for 2, ``REFUSED`` for 1: the status a run's step records for an error of exit
    code ``code`` (``assets/errors.py``), which the command reading the run turns back into it."""
    return STATUS[code].upper()


_BOUNDS = {"ge": "≥", "gt": ">", "le": "≤", "lt": "<"}
_NOT_A_NUMBER = {
    "float_parsing": "a number",
    "float_type": "a number",
    "int_parsing": "a whole number",
    "int_from_float": "a whole number",
    "int_type": "a whole number",
}

# A settings field -> the command-line flag that sets it, so a line names what the user typed
# (the command's) or both names (the Launchpad's: ``graph_threshold (--threshold)``).
FLAGS = {
    "graph_threshold": "--threshold",
    "dupe_threshold": "--dupe-threshold",
    "skip_bad_files": "--skip-bad-files",
    "backend": "--backend",
    "model": "--model",
    "n_behaviors": "--n-behaviors",
    "banlist_budget": "--banlist-budget",
    "behavior_source": "--behavior-source",
    "behavior": "--behavior",
    "strategies_file": "--strategies",
    "embedder": "--embedder",
    "search_url": "--search-url",
    "openalex_url": "--openalex-url",
    "confirm_topic": "--confirm-topic",
    "new_library": "--new-library",
    "topic": "--topic",
    "rounds": "--rounds",
    "config_file": "--config",
    "attempt": "--attempt",
    "vault": "--into",
}


def both_names(field: str) -> str:
    """``graph_threshold (--threshold)``: a setting as the Launchpad and the command name it."""
    return f"{field} ({FLAGS[field]})" if field in FLAGS else field


def settings_line(model, error, names: dict[str, str] | None = None) -> str:
    """A pydantic ``ValidationError`` of settings ``model`` as one line: each bad field by the
    name the user gave it (``names``: field -> flag, e.g. ``--threshold``), what it allows, and the
    value given: ``--threshold: must be ≥ -1 and ≤ 1 (got 30.0)``."""
    parts = []
    for e in error.errors():
        field = _dotted(e["loc"])
        name = (names or {}).get(field, field)
        allowed = allowed_range(model, field)
        if e["type"] == "extra_forbidden":
            owner = _owner(model, field)
            known = ", ".join(f.alias or n for n, f in owner.model_fields.items())
            what = f"not a setting of {owner.__name__} (it has {known})"
        elif e["type"] == "value_error":  # a rule of the model's own: its sentence, as it says it
            parts.append(f"{name}: {e['ctx']['error']}")
            continue
        elif allowed and e["type"] in (
            "greater_than",
            "greater_than_equal",
            "less_than",
            "less_than_equal",
            "finite_number",
        ):
            what = f"must be {allowed}"
        elif allowed and e["type"] in _NOT_A_NUMBER:  # text that is no number: what it must be, with its range
            what = f"must be {_NOT_A_NUMBER[e['type']]} {allowed}"
        else:
            what = e["msg"][:1].lower() + e["msg"][1:]
        parts.append(
            f"{name}: {what} (got {e['input']!r})" if "input" in e and e["type"] != "missing" else f"{name}: {what}"
        )
    return "; ".join(parts) or str(error).splitlines()[0]


def allowed_range(model, field: str) -> str:
    """``≥ -1 and ≤ 1``: the bounds declared on ``model.field`` (empty when it has none); what a
    refusal says and what ``--help`` shows, read from the model so neither can drift from it."""
    owner = _owner(model, field)
    info = getattr(owner, "model_fields", {}).get(field.rpartition(".")[2])
    bounds = [
        f"{sign} {_number(getattr(m, attr))}"
        for m in (info.metadata if info else [])
        for attr, sign in _BOUNDS.items()
        if getattr(m, attr, None) is not None
    ]
    return " and ".join(bounds)


def _number(value: float) -> str:
    """``10000000`` for a whole bound (not ``1e+07``), else as ``:g`` writes it (``0.3``)."""
    return str(value) if isinstance(value, int) else f"{value:g}"


def _dotted(loc: tuple) -> str:
    """``("endpoints", 0, "max_tokens")`` -> ``endpoints[0].max_tokens``: a key as a TOML user writes it."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else f"{'.' if out else ''}{part}"
    return out or "settings"


def _owner(model, field: str):
    """The (nested) model that declares the last part of ``field`` (``endpoints[0].max_tokens``:
    the endpoint's model); ``model`` itself for a plain field."""
    for part in field.split(".")[:-1]:
        name = part.split("[")[0]
        fields = getattr(model, "model_fields", {})
        info = fields.get(name) or next((f for f in fields.values() if f.alias == name), None)
        if info is None:
            return model
        # the model inside ``X``, ``X | None`` or ``tuple[X, ...]``
        inner = [a for a in (info.annotation, *getattr(info.annotation, "__args__", ())) if hasattr(a, "model_fields")]
        if not inner:
            return model
        model = inner[0]
    return model
