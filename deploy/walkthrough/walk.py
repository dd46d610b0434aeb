"""Walk deploy/README-deployment.md from fresh machines to a worker on a second host, on this one.

Machine A (the database, Redis, an S3 stand-in: ``moto_server``) and machine B (a worker on a
second host, no input folder) are each a network namespace of ``tests/support/netns.py`` on a private /24,
and each runs in a mount namespace of its own whose ``/etc`` is a copy of this machine's (so
``useradd``, ``/etc/hypograph``, ``/etc/postgresql``, ``/etc/redis`` are theirs) and whose
``/opt/hypograph``, ``/var/lib/hypograph``, ``/var/lib/postgresql``... are folders of the walk.
``machine-a.sh`` and ``machine-b.sh`` run the guide's commands as written, with this walk's
addresses and passwords; B's install uses the host's network (the package index), its worker, units,
bucket and checks run in B's namespace. Exit status: B's (0 only if every check of machine-b.sh
held). README.md beside this file: what each command of the guide was run by, and the timings.
Needs root and ``ip netns``. Whatever happens, the namespaces, the mount points it made and the
copies of ``/etc`` are removed; the logs stay in the printed folder; nothing is left on this machine
but Debian packages ``apt-get install`` upgraded.

Usage (from the checkout, as root): ``python3 deploy/walkthrough/walk.py``
"""

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(REPO / "tests"))
import netns  # noqa: E402


def prepare(walk: str) -> list[str]:
    """Each machine's copy of /etc (A's without Debian's PostgreSQL cluster: a fresh machine has none
    before apt's postinst), and the mount points the scripts bind over; the ones made here."""
    for m in ("a", "b"):
        os.makedirs(f"{walk}/{m}")
        subprocess.run(["cp", "-a", "/etc", f"{walk}/{m}/etc"], check=True)
    shutil.rmtree(f"{walk}/a/etc/postgresql/15/main", ignore_errors=True)
    made = [d for d in ("/opt/hypograph", "/var/lib/hypograph") if not os.path.exists(d)]
    for d in made:
        os.makedirs(d)
    return made


def main() -> int:
    walk = tempfile.mkdtemp(prefix="hypograph-walk-")
    net = netns.Network(["a", "b"])
    made, a, code = [], None, 1
    try:
        net.create()
        made = prepare(walk)
        env = {
            **os.environ,
            "WALK": walk,
            "ADDR_A": net.address["a"],
            "SUBNET": str(net.subnet),
            "PGPW": "walk-" + os.urandom(6).hex(),
            "HYPOGRAPH_REPO": str(REPO),
            "NS_B": net.namespace("b"),
            "MOTO_SERVER": str(REPO / ".venv" / "bin" / "moto_server"),
        }
        inside_a = ["ip", "netns", "exec", net.namespace("a"), "unshare", "--mount", "--propagation", "private"]
        with open(f"{walk}/a.log", "w") as log:
            a = subprocess.Popen([*inside_a, "bash", HERE / "machine-a.sh"], env=env, stdout=log, stderr=log)
        while not os.path.exists(f"{walk}/a.ready"):
            if a.poll() is not None:
                print(f"machine A ended with {a.returncode}; see {walk}/a.log")
                return 1
            time.sleep(1)
        fresh = {**env, "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}  # a fresh root's
        with open(f"{walk}/b.log", "w") as log:
            b = subprocess.run(
                ["unshare", "--mount", "--propagation", "private", "bash", HERE / "machine-b.sh"],
                env=fresh,
                stdout=log,
                stderr=log,
                check=False,
            )
        code = b.returncode
        print(f"machine B ended with {code}; bytes through B's veth: {net.moved('b')}; logs in {walk}")
    finally:
        open(f"{walk}/a.stop", "w").close()
        if a is not None:
            try:
                a.wait(timeout=60)
            except subprocess.TimeoutExpired:
                a.kill()
        for m in ("a", "b"):  # what this walk started and is still inside its namespaces, by pid
            found = subprocess.run(
                ["ip", "netns", "pids", net.namespace(m)], capture_output=True, text=True, check=False
            )
            for pid in found.stdout.split():
                os.kill(int(pid), 9)
        net.delete()
        for d in made:
            os.rmdir(d)
        for m in ("a", "b"):  # the copies of /etc (a shadow file among them) and the installed code
            for sub in ("etc", "opt", "var"):
                shutil.rmtree(f"{walk}/{m}/{sub}", ignore_errors=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
