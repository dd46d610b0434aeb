"""Issue 44: the recipes of deploy/ start as written.

Each systemd unit's ``ExecStart`` is started the way systemd starts it: its ``%`` specifiers and
``$VAR`` / ``${VAR}`` expanded, with nothing but the unit's own environment (``Environment=`` and
``EnvironmentFile=``, no inherited ``PATH``) in its ``WorkingDirectory=``. Only the install
locations differ from a server's, each mapped to this checkout (``INSTALL``): ``/opt/hypograph`` is
the repository, ``/opt/hypograph/.venv`` the test's virtualenv, ``/etc/hypograph/*.env`` and
``/etc/redis/hypograph.conf`` files of the test (the recipe's Redis file with this test's port,
folder and ``bind 127.0.0.1``: the LAN address of the recipe is not on this machine). ``User=`` is
not applied (no account is created).

The Helm files are checked for their structure (no ``helm`` in Debian or PyPI here): the worker mounts
read-only only what it reads, and every secret comes from a Secret, never a ConfigMap.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import time
from pathlib import Path

import pytest
import services
import yaml
from conftest import REPO, VENV_BIN
from services import free_port

SYSTEMD = REPO / "deploy" / "systemd"
needs_redis = pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server is not installed")


def unit_settings(*paths: Path) -> dict[str, list[str]]:
    """The ``[Service]`` settings of a unit and its drop-ins, in order (``\\`` continuations joined);
    an empty ``ExecStart=`` resets the list, as in systemd."""
    settings: dict[str, list[str]] = {}
    for path in paths:
        text = re.sub(r"\\\n\s*", " ", path.read_text(encoding="utf-8"))
        section = None
        for raw in text.splitlines():
            line = raw.strip()
            if not line or line.startswith(("#", ";")):
                continue
            if line.startswith("["):
                section = line
                continue
            if section == "[Service]":
                key, _, value = line.partition("=")
                if key == "ExecStart" and not value:
                    settings.pop(key, None)
                    continue
                settings.setdefault(key, []).append(value)
    return settings


def environment_file(path: Path) -> dict[str, str]:
    return environment_text(path.read_text(encoding="utf-8"))


def environment_text(text: str) -> dict[str, str]:
    """An ``EnvironmentFile=`` as systemd reads it: lines starting with ``#`` or ``;`` skipped, the
    whitespace around a value stripped, a value wholly in quotes unquoted; a ``#`` after a value is
    part of it (systemd has no inline comments)."""
    out = {}
    for raw in text.splitlines():
        line = raw.strip()
        if line and not line.startswith(("#", ";")):
            key, _, value = line.partition("=")
            value = value.strip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
                value = value[1:-1]
            out[key.strip()] = value
    return out


def expand(command: str, env: dict[str, str], instance: str) -> list[str]:
    """``ExecStart``'s words as systemd makes them: ``%i``, ``%%``; ``$$`` a dollar; ``${VAR}``
    inside a word and ``$VAR`` as a word from the unit's environment."""
    command = command.replace("%%", "\0").replace("%i", instance).replace("\0", "%")
    command = command.replace("$$", "\1")
    command = re.sub(r"\$\{(\w+)\}", lambda m: env.get(m.group(1), ""), command)
    words = shlex.split(command)
    words = [env.get(w[1:], "") if re.fullmatch(r"\$\w+", w) else w for w in words]
    return [w.replace("\1", "$") for w in words]


def start_unit(paths: list[Path], install: dict[str, str], log: Path, instance: str = "1"):
    """Start the unit's ExecStart with the unit's environment only; the process."""

    def mapped(text: str) -> str:
        for server, here in install.items():  # longest first: /opt/hypograph/.venv before /opt/hypograph
            text = text.replace(server, here)
        return text

    settings = unit_settings(*paths)
    env: dict[str, str] = {}
    for value in settings.get("Environment", []):
        for pair in shlex.split(mapped(value)):
            key, _, val = pair.partition("=")
            env[key] = val
    for name in settings.get("EnvironmentFile", []):  # its values win over Environment='s, as in systemd
        env.update(environment_file(Path(mapped(name.lstrip("-")))))
    (command,) = settings["ExecStart"]
    args = expand(mapped(command), env, instance)
    cwd = mapped(settings.get("WorkingDirectory", ["/"])[0])
    return services.start(args, log, env, cwd=Path(cwd)), env


