"""A published batch into a vault: ``hypograph batch CASE_DIR --into VAULT``.

Each accepted hypothesis becomes a step-3 H node (``type: hypothesis``, ``statement`` = its
mechanism, ``question`` = the case's question), so proximity and structure treat it like any
extracted hypothesis. Its origin is the registry creation: ``source`` links one S node minted
for the batch (``source_type: case-hypothesis-batch``, the registry's path and sha256) and
``locator`` is the creation's JSON pointer in registry.json; ``case_creation`` names
(package, revision, H id). Ids are minted by ``create_node`` under the vault lock. A node whose
``case_creation`` is already in the vault (in any folder, merged or dropped included) is never
minted again, so re-running, or running after a crash half-way, mints only what is missing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from hypograph.case.batch import paths
from hypograph.case.checks import run_checks
from hypograph.case.package import TARGET_VAULT, CasePackage
from hypograph.case.rules import describe
from hypograph.errors import HypographError, NotDone
from hypograph.ids import numbered_key
from hypograph.vault.mint import create_node
from hypograph.vault.vault import open_vault, require_vault


@dataclass
class MintReport:
    vault: Path
    source_id: str = ""
    minted: list[tuple[str, str]] = field(default_factory=list)  # (case H id, vault node id)
    existing: list[tuple[str, str]] = field(default_factory=list)

    def line(self) -> str:
        return (
            f"{self.vault}: {len(self.minted)} H nodes minted, {len(self.existing)} already there "
            f"(batch source {self.source_id})"
        )


def mint_batch(case_dir: Path | str, vault_root: Path | str | None = None) -> MintReport:
    """Mint the current revision's published batch into ``vault_root`` (idempotent), default the
    package's ``target_vault``; the vault minted into is recorded as the target. No model needed."""
    pkg = CasePackage(Path(case_dir))
    with pkg.lock():
        pkg.roll_forward()
        m = pkg.manifest()
        rev = m["analysis_revision"]
        p = paths(rev)
        if not (pkg.root / p["hypothesis_registry"]).exists():
            raise NotDone(f"{pkg.root / p['hypothesis_registry']}: no published batch for revision {rev} yet")
        bad = {k: v for k, v in run_checks(pkg, rev).items() if v}
        if bad:
            raise HypographError(
                f"{pkg.root}: the batch fails its checks, not minting: "
                + "; ".join(f"{k}: {describe(v, 3)}" for k, v in bad.items())
            )
        vault = Path(vault_root).resolve() if vault_root is not None else pkg.target_vault(m)
        if vault is None:
            raise NotDone(
                f"{pkg.root / 'manifest.json'}: no vault to mint into: the case names no target_vault "
                "and none was given"
            )
        require_vault(vault, "the vault to mint into")  # before anything is written in it
        hyp_doc, context = pkg.read_json(p["hypotheses"]), pkg.read_json(p["hypothesis_context"])
        report = _mint(pkg, vault, m["package_id"], rev, hyp_doc, context)
        if m.get(TARGET_VAULT) != str(vault):  # later mints, and the Dagster asset, find it without config
            pkg.write({}, {**m, TARGET_VAULT: str(vault), "package_generation": m["package_generation"] + 1})
        return report


def _mint(pkg: CasePackage, root: Path, package_id: str, rev: int, hyp_doc: dict, context: dict) -> MintReport:
    vault = open_vault(root)
    key = f"{package_id}/{numbered_key(rev)}"
    report = MintReport(root)
    registry_path = paths(rev)["hypothesis_registry"]
    source = next((n for n in vault.of_type("source") if n.meta.get("case_batch") == key), None)
    if source is None:
        report.source_id, rel = create_node(
            root,
            "source",
            f"Case batch {package_id} revision {rev}",
            {
                "source_type": "case-hypothesis-batch",
                "case_batch": key,
                "case_package": package_id,
                "registry": registry_path,
                "registry_sha256": pkg.sha(registry_path),
            },
            f"Initial hypotheses of case package {package_id}, analysis revision {rev}: possible causes, "
            "untested. Each H node minted from it points at its registry creation.\n",
        )
        link = f"[[{rel.stem}]]"
    else:
        report.source_id, link = source.id, source.link
    minted = {n.meta.get("case_creation"): n.id for n in vault.of_type("hypothesis") if n.meta.get("case_creation")}
    for i, h in enumerate(hyp_doc["hypotheses"]):
        creation = f"{key}/{h['id']}"
        if creation in minted:
            report.existing.append((h["id"], minted[creation]))
            continue
        node_id, _ = create_node(
            root,
            "hypothesis",
            h["title"],
            {
                "statement": " ".join(h["mechanism"].split()),
                "question": context["question"],
                "source": link,
                "locator": f"{registry_path}#/creations/{i}",
                "case_creation": creation,
                "case_role": h["role"],
            },
            _body(h, context, vault),
        )
        report.minted.append((h["id"], node_id))
    return report


def _body(h: dict, context: dict, vault) -> str:
    """The record's prose; a cited source that is a node of this vault becomes a wiki-link."""

    def cite(sid: str) -> str:
        node = vault.nodes.get(sid)
        return node.link if node is not None else sid

    statements = {s["alias"]: s["text"] for s in context["statements"]}
    lines = [
        f"**rationale** - {h['rationale']}",
        "",
        f"**distinction** - {h['distinction']}",
        "",
        "**cites** - " + ", ".join(cite(s) for s in h["source_ids"]),
        "",
        "**explains** - " + "; ".join(f"{a}: {statements.get(a, '?')}" for a in h["interpretation_ids"]),
        "",
    ]
    for key in ("expected_evidence", "falsifying_evidence", "open_questions"):
        lines += [f"**{key}**", *[f"- {x}" for x in h[key]], ""]
    return "\n".join(lines)
