"""A typed view of a node's fields, and the one place step 4 names the fields it writes.

``NodeView(node)`` reads ``node.meta`` live (it holds the node, not a copy), so a view taken before
a write sees the write. Each property returns the field as the vault holds it, or the id a link
field points at (``*_id`` / ``*_ids``): the view never coerces a malformed value, so a check can
still report exactly what is there. The file format is the writer's (``Node.text``): the view only
reads, and the functions below it change ``meta`` the way step 4 always has, key by key.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hypograph.vault.nodes import Node, link_target

# The fields step 4 writes on a hypothesis (check 6 reads them for numbers).
STEP4_FIELDS = (
    "state",
    "cluster",
    "merged_into",
    "merged_from",
    "additional_sources",
    "generalization_note",
    "drop_reason",
    "residual",
    "origin",
)
CONSTRUCTED = "step-4-constructed"  # ``origin`` of a member 4b constructed (a complement)
RESIDUAL = "step-4-residual"  # ``origin`` of a cluster's residual catch-all


def _targets(value: Any) -> list[str]:
    """The ids a link list (or a single link) points at, in order; non-links left out."""
    if isinstance(value, str):
        value = [value]
    return [t for t in (link_target(v) for v in (value or [])) if t]


@dataclass(frozen=True, slots=True)
class NodeView:
    """Typed, read-only access to one node's fields (hypothesis or cluster)."""

    node: Node

    @property
    def id(self) -> str:
        return self.node.id

    # -- a hypothesis's state --------------------------------------------------------------------

    @property
    def state(self) -> Any:
        """``state`` as written (None when the field is absent; any other value is a problem)."""
        return self.node.meta.get("state")

    @property
    def active(self) -> bool:
        return self.state == "active"

    @property
    def merged(self) -> bool:
        return self.state == "merged"

    @property
    def dropped(self) -> bool:
        return self.state == "dropped"

    @property
    def open(self) -> bool:
        """Active, or not yet dispositioned (no ``state``)."""
        return self.state in (None, "active")

    @property
    def has_state(self) -> bool:
        return "state" in self.node.meta

    @property
    def drop_reason(self) -> Any:
        return self.node.meta.get("drop_reason")

    # -- merges --------------------------------------------------------------------------------

    @property
    def merged_into(self) -> Any:
        return self.node.meta.get("merged_into")

    @property
    def merged_into_id(self) -> str | None:
        return link_target(self.merged_into)

    @property
    def merged_from(self) -> Any:
        return self.node.meta.get("merged_from")

    @property
    def merged_from_ids(self) -> list[str]:
        """The ids ``merged_from`` links to (a single link counts as a list of one)."""
        return _targets(self.merged_from)

    @property
    def merged_from_list_ids(self) -> list[str]:
        """The ids of ``merged_from`` when it is a list (anything else names none)."""
        merged_from = self.merged_from
        return _targets(merged_from) if isinstance(merged_from, list) else []

    # -- provenance ------------------------------------------------------------------------------

    @property
    def source(self) -> Any:
        return self.node.meta.get("source")

    @property
    def source_id(self) -> str | None:
        return link_target(self.source)

    @property
    def additional_sources(self) -> Any:
        return self.node.meta.get("additional_sources")

    @property
    def additional_source_ids(self) -> list[str]:
        return _targets(self.additional_sources)

    @property
    def locator(self) -> Any:
        return self.node.meta.get("locator")

    @property
    def statement(self) -> Any:
        return self.node.meta.get("statement")

    @property
    def question(self) -> Any:
        return self.node.meta.get("question")

    @property
    def generalization_note(self) -> Any:
        return self.node.meta.get("generalization_note")

    # -- step 4's own members ----------------------------------------------------------------------

    @property
    def origin(self) -> Any:
        """``origin``: set only on hypotheses minted at step 4 (``CONSTRUCTED``, ``RESIDUAL``)."""
        return self.node.meta.get("origin")

    @property
    def minted(self) -> bool:
        """Minted at step 4 (a residual or a constructed member), not stated by a paper."""
        return bool(self.origin)

    @property
    def constructed(self) -> bool:
        return self.origin == CONSTRUCTED

    @property
    def residual(self) -> bool:
        """``residual: true`` exactly (the seed's flag; any other value is no residual)."""
        return self.node.meta.get("residual") is True

    @property
    def cluster(self) -> Any:
        """A hypothesis's backlink to its cluster, as written."""
        return self.node.meta.get("cluster")

    @property
    def cluster_id(self) -> str | None:
        return link_target(self.cluster)

    # -- a cluster (HC) node -------------------------------------------------------------------------

    @property
    def hypotheses(self) -> Any:
        """An HC's member links, as written."""
        return self.node.meta.get("hypotheses")

    @property
    def member_ids(self) -> list[str]:
        """The ids an HC's ``hypotheses`` links to, in order (non-links left out)."""
        return _targets(self.hypotheses)

    @property
    def listed_ids(self) -> list[str | None]:
        """One entry per listed member link: its id, or None where it is no link."""
        return [link_target(link) for link in self.hypotheses or []]

    @property
    def exhaustive(self) -> bool:
        return self.node.meta.get("exhaustive_by_construction") is True

    @property
    def exclusivity(self) -> Any:
        return self.node.meta.get("exclusivity")

    @property
    def independence(self) -> Any:
        return self.node.meta.get("independence")

    @property
    def has_depends_on(self) -> bool:
        return "depends_on" in self.node.meta

    @property
    def has_exhaustive_field(self) -> bool:
        return "exhaustive_by_construction" in self.node.meta

    def values(self, keys: tuple[str, ...]) -> dict[str, Any]:
        """``keys`` -> the field's value (None where absent): the fields a prompt shows a model."""
        return {k: self.node.meta.get(k) for k in keys}

    def step4_values(self) -> list[tuple[str, Any]]:
        """(field, value) of every field step 4 owns on this node: a hypothesis's ``STEP4_FIELDS``
        (None where absent); every field of a cluster but ``type`` and ``id``."""
        meta = self.node.meta
        if self.node.type == "hypothesis-cluster":
            return [(k, v) for k, v in meta.items() if k not in ("type", "id")]
        return [(k, meta.get(k)) for k in STEP4_FIELDS]


