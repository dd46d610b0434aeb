"""The golden outputs: what the ``hypograph`` commands write on the example inputs and the two shared
vaults, pinned byte for byte (issue 31: "every output file is byte-identical to before the change").

    .venv/bin/python tests/record_golden.py               # re-record with the installed `hypograph`
    .venv/bin/python tests/record_golden.py --code DIR    # record with another checkout's code, e.g.
                                                          # a `git worktree add /tmp/base <commit>`

Either writes ``tests/data/golden_outputs.json``; ``tests/test_golden_outputs.py`` runs the same
commands (``CASES`` below, the one list both use) with the installed ``hypograph`` console script
on fresh copies and compares. Re-record only for an intended change of the outputs, name it in the
commit, and record from the commit before the change (``--code``) when a refactoring must prove
it changed no byte.

Each case copies its inputs to ``<workdir>/<label>`` (the folder name is the input's partition key,
so it is the same in every run), runs its commands one after another offline (``HYPOGRAPH_LLM=
offline``, ``HF_HUB_OFFLINE=1``, every other ``HYPOGRAPH_*``/``OPENAI_*``/``DAGSTER_*`` variable
removed) on a Dagster instance of its own (``<workdir>/dagster-home``, outside the copies, so none
of its run ids or timestamps is recorded), then records, for every file under each copy — the
untouched inputs too, so a deleted or rewritten input shows — its relative path and sha256, and
each command's exit code and stdout.

Found by running every case twice and diffing the records, and by looking for the run's date and
the copies' paths in what the commands write:

* normalised before hashing, so the file stays pinned:
  - the copy's absolute path, written as ``{<label>}``: it is where the test put the copy, not an
    output (``.hypograph/assets/hypothesis_texts.json``'s ``root``, the case manifest's
    ``target_vault``, the paths the commands print);
  - a ``generated: YYYY-MM-DD`` line, written as ``generated: <date>``: the day of the run
    (``agent-notes/structure.md``);
  - the ``folder DEVICE:INODE`` line of ``.hypograph/input-id``, left out: where the copy sits on
    this disk, which tells a copy from its original;
* left out (``EXCLUDED``): lock files, ``*.lock`` — ``.hypograph/structure.lock`` holds the pid, the
  host and the start time of the run that took it; ``.create_node.lock`` and
  ``.hypograph/case.lock`` are empty files whose presence is how the locking works, not an output.

The PNG pictures and ``embeddings.npz`` are pinned: they are byte-stable run to run, but follow the
versions of matplotlib, numpy and the other libraries in ``ENVIRONMENT`` (recorded beside the
digests; the test names any that differ when it fails). The pictures (``PICTURES``: the PNGs and
``report.html``) also follow the processor: the map's layout iterates from a truncated SVD whose
last bits depend on the BLAS kernels the CPU gets, so on another processor than the recording's
(``cpu``) the test compares their presence only, and says so.
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
SHARED_VAULTS = REPO / "tests" / "fixtures" / "vaults"  # copies of ../shared/examples/vaults
GOLDEN = REPO / "tests" / "data" / "golden_outputs.json"

REMOVED_ENV_PREFIXES = ("HYPOGRAPH_", "OPENAI_", "DAGSTER_")  # models, endpoints, executors, instances
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HYPOGRAPH_LLM": "offline"}
PICTURES = re.compile(r"(\.png|/report\.html)$")  # pinned on the recording's processor only
EXCLUDED = re.compile(r"(^|/)[^/]*\.lock$")  # lock files: see the module docstring
DATE_LINE = re.compile(rb"^generated: \d{4}-\d{2}-\d{2}$", re.M)
FOLDER_LINE = re.compile(rb"^folder \d+:\d+\n", re.M)  # input-id: the copy's device and inode
# The libraries whose versions the pinned bytes follow (pictures, arrays, JSON, YAML, clustering).
ENVIRONMENT = (
    "dagster",
    "igraph",
    "matplotlib",
    "numpy",
    "orjson",
    "plotly",
    "python-frontmatter",
    "pyyaml",
    "scikit-learn",
    "scipy",
)


@dataclass(frozen=True)
class Case:
    """Inputs copied to ``<workdir>/<label>``, then ``commands`` (``hypograph`` arguments, where
    ``{label}`` is that copy's path) run one after another."""

    name: str
    inputs: dict[str, Path]
    commands: tuple[tuple[str, ...], ...]

    def missing(self) -> list[Path]:
        return [src for src in self.inputs.values() if not src.is_dir()]


CASES = (
    Case("run", {"run": EXAMPLES / "run"}, (("proximity", "{run}"), ("report", "{run}"))),
    Case("vault", {"vault": EXAMPLES / "vault"}, (("structure", "{vault}", "--llm", "offline"),)),
    *(
        Case(
            name,
            {"vault": SHARED_VAULTS / name},
            (("proximity", "{vault}"), ("structure", "{vault}", "--llm", "offline")),
        )
        for name in ("covid1", "eggs1")
    ),
    Case(
        "library",
        {"library": EXAMPLES / "library"},
        (("library", "{library}", "--report"), ("library", "{library}", "--check")),
    ),
    # A published batch is reused (no model), then minted into a copy of the example vault.
    Case(
        "case",
        {"case": EXAMPLES / "case", "vault": EXAMPLES / "vault"},
        (("batch", "{case}"), ("batch", "{case}", "--into", "{vault}")),
    ),
)


# -- running --------------------------------------------------------------------------------------


def installed_hypograph() -> list[str]:
    """The ``hypograph`` console script beside this Python (the venv's: the code it is installed from)."""
    script = Path(sys.executable).with_name("hypograph")
    if not script.exists():
        raise SystemExit(f"{script}: missing; run this with the venv's python (.venv/bin/python)")
    return [str(script)]


def checkout_hypograph(code: Path) -> tuple[list[str], dict[str, str]]:
    """``hypograph`` as ``code``'s pyproject.toml defines it, run from ``code`` (not the editable
    install), with an assertion that the entry module came from there."""
    code = code.resolve()
    entry = tomllib.loads((code / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]["hypograph"]
    module, func = entry.split(":")
    prog = (
        f"import sys; sys.path.insert(0, {str(code)!r}); import {module} as m; "
        f"assert m.__file__.startswith({str(code) + os.sep!r}), m.__file__; sys.argv[0] = 'hypograph'; "
        f"sys.exit(m.{func}())"
    )
    return [sys.executable, "-c", prog], {"PYTHONPATH": str(code)}


def _normalise(data: bytes, roots: dict[str, Path]) -> bytes:
    for label, root in sorted(roots.items(), key=lambda item: -len(str(item[1]))):
        data = data.replace(str(root).encode(), b"{" + label.encode() + b"}")
    return FOLDER_LINE.sub(b"", DATE_LINE.sub(b"generated: <date>", data))


def digests(roots: dict[str, Path]) -> dict[str, str]:
    """``<label>/<relative path>`` -> sha256 of every file under each copy but ``EXCLUDED`` ones,
    normalised (see the module docstring)."""
    out = {}
    for label, root in roots.items():
        for path in sorted(root.rglob("*")):
            rel = f"{label}/{path.relative_to(root).as_posix()}"
            if path.is_file() and not EXCLUDED.search(rel):
                out[rel] = hashlib.sha256(_normalise(path.read_bytes(), roots)).hexdigest()
    return out


def run_case(case: Case, workdir: Path, hypograph: list[str] | None = None, env: dict | None = None) -> dict:
    """Copy the case's inputs under ``workdir`` (empty or new), run its commands with ``hypograph``
    (default: the installed console script) and return its record: ``commands`` (argument line,
    exit code, stdout) and ``files`` (``digests``)."""
    workdir = Path(workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    roots = {label: Path(shutil.copytree(src, workdir / label)) for label, src in case.inputs.items()}
    environ = {k: v for k, v in os.environ.items() if not k.startswith(REMOVED_ENV_PREFIXES)}
    environ |= OFFLINE_ENV | (env or {}) | {"DAGSTER_HOME": str(workdir / "dagster-home")}
    commands = []
    for command in case.commands:
        argv = [arg.format(**{label: str(root) for label, root in roots.items()}) for arg in command]
        proc = subprocess.run(
            (hypograph or installed_hypograph()) + argv,
            capture_output=True,
            env=environ,
            cwd=workdir,
            check=False,
        )
        entry = {
            "argv": " ".join(command),
            "exit": proc.returncode,
            "stdout": _normalise(proc.stdout, roots).decode("utf-8", "replace"),
        }
        if proc.returncode != 0:  # not recorded (timings, tracebacks): shown when a test fails
            entry["stderr"] = proc.stderr.decode("utf-8", "replace")[-3000:]
        commands.append(entry)
    return {"commands": commands, "files": digests(roots)}


def run_cases(
    cases: Iterable[Case], workdir: Path, hypograph: list[str] | None = None, env: dict | None = None
) -> dict[str, dict]:
    """``run_case`` for each case under ``workdir/<name>``, two at a time (each its own copies and
    instance; the outputs do not depend on the order)."""
    cases = list(cases)
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {c.name: pool.submit(run_case, c, Path(workdir) / c.name, hypograph, env) for c in cases}
        return {name: future.result() for name, future in futures.items()}


def _cpu() -> str:
    """The processor's model name: BLAS picks its kernels by it, and their last bits move the map's points."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "unknown"
    names = (line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("model name"))
    return next(names, "unknown")


def environment() -> dict[str, str]:
    versions = {"python": ".".join(map(str, sys.version_info[:3])), "cpu": _cpu()}
    for name in ENVIRONMENT:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "absent"
    return versions


# -- comparing ------------------------------------------------------------------------------------


def differences(expected: dict, actual: dict, pictures: bool = True) -> list[str]:
    """What differs between two records of one case, one line (or a stdout diff) per difference;
    ``pictures=False`` leaves the bytes of ``PICTURES`` out (their presence still counts)."""
    lines = []
    want, got = expected["files"], actual["files"]
    lines += [f"missing: {rel}" for rel in sorted(want.keys() - got.keys())]
    lines += [f"new:     {rel}" for rel in sorted(got.keys() - want.keys())]
    lines += [
        f"differs: {rel}"
        for rel in sorted(want.keys() & got.keys())
        if want[rel] != got[rel] and (pictures or not PICTURES.search(rel))
    ]
    if [c["argv"] for c in expected["commands"]] != [c["argv"] for c in actual["commands"]]:
        lines.append("the commands differ from the recorded ones: re-record")
    for old, new in zip(expected["commands"], actual["commands"], strict=False):
        where = f"`hypograph {old['argv']}`"
        if old["exit"] != new["exit"]:
            lines.append(f"{where}: exit {new['exit']}, recorded {old['exit']}")
        if new.get("stderr"):
            lines.append(f"{where} stderr (end):\n{new['stderr']}")
        if old["stdout"] != new["stdout"]:
            diff = difflib.unified_diff(
                old["stdout"].splitlines(), new["stdout"].splitlines(), "recorded", "now", lineterm="", n=1
            )
            lines.append(f"{where} stdout differs:\n" + "\n".join(diff))
    return lines


# -- recording ------------------------------------------------------------------------------------


def _commit(code: Path) -> str:
    proc = subprocess.run(["git", "-C", str(code), "rev-parse", "HEAD"], capture_output=True, text=True, check=False)
    return proc.stdout.strip() or "unknown"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--code", type=Path, default=None, help="a checkout whose code to record (default: installed)")
    p.add_argument("--out", type=Path, default=GOLDEN, help=f"where to write (default {GOLDEN.relative_to(REPO)})")
    args = p.parse_args(argv)
    missing = [str(src) for case in CASES for src in case.missing()]
    if missing:
        raise SystemExit(f"inputs missing: {', '.join(missing)}")
    hypograph, env = checkout_hypograph(args.code) if args.code else (installed_hypograph(), {})
    with tempfile.TemporaryDirectory(prefix="golden-") as tmp:
        cases = run_cases(CASES, Path(tmp), hypograph, env)
    failed = [f"{name}: `hypograph {c['argv']}` exit {c['exit']}" for name, r in cases.items() for c in r["commands"]]
    failed = [line for line in failed if not line.endswith("exit 0")]
    if failed:  # every command of these cases succeeds; a failure is recorded by nobody
        raise SystemExit("not recorded, commands failed:\n" + "\n".join(failed))
    record = {
        "recorded_from": _commit(args.code or REPO),
        "environment": environment(),
        "cases": cases,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    counts = ", ".join(f"{name} {len(r['files'])}" for name, r in cases.items())
    print(f"wrote {args.out}: files pinned per case: {counts}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
