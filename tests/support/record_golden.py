"""The golden outputs: what the ``hypograph`` commands write on the example inputs and the two shared
vaults, pinned byte for byte (issue 31: "every output file is byte-identical to before the change").

    .venv/bin/python tests/support/record_golden.py               # re-record with the installed `hypograph`
    .venv/bin/python tests/support/record_golden.py --code DIR    # record with another checkout's code, e.g.
                                                          # a `git worktree add /tmp/base <commit>`

Either writes ``tests/data/golden_outputs.json``; ``tests/cli/test_golden_outputs.py`` runs the same
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

The pictures (``PICTURES``: the PNGs and ``report.html``) are pinned by what they show, not by
their bytes (``shown``): a PNG by its signature, pixel size, bit depth and colour type; the page by
its text with each figure's data decoded (plotly writes arrays as base64 typed arrays) and every
number rounded to ``SHOWN_DECIMALS`` decimals — the points' coordinates (in [-1, 1]: 1e-4 is a
tenth of a pixel on a 1,000-pixel map), the labels, the hover texts, the legend, the sweep. The
PNGs are drawn from those same figures (``hypograph.report``: one MapPicture and its placed labels
make the map's PNG and its page figure), so the page pins what the PNGs show. Their bytes would
follow the rasteriser and the compressor, which nothing here can prove the same on every machine.
The map's layout itself starts from rounded numbers (``hypograph.report.layout.START_DECIMALS``),
so the BLAS kernels a processor gets and its thread count do not move a point; no comparison
depends on the processor (``test_golden_outputs.py`` runs the commands with other BLAS kernels,
one thread, another ``TMPDIR`` and ``PYTHONHASHSEED`` than the recording's: ``OTHER_MACHINE``). ``embeddings.npz`` and
the other arrays are pinned by bytes: they follow only the versions of numpy, scipy and the other
libraries in ``ENVIRONMENT`` (recorded beside the digests; the test names any that differ when it fails).
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

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
SHARED_VAULTS = REPO / "tests" / "fixtures" / "vaults"  # copies of ../shared/examples/vaults
GOLDEN = REPO / "tests" / "data" / "golden_outputs.json"

REMOVED_ENV_PREFIXES = ("HYPOGRAPH_", "OPENAI_", "DAGSTER_")  # models, endpoints, executors, instances
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HYPOGRAPH_LLM": "offline"}
PICTURES = re.compile(r"(\.png|/report\.html)$")  # pinned by what they show: ``shown``
SHOWN_DECIMALS = 4  # the precision a picture's numbers are compared at (see the module docstring)
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
                data = _normalise(path.read_bytes(), roots)
                out[rel] = shown(rel, data) if PICTURES.search(rel) else hashlib.sha256(data).hexdigest()
    return out


# -- what a picture shows ---------------------------------------------------------------------------

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
NEW_PLOT = re.compile(r"Plotly\.newPlot\(\s*")


def shown(rel: str, data: bytes) -> str:
    """What the picture ``rel`` shows, as a string to compare: a PNG's size and kind
    (``png 1200x900 8-bit colour 6``), the page's ``shown sha256:`` of ``page_shown``."""
    if rel.endswith(".png"):
        if data[:8] != PNG_SIGNATURE or data[12:16] != b"IHDR":
            return "not a PNG"
        width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
        return f"png {width}x{height} {data[24]}-bit colour {data[25]}"
    return "shown sha256:" + hashlib.sha256(page_shown(data.decode("utf-8")).encode()).hexdigest()


def page_shown(page: str) -> str:
    """``report.html`` with each ``Plotly.newPlot(id, data, layout, config)`` call's arguments
    decoded (``_rounded``) and written back as sorted JSON: its text, labels and numbers, not the
    bytes of their encoding."""
    out, at = [], 0
    decoder = json.JSONDecoder()
    for m in NEW_PLOT.finditer(page):
        out.append(page[at : m.end()])
        pos, args = m.end(), []
        while True:
            value, pos = decoder.raw_decode(page, pos)
            args.append(_rounded(value))
            pos = len(page) - len(page[pos:].lstrip())
            if page[pos] != ",":
                break
            pos = len(page) - len(page[pos + 1 :].lstrip())
        out.append(json.dumps(args, sort_keys=True, ensure_ascii=False))
        at = pos
    out.append(page[at:])
    return "".join(out)


def _rounded(value):
    """A figure's JSON value with plotly's typed arrays (``{"dtype", "bdata"[, "shape"]}``) decoded
    and every float rounded to ``SHOWN_DECIMALS`` (``-0.0`` written ``0.0``)."""
    import base64

    import numpy as np

    if isinstance(value, dict):
        if "bdata" in value and "dtype" in value:
            array = np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
            if "shape" in value:
                shape = value["shape"]
                array = array.reshape([int(n) for n in str(shape).split(",")] if isinstance(shape, str) else shape)
            return _rounded(array.tolist())
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    if isinstance(value, float):
        return round(value, SHOWN_DECIMALS) + 0.0
    return value


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


def environment() -> dict[str, str]:
    """The versions of Python and of the ``ENVIRONMENT`` libraries (no processor: nothing compared
    depends on it)."""
    versions = {"python": ".".join(map(str, sys.version_info[:3]))}
    for name in ENVIRONMENT:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "absent"
    return versions


# -- comparing ------------------------------------------------------------------------------------


def differences(expected: dict, actual: dict) -> list[str]:
    """What differs between two records of one case, one line (or a stdout diff) per difference."""
    lines = []
    want, got = expected["files"], actual["files"]
    lines += [f"missing: {rel}" for rel in sorted(want.keys() - got.keys())]
    lines += [f"new:     {rel}" for rel in sorted(got.keys() - want.keys())]
    lines += [
        f"differs: {rel}" + (f" (recorded: {want[rel]}; now: {got[rel]})" if rel.endswith(".png") else "")
        for rel in sorted(want.keys() & got.keys())
        if want[rel] != got[rel]
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
