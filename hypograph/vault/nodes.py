"""Markdown nodes: YAML frontmatter + body, filename ``ID - Title.md``.

Reading uses python-frontmatter's YAML handler with a loader that refuses aliases (a few
anchors can expand into gigabytes once walked). A node whose fields did not change is never
rewritten, so it stays byte-for-byte what it was. A changed node keeps its body exactly, its key
order, and the original YAML text of every field that kept its value; only changed and new
fields are re-emitted (wiki-links double-quoted, as the seed pipeline writes them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from frontmatter.default_handlers import YAMLHandler

from hypograph.atomic import read_utf8
from hypograph.errors import HypographError
from hypograph.limits import data_problem
from hypograph.paths import cut_bytes

FRONTMATTER_RE = re.compile(r"\A---[ \t]*\r?\n(.*?)^---[ \t]*(?:\r?\n|\Z)", re.S | re.M)
FILENAME_ID_RE = re.compile(r"^([A-Z]+-\d+)(?: - |\.md$|$)")
LINK_RE = re.compile(r"!?\[\[([^\]|#]+?)(?:#[^\]|]*)?(?:\|[^\]]*)?\]\]")
MAX_NODE_BYTES = 16 << 20  # a node is a few kB of markdown; a larger node file is refused, naming it
ILLEGAL_FILENAME_CHARS = re.compile(r'[/\\:*?"<>|\[\]#^\x00-\x1f]')


class _NoAliasLoader(yaml.SafeLoader):
    """SafeLoader that rejects YAML aliases (``*name``: no billion-laughs expansion) and duplicate
    keys (the later would silently shadow the earlier, which a rewrite would then lose)."""

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(
                None, None, "YAML aliases are not allowed in node frontmatter", event.start_mark
            )
        return super().compose_node(parent, index)

    def construct_mapping(self, node, deep=False):
        _refuse_duplicate_keys(node)
        return super().construct_mapping(node, deep)


def _refuse_duplicate_keys(node) -> None:
    if isinstance(node, yaml.MappingNode):
        seen = set()
        for key_node, _value in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
            if key is not None and key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} (a later one would hide the first)", key_node.start_mark
                )
            seen.add(key)


class _FastLoader(yaml.CSafeLoader if yaml.__with_libyaml__ else yaml.SafeLoader):  # type: ignore[misc]
    """libyaml's parser (14x the pure-Python one) with the same duplicate-key refusal. It cannot
    refuse aliases while composing, so ``_load`` gives it only text that holds none."""

    def construct_mapping(self, node, deep=False):
        _refuse_duplicate_keys(node)
        return super().construct_mapping(node, deep)


# The pure-Python reader's refusals, which ``_load`` leaves to it: a text it may refuse, or whose
# nesting a C parser would follow deeper than the Python one (it recurses without a limit).
_PY_ONLY = re.compile(
    r"[*!@`\t\r\ufeff\x85\u2028\u2029]|[|>][^\n]*#|^\s*%|" + yaml.reader.Reader.NON_PRINTABLE.pattern, re.M
)
_FAST_MAX_CHARS = 65536
_FAST_MAX_BRACKETS = 2000


def _load(text: str):
    """The frontmatter's value, exactly as ``_NoAliasLoader`` reads it: libyaml when the text holds
    no alias or anchor, no character the Python reader refuses, and no deep flow nesting; the
    Python loader otherwise, or whenever libyaml raises (so every error is the Python loader's)."""
    if (
        yaml.__with_libyaml__
        and len(text) <= _FAST_MAX_CHARS
        and text.count("[") + text.count("{") <= _FAST_MAX_BRACKETS
        and not _PY_ONLY.search(text)
    ):
        try:
            return _HANDLER.load(text, Loader=_FastLoader)
        except Exception:  # noqa: BLE001 - the Python loader below gives the canonical error
            pass
    return _HANDLER.load(text, Loader=_NoAliasLoader)


class _Dumper(yaml.SafeDumper):
    """Double-quote wiki-links like the seed pipeline; everything else as PyYAML decides."""


def _represent_str(dumper: yaml.SafeDumper, value: str):
    style = '"' if value.startswith(("[[", "![[")) else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _represent_str)
# An empty field reads "source:" as in the seed vaults, not "source: null".
_Dumper.add_representer(type(None), lambda d, _v: d.represent_scalar("tag:yaml.org,2002:null", ""))
_HANDLER = YAMLHandler()
TOP_KEY_RE = re.compile(r"^([^\s#'\"-][^:]*|'[^']*'|\"[^\"]*\"):(?:[ \t]|$)")


