"""Mutation testing of the safety-critical modules (``make mutation``), with mutmut 3.

For each module in ``MODULES``: copy the checkout's files (tracked and new, not ignored) into
``.mutation/<module>/`` (files whose bytes did not change keep their mtime, so mutmut's cache of
earlier results stays valid), configure mutmut to mutate that one module and run only that
module's own fast tests, run it, and read back every mutant's outcome.

Prints, per module, the mutants killed / surviving / listed as equivalent and the score
``killed / (all - equivalent)``, then the diff of every surviving mutant that is not listed.
Equivalent mutants are the rows of the table in ``benchmarks/mutation.md`` whose first cell is a
mutant name in backticks (with the reason in the next cell); a listed mutant that no longer
survives is reported as stale. Exits 1 when a module's score is under ``TARGET``.

Usage::

    python benchmarks/mutation.py                      # every module
    python benchmarks/mutation.py hypograph/journal.py # one module (or several; a unique part of
    python benchmarks/mutation.py structure/checks     # the path is enough)
    python benchmarks/mutation.py --resume journal     # test only the last run's survivors again
    python benchmarks/mutation.py --jobs 1             # one mutant at a time
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
WORK = REPO / ".mutation"
NOTES = REPO / "benchmarks" / "mutation.md"
TARGET = 0.90

# module -> its own fast, in-process tests (a test in a subprocess runs the installed code, not
# the mutant, so it could not kill one; leaving those out keeps a run short on two cores).
MODULES: dict[str, list[str]] = {
    "hypograph/atomic.py": [
        "tests/core/shared/test_atomic_edges.py",
        "tests/core/structure/test_guarantees.py",
        "tests/core/structure/test_journal.py",
    ],
    "hypograph/journal.py": [
        "tests/core/structure/test_journal.py",
        "tests/core/structure/test_journal_edges.py",
        "tests/core/structure/test_guarantees.py",
    ],
    "hypograph/vault/mint.py": [
        "tests/core/structure/test_mint.py",
        "tests/core/structure/test_guarantees.py",
        "tests/core/structure/test_vault.py",
    ],
    "hypograph/structure/checks.py": ["tests/core/structure/test_structure_checks_rules.py"],
    "hypograph/structure/dispositions/merge.py": ["tests/core/structure/test_merge_bookkeeping.py"],
    "hypograph/structure/unmerge.py": [
        "tests/core/structure/test_unmerge.py",
        "tests/core/structure/test_guarantees.py",
    ],
    "hypograph/llm/client.py": [
        "tests/core/shared/test_llm_client.py",
        "tests/core/shared/test_llm_edges.py",
        "tests/core/shared/test_llm_hostile.py",
    ],
    "hypograph/llm/config.py": ["tests/core/shared/test_llm_client.py", "tests/core/shared/test_llm_edges.py"],
    "hypograph/case/batch.py": [
        "tests/core/case/test_case_registry.py",
        "tests/core/case/test_case_package.py",
        "tests/core/case/test_case_builder.py",
        "tests/core/case/test_case_recovery.py",
    ],
    "hypograph/case/publish.py": [
        "tests/core/case/test_case_registry.py",
        "tests/core/case/test_case_recovery.py",
        "tests/core/case/test_case_package.py",
    ],
    "hypograph/case/checks.py": ["tests/core/case/test_case_checks_rules.py"],
}
# Besides the package under test, what the tests import or read.
ALSO_COPY = [".gitignore", "assets", "resources", "io_managers", "pipelines", "examples", "config", "workspace.yaml"]
MUTANT_RE = re.compile(r"^\|\s*`(hypograph\.[\w.]+__mutmut_\d+)`\s*\|\s*(.+?)\s*\|", re.M)
KILLED = {"killed", "timeout", "caught by type check", "segfault"}


@dataclass
class Outcome:
    module: str
    status: dict[str, str] = field(default_factory=dict)  # mutant -> mutmut status
    seconds: float = 0.0

    def killed(self) -> list[str]:
        return [m for m, s in self.status.items() if s in KILLED]

    def alive(self) -> list[str]:
        return [m for m, s in self.status.items() if s not in KILLED]


def listed_equivalents(notes: Path = NOTES) -> dict[str, str]:
    """{mutant name: why it is equivalent} from the notes' table."""
    return dict(MUTANT_RE.findall(notes.read_text(encoding="utf-8"))) if notes.exists() else {}


def project_files() -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", "-z", "-co", "--exclude-standard"], cwd=REPO, check=True, capture_output=True
    ).stdout
    return [f for f in out.decode().split("\0") if f and (REPO / f).is_file()]


def sync(dst: Path) -> None:
    """Copy the project into ``dst``, rewriting only files whose bytes changed (and removing the
    Python files the project no longer has)."""
    files = project_files()
    keep = set(files)
    for gone in [
        p
        for p in dst.rglob("*.py")
        if "mutants" not in p.relative_to(dst).parts and str(p.relative_to(dst)) not in keep
    ]:
        gone.unlink()
    for rel in files:
        src, out = REPO / rel, dst / rel
        data = src.read_bytes()
        if not out.exists() or out.read_bytes() != data:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(data)


def configure(dst: Path, module: str, tests: list[str]) -> None:
    """Append a ``[tool.mutmut]`` table for ``module`` to the copy's pyproject.toml."""

    def toml_list(items):
        return "[" + ", ".join(f'"{x}"' for x in items) + "]"

    text = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    text += (
        "\n[tool.mutmut]\n"
        f'source_paths = ["hypograph"]\n'
        f"only_mutate = {toml_list([module])}\n"
        f"pytest_add_cli_args_test_selection = {toml_list(tests)}\n"
        f'pytest_add_cli_args = ["-p", "no:cacheprovider"]\n'
        f"also_copy = {toml_list(ALSO_COPY)}\n"
        "use_git_change_detection = false\n"
    )
    path = dst / "pyproject.toml"
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")


