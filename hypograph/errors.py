"""The one exception type the tool raises for bad input or bad state."""


class HypographError(Exception):
    """A user-facing error: the message names the file (and field) and what is wrong."""
