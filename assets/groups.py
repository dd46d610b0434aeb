"""Asset group names, and each group's shared asset arguments: one place, so jobs, selections and
the UI agree (``@asset(**ASSET[STRUCTURE], …)``)."""

import inspect

from assets.partitions import case_revisions, hypothesis_inputs, library_rounds, vaults
from hypograph.code_version import code_version
from io_managers.fleet import VERSION_TAG

PROXIMITY = "proximity"
STRUCTURE = "structure"
LIBRARY = "library"
CASEWORK = "casework"

# group -> the arguments every asset of the group takes: its name and partitions (and the
# proximity values' IO manager)
ASSET: dict[str, dict] = {
    PROXIMITY: {"group_name": PROXIMITY, "partitions_def": hypothesis_inputs, "io_manager_key": "io_manager"},
    STRUCTURE: {"group_name": STRUCTURE, "partitions_def": vaults},
    LIBRARY: {"group_name": LIBRARY, "partitions_def": library_rounds},
    CASEWORK: {"group_name": CASEWORK, "partitions_def": case_revisions},
}

# Every job's runs carry the code version of the process that creates them (the web server's code
# location, a sensor's, a command's): a worker of another version refuses their steps.
RUN_TAGS = {VERSION_TAG: code_version()}


def described(decorator, **kwargs):
    """``decorator(**kwargs)`` with the function's docstring as the description the UI shows."""
    return lambda fn: decorator(description=inspect.cleandoc(fn.__doc__), **kwargs)(fn)
