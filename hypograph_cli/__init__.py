"""The ``hypograph`` command: flags into the products' settings models (validated before any run
exists), then the same jobs the UI launches (``pipelines/launch.py``). Outside the code location."""

import signal as _signal

# A SIGTERM that arrives while the command is still importing (before ``signals.counted`` holds the
# signals) is remembered here, not lost to Python's default (death by the signal, no line):
# ``main`` then ends with 130 before anything starts. Only the main thread may set a handler.
EARLY_SIGNALS: list[int] = []
if _signal.getsignal(_signal.SIGTERM) == _signal.SIG_DFL:
    _signal.signal(_signal.SIGTERM, lambda signum, _frame: EARLY_SIGNALS.append(signum))
