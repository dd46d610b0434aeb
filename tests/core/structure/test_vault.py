"""Vault I/O: reading nodes, writing them back byte-for-byte, wiki-links, titles, minting ids.

The real vaults (tests/fixtures/vaults) are only ever read or copied into tmp_path.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from cli_helper import hypograph, start_hypograph
from conftest import SHARED_VAULTS, node_markdown, offline_env

from hypograph.errors import HypographError
from hypograph.vault import mint
from hypograph.vault.mint import LOCK_NAME, create_node, vault_lock
from hypograph.vault.nodes import clean_title, dump_like, parse_node, read_node
from hypograph.vault.vault import node_files, open_vault

REAL_VAULTS = ("covid1", "eggs1")


# -- helpers ------------------------------------------------------------------------------------


def real_vault(name: str) -> Path:
    root = SHARED_VAULTS / name
    if not (root / "hypotheses").is_dir():
        pytest.skip(f"{root} is not available")
    return root


def write_file(root: Path, rel: str, text: str | bytes) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def write_node(root: Path, rel: str, body: str = "", **meta) -> Path:
    """A node file at ``rel`` with ``meta`` as its frontmatter (in the order given)."""
    return write_file(root, rel, node_markdown(meta, body))


def hypothesis(root: Path, node_id: str, title: str, folder: str = "hypotheses", **meta) -> Path:
    return write_node(
        root, f"{folder}/{node_id} - {title}.md", type="hypothesis", id=node_id, statement=f"{title}.", **meta
    )


def split(text: str) -> tuple[list[str], str]:
    """(frontmatter lines with their line ends, body) of a node's text."""
    m = re.match(r"---\r?\n(.*?)^---\r?\n", text, re.S | re.M)
    return m.group(1).splitlines(keepends=True), text[m.end() :]


def node_ids(root: Path, folder: str = "hypotheses") -> list[str]:
    return sorted(p.name.split(" - ")[0] for p in (root / folder).rglob("*.md"))


# -- reading and writing back the real vaults ------------------------------------------------------


@pytest.mark.parametrize("name", REAL_VAULTS)
def test_every_node_of_real_vault_parses(name):
    root = real_vault(name)
    vault = open_vault(root)
    with_ids = [rel for rel in node_files(root) if "id" in read_node(root, rel).meta]
    assert sorted(str(n.path) for n in vault.nodes.values()) == sorted(map(str, with_ids))
    assert len(vault.nodes) > 40
    for node in vault.nodes.values():
        assert node.path.name.startswith(f"{node.id} - ") and node.type, node.path
    assert {n.type for n in vault.nodes.values()} >= {"hypothesis", "hypothesis-cluster", "observation", "source"}


@pytest.mark.parametrize("name", REAL_VAULTS)
def test_unchanged_node_text_is_byte_identical(name):
    root = real_vault(name)
    for node in open_vault(root).nodes.values():
        assert not node.changed
        assert node.text().encode("utf-8") == (root / node.path).read_bytes(), node.path


@pytest.mark.parametrize("name", REAL_VAULTS)
def test_changing_one_field_keeps_every_other_line(name):
    """Change ``type`` and add a field on every node: only that line changes, one line is added."""
    root = real_vault(name)
    for node in open_vault(root).nodes.values():
        lines, body = split(node.raw)
        node.meta["type"] = "changed-type"
        node.meta["reviewed_by"] = "[[A-1]]"
        new_lines, new_body = split(node.text())
        expected = ["type: changed-type\n" if line.startswith("type:") else line for line in lines]
        assert new_lines == expected + ['reviewed_by: "[[A-1]]"\n'], node.path
        assert new_body == body, node.path
        assert list(parse_node(node.text(), node.path).meta) == list(node.meta)


TRICKY = """---
type: hypothesis
id: H-7
"quoted key": keeps its quotes
statement: >-
  A folded statement
  over two lines.
state: active
source: '[[S-1 - Okafor 2019]]'
locator: [Results, "Table 2"]
unknown_field: {a: 1, b: [x, y]}
quote: "a quote with: a colon"
---
Body line with [[H-3]] and a rule below.
---
not frontmatter: this stays in the body
"""