def guide_environment() -> dict[str, str]:
    """What deploy/README-deployment.md puts in ``/etc/hypograph/env`` of a second host: its ``ini``
    blocks that are not unit files (the instance's variables, every machine's, the second host's),
    read as systemd reads them."""
    guide = (REPO / "deploy" / "README-deployment.md").read_text(encoding="utf-8")
    blocks = [b for b in re.findall(r"```ini\n(.*?)```", guide, re.S) if not re.search(r"(?m)^\[", b)]
    return environment_text("\n".join(blocks))


def install_map(tmp: Path) -> dict[str, str]:
    return {
        "/opt/hypograph/.venv": str(VENV_BIN.parent),
        "/opt/hypograph": str(REPO),
        "/etc/hypograph/": f"{tmp}/etc-hypograph/",
        "/etc/redis/hypograph.conf": str(tmp / "redis-hypograph.conf"),
    }


def wait_until(check, seconds: float, process, log: Path):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"{log.name}: exited with {process.returncode}:\n{log.read_text()[-3000:]}")
        result = check()
        if result:
            return result
        time.sleep(0.5)
    pytest.fail(f"not ready in {seconds} s:\n{log.read_text()[-3000:]}")


def files_holding(root: Path, secret: str) -> list[Path]:
    out = []
    for p in root.rglob("*"):
        if p.is_file() and not p.is_symlink():
            try:
                if secret.encode() in p.read_bytes():
                    out.append(p)
            except OSError:
                pass
    return out


@needs_redis
def test_the_redis_drop_in_and_the_worker_unit_start_as_written(tmp_path, monkeypatch):
    install = install_map(tmp_path)
    etc = tmp_path / "etc-hypograph"
    etc.mkdir()
    password, port = "pw-" + os.urandom(8).hex(), free_port()
    (etc / "redis.env").write_text(f"HYPOGRAPH_REDIS_PASSWORD={password}\n")
    recipe = (SYSTEMD / "redis-hypograph.conf").read_text(encoding="utf-8")
    (tmp_path / "redis").mkdir()
    here = re.sub(r"(?m)^bind .*$", "bind 127.0.0.1", recipe)
    here = re.sub(r"(?m)^port .*$", f"port {port}", here)
    here = re.sub(r"(?m)^dir .*$", f"dir {tmp_path / 'redis'}", here)
    (tmp_path / "redis-hypograph.conf").write_text(here)
    home = tmp_path / "dagster-home"
    home.mkdir()
    broker = f"redis://:{password}@127.0.0.1:{port}/0"
    # the guide's /etc/hypograph/env of a second host, with this machine's folders and broker
    guide = guide_environment()
    assert not {k: v for k, v in guide.items() if "#" in v}, "a note after a value is part of it in systemd"
    here = {"DAGSTER_HOME": str(home), "HYPOGRAPH_CELERY_BROKER": broker, "HYPOGRAPH_WORKSPACE": str(tmp_path)}
    lines = [f"{k}={here.get(k, v)}".replace("/opt/hypograph", str(REPO)) for k, v in guide.items()]
    (etc / "env").write_text("\n".join(lines) + "\n")
    (etc / "env").chmod(0o600)
    debian = Path("/lib/systemd/system/redis-server.service")  # its ExecStart is replaced by the drop-in
    redis_unit = [p for p in (debian, SYSTEMD / "redis-server.service.d" / "hypograph.conf") if p.exists()]
    redis, _ = start_unit(redis_unit, install, tmp_path / "redis.log")
    worker = None
    try:
        import redis as redis_py

        client = redis_py.Redis(host="127.0.0.1", port=port, password=password, socket_timeout=5)
        wait_until(lambda: _pings(client), 30, redis, tmp_path / "redis.log")
        with pytest.raises(redis_py.AuthenticationError):
            redis_py.Redis(host="127.0.0.1", port=port, socket_timeout=5).set("x", "1")  # no password, no access
        assert not [pid for pid in _group(redis.pid) if password in _cmdline(pid)]  # not in any command line

        worker, env = start_unit([SYSTEMD / "hypograph-worker@.service"], install, tmp_path / "worker.log")
        for key in ("HYPOGRAPH_CELERY_CONFIG", "HYPOGRAPH_CELERY_BROKER"):
            monkeypatch.setenv(key, env[key])
        from pipelines.celery_worker import build_app

        app = build_app()
        answers = wait_until(lambda: app.control.ping(timeout=2), 120, worker, tmp_path / "worker.log")
        assert any(name.startswith("hypograph-1@") and a == {"ok": "pong"} for r in answers for name, a in r.items())
        # a second host's worker serves only the range steps (the guide's CELERY_WORKER_QUEUES=shards)
        queues = app.control.inspect(timeout=5).active_queues()
        assert [sorted(q["name"] for q in qs) for name, qs in queues.items() if name.startswith("hypograph-1@")] == [
            ["shards"]
        ], queues
        # the worker wrote no file holding the password (dagster-celery's `worker start` wrote one,
        # world-readable, under $DAGSTER_HOME at every start)
        assert files_holding(home, password) == []
        assert files_holding(REPO / "pipelines", password) == []
    finally:
        if worker is not None:
            services.stop(worker, seconds=30)
        services.stop(redis, seconds=20)


