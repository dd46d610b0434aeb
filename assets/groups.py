"""Asset group names: one place, so jobs, selections and the UI agree (each product's folder gives
its assets their group and partitions: ``assets/<product>/assets.py``); the run tags every job
carries; what a job declares for the launcher; and the UI's descriptions from docstrings."""

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

# What a job declares for the launcher (``pipelines/launch.py`` names no product, it reads these from
# the job's metadata): ``SUB_KEYS_OF`` the kind of input whose own keys its partitions are (a
# library's rounds ``<id>/r0002``: the input is registered as that kind, the key added to the job's
# partition set); ``READS_INPUT`` that it reads the input itself, whose version is then observed
# before the run so its materializations name the version they read.
SUB_KEYS_OF = "hypograph/sub_keys_of"
READS_INPUT = "hypograph/reads_input"


def launched(sub_keys_of: str | None = None, reads_input: bool = False) -> dict:
    """A job's ``metadata`` saying what the launcher does before its run (see above)."""
    return {**({SUB_KEYS_OF: sub_keys_of} if sub_keys_of else {}), **({READS_INPUT: True} if reads_input else {})}


def described(decorator, **kwargs):
    """``decorator(**kwargs)`` with the function's docstring as the description the UI shows."""
    return lambda fn: decorator(description=inspect.cleandoc(fn.__doc__), **kwargs)(fn)
