"""Run the proximity job on an input as ``hypograph proximity`` does (``pipelines.launch.run_job``,
in this process, on ``$DAGSTER_HOME``'s instance) and die by SIGKILL inside its clusters step: a
command killed mid-run, its run left STARTED.

    python tests/killed_run_driver.py INPUT
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import assets.proximity.assets as proximity_assets  # noqa: E402
from pipelines.launch import run_job  # noqa: E402


def die(*_args, **_kwargs):
    os.kill(os.getpid(), signal.SIGKILL)


proximity_assets.labelled_clusters = die
run_job(Path(sys.argv[1]), "proximity", offline=True)
