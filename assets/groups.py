"""Asset group names: one place, so jobs, selections and the UI agree (each product's folder gives
its assets their group and partitions: ``assets/<product>/assets.py``); the run tags every job
carries; and the UI's descriptions from docstrings."""

import inspect

from hypograph.code_version import code_version
from io_managers.fleet import VERSION_TAG

PROXIMITY = "proximity"
STRUCTURE = "structure"
LIBRARY = "library"
CASE = "case"

# Every job's runs carry the code version of the process that creates them (the web server's code
# location, a sensor's, a command's): a worker of another version refuses their steps.
RUN_TAGS = {VERSION_TAG: code_version()}


def described(decorator, **kwargs):
    """``decorator(**kwargs)`` with the function's docstring as the description the UI shows."""
    return lambda fn: decorator(description=inspect.cleandoc(fn.__doc__), **kwargs)(fn)
