"""The values the steps of a sharded proximity run pass each other, as files loading cannot execute.

A shard file is an uncompressed ``.npz`` (numpy's zip of ``.npy`` arrays, read with
``allow_pickle=False``): one ``header`` array holding UTF-8 JSON that says which kind of value it
is and its scalar fields, and the value's numeric arrays. Four kinds travel:

=============  ====================================================  ==============================
kind           header                                                arrays
=============  ====================================================  ==============================
``range``      ``start``, ``stop``: a fan-out step's row range       none
``embeddings`` ``ids``, ``backend``, ``model``, ``vocabulary``,      dense: ``rows``; sparse (CSR):
               ``notes``, ``digest``, ``shape`` (sparse only)        ``data``, ``indices``, ``indptr``
``edges``      ``start``, ``stop``, ``capped``, ``info``: one        ``rows``, ``cols``, ``sims``
               shard's ``(Block, info)``
``corpus``     nothing more: the texts a fan-out step hands its     ``json``: ``corpus_json``'s
               range steps                                          bytes
=============  ====================================================  ==============================

``dump(value, at)`` -> bytes; ``load(file, where, at)`` -> the value, or one HypographError line
naming ``where`` (a pickle, an object array, another kind of file, a field of the wrong type or
shape, an index outside its range, a compressed member, a member whose array header claims more
bytes than it holds, a file written for another place ``at``): a file planted in the shard storage
is data at worst, never code, and reading it takes no more memory than its size. ``at`` is where
the file belongs (its run, step and output: the header records it and a copy found elsewhere, say
another run's, is refused). Arrays keep their dtypes, so a value read back is the value written,
bit for bit.
"""

from __future__ import annotations

import io
import json
import math
import zipfile
from typing import IO

import numpy as np

from hypograph.errors import HypographError
from hypograph.hypotheses import Corpus, corpus_from_json, corpus_json
from hypograph.proximity.embed import Embeddings
from hypograph.proximity.similarity import Block

ZIP_MAGIC = b"PK\x03\x04"  # an npz is a zip archive; np.load would take a .npy or a pickle too
MAX_HEADER_BYTES = 1 << 30  # the ids and vocabulary of a few million rows
KINDS = ("range", "embeddings", "edges", "corpus")


def dump(value, at: str = "") -> bytes:
    """The shard file of ``value``: a ``(start, stop)`` range, an ``Embeddings``, a ``Corpus`` or a
    ``(Block, info)`` pair; TypeError for anything else (a step returning another kind is a bug here).
    ``at``: where the file is written (recorded; ``load`` compares)."""
    header, arrays = _parts(value)
    header = {**header, "at": at}
    buf = io.BytesIO()
    raw = json.dumps(header, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    np.savez(buf, header=np.frombuffer(raw, dtype=np.uint8), **arrays)
    return buf.getvalue()


def _parts(value) -> tuple[dict, dict[str, np.ndarray]]:
    if isinstance(value, Corpus):  # the texts a fan-out step hands its range steps: JSON bytes, no code
        return {"kind": "corpus"}, {"json": np.frombuffer(corpus_json(value), dtype=np.uint8)}
    if isinstance(value, Embeddings):
        header = {
            "kind": "embeddings",
            "ids": list(value.ids),
            "backend": value.backend,
            "model": value.model,
            "vocabulary": value.vocabulary,
            "notes": list(value.notes),
            "digest": value.digest,
        }
        if isinstance(value.rows, np.ndarray):
            return header, {"rows": value.rows}
        m = value.rows
        return {**header, "shape": list(m.shape)}, {"data": m.data, "indices": m.indices, "indptr": m.indptr}
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], Block) and isinstance(value[1], dict):
        block, info = value
        header = {"kind": "edges", "start": int(block.start), "stop": int(block.stop), "capped": int(block.capped)}
        return {**header, "info": info}, {"rows": block.rows, "cols": block.cols, "sims": block.sims}
    if isinstance(value, tuple) and len(value) == 2 and all(isinstance(v, int) for v in value):
        return {"kind": "range", "start": int(value[0]), "stop": int(value[1])}, {}
    raise TypeError(f"no shard format for a {type(value).__name__}")


def load(file: IO[bytes], where: str, at: str = ""):
    """The value in shard file ``file`` (a seekable binary file; ``where`` names it in errors),
    written for ``at`` (see ``dump``)."""
    start = file.read(len(ZIP_MAGIC))
    file.seek(0)
    if start != ZIP_MAGIC:  # a pickle, a bare .npy, anything else: never handed to a loader
        what = "a pickle" if start[:1] == b"\x80" else "not an npz archive"
        raise HypographError(f"{where}: not a shard file ({what}); refused, nothing in it was run")
    try:
        arrays = _arrays(file, where)
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, KeyError) as e:
        why = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise HypographError(f"{where}: not a shard file ({why}); refused, nothing in it was run") from None
    if "header" not in arrays:
        raise HypographError(f"{where}: not a shard file (no header); refused, nothing in it was run")
    header = _header(arrays.pop("header"), where)
    if header.get("at") != at:
        raise HypographError(
            f"{where}: written for {header.get('at')!r}, not for {at!r} (a copy from another run or step); refused"
        )
    try:
        return _value(header, arrays)
    except (KeyError, TypeError, ValueError) as e:
        raise HypographError(f"{where}: {header.get('kind')} shard: {e}; refused") from None


