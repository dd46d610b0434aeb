"""A succeeded run's shard files removed (``assets/proximity/shard_files.py``, issue 44), on a folder and on
an S3-compatible object store (``moto_server``, started here on 127.0.0.1), with the names the
steps give them: a dynamic step's key holds brackets (``similarity_shard[rows_0_245]``), which
fsspec's ``rm`` reads as a glob. Another run's files and the compute logs kept beside the shards
on one machine stay. The daemon's sensor calling this on a real run: tests/system/test_distributed.py (a
folder) and tests/system/test_second_host.py (S3); a failed run's files kept: test_distributed.py's outage.
"""

from __future__ import annotations

import pytest
import services
from conftest import VENV_BIN
from services import free_port
from test_distributed import wait_for_port

from assets.proximity.shard_files import remove_run_shards

RUN, OTHER = "7d43a8bc-8ebf-4b77-bb93-4baac06e0340", "0b1c2d3e-0000-4000-8000-000000000000"
# what a sharded proximity run leaves, relative to its folder (tests/system/test_second_host.py saw these)
WRITTEN = [
    "hypothesis_embeddings.embedding_shards/result",
    "hypothesis_embeddings.embed_shard[rows_0_1200]/result",
    "similarity_graph.similarity_shards/rows_0_245",
    "similarity_graph.similarity_shard[rows_0_245]/result",
    "similarity_graph.similarity_shard[rows_245_528]/result",
]


def test_a_run_s_shard_folder_is_emptied_and_removed_and_nothing_else(tmp_path):
    for run in (RUN, OTHER):
        for rel in WRITTEN:
            (tmp_path / run / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / run / rel).write_bytes(b"PK")
    logs = tmp_path / RUN / "compute_logs" / "abcdefgh.err"  # LocalComputeLogManager's, on one machine
    logs.parent.mkdir()
    logs.write_text("a step's stderr")

    removed = remove_run_shards(str(tmp_path), RUN)

    assert sorted(removed) == sorted(str(tmp_path / RUN / rel) for rel in WRITTEN)
    assert sorted(p.relative_to(tmp_path / RUN).as_posix() for p in (tmp_path / RUN).rglob("*")) == [
        "compute_logs",
        "compute_logs/abcdefgh.err",
    ]
    assert sorted(p.relative_to(tmp_path / OTHER).as_posix() for p in (tmp_path / OTHER).rglob("*") if p.is_file()) == [
        *sorted(WRITTEN)
    ]
    logs.unlink()
    logs.parent.rmdir()
    assert remove_run_shards(str(tmp_path), RUN) == []  # nothing left to remove, the empty folder goes
    assert not (tmp_path / RUN).exists()


@pytest.fixture
def object_store(tmp_path, monkeypatch):
    """An S3 emulator on 127.0.0.1 with a bucket ``team-bucket``; a boto3 client to it. The
    environment names it as a deployment's does (``AWS_ENDPOINT_URL``, keys)."""
    if not (VENV_BIN / "moto_server").exists():
        pytest.skip("moto[server] is not installed")
    import boto3
    import s3fs

    port = free_port()
    server = services.start([VENV_BIN / "moto_server", "-H", "127.0.0.1", "-p", port], tmp_path / "s3.log", {})
    try:
        wait_for_port(port, server, tmp_path / "s3.log")
        settings = {
            "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
            "AWS_ACCESS_KEY_ID": "hypograph-test",
            "AWS_SECRET_ACCESS_KEY": "hypograph-test-secret",
            "AWS_DEFAULT_REGION": "us-east-1",
        }
        for name, value in settings.items():
            monkeypatch.setenv(name, value)
        s3fs.S3FileSystem.clear_instance_cache()  # a cached one would name another endpoint
        client = boto3.client("s3", endpoint_url=settings["AWS_ENDPOINT_URL"], region_name="us-east-1")
        client.create_bucket(Bucket="team-bucket")
        yield client
    finally:
        services.stop(server, seconds=10)
        s3fs.S3FileSystem.clear_instance_cache()


def keys(client, prefix: str) -> list[str]:
    pages = client.get_paginator("list_objects_v2").paginate(Bucket="team-bucket", Prefix=prefix)
    return sorted(o["Key"] for page in pages for o in page.get("Contents", []))


def test_a_run_s_shard_files_are_removed_from_the_object_store_and_nothing_else(object_store):
    for run in (RUN, OTHER):
        for rel in WRITTEN:
            object_store.put_object(Bucket="team-bucket", Key=f"hypograph/shards/{run}/{rel}", Body=b"PK")
    object_store.put_object(Bucket="team-bucket", Key=f"hypograph/logs/storage/{RUN}/compute_logs/x.err", Body=b"")

    removed = remove_run_shards("s3://team-bucket/hypograph/shards", RUN)

    assert sorted(removed) == sorted(f"team-bucket/hypograph/shards/{RUN}/{rel}" for rel in WRITTEN)
    assert keys(object_store, f"hypograph/shards/{RUN}/") == []
    assert keys(object_store, f"hypograph/shards/{OTHER}/") == sorted(f"hypograph/shards/{OTHER}/{r}" for r in WRITTEN)
    assert keys(object_store, "hypograph/logs/") == [f"hypograph/logs/storage/{RUN}/compute_logs/x.err"]
    assert object_store.head_bucket(Bucket="team-bucket")  # the bucket itself stays
