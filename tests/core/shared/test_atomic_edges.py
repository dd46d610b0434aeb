"""The atomic writer's refusals, each one line naming the file (found by mutation testing)."""

from __future__ import annotations

import pytest

from hypograph.atomic import write_text
from hypograph.errors import HypographError


def test_a_symlink_is_not_replaced_by_a_regular_file(tmp_path):
    (tmp_path / "target.md").write_text("kept\n")
    (tmp_path / "link.md").symlink_to("target.md")
    with pytest.raises(HypographError) as err:
        write_text(tmp_path / "link.md", "new\n")
    assert str(err.value) == f"{tmp_path / 'link.md'}: is a symlink; not replacing it by a regular file"
    assert (tmp_path / "link.md").is_symlink() and (tmp_path / "target.md").read_text() == "kept\n"


def test_a_write_the_file_system_refuses_names_the_file_and_the_reason(tmp_path):
    (tmp_path / "folder").write_text("a file where a folder should be\n")
    with pytest.raises(HypographError) as err:
        write_text(tmp_path / "folder" / "x.md", "new\n")
    assert str(err.value) == f"{tmp_path / 'folder' / 'x.md'}: cannot write (File exists)"
    assert (tmp_path / "folder").read_text() == "a file where a folder should be\n"