def test_changing_one_field_of_tricky_node():
    node = parse_node(TRICKY, Path("hypotheses/H-7 - T.md"))
    node.meta["state"] = "merged"
    node.meta["merged_into"] = "[[H-3 - Title]]"
    assert node.text() == (
        TRICKY.replace("state: active\n", "state: merged\n").replace(
            'quote: "a quote with: a colon"\n', 'quote: "a quote with: a colon"\nmerged_into: "[[H-3 - Title]]"\n'
        )
    )
    node.meta["locator"] = ["S-1: Results", "S-2: Table 2"]
    reread = parse_node(node.text(), node.path)
    assert reread.meta == node.meta and reread.body == node.body
    assert list(reread.meta) == list(node.meta)


@pytest.mark.parametrize(
    "text, change, kept",
    [
        pytest.param(
            "---\n# written by step 3\ntype: hypothesis\nid: H-1\nstate: active\n---\nbody\n",
            "state",
            "# written by step 3\n",
            id="leading-comment",
        ),
        pytest.param(
            "---\ntype: hypothesis\nid: H-1\nstate: active\n# source checked by hand\nsource: x\n---\nbody\n",
            "state",
            "# source checked by hand\n",
            id="comment-after-changed-key",
        ),
        pytest.param(
            "---\ntype: hypothesis\nid: H-1\nstate: active\n# source checked by hand\nsource: x\n---\nbody\n",
            "id",
            "# source checked by hand\n",
            id="comment-after-unchanged-key",
        ),
    ],
)
def test_comment_lines_survive_a_change(text, change, kept):
    node = parse_node(text, Path("hypotheses/H-1 - T.md"))
    node.meta[change] = "H-9" if change == "id" else "merged"
    assert kept in node.text()


def test_crlf_node_keeps_its_line_endings_when_changed():
    text = "---\r\ntype: hypothesis\r\nid: H-1\r\nstate: active\r\n---\r\nbody\r\n"
    node = parse_node(text, Path("hypotheses/H-1 - T.md"))
    node.meta["state"] = "merged"
    assert node.text() == text.replace("state: active", "state: merged")


# -- wiki-links and titles ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "link",
    [
        "[[H-3 - Warm autumns let mites breed]]",
        "[[H-3]]",
        "![[H-3 - Warm autumns let mites breed]]",
        "[[H-3|the mite one]]",
        "[[H-3 - Warm autumns let mites breed#Evidence|see]]",
        "[[H-3 - A title that was since renamed]]",
    ],
)
def test_wikilink_resolves_by_id(tmp_path, link):
    hypothesis(tmp_path, "H-3", "Warm autumns let mites breed")
    hypothesis(tmp_path, "H-33", "Mites prefer drone brood")
    assert open_vault(tmp_path).resolve(link).id == "H-3"


@pytest.mark.parametrize("link", ["[[H-4]]", "H-3", "[[Warm autumns let mites breed]]", None, 3])
def test_wikilink_to_nothing_resolves_to_none(tmp_path, link):
    hypothesis(tmp_path, "H-3", "Warm autumns let mites breed")
    assert open_vault(tmp_path).resolve(link) is None


@pytest.mark.parametrize("name", REAL_VAULTS)
def test_real_vault_links_resolve(name):
    vault = open_vault(real_vault(name))
    for hc in vault.of_type("hypothesis-cluster"):
        assert all(vault.resolve(link).type == "hypothesis" for link in hc.meta["hypotheses"])
    for h in vault.of_type("hypothesis"):
        if h.meta.get("source"):
            assert vault.resolve(h.meta["source"]).type == "source", h.id  # eggs1 uses bare [[S-12]]


@pytest.mark.parametrize(
    "title, cleaned",
    [
        (
            'Mites / viruses \\ cause: collapse* ? "yes" <no> | [maybe] #1 ^x',
            "Mites - viruses - cause- collapse- - -yes- -no- - -maybe- -1 -x",
        ),
        ("  Trailing dots and   spaces ...  ", "Trailing dots and spaces"),
        ("/:*", "---"),
        ("", "Untitled"),
    ],
)
def test_clean_title(title, cleaned):
    assert clean_title(title) == cleaned


def test_clean_title_makes_a_usable_filename_and_link(tmp_path):
    title = 'Is H-3 "right"? A/B test: 50% <of> [[all]] #tags | ^block \\ *star*'
    node_id, rel = create_node(tmp_path, "hypothesis", title, {"statement": "s"})
    assert rel.parent == Path("hypotheses") and (tmp_path / rel).is_file()
    assert not set('/\\:*?"<>|[]#^') & set(rel.stem)
    vault = open_vault(tmp_path)
    assert vault.resolve(vault.nodes[node_id].link).id == node_id == "H-1"
    assert len(clean_title("word " * 100)) <= 150