def mutmut(dst: Path, *args: str, log=None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": ""}  # the copy, not the editable install, is what is imported
    return subprocess.run(
        [sys.executable, "-m", "mutmut", *args],
        cwd=dst,
        env=env,
        text=True,
        stdout=log or subprocess.PIPE,
        stderr=subprocess.STDOUT,
        check=False,  # its exit status says nothing the results do not
    )


def results(dst: Path, module: str) -> dict[str, str]:
    """{mutant: status} of ``module`` from mutmut's last run in ``dst`` (empty before any run)."""
    if not (dst / "mutants").is_dir():
        return {}
    prefix = module.removesuffix(".py").replace("/", ".") + "."
    out = {}
    for line in mutmut(dst, "results", "--all", "true").stdout.splitlines():
        name, _, status = line.strip().rpartition(": ")
        if name.startswith(prefix):
            out[name] = status
    return out


def run_module(module: str, jobs: int, resume: bool) -> Outcome:
    """Mutate ``module`` in its own copy; with ``resume``, test again only the mutants that were
    not killed last time (the loop while adding tests), else every mutant afresh."""
    dst = WORK / module.removesuffix(".py").replace("/", ".")
    again = [m for m, s in results(dst, module).items() if s not in KILLED] if resume else None
    if not resume and dst.exists():
        shutil.rmtree(dst)
    sync(dst)
    configure(dst, module, MODULES[module])
    started = time.monotonic()
    if again is None or again:
        _run(dst, module, jobs, again)
    outcome = Outcome(module, results(dst, module), seconds=time.monotonic() - started)
    if not outcome.status or all(s == "not checked" for s in outcome.status.values()):
        raise SystemExit(
            f"mutation: {module}: mutmut checked no mutant (do its tests pass?); see {dst / 'mutmut-run.log'}"
        )
    return outcome


def _run(dst: Path, module: str, jobs: int, again: list[str] | None) -> None:
    """``mutmut run`` in ``dst``: every mutant, or only those of ``again``."""
    with open(dst / "mutmut-run.log", "w") as log:
        mutmut(dst, "run", "--max-children", str(jobs), *(again or []), log=log)
        # A changed test selection makes mutmut forget earlier verdicts: test those too.
        unchecked = [m for m, s in results(dst, module).items() if s == "not checked"]
        if again and unchecked:
            mutmut(dst, "run", "--max-children", str(jobs), *unchecked, log=log)


def show(module: str, mutant: str) -> str:
    dst = WORK / module.removesuffix(".py").replace("/", ".")
    return mutmut(dst, "show", mutant).stdout


def report(outcomes: list[Outcome], equivalent: dict[str, str]) -> bool:
    """Print the table and the unexplained survivors; True when every module meets the target."""
    ok = True
    print(f"\n{'module':45} {'mutants':>7} {'killed':>6} {'equiv':>5} {'alive':>5} {'score':>6} {'time':>6}")
    for o in outcomes:
        eq = [m for m in o.alive() if m in equivalent]
        real = len(o.status) - len(eq)
        score = len(o.killed()) / real if real else 1.0
        ok &= score >= TARGET
        print(
            f"{o.module:45} {len(o.status):7} {len(o.killed()):6} {len(eq):5} {len(o.alive()) - len(eq):5} "
            f"{score:6.1%} {o.seconds:5.0f}s"
        )
    for o in outcomes:
        unexplained = [m for m in o.alive() if m not in equivalent]
        mine = [m for m in equivalent if m.startswith(o.module.removesuffix(".py").replace("/", ".") + ".")]
        stale = [m for m in mine if o.status.get(m, "gone") in KILLED | {"gone"}]
        for m in unexplained:
            print(f"\n--- surviving ({o.status[m]}): {m}\n{show(o.module, m).rstrip()}")
        for m in stale:
            print(f"\nstale entry in {NOTES.name}: {m} is {o.status.get(m, 'no longer a mutant')}")
    print(f"\ntarget: >= {TARGET:.0%} of non-equivalent mutants killed in every module: {'met' if ok else 'NOT met'}")
    return ok


def resolve(name: str, parser: argparse.ArgumentParser) -> str:
    """A module of ``MODULES`` by its path, or by a unique part of it (``journal``, ``llm/client``)."""
    found = [m for m in MODULES if m == name] or [m for m in MODULES if name in m]
    if len(found) != 1:
        parser.error(
            f"{name!r} names {len(found)} of the modules under mutation testing: "
            f"{', '.join(found) or ', '.join(MODULES)}"
        )
    return found[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("modules", nargs="*", help=f"modules to mutate (default: all {len(MODULES)})")
    parser.add_argument("--jobs", type=int, default=2, help="mutants tested at once (default 2)")
    parser.add_argument(
        "--resume",
        action="store_true",
        help="keep the last run's kills and test again only its survivors (fast, while adding tests)",
    )
    args = parser.parse_args(argv)
    modules = [resolve(m, parser) for m in args.modules] or list(MODULES)
    outcomes = []
    for module in modules:
        print(f"mutation: {module} ...", flush=True)
        outcomes.append(run_module(module, args.jobs, args.resume))
    return 0 if report(outcomes, listed_equivalents()) else 1


if __name__ == "__main__":
    sys.exit(main())
