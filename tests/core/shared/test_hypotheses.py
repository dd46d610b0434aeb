"""Reading hypotheses (hypograph/hypotheses.py): both input shapes and every row of the bad-input
policy table in the module docstring."""

from __future__ import annotations

import json

import pytest
from conftest import QUESTION, RUN_HYPOTHESES, RUN_IDS, VAULT_IDS, VAULT_NODES

from hypograph.errors import HypographError
from hypograph.hypotheses import (
    Hypothesis,
    corpus_from_json,
    corpus_json,
    id_sort_key,
    load_corpus,
    strip_wikilinks,
)
from hypograph.ids import key_number, numbered_key
from hypograph.paths import HYPOTHESIS_FOLDERS, input_kind


def by_id(corpus) -> dict[str, Hypothesis]:
    return {h.id: h for h in corpus.hypotheses}


def assert_skipped_with_warning(corpus, hid: str, filename: str, fragment: str) -> None:
    assert hid not in corpus.ids
    matching = [w for w in corpus.warnings if filename in w]
    assert len(matching) == 1, corpus.warnings
    assert fragment in matching[0]


# -- run directory ------------------------------------------------------------------------------


def test_run_dir_is_read_in_natural_id_order(run_dir):
    corpus = load_corpus(run_dir)
    assert corpus.kind == "run-dir"
    assert corpus.ids == RUN_IDS  # H-10 after H-5, not after H-1
    assert corpus.warnings == []


def test_run_dir_text_is_title_statement_mechanism(run_dir):
    h = by_id(load_corpus(run_dir))["H-1"]
    fields = RUN_HYPOTHESES["H-1"]
    assert h.text == f"{fields['title']} {fields['statement']} {fields['mechanism']}"


