"""The list of system tests in tests/conftest.py names files and tests that exist, so `make
test-fast` cannot quietly start running a renamed system test."""

import re

from conftest import REPO, SYSTEM_FILES, SYSTEM_TESTS


def test_every_system_file_and_test_listed_exists():
    tests = REPO / "tests"
    missing = [name for name in SYSTEM_FILES if not (tests / name).is_file()]
    for entry in SYSTEM_TESTS:
        file, name = entry.split("::")
        text = (tests / file).read_text(encoding="utf-8") if (tests / file).is_file() else ""
        if not re.search(rf"^def {re.escape(name)}\(", text, re.MULTILINE):
            missing.append(entry)
    assert missing == []