@dataclass
class Node:
    """One markdown node. ``path`` is relative to the vault root; ``raw`` is the text as read."""

    path: Path
    meta: dict[str, Any]
    body: str
    raw: str = ""
    original_meta: dict[str, Any] = field(default_factory=dict)
    original_yaml: str = ""
    delimiters: tuple[str, str] = ("---\n", "---\n")  # the opening and closing lines as read

    @property
    def id(self) -> str:
        return str(self.meta.get("id", ""))

    @property
    def type(self) -> str:
        return str(self.meta.get("type", ""))

    @property
    def title(self) -> str:
        """The filename's descriptive part, after ``ID - ``."""
        return self.path.stem.partition(" - ")[2]

    @property
    def link(self) -> str:
        """``[[ID - Title]]``: an Obsidian wiki-link to this node."""
        return f"[[{self.path.stem}]]"

    def __post_init__(self) -> None:
        self._original_body = self.body  # as read: a body-only edit is a change too

    @property
    def changed(self) -> bool:
        return self.meta != self.original_meta or self.body != self._original_body

    def text(self) -> str:
        """The file's text: the raw text if nothing changed, else edited frontmatter + same body."""
        if not self.changed and self.raw:
            return self.raw
        preamble, blocks = _key_blocks(self.original_yaml)
        newline = "\r\n" if self.delimiters[0].endswith("\r\n") else "\n"
        parts = [self.delimiters[0], preamble]
        for key, value in self.meta.items():
            value_text, trailing = blocks.get(key, ("", ""))
            if key in blocks and key in self.original_meta and self.original_meta[key] == value:
                parts.append(value_text)
            else:
                parts.append(dump_like(key, value, value_text).replace("\n", newline))
            parts.append(trailing)  # comments and blank lines after a field stay where they were
        return "".join(parts) + self.delimiters[1] + self.body


def dump_field(key: str, value: Any) -> str:
    """One top-level field as YAML text ending in a newline, never folded. (Step 4 writes the same
    few values on thousands of nodes — ``state: active``, one cluster link per cluster — so each
    distinct field is emitted once.)"""
    frozen = _frozen(value)
    if frozen is None:
        return _dump_field(key, value)
    return _dump_cached(key, frozen, value)


_ITEM_RE = re.compile(r"^([ \t]*)- ")


def dump_like(key: str, value: Any, old: str) -> str:
    """``key: value`` as YAML text in the style of ``old``, the field's text as it was (empty for a
    new field): a list's items indented as its items were, and text quoted as it was quoted
    (``"`` or ``'``), so a vault written by another tool keeps its look where a value changes.
    Values other than text or a flat list of one-line text are written as ``dump_field`` writes them."""
    style = _style_of(old) if old else None
    texts = value if isinstance(value, list) else [value]
    if style is None or style == ("", None) or not all(isinstance(t, str) and "\n" not in t for t in texts):
        return dump_field(key, value)
    indent, quote = style
    text = _HANDLER.export({_Key(key): value}, Dumper=_quoting(quote), sort_keys=False, width=1_000_000) + "\n"
    if not isinstance(value, list) or not indent:
        return text
    return "".join(indent + line if line.startswith("- ") else line for line in text.splitlines(keepends=True))


def _style_of(old: str) -> tuple[str, str | None]:
    """(the indent before a list item's ``- ``, the quote every value or item opens with, or None)."""
    first, *rest = old.splitlines()
    items = [m for m in (_ITEM_RE.match(line) for line in rest) if m]
    if items:
        indent = items[0].group(1)
        heads = {m.string[m.end() : m.end() + 1] for m in items}
    else:
        indent, heads = "", {first.partition(":")[2].strip()[:1]}
    quote = heads.pop() if len(heads) == 1 else None
    return indent, quote if quote in ('"', "'") else None


class _Key(str):
    """A field name: written as PyYAML writes it, whatever the quoting of the values."""


class _DoubleDumper(_Dumper):
    """Every text double-quoted."""


class _SingleDumper(_Dumper):
    """Wiki-links double-quoted (as always), other text single-quoted."""


_DoubleDumper.add_representer(str, lambda d, v: d.represent_scalar("tag:yaml.org,2002:str", v, style='"'))
_SingleDumper.add_representer(
    str,
    lambda d, v: d.represent_scalar("tag:yaml.org,2002:str", v, style='"' if v.startswith(("[[", "![[")) else "'"),
)


for _dumper in (_Dumper, _DoubleDumper, _SingleDumper):
    _dumper.add_representer(_Key, lambda d, v: d.represent_scalar("tag:yaml.org,2002:str", str(v)))


def _quoting(quote: str | None) -> type[yaml.SafeDumper]:
    return {'"': _DoubleDumper, "'": _SingleDumper}.get(quote or "", _Dumper)


def _dump_field(key: str, value: Any) -> str:
    return _HANDLER.export({key: value}, Dumper=_Dumper, sort_keys=False, width=1_000_000) + "\n"


_DUMPED: dict[tuple, str] = {}


