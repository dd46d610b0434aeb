"""The system tests listed in tests/conftest.py outside tests/system/ exist, so `make test-fast`
cannot quietly start running a renamed system test; and the system folder holds tests."""

import re

from conftest import REPO, SYSTEM, SYSTEM_TESTS


def test_every_system_test_listed_exists():
    missing = []
    for entry in SYSTEM_TESTS:
        file, name = entry.split("::")
        found = list((REPO / "tests").rglob(file))
        text = found[0].read_text(encoding="utf-8") if len(found) == 1 else ""
        if not re.search(rf"^def {re.escape(name)}\(", text, re.MULTILINE):
            missing.append(entry)
    assert missing == []
    assert len(list(SYSTEM.glob("test_*.py"))) >= 10