# -- minting -------------------------------------------------------------------------------------------


def test_next_id_counts_tombstones_in_subfolders(tmp_path):
    hypothesis(tmp_path, "H-3", "Active")
    hypothesis(tmp_path, "H-40", "Absorbed long ago", folder="hypotheses/merged", state="merged")
    hypothesis(tmp_path, "H-12", "Dropped", folder="hypotheses/dropped", state="dropped")
    write_node(tmp_path, "hypothesis-clusters/HC-7 - A cluster.md", type="hypothesis-cluster", id="HC-7")
    node_id, rel = create_node(
        tmp_path,
        "hypothesis",
        "New {{ID}}",
        {"statement": "I am {{ID}}.", "source": None},
        body="\nMinted as {{ID}}.\n",
    )
    assert (node_id, rel) == ("H-41", Path("hypotheses/H-41 - New H-41.md"))
    node = read_node(tmp_path, rel)
    assert list(node.meta.items()) == [
        ("type", "hypothesis"),
        ("id", "H-41"),
        ("statement", "I am H-41."),
        ("source", None),
    ]
    assert node.body == "\nMinted as H-41.\n"
    assert create_node(tmp_path, "hypothesis-cluster", "Next cluster")[0] == "HC-8"
    assert (tmp_path / LOCK_NAME).is_file()


def test_create_node_never_overwrites(tmp_path, monkeypatch):
    existing = hypothesis(tmp_path, "H-1", "Taken")
    before = existing.read_bytes()
    monkeypatch.setattr(mint, "highest_id", lambda root, prefix: 0)  # as if the count were stale
    with pytest.raises(HypographError, match="already exists"):
        create_node(tmp_path, "hypothesis", "Taken", {"statement": "replacement"})
    assert existing.read_bytes() == before
    assert sorted(p.name for p in (tmp_path / "hypotheses").iterdir()) == [existing.name]  # no temp file left


def test_create_node_rejects_unknown_type(tmp_path):
    with pytest.raises(HypographError, match="unknown node type"):
        create_node(tmp_path, "hypotheses", "T")


MINT_TEN = """
import sys
from hypograph.vault.mint import create_node
for k in range(10):
    create_node(sys.argv[1], "hypothesis", f"From worker {sys.argv[2]} number {k}", {"statement": "{{ID}}"})
"""


def test_concurrent_minting_from_several_processes(tmp_path):
    hypothesis(tmp_path, "H-5", "Already here", folder="hypotheses/dropped", state="dropped")
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", MINT_TEN, str(tmp_path), str(w)],
            env=offline_env(),
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(4)
    ]
    for w in workers:
        assert w.wait(timeout=120) == 0, w.stderr.read()
    minted = [p for p in (tmp_path / "hypotheses").glob("*.md")]
    assert len(minted) == 40
    ids = sorted(read_node(tmp_path, p.relative_to(tmp_path)).meta["id"] for p in minted)
    assert ids == sorted(f"H-{n}" for n in range(6, 46))  # distinct, no gap, the tombstone not reused
    assert all(read_node(tmp_path, p.relative_to(tmp_path)).meta["statement"] == p.name.split(" - ")[0] for p in minted)
    titles = {p.name.split(" - ", 1)[1] for p in minted}
    assert titles == {f"From worker {w} number {k}.md" for w in range(4) for k in range(10)}  # nothing lost


def lock_waiters(lock_file: Path) -> set[int]:
    """Pids blocked waiting for a lock on ``lock_file`` (Linux /proc/locks)."""
    inode = lock_file.stat().st_ino
    waiters = set()
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if "->" in fields and fields[-3].endswith(f":{inode}"):
            waiters.add(int(fields[fields.index("->") + 4]))
    return waiters


@pytest.mark.skipif(not Path("/proc/locks").exists(), reason="needs Linux /proc/locks")
def test_minting_waits_for_the_vault_lock(tmp_path):
    with vault_lock(tmp_path):
        child = start_hypograph(
            "create-node", tmp_path, "--type", "hypothesis", "--title", "Waited", stdin=subprocess.PIPE
        )
        child.stdin.write("---\nstate: active\n---\nBody of {{ID}}\n")  # the CLI wants frontmatter
        child.stdin.close()
        deadline = time.monotonic() + 60
        while child.pid not in lock_waiters(tmp_path / LOCK_NAME):  # handshake: the child is blocked in flock
            assert child.poll() is None, child.stderr.read()
            assert time.monotonic() < deadline, "the child never waited for the lock"
            time.sleep(0.02)
        assert not (tmp_path / "hypotheses").exists()  # nothing minted while the lock is held
    assert child.wait(timeout=60) == 0, child.stderr.read()
    assert child.stdout.read().splitlines() == ["H-1", str(tmp_path / "hypotheses" / "H-1 - Waited.md")]