@pytest.mark.parametrize("size", [16_383, 16_384, 16_385, 3_000_000])  # around and far past one read
def test_run_dir_reads_a_long_hypothesis_file_whole(run_dir, add_hypothesis, size):
    add_hypothesis(run_dir, "H-99", title="Long", statement="")
    path = run_dir / "hypotheses" / "H-99.json"
    padding = size - len(json.dumps({"id": "H-99", "title": "Long", "statement": ""}))
    statement = "word " * (padding // 5) + "x" * (padding % 5)
    path.write_text(json.dumps({"id": "H-99", "title": "Long", "statement": statement}))
    assert path.stat().st_size == size
    assert by_id(load_corpus(run_dir))["H-99"].text == f"Long {statement.strip()}"


def test_input_kind_looks_past_other_files(tmp_path, add_hypothesis, add_node):
    (tmp_path / "hypotheses").mkdir()
    for k in range(50):
        (tmp_path / "hypotheses" / f"note-{k}.md").write_text("x")
    assert input_kind(tmp_path) == "vault"
    add_hypothesis(tmp_path, "H-1", title="A hypothesis")
    assert input_kind(tmp_path) == "run-dir"


def test_run_dir_keeps_extra_fields(run_dir):
    h = by_id(load_corpus(run_dir))["H-1"]
    assert h.extra == {
        "predictions": ["Winter losses rise with autumn mite counts"],
        "evidence": ["Okafor 2019"],
        "cluster": None,
        "status": "proposed",
    }
    assert h.path == "hypotheses/H-1.json"


@pytest.mark.parametrize(
    "fields, expected",
    [
        ({"statement": "Mites spread virus."}, "Mites spread virus."),
        ({"statement": "Mites spread virus.", "mechanism": "By feeding."}, "Mites spread virus. By feeding."),
        (
            {"title": None, "statement": "Mites spread virus.", "mechanism": "By feeding."},
            "Mites spread virus. By feeding.",
        ),
        (
            {"title": "", "statement": "  Mites spread virus.  ", "mechanism": "\tBy feeding.\n"},
            "Mites spread virus. By feeding.",
        ),
        ({"title": "Mites", "mechanism": "By feeding."}, "Mites By feeding."),
    ],
    ids=["statement-only", "no-title", "null-title", "blank-title-and-padding", "no-statement"],
)
def test_run_dir_text_joins_present_fields_with_single_spaces(run_dir, add_hypothesis, fields, expected):
    add_hypothesis(run_dir, "H-7", **fields)
    assert by_id(load_corpus(run_dir))["H-7"].text == expected


BAD_RUN_FILES = {
    "malformed-json": (b'{"id": "H-9", "title": ', "malformed JSON"),
    "not-utf8": ('{"id": "H-9", "title": "Caf\u00e9 bees"}'.encode("latin-1"), "not UTF-8"),
    "not-an-object": (b'["H-9"]', "expected a JSON object"),
    "missing-id": (b'{"title": "Mites"}', "field 'id': missing"),
    "id-not-a-string": (b'{"id": 9, "title": "Mites"}', "field 'id'"),
    "id-does-not-match-filename": (b'{"id": "H-8", "title": "Mites"}', "does not match the filename"),
    "field-not-a-string": (b'{"id": "H-9", "title": ["Mites"]}', "field 'title'"),
    "no-text": (b'{"id": "H-9", "status": "proposed"}', "no title, statement or mechanism"),
}


def test_a_hypothesis_file_over_the_limit_is_skipped_with_a_warning_not_read_whole(run_dir, monkeypatch):
    from hypograph import hypotheses

    monkeypatch.setattr(hypotheses, "MAX_FILE_BYTES", 4096)
    (run_dir / "hypotheses" / "H-9.json").write_text(json.dumps({"id": "H-9", "title": "x" * 4096}))
    (run_dir / "hypotheses" / "H-8.json").write_text(json.dumps({"id": "H-8", "title": "x" * 4000}))
    corpus = load_corpus(run_dir)
    assert_skipped_with_warning(corpus, "H-9", "hypotheses/H-9.json", "over the 4096-byte limit")
    assert "H-8" in corpus.ids  # just under the limit: read


@pytest.mark.parametrize("content, fragment", BAD_RUN_FILES.values(), ids=BAD_RUN_FILES.keys())
def test_run_dir_skips_bad_file_with_warning_naming_it(run_dir, content, fragment):
    (run_dir / "hypotheses" / "H-9.json").write_bytes(content)
    corpus = load_corpus(run_dir)
    assert_skipped_with_warning(corpus, "H-9", "hypotheses/H-9.json", fragment)
    assert corpus.ids == RUN_IDS


def test_run_dir_with_no_hypotheses_is_an_error(tmp_path):
    (tmp_path / "hypotheses").mkdir()
    with pytest.raises(HypographError, match="no hypotheses found"):
        load_corpus(tmp_path)


def test_run_dir_with_only_bad_files_is_an_error(tmp_path, add_hypothesis):
    add_hypothesis(tmp_path, "H-1")  # no text
    (tmp_path / "hypotheses" / "H-2.json").write_text("{oops")
    with pytest.raises(HypographError, match="no hypotheses found"):
        load_corpus(tmp_path)


def test_input_without_hypotheses_dir_is_an_error(tmp_path):
    with pytest.raises(HypographError, match="no hypotheses/ directory"):
        load_corpus(tmp_path)
    with pytest.raises(HypographError, match="no such directory"):
        load_corpus(tmp_path / "missing")


def test_run_dir_reads_only_h_json_files(run_dir):
    (run_dir / "hypotheses" / "notes.json").write_text("{broken")
    (run_dir / "hypotheses" / "H-11.txt").write_text("not a hypothesis")
    corpus = load_corpus(run_dir)
    assert corpus.ids == RUN_IDS
    assert corpus.warnings == []


# -- vault --------------------------------------------------------------------------------------


def test_vault_reads_active_top_level_nodes_only(vault):
    corpus = load_corpus(vault)
    assert corpus.kind == "vault"
    assert corpus.ids == VAULT_IDS  # merged/H-5 and dropped/H-6 are not read
    assert corpus.warnings == []


def test_vault_text_is_title_and_statement_without_markup(vault):
    h = by_id(load_corpus(vault))["H-1"]
    title, _ = VAULT_NODES["H-1"]
    assert h.text == (
        f"{title} Colonies carrying heavy Varroa mite loads into autumn collapse over winter, "
        "as Okafor reports, because the mites spread deformed wing virus."
    )
    for boilerplate in ("[[", "]]", "type:", "hypothesis", "Results", QUESTION, "Notes on", "---"):
        assert boilerplate not in h.text


def test_vault_wikilink_without_alias_keeps_target(vault):
    assert by_id(load_corpus(vault))["H-3"].text.endswith("see S-2 - Lind 2020.")


def test_vault_keeps_question_and_other_fields(vault):
    h = by_id(load_corpus(vault))["H-1"]
    assert h.question == QUESTION
    assert h.title == VAULT_NODES["H-1"][0]
    assert h.extra["source"] == "[[S-1 - Okafor 2019]]"
    assert h.extra["locator"] == "Results"
    assert h.path == f"hypotheses/H-1 - {VAULT_NODES['H-1'][0]}.md"


def test_vault_node_without_title_in_filename_uses_statement(vault):
    (vault / "hypotheses" / "H-7.md").write_text(
        "---\ntype: hypothesis\nid: H-7\nstatement: Mites spread virus.\n---\n"
    )
    assert by_id(load_corpus(vault))["H-7"].text == "Mites spread virus."


BAD_VAULT_NODES = {
    "unparseable-yaml": (b"---\ntype: hypothesis\nid: H-9\nstatement: [unclosed\n---\n", "not valid YAML"),
    "not-utf8": ("---\ntype: hypothesis\nid: H-9\nstatement: Caf\u00e9 bees\n---\n".encode("latin-1"), "not UTF-8"),
    "missing-id": (b"---\ntype: hypothesis\nstatement: Mites.\n---\n", "field 'id': missing"),
    "mismatched-id": (b"---\ntype: hypothesis\nid: H-8\nstatement: Mites.\n---\n", "does not match the filename"),
    "wrong-type": (b"---\ntype: observation\nid: H-9\nstatement: Mites.\n---\n", "field 'type'"),
    "no-frontmatter": (b"Just a note about mites.\n", "field 'id': missing"),
    "statement-not-a-string": (b"---\ntype: hypothesis\nid: H-9\nstatement: [a, b]\n---\n", "field 'statement'"),
}


@pytest.mark.parametrize("content, fragment", BAD_VAULT_NODES.values(), ids=BAD_VAULT_NODES.keys())
def test_vault_bad_node_is_an_error_naming_the_file(vault, content, fragment):
    (vault / "hypotheses" / "H-9 - Bad node.md").write_bytes(content)
    with pytest.raises(HypographError) as err:
        load_corpus(vault)
    assert "hypotheses/H-9 - Bad node.md" in str(err.value)
    assert fragment in str(err.value)


def test_vault_node_with_no_text_is_an_error(vault):
    (vault / "hypotheses" / "H-9.md").write_text("---\ntype: hypothesis\nid: H-9\nstatement: ''\n---\n")
    with pytest.raises(HypographError, match=r"H-9\.md.*empty"):
        load_corpus(vault)


@pytest.mark.parametrize("state", ["merged", "dropped"])
def test_vault_merged_or_dropped_node_at_top_level_is_skipped_with_warning(vault, add_node, state):
    add_node(vault, "H-9", "Stray node", statement="Mites spread virus.", state=state)
    corpus = load_corpus(vault)
    assert_skipped_with_warning(corpus, "H-9", "hypotheses/H-9 - Stray node.md", f"state '{state}'")
    assert corpus.ids == VAULT_IDS


def test_vault_duplicate_id_is_an_error_naming_both_files(vault, add_node):
    add_node(vault, "H-1", "Another title", statement="Mites spread virus.")
    with pytest.raises(HypographError) as err:
        load_corpus(vault)
    message = str(err.value)
    assert "hypotheses/H-1 - Another title.md" in message
    assert f"hypotheses/H-1 - {VAULT_NODES['H-1'][0]}.md" in message


def test_vault_with_only_merged_nodes_is_an_error(tmp_path, add_node):
    add_node(tmp_path, "H-1", "Merged away", folder="hypotheses/merged", statement="Mites.", state="merged")
    with pytest.raises(HypographError, match="no hypotheses"):
        load_corpus(tmp_path)


def test_vault_with_only_skipped_nodes_is_an_error(tmp_path, add_node):
    add_node(tmp_path, "H-1", "Stray", statement="Mites.", state="merged")
    with pytest.raises(HypographError, match="no hypotheses found"):
        load_corpus(tmp_path)


# -- helpers ------------------------------------------------------------------------------------


def test_input_kind(run_dir, vault):
    assert input_kind(run_dir) == "run-dir"
    assert input_kind(vault) == "vault"


def test_input_kind_is_one_rule_for_every_kind(tmp_path, run_dir):
    """Registration, proximity's corpus and a library's corpus all ask ``input_kind``: a manifest
    makes a case, ``hypotheses/`` a run directory or vault (before a library file), a library file
    a library; ``among`` narrows what a reader accepts, with its own line."""
    (run_dir / "hypothesis_library.json").write_text("{}")
    assert input_kind(run_dir) == "run-dir"
    (run_dir / "manifest.json").write_text("{}")
    assert input_kind(run_dir) == "case"
    assert input_kind(run_dir, HYPOTHESIS_FOLDERS) == "run-dir"
    library = tmp_path / "lib"
    library.mkdir()
    (library / "hypothesis_library.json").write_text("{}")
    assert input_kind(library) == "library"
    with pytest.raises(HypographError, match="no hypotheses/ directory"):
        input_kind(library, HYPOTHESIS_FOLDERS)
    with pytest.raises(HypographError, match=r"not an input \(no hypotheses/"):
        input_kind(tmp_path)


def test_numbered_keys_both_ways():
    assert [numbered_key(n) for n in (1, 42, 12345)] == ["r0001", "r0042", "r12345"]
    assert [key_number(k) for k in ("r0001", "r0042", "r12345")] == [1, 42, 12345]
    for bad in ("r0000", "r1", "0001", "r0001x", "lib/r0001"):
        with pytest.raises(HypographError, match="expected r0001"):
            key_number(bad)


def test_id_sort_key_is_natural():
    assert sorted(["H-10", "H-2", "H-1", "C-3", "odd"], key=id_sort_key) == ["C-3", "H-1", "H-2", "H-10", "odd"]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("see [[S-2 - Liu 2023|Liu]]", "see Liu"),
        ("see [[H-3 - Title]]", "see H-3 - Title"),
        ("see [[S-2 - Liu 2023#Results|Liu]] and ![[fig.png]]", "see Liu and fig.png"),
        ("no links", "no links"),
    ],
)
def test_strip_wikilinks(text, expected):
    assert strip_wikilinks(text) == expected


