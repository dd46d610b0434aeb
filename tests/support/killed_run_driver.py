"""``hypograph proximity INPUT -q`` in this process (the command's own code), stopped inside its
clusters step: ``kill`` dies by SIGKILL there (a command killed mid-run, its run left STARTED);
``interrupt`` sends SIGINT to its process group there, as Ctrl-C in a terminal does, and the
command goes on to its end. Exits with the command's exit code.

    python tests/support/killed_run_driver.py kill|interrupt INPUT
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import assets.proximity.assets as proximity_assets  # noqa: E402
from hypograph_cli.main import main  # noqa: E402


def kill(*_args, **_kwargs):
    os.kill(os.getpid(), signal.SIGKILL)


def interrupt(*_args, **_kwargs):
    os.killpg(0, signal.SIGINT)
    time.sleep(30)  # Dagster raises its interrupt here, inside the step


mode, target = sys.argv[1], sys.argv[2]
proximity_assets.labelled_clusters = {"kill": kill, "interrupt": interrupt}[mode]
sys.exit(main(["proximity", target, "-q"]))
