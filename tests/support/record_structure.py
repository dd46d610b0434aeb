"""Record what ``hypograph structure --llm offline`` writes on the example vault and both real vaults.

    PYTHONPATH=$PWD:$PWD/tests:$PWD/tests/support .venv/bin/python tests/support/record_structure.py

The record is the sha256 of every file of each vault after the run (see ``structure_record`` in
conftest.py for what is left out and why) plus the command's output; ``test_structure.py``
compares a fresh run with it, so a refactoring that changes any written byte fails. Re-record only
for an intended change, and name it in the commit.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cli_helper import hypograph  # noqa: E402
from conftest import (  # noqa: E402
    EXAMPLE_VAULT,
    RECORDED_STRUCTURE,
    SHARED_VAULTS,
    copy_tree,
    offline_env,
    structure_record,
)

VAULTS = {"example": EXAMPLE_VAULT, "covid1": SHARED_VAULTS / "covid1", "eggs1": SHARED_VAULTS / "eggs1"}


def main() -> None:
    record = {}
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["DAGSTER_HOME"] = str(Path(tmp) / "dagster")  # a throwaway instance
        for name, src in VAULTS.items():
            root = copy_tree(src, Path(tmp) / name)
            proc = hypograph("structure", root, "--llm", "offline", env=offline_env())
            proc.check_returncode()
            record[name] = structure_record(root, proc.stdout)
    RECORDED_STRUCTURE.parent.mkdir(parents=True, exist_ok=True)
    RECORDED_STRUCTURE.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {RECORDED_STRUCTURE}")


if __name__ == "__main__":
    main()