def test_create_node_cli_replaces_id_placeholder(tmp_path):
    hypothesis(tmp_path, "H-9", "Existing")
    proc = hypograph(
        "create-node",
        tmp_path,
        "--type",
        "hypothesis",
        "--title",
        "Residual of {{ID}}",
        stdin="---\nstate: active\n---\nThis is {{ID}}, minted by the CLI.\n",
    )
    assert proc.returncode == 0, proc.stderr
    rel = Path("hypotheses/H-10 - Residual of H-10.md")
    assert proc.stdout.splitlines() == ["H-10", str(tmp_path / rel)]
    node = read_node(tmp_path, rel)
    assert node.meta == {"type": "hypothesis", "id": "H-10", "state": "active"}
    assert node.body == "This is H-10, minted by the CLI.\n"


def test_create_node_cli_accepts_a_whole_node(tmp_path):
    text = node_markdown(
        {"type": "observation", "id": "O-999", "statement": "Seen in {{ID}}.", "state": "active"}, "Body of {{ID}}.\n"
    )
    proc = hypograph("create-node", tmp_path, "--type", "hypothesis", "--title", "Whole", stdin=text)
    assert proc.returncode == 0, proc.stderr
    node = read_node(tmp_path, Path("hypotheses/H-1 - Whole.md"))
    assert node.meta == {"type": "hypothesis", "id": "H-1", "statement": "Seen in H-1.", "state": "active"}
    assert node.body == "Body of H-1.\n"


def test_create_node_cli_unknown_type_fails(tmp_path):
    proc = hypograph("create-node", tmp_path, "--type", "theory", "--title", "T", stdin="---\nstate: active\n---\nx")
    assert proc.returncode == 1
    assert "unknown node type" in proc.stderr
    assert not any(tmp_path.rglob("*.md"))


# -- bad input --------------------------------------------------------------------------------------------

