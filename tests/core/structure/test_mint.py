"""Minting's edges, in-process (found by mutation testing: ``hypograph create-node`` is tested in a
subprocess, where no mutant is switched on): the body a node gets, folders made on the way, the
exact refusals, and ``create_node_from_text`` taking a body or a whole node."""

from __future__ import annotations

from pathlib import Path

import pytest

from hypograph.errors import HypographError
from hypograph.vault import mint
from hypograph.vault.mint import create_node, create_node_from_text, file_with_id
from hypograph.vault.nodes import read_node


def test_a_node_without_a_body_has_only_its_frontmatter(tmp_path):
    node_id, rel = create_node(tmp_path, "hypothesis", "Plain", {"statement": "s"})
    assert (tmp_path / rel).read_text(encoding="utf-8") == "---\ntype: hypothesis\nid: H-1\nstatement: s\n---\n"


def test_a_node_in_a_new_nested_folder(tmp_path):
    node_id, rel = create_node(tmp_path, "hypothesis", "Deep", folder="a/b/c")
    assert rel == Path("a/b/c/H-1 - Deep.md") and (tmp_path / rel).is_file()


def test_an_unknown_type_is_refused_naming_the_known_ones(tmp_path):
    with pytest.raises(HypographError) as err:
        create_node(tmp_path, "hypotheses", "T")
    assert str(err.value) == f"unknown node type 'hypotheses': one of {', '.join(mint.NODE_TYPES)}"
    assert ", " in str(err.value) and not list(tmp_path.iterdir())


def test_the_exclusive_create_never_overwrites_and_names_the_file(tmp_path):
    path = tmp_path / "H-1 - Taken.md"
    path.write_text("mine\n")
    with pytest.raises(HypographError) as err:
        mint._create_exclusive(path, "theirs\n")
    assert str(err.value) == f"{path}: already exists; not overwriting it"
    assert path.read_text() == "mine\n" and [p.name for p in tmp_path.iterdir()] == [path.name]


def test_the_exclusive_create_writes_utf8(tmp_path):
    path = tmp_path / "H-1 - Été.md"
    mint._create_exclusive(path, "é ü 中\n")
    assert path.read_bytes() == "é ü 中\n".encode()


def test_file_with_id_finds_the_id_in_any_folder_and_only_that_id(tmp_path):
    (tmp_path / "x/y").mkdir(parents=True)
    (tmp_path / "x/y/H-3 - Old.md").write_text("")
    (tmp_path / "H-31 - Other.md").write_text("")
    assert file_with_id(tmp_path, "H-3") == tmp_path / "x/y/H-3 - Old.md"
    assert file_with_id(tmp_path, "H-31") == tmp_path / "H-31 - Other.md"
    assert file_with_id(tmp_path, "H-4") is None


def test_create_node_from_a_body(tmp_path):
    node_id, rel = create_node_from_text(tmp_path, "hypothesis", "From stdin", "Body of {{ID}}.\n")
    node = read_node(tmp_path, rel)
    assert (node_id, node.meta, node.body) == ("H-1", {"type": "hypothesis", "id": "H-1"}, "Body of H-1.\n")


def test_create_node_from_a_whole_node_keeps_its_fields_but_not_its_type_or_id(tmp_path):
    text = "---\ntype: argument\nid: H-999\nstatement: I am {{ID}}.\nsource: '[[S-1]]'\n---\nWhy {{ID}}.\n"
    node_id, rel = create_node_from_text(tmp_path, "hypothesis", "Whole", text)
    node = read_node(tmp_path, rel)
    assert node_id == "H-1" and rel == Path("hypotheses/H-1 - Whole.md")
    assert node.meta == {"type": "hypothesis", "id": "H-1", "statement": "I am H-1.", "source": "[[S-1]]"}
    assert node.body == "Why H-1.\n"


def test_create_node_from_bad_text_names_stdin(tmp_path):
    with pytest.raises(HypographError) as err:
        create_node_from_text(tmp_path, "hypothesis", "Bad", "---\n: [unclosed\n---\nbody\n")
    assert str(err.value).startswith("<stdin>: frontmatter is not valid YAML")
    assert not (tmp_path / "hypotheses").exists()


def test_ids_in_other_programs_dot_folders_are_never_reused(tmp_path):
    """A node moved to Obsidian's ``.trash/`` still holds its id: the next one is past it."""
    (tmp_path / ".trash").mkdir()
    (tmp_path / ".trash" / "H-7 - Deleted by hand.md").write_text("---\nid: H-7\n---\n")
    assert mint.highest_id(tmp_path, "H") == 7
    assert create_node(tmp_path, "hypothesis", "Next")[0] == "H-8"


@pytest.mark.parametrize(
    "folder, problem", [("../elsewhere", "leaves the input"), ("/tmp/elsewhere", "is not relative to the input")]
)
def test_a_folder_outside_the_vault_is_refused_before_anything_is_written(tmp_path, folder, problem):
    root = tmp_path / "vault"
    root.mkdir()
    with pytest.raises(HypographError) as err:
        create_node(root, "hypothesis", "Out", folder=folder)
    assert str(err.value) == f"{root / folder / 'H-1 - Out.md'}: {problem}"
    assert not (tmp_path / "elsewhere").exists() and sorted(p.name for p in root.iterdir()) == [mint.LOCK_NAME]


def test_a_write_the_file_system_refuses_is_one_line_naming_the_file(tmp_path):
    (tmp_path / "hypotheses").write_text("a file where the folder should be\n")
    with pytest.raises(HypographError) as err:
        create_node(tmp_path, "hypothesis", "Blocked")
    assert str(err.value) == f"{tmp_path / 'hypotheses' / 'H-1 - Blocked.md'}: cannot write (File exists)"


def test_a_node_is_written_whole_under_a_hidden_temp_name_beside_it(tmp_path, monkeypatch):
    """What makes a killed run harmless: the half-written file is a hidden ``.NAME.*.tmp`` in the
    node's own folder (readers skip it; the hard link into place stays on one file system)."""
    seen = []
    link = mint.os.link

    def spy(src, dst):
        seen.append((Path(src), Path(dst), Path(src).read_text(encoding="utf-8")))
        link(src, dst)

    monkeypatch.setattr(mint.os, "link", spy)
    node_id, rel = create_node(tmp_path, "hypothesis", "Whole", body="All of it.\n")
    [(tmp, dst, text)] = seen
    assert dst == tmp_path / rel and tmp.parent == dst.parent
    assert tmp.name.startswith(f".{dst.name}.") and tmp.name.endswith(".tmp")
    assert text == dst.read_text(encoding="utf-8") and text.endswith("All of it.\n")
    assert sorted(p.name for p in dst.parent.iterdir()) == [dst.name]