def _pings(client) -> bool:
    import redis as redis_py

    try:
        return client.ping()
    except redis_py.RedisError:
        return False


def _group(pgid: int) -> list[int]:
    out = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if os.getpgid(int(proc.name)) == pgid:
                    out.append(int(proc.name))
            except ProcessLookupError:
                pass
    return out


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


# -- Helm (structure: no helm binary in Debian or on PyPI here) -----------------------------------


def _docs(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]


def test_the_helm_worker_mounts_read_only_only_what_it_reads_and_takes_secrets_from_secrets():
    (deployment,) = _docs(REPO / "deploy" / "helm" / "celery-workers.yaml")
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    env = {e["name"]: e for e in container.get("env", [])}
    home = env["DAGSTER_HOME"]["value"]
    # DAGSTER_HOME is written to (a step's compute logs, a run's storage): not a ConfigMap's folder
    assert home not in mounts or "configMap" not in volumes[mounts[home]["name"]]
    for path, mount in mounts.items():
        source = volumes[mount["name"]]
        if "configMap" in source or "secret" in source:  # read-only sources: a file mounted, not a folder
            assert "subPath" in mount or path.startswith("/etc/"), path
    assert any(m.get("subPath") == "dagster.yaml" for m in mounts.values())  # the instance's settings: the file
    assert_secrets_from_secrets(container, volumes, env)


def assert_secrets_from_secrets(container: dict, volumes: dict, env: dict) -> None:
    """Passwords from Secrets only (never a ConfigMap); the worker started by its absolute path."""
    assert env["HYPOGRAPH_CELERY_BROKER"]["valueFrom"]["secretKeyRef"]
    assert env["DAGSTER_PG_PASSWORD"]["valueFrom"]["secretKeyRef"]
    configmap_text = "\n".join(str(v) for v in volumes.values() if "configMap" in v)
    assert "password" not in configmap_text.lower()
    assert container["command"][0].startswith("/") and "pipelines.celery_worker" in container["command"]
    values = _docs(REPO / "deploy" / "helm" / "values-celery.yaml")[0]
    (deployment_values,) = values["dagster-user-deployments"]["deployments"]
    assert {"name": "HYPOGRAPH_CELERY_BROKER"} not in deployment_values.get("env", [])
    assert "hypograph-celery-broker" in [s["name"] for s in deployment_values["envSecrets"]]


def test_the_install_line_carries_every_extra_the_recipe_needs():
    guide = (REPO / "deploy" / "README-deployment.md").read_text(encoding="utf-8")
    installs = re.findall(r"pip install ([^`\n]+)", guide)
    assert installs and all("[celery,s3]" in line or "[celery, s3]" in line for line in installs), installs
    import tomllib

    extras = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    s3 = " ".join(extras["s3"])
    assert "s3fs" in s3 and "dagster-aws" in s3, s3
    assert any(d.startswith("dagster-celery") for d in extras["celery"]), extras["celery"]