BILLION_LAUGHS = "\n".join(
    ["---", "type: hypothesis", "id: H-2", 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    + [f"{chr(98 + k)}: &{chr(98 + k)} [{','.join(['*' + chr(97 + k)] * 9)}]" for k in range(8)]
    + ["---", ""]
)


@pytest.mark.parametrize(
    "rel, text, message",
    [
        ("hypotheses/H-2 - Broken.md", "---\ntype: hypothesis\nid: H-2\nstatement: [unclosed\n---\n", "not valid YAML"),
        ("hypotheses/H-2 - Laughs.md", BILLION_LAUGHS, "aliases are not allowed"),
        ("hypotheses/H-2 - Alias.md", "---\ntype: hypothesis\nid: &x H-2\nalso: *x\n---\n", "aliases are not allowed"),
        (
            "hypotheses/H-2 - Latin-1.md",
            "---\ntype: hypothesis\nid: H-2\nstatement: caf\xe9\n---\n".encode("latin-1"),
            "not UTF-8",
        ),
        ("hypotheses/H-2 - Mismatch.md", "---\ntype: hypothesis\nid: H-3\n---\n", "does not match the filename"),
        ("hypotheses/H-2 - Number.md", "---\ntype: hypothesis\nid: 2\n---\n", "is not an id"),
        ("hypotheses/H-2 - List.md", "---\n- type\n- id\n---\n", "not a mapping"),
    ],
)
def test_bad_node_file_is_an_error_naming_it(tmp_path, rel, text, message):
    hypothesis(tmp_path, "H-1", "Fine")
    write_file(tmp_path, rel, text)
    with pytest.raises(HypographError, match=message) as err:
        open_vault(tmp_path)
    assert rel in str(err.value)


def test_bad_node_file_fails_the_cli_naming_it(tmp_path):
    hypothesis(tmp_path, "H-1", "Fine")
    write_file(tmp_path, "hypotheses/H-2 - Laughs.md", BILLION_LAUGHS)
    proc = hypograph("check", tmp_path)
    assert proc.returncode == 1
    assert "H-2 - Laughs.md" in proc.stderr and "aliases" in proc.stderr


def test_two_files_with_one_id_is_an_error_naming_both(tmp_path):
    first = hypothesis(tmp_path, "H-4", "First copy")
    second = hypothesis(tmp_path, "H-4", "Second copy", folder="hypotheses/merged", state="merged")
    with pytest.raises(HypographError) as err:
        open_vault(tmp_path)
    for path in (first, second):
        assert str(path.relative_to(tmp_path)) in str(err.value)


def test_file_without_id_is_not_a_node(tmp_path):
    hypothesis(tmp_path, "H-1", "Fine")
    write_file(tmp_path, "hypotheses/Reading notes.md", "---\ntitle: notes\n---\nJust notes.\n")
    write_file(tmp_path, "hypotheses/Plain.md", "No frontmatter at all.\n")
    write_file(tmp_path, "agent-notes/H-1 - Not a node either.md", "---\nid: H-99\n---\n")
    write_file(tmp_path, "problem-log.md", "---\nid: nonsense\n---\n")
    assert sorted(open_vault(tmp_path).nodes) == ["H-1"]


def test_open_vault_on_missing_directory(tmp_path):
    with pytest.raises(HypographError, match="not a directory"):
        open_vault(tmp_path / "nowhere")


# -- the libyaml fast path reads every frontmatter exactly as the Python loader ---------------------


@pytest.mark.parametrize(
    "text",
    [
        'id: H-1\nstatement: "A & B: c."\nsource: "[[S-1 - Smith & Jones 2020]]"\nlocator:\n- "S-1: p. 3"\n',
        "a: 1\nb: 1.0\nc: true\nd: yes\ne: null\nf: 2024-01-02\ng: '010'\nh: 0x1F\n",
        "k: |\n  line one\n  line two\nm: >-\n  folded\n  text\n",
        "tags: [a, b, {c: d}]\nempty:\nq: 'it''s'\n",
        'x: 35% of the sites\ny: "\\u00e9"\n',
    ],
)
def test_the_fast_loader_reads_as_the_python_loader(text):
    from hypograph.vault import nodes

    assert repr(nodes._load(text)) == repr(nodes._HANDLER.load(text, Loader=nodes._NoAliasLoader))


@pytest.mark.parametrize(
    "text, message",
    [
        ("a: &x [1]\nb: *x\n", "aliases are not allowed"),
        ("a: 1\na: 2\n", "duplicate key 'a'"),
        ("a: [" * 3000 + "]" * 3000 + "\n", ""),
    ],
)
def test_what_the_python_loader_refuses_is_refused_the_same(text, message):
    from hypograph.vault import nodes

    def outcome(load):
        try:
            return repr(load(text))
        except Exception as e:  # noqa: BLE001 - the message is compared
            return f"{type(e).__name__}: {e}"

    fast, python = outcome(nodes._load), outcome(lambda t: nodes._HANDLER.load(t, Loader=nodes._NoAliasLoader))
    assert fast == python and message in fast


@pytest.mark.parametrize(
    ("old", "value", "new"),
    [
        # a list indented under its key, every item double-quoted: so are the new items
        ('locator:\n  - "S-1: a"\n  - "S-2: b"\n', ["S-1: a", "S-3: c"], 'locator:\n  - "S-1: a"\n  - "S-3: c"\n'),
        # single-quoted items stay single-quoted (a wiki-link is double-quoted, as always)
        ("locator:\n- 'S-1: a'\n", ["S-2: b", "[[S-2]]"], "locator:\n- 'S-2: b'\n- \"[[S-2]]\"\n"),
        # a quoted text value stays quoted
        ('statement: "Mites kill."\n', "Mites spread.", 'statement: "Mites spread."\n'),
        # mixed quoting, a plain value, a new field, a value that is no text: as PyYAML writes it
        ('locator:\n  - "S-1: a"\n  - S-2 b\n', ["S-1: a"], "locator:\n  - 'S-1: a'\n"),
        ("statement: Mites kill.\n", "Mites: spread.", "statement: 'Mites: spread.'\n"),
        ("", ["S-1: a"], "locator:\n- 'S-1: a'\n"),
        ('residual: "yes"\n', True, "residual: true\n"),
    ],
)
def test_a_changed_field_keeps_the_style_it_was_written_in(old, value, new):
    key = new.partition(":")[0]
    assert dump_like(key, value, old) == new
    assert yaml.safe_load(new) == {key: value}