def _arrays(file: IO[bytes], where: str) -> dict[str, np.ndarray]:
    """The archive's arrays, each member checked before it is read: stored (``np.savez`` compresses
    nothing, so a deflated member is a bomb or not ours), named ``*.npy`` once, and holding exactly
    the bytes its array header claims (a header claiming terabytes is refused, not allocated)."""
    out: dict[str, np.ndarray] = {}
    with zipfile.ZipFile(file) as archive:
        for info in archive.infolist():
            name = info.filename.removesuffix(".npy")
            if info.compress_type != zipfile.ZIP_STORED:
                raise ValueError(f"member {info.filename} is compressed")
            if not info.filename.endswith(".npy") or name in out:
                raise ValueError(f"member {info.filename}: not one array of its own")
            with archive.open(info) as member:
                version = np.lib.format.read_magic(member)
                read_header = (
                    np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
                )
                shape, _, dtype = read_header(member)
                if dtype.hasobject:
                    raise ValueError(f"member {info.filename}: object array")
                claimed, held = math.prod(shape) * dtype.itemsize, info.file_size - member.tell()
                if claimed != held:
                    raise ValueError(f"member {info.filename}: its header claims {claimed} bytes, it holds {held}")
                member.seek(0)
                out[name] = np.lib.format.read_array(member, allow_pickle=False)
    return out


def _header(array: np.ndarray, where: str) -> dict:
    if array.dtype != np.uint8 or array.ndim != 1 or array.size > MAX_HEADER_BYTES:
        raise HypographError(f"{where}: header: not UTF-8 JSON bytes; refused")
    try:
        header = json.loads(array.tobytes().decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise HypographError(f"{where}: header: not UTF-8 JSON; refused") from None
    if not isinstance(header, dict) or header.get("kind") not in KINDS:
        raise HypographError(f"{where}: header.kind: not one of {', '.join(KINDS)}; refused")
    return header


def _value(header: dict, arrays: dict[str, np.ndarray]):
    """The value of a shard file's ``header`` and ``arrays``, by its kind."""
    return {"corpus": _corpus, "range": _range, "edges": _edges, "embeddings": _embeddings}[header["kind"]](
        header, arrays
    )


def _corpus(header: dict, arrays: dict[str, np.ndarray]) -> Corpus:
    raw = arrays["json"]
    if raw.dtype != np.uint8 or raw.ndim != 1:
        raise TypeError("json: not bytes")
    return corpus_from_json(raw.tobytes())


def _range(header: dict, arrays: dict[str, np.ndarray]) -> tuple[int, int]:
    start, stop = _int(header, "start"), _int(header, "stop")
    if not 0 <= start <= stop:
        raise ValueError(f"start, stop: not 0 <= {start} <= {stop}")
    return start, stop


def _edges(header: dict, arrays: dict[str, np.ndarray]) -> tuple[Block, dict]:
    info = header["info"]
    if not isinstance(info, dict):
        raise TypeError("info: not an object")
    start, stop = _range(header, arrays)
    rows, cols = (_numbers(arrays, name, "iu") for name in ("rows", "cols"))
    sims = _numbers(arrays, "sims", "f")
    if not rows.shape == cols.shape == sims.shape:
        raise ValueError(f"rows, cols, sims: {rows.size}, {cols.size}, {sims.size} values, not one each per edge")
    if rows.size and min(rows.min(), cols.min()) < 0:  # the upper bound is the graph's, checked where it is known
        raise ValueError("rows, cols: a position below 0")
    if not np.isfinite(sims).all():
        raise ValueError("sims: not finite")
    capped = _int(header, "capped")
    if capped < 0:
        raise ValueError("capped: below 0")
    return Block(start, stop, rows, cols, sims, capped), info


def _embeddings(header: dict, arrays: dict[str, np.ndarray]) -> Embeddings:
    ids, vocabulary, notes = header["ids"], header["vocabulary"], header["notes"]
    if not _strings(ids) or not _strings(notes) or not (vocabulary is None or _strings(vocabulary)):
        raise TypeError("ids, notes, vocabulary: not lists of strings")
    texts = [header[k] for k in ("backend", "model", "digest")]
    if not all(isinstance(t, str) for t in texts):
        raise TypeError("backend, model, digest: not strings")
    rows = _sparse_rows(header, arrays) if "shape" in header else _numbers(arrays, "rows", "f", ndim=2)
    if rows.shape[0] != len(ids):
        raise ValueError(f"{rows.shape[0]} rows for {len(ids)} ids")
    return Embeddings(ids, rows, texts[0], texts[1], vocabulary, notes, texts[2])


def _sparse_rows(header: dict, arrays: dict[str, np.ndarray]):
    import scipy.sparse as sp

    shape = header["shape"]
    if not (isinstance(shape, list) and len(shape) == 2 and all(type(s) is int and s >= 0 for s in shape)):
        raise TypeError("shape: not two counts")
    parts = (_numbers(arrays, "data", "f"), _numbers(arrays, "indices", "iu"), _numbers(arrays, "indptr", "iu"))
    matrix = sp.csr_matrix(parts, shape=tuple(shape))
    matrix.check_format(full_check=True)  # indices in range, indptr ordered: ValueError otherwise
    return matrix


def _int(header: dict, name: str) -> int:
    value = header[name]
    if type(value) is not int:
        raise TypeError(f"{name}: not an integer")
    return value


def _strings(values) -> bool:
    return isinstance(values, list) and all(isinstance(v, str) for v in values)


def _numbers(arrays: dict[str, np.ndarray], name: str, kinds: str, ndim: int = 1) -> np.ndarray:
    """Array ``name``: of a dtype of ``kinds`` (``i``, ``u`` integers, ``f`` floats) and ``ndim``
    dimensions (TypeError otherwise)."""
    array = arrays[name]
    if array.dtype.kind not in kinds or array.ndim != ndim:
        raise TypeError(f"{name}: {array.dtype} array of {array.ndim} dimensions, not {ndim} of {kinds} numbers")
    return array