def _dump_cached(key: str, frozen: tuple, value: Any) -> str:
    k = (key, frozen)
    text = _DUMPED.get(k)
    if text is None:
        text = _dump_field(key, value)
        if len(_DUMPED) < 100_000:
            _DUMPED[k] = text
    return text


def _frozen(value: Any):
    """A hashable stand-in for ``value`` that tells apart what YAML writes differently (``True``
    from ``1``, a list from a string), or None for a value not worth caching."""
    if value is None or isinstance(value, (str, bool, int)):  # not float: -0.0 == 0.0
        return (type(value).__name__, value)
    if isinstance(value, list) and len(value) <= 64:
        items = tuple(_frozen(v) for v in value)
        return None if any(i is None for i in items) else ("list", items)
    return None


def render(meta: dict[str, Any], body: str) -> str:
    """A new node's text: ``---``, the fields in order, ``---``, the body."""
    return "---\n" + "".join(dump_field(k, v) for k, v in meta.items()) + "---\n" + body


def _key_blocks(fm: str) -> tuple[str, dict[str, tuple[str, str]]]:
    """Split frontmatter YAML into the lines before the first key, and for each top-level key its
    value text (key line plus continuation lines) and the comment/blank lines that follow it."""
    preamble: list[str] = []
    lines: dict[str, list[str]] = {}
    key = None
    for line in fm.splitlines(keepends=True):
        m = TOP_KEY_RE.match(line)
        if m:
            key = m.group(1).strip("'\"")
            lines[key] = [line]
        elif key is None:
            preamble.append(line)
        else:
            lines[key].append(line)
    blocks = {}
    for k, block in lines.items():
        if not block[-1].endswith("\n"):
            block[-1] += "\r\n" if block[0].endswith("\r\n") else "\n"
        cut = len(block)
        while cut > 1 and (not block[cut - 1].strip() or block[cut - 1].startswith("#")):
            cut -= 1
        blocks[k] = ("".join(block[:cut]), "".join(block[cut:]))
    return "".join(preamble), blocks


def parse_node(raw: str, rel: Path) -> Node:
    """Parse the text of a node file; raise HypographError naming the file on bad YAML."""
    m = FRONTMATTER_RE.match(raw)
    if not m:
        return Node(rel, {}, raw, raw, {})
    try:
        meta = _load(m.group(1))
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" (frontmatter line {mark.line + 1})" if mark else ""
        problem = getattr(e, "problem", None) or e
        raise HypographError(f"{rel}: frontmatter is not valid YAML{where}: {problem}") from None
    except RecursionError:
        raise HypographError(f"{rel}: frontmatter is nested too deeply to read") from None
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise HypographError(f"{rel}: frontmatter is not a mapping of fields")
    for key, value in meta.items():
        problem = data_problem(value)
        if problem or not isinstance(key, str):
            raise HypographError(f"{rel}: field {key!r}: {problem or 'a field name must be text'}")
    return Node(
        rel, meta, raw[m.end() :], raw, _deep_copy(meta), m.group(1), (raw[: m.start(1)], raw[m.end(1) : m.end()])
    )


def read_node(root: Path, rel: Path) -> Node:
    """The node at ``root / rel`` (a file the vault's scan found: a symlink in it stays inside the
    vault, so it is followed), at most ``MAX_NODE_BYTES``; errors are one line naming ``rel``."""
    return parse_node(read_utf8(root / rel, MAX_NODE_BYTES, str(rel)), rel)


def _deep_copy(value):
    if isinstance(value, dict):
        return {k: _deep_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_deep_copy(v) for v in value]
    return value


def link_target(link: Any) -> str | None:
    """The id a wiki-link points at: ``[[H-3 - Title]]`` and ``[[H-3]]`` -> ``H-3``; else None."""
    if not isinstance(link, str):
        return None
    m = LINK_RE.search(link)
    if not m:
        return None
    target = m.group(1).strip()
    fm = FILENAME_ID_RE.match(target)
    return fm.group(1) if fm else None


TITLE_BYTES = 180  # + "HC-NNNNNN - " + ".md" stays well under paths.MAX_NAME_BYTES


def clean_title(title: str, limit: int = 150, max_bytes: int = TITLE_BYTES) -> str:
    """A title safe as a filename and inside a wiki-link: illegal characters become ``-``,
    whitespace collapses, no leading/trailing dots or spaces, at most ``limit`` characters and
    ``max_bytes`` UTF-8 bytes (cut at the last word boundary when it keeps most of the text)."""
    cleaned = ILLEGAL_FILENAME_CHARS.sub("-", title)
    cleaned = re.sub(r"\s+", " ", cleaned).strip(" .")
    cut = cut_bytes(cleaned[:limit], max_bytes)
    if cut != cleaned:
        space = cut.rfind(" ")  # a word boundary, unless it would drop most of the text (CJK has none)
        cleaned = (cut[:space] if space >= len(cut) * 0.6 else cut).rstrip(" .")
    return cleaned or "Untitled"
