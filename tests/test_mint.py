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