def test_corpus_snapshot_round_trips(vault):
    corpus = load_corpus(vault)
    back = corpus_from_json(corpus_json(corpus))
    assert back.ids == corpus.ids
    assert back.texts == corpus.texts
    assert back.kind == corpus.kind
    assert [h.extra for h in back.hypotheses] == [h.document()["extra"] for h in corpus.hypotheses]


def test_a_snapshot_holds_what_json_cannot_take_natively():
    """Dates and sets a vault's YAML may hold become ISO text and sorted lists, as Hypothesis.document
    writes them; an integer past 64 bits or a lone surrogate goes through the standard library."""
    import datetime
    from pathlib import Path

    from hypograph.hypotheses import Corpus

    extra = {"created": datetime.date(2024, 5, 1), "tags": {"b", "a"}, 3: "three"}
    odd = {"big": 2**70, "odd": "\ud800"}
    for fields in (extra, odd):
        h = Hypothesis(id="H-1", title="t", statement="s", path="hypotheses/H-1.md", extra=fields)
        back = corpus_from_json(corpus_json(Corpus(root=Path("/x"), kind="vault", hypotheses=[h], warnings=[])))
        assert back.hypotheses[0].extra == h.document()["extra"]


def test_a_long_file_is_read_whole(run_dir, add_hypothesis):
    add_hypothesis(run_dir, "H-99", title="Long", statement="word " * 5000)
    corpus = load_corpus(run_dir)
    assert next(h.text for h in corpus.hypotheses if h.id == "H-99") == "Long " + ("word " * 5000).strip()


def test_a_file_that_cannot_be_read_is_a_warning_naming_it_and_the_reason(run_dir, monkeypatch):
    import hypograph.hypotheses as reader

    real = reader._file_bytes

    def refuse(path):
        if path.endswith("/H-2.json"):  # the tests run as root, whom a file's mode does not stop
            raise PermissionError(13, "Permission denied")
        return real(path)

    monkeypatch.setattr(reader, "_file_bytes", refuse)
    corpus = load_corpus(run_dir)
    assert "H-2" not in corpus.ids and len(corpus.ids) == len(RUN_IDS) - 1
    assert corpus.warnings == ["hypotheses/H-2.json: skipped: cannot be read (Permission denied)"]
