"""Case batches under failure: crashes at every publication step, an unreachable model (retry
rounds with persisted due times, then a block), failover, concurrent and stale dispatches, and
replay of a package copied elsewhere."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import shutil
import threading

import pytest
from case_support import Clock, builder_for, files, make_case, package_id, reply, valid_answer
from llm_stub import answer, invalid_json, llm_server, server_error, sleeping, unused_port  # noqa: F401

from hypograph.case import CasePackage, Status, due_retry
from hypograph.case.package import JOURNAL
from hypograph.case.publish import CrashAt, SimulatedCrash
from hypograph.journal import Journal

H = "analysis/hypotheses/0001"


def run(builder, case, attempt=None):
    return asyncio.run(builder.build(case.name, package_id(case), attempt))


def copy_case(src, dst):
    return shutil.copytree(src, dst, ignore=shutil.ignore_patterns(".hypograph"))


@pytest.fixture
def template(tmp_path):
    """One confirmed case; every test copies it, so all copies share one package id."""
    return make_case(tmp_path / "template")


def reference_run(template, tmp_path, llm_server) -> tuple[dict, list[str]]:
    case = copy_case(template, tmp_path / "reference" / template.name)
    hook = CrashAt(None)
    llm_server.script(reply(valid_answer()))
    assert run(builder_for(case, [llm_server.url], hook=hook), case).status is Status.COMPLETED
    return files(case), hook.seen


def test_crash_at_every_publication_step_replays_without_new_ids(template, tmp_path, llm_server):
    expected, points = reference_run(template, tmp_path, llm_server)
    assert points == [
        "context:journal-saved",
        f"context:wrote:{H}/policy.json",
        f"context:wrote:{H}/context.json",
        "context:wrote:manifest.json",
        "round-recorded",
        "publish:journal-saved",
        f"publish:wrote:{H}/hypotheses.json",
        f"publish:wrote:{H}/registry.json",
        f"publish:wrote:{H}/hypotheses.md",
        f"publish:wrote:{H}/dispatch.json",
        "publish:wrote:manifest.json",
        "published",
    ]
    llm_server.always(reply(valid_answer()))
    for i, point in enumerate(points):
        case = copy_case(template, tmp_path / f"crash{i}" / template.name)
        with pytest.raises(SimulatedCrash):
            run(builder_for(case, [llm_server.url], hook=CrashAt(point)), case)
        if point.startswith(("context:", "publish:")):
            assert Journal(case, JOURNAL).pending(), point  # really stopped inside the plan
        if point == "publish:journal-saved":
            assert not (case / f"{H}/hypotheses.json").exists()
        calls = len(llm_server.requests)
        result = run(builder_for(case, [llm_server.url]), case)
        assert result.status is Status.COMPLETED, (point, result.message)
        if points.index(point) >= points.index("round-recorded"):
            assert len(llm_server.requests) == calls, f"{point}: a confirmed response was asked again"
        assert files(case) == expected, point  # same ids, allocations, registry, manifest, bytes
        assert not Journal(case, JOURNAL).pending()


def test_replay_of_a_package_copied_elsewhere(template, tmp_path, llm_server):
    expected, _ = reference_run(template, tmp_path, llm_server)
    for point in ("round-recorded", f"publish:wrote:{H}/registry.json"):
        case = copy_case(template, tmp_path / f"here-{point[:5]}" / template.name)
        llm_server.script(reply(valid_answer()))
        with pytest.raises(SimulatedCrash):
            run(builder_for(case, [llm_server.url], hook=CrashAt(point)), case)
        moved = copy_case(case, tmp_path / f"elsewhere-{point[:5]}" / template.name)  # no tool state, no cache
        dead = f"http://127.0.0.1:{unused_port()}/v1"
        result = run(builder_for(moved, [dead]), moved)
        assert result.status is Status.COMPLETED and files(moved) == expected


def test_unreachable_model_retries_with_persisted_due_times_then_blocks(template, tmp_path, llm_server):
    case = copy_case(template, tmp_path / "c" / template.name)
    llm_server.always(server_error(503))
    dead = f"http://127.0.0.1:{unused_port()}/v1"
    clock = Clock()
    dues = []
    for round_ in range(1, 11):
        builder = builder_for(case, [dead, llm_server.url], clock=clock)  # a fresh builder: state is on disk
        result = run(builder, case)
        assert len(llm_server.requests) == round_  # failover reached the second endpoint once per round
        if round_ < 10:
            dues.append(_retry_due(case, result, round_, clock, llm_server, dead))
            clock.now = dues[-1]
            assert due_retry(CasePackage(case), clock.now).case_id == case.name
        else:
            assert result.status is Status.BLOCKED
    assert json.loads((case / f"{H}/dispatch.json").read_text())["status"] == "BLOCKED"
    clock.advance(days=30)
    assert run(builder_for(case, [llm_server.url], clock=clock), case).status is Status.BLOCKED
    assert len(llm_server.requests) == 10 and due_retry(CasePackage(case), clock.now) is None
    assert not (case / f"{H}/registry.json").exists()
    llm_server.always(reply(valid_answer()))
    assert run(builder_for(case, [llm_server.url], clock=clock), case, attempt="2").status is Status.COMPLETED


def _retry_due(case, result, round_: int, clock, llm_server, dead: str) -> dt.datetime:
    """Failed round ``round_``: its retry due after the backoff (persisted), not run before it is due."""
    assert result.status is Status.RETRY_PENDING and f"round {round_} of 10" in result.message
    due = dt.datetime.fromisoformat(result.due_at)
    assert due - clock.now == dt.timedelta(seconds=min(60 * 2 ** (round_ - 1), 3600))
    assert json.loads((case / f"{H}/dispatch.json").read_text())["due_at"] == result.due_at
    early = run(builder_for(case, [dead, llm_server.url], clock=clock), case)
    assert early.status is Status.RETRY_PENDING and len(llm_server.requests) == round_  # no call, no sleep
    assert due_retry(CasePackage(case), clock.now) is None
    return due


def test_failover_and_invalid_answer_is_not_an_outage(template, tmp_path, llm_server):
    case = copy_case(template, tmp_path / "a" / template.name)
    dead = f"http://127.0.0.1:{unused_port()}/v1"
    llm_server.script(reply(valid_answer()))
    assert run(builder_for(case, [dead, llm_server.url]), case).status is Status.COMPLETED
    assert llm_server.url.split("//")[1] in json.loads((case / f"{H}/rounds/1.json").read_text())["endpoint"]
    case = copy_case(template, tmp_path / "b" / template.name)
    second = f"http://127.0.0.1:{unused_port()}/v1"
    llm_server.script(invalid_json())
    result = run(builder_for(case, [llm_server.url, second]), case)
    assert result.status is Status.ERROR
    state = json.loads((case / f"{H}/dispatch.json").read_text())
    assert state["status"] == "REJECTED" and state["failed_rounds"] == 0 and state["due_at"] is None


def test_two_concurrent_dispatches(template, tmp_path, llm_server):
    case = copy_case(template, tmp_path / "c" / template.name)
    llm_server.script(sleeping(1.0, reply(valid_answer())))

    async def both():
        a = builder_for(case, [llm_server.url])
        b = builder_for(case, [llm_server.url])
        return await asyncio.gather(a.build(case.name, package_id(case)), b.build(case.name, package_id(case)))

    results = asyncio.run(both())
    assert sorted(r.status.value for r in results) == ["COMPLETED", "DEFERRED"]
    deferred = next(r for r in results if r.status is Status.DEFERRED)
    assert "another dispatch holds the case lock" in deferred.message
    assert len(llm_server.requests) == 1


def test_stale_concurrent_result_is_rejected(template, tmp_path, llm_server):
    case = copy_case(template, tmp_path / "s" / template.name)
    lock = threading.Lock()

    def foreign_writer_then_answer(body):
        with lock:  # another writer moves the package on while the model is thinking
            m = json.loads((case / "manifest.json").read_text())
            m["package_generation"] += 1
            (case / "manifest.json").write_text(json.dumps(m))
        return reply(valid_answer())

    llm_server.script(foreign_writer_then_answer)
    result = run(builder_for(case, [llm_server.url]), case)
    assert result.status is Status.ERROR and "stale" in result.message and "moved from 3 to 4" in result.message
    assert not (case / f"{H}/rounds/1.json").exists() and not (case / f"{H}/registry.json").exists()
    llm_server.script(reply(valid_answer()))
    assert run(builder_for(case, [llm_server.url]), case).status is Status.COMPLETED