# -- the writer: every field step 4 changes on an existing node, changed here ---------------------


def set_active(node: Node) -> None:
    node.meta["state"] = "active"


def set_merged(node: Node, survivor_link: str) -> None:
    """``state: merged`` and the one-hop ``merged_into`` link."""
    node.meta["state"] = "merged"
    node.meta["merged_into"] = survivor_link


def set_dropped(node: Node, reason: str) -> None:
    """``state: dropped`` with its reason; a ``merged_into`` is kept as ``former_merged_into``."""
    node.meta["state"] = "dropped"
    node.meta["drop_reason"] = reason
    if "merged_into" in node.meta:
        node.meta["former_merged_into"] = node.meta.pop("merged_into")


def restore_active(node: Node) -> None:
    """An absorbed node made active again (``hypograph unmerge``): its ``merged_into`` goes."""
    node.meta["state"] = "active"
    node.meta.pop("merged_into", None)


def set_cluster(node: Node, cluster_link: str) -> None:
    node.meta["cluster"] = cluster_link


def clear_cluster(node: Node) -> None:
    node.meta.pop("cluster", None)


def set_provenance(node: Node, merged_from: list, additional_sources: list | None, locator: list) -> None:
    """A survivor's ``merged_from``, ``additional_sources`` (left as it is when None) and ``locator``."""
    node.meta["merged_from"] = merged_from
    if additional_sources is not None:
        node.meta["additional_sources"] = additional_sources
    node.meta["locator"] = locator


def set_merged_from(node: Node, merged_from: list) -> None:
    node.meta["merged_from"] = merged_from


def set_additional_sources(node: Node, sources: list) -> None:
    node.meta["additional_sources"] = sources


def set_locator(node: Node, locator: Any) -> None:
    node.meta["locator"] = locator


def set_statement(node: Node, statement: Any) -> None:
    node.meta["statement"] = statement


def widen(node: Node, statement: str, note: Any) -> None:
    """The group's widened statement and the note that says why."""
    node.meta["statement"] = statement
    node.meta["generalization_note"] = note


def remove_fields(node: Node, *keys: str) -> None:
    for key in keys:
        node.meta.pop(key, None)


def map_text(node: Node, change: Callable[[str], str]) -> None:
    """Every text field, and every text item of a list field, replaced by ``change`` of it."""
    for key, value in list(node.meta.items()):
        if isinstance(value, str):
            node.meta[key] = change(value)
        elif isinstance(value, list):
            node.meta[key] = [change(v) if isinstance(v, str) else v for v in value]


def set_members_field(hc: Node, links: list[str]) -> None:
    hc.meta["hypotheses"] = links


def set_depends_on(hc: Node, notes: list[str]) -> None:
    hc.meta["depends_on"] = notes


# -- the fields of a hypothesis 4b mints --------------------------------------------------------


def minted_member_meta(statement: Any, question: Any, cluster_link: str, *, residual: bool) -> dict[str, Any]:
    """A new cluster member's fields in the order the vault writes them: a residual
    (``residual: true``, origin ``RESIDUAL``) or a constructed complement (origin ``CONSTRUCTED``)."""
    meta: dict[str, Any] = {
        "statement": statement,
        "question": question,
        "source": None,
        "locator": None,
        "state": "active",
        "cluster": cluster_link,
    }
    if residual:
        meta["residual"] = True
    meta["origin"] = RESIDUAL if residual else CONSTRUCTED
    return meta
