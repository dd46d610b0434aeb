"""The one exception type the tool raises for bad input or bad state.

``exit_code`` is what ``hypograph`` exits with when the error reaches it: 1 for refused input
(the default), 2 for ``NotDone`` — nothing wrong with the input, but the step is not done yet or
needs something first (a model, a person's confirmation, the lock another run holds).
"""


class HypographError(Exception):
    """A user-facing error: the message names the file (and field) and what is wrong."""

    exit_code = 1


class NotDone(HypographError):
    """Not done yet, or needs something first (a model, a confirmation, a free lock): exit 2."""

    exit_code = 2
