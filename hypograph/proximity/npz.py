"""npz archives whose bytes depend only on their arrays.

``numpy.savez`` writes each member with ``force_zip64``, and Python's zipfile wrote such headers
differently before 3.11.4 (the sizes, the version needed to extract), so the same arrays gave
other bytes, and another digest, on another Python. Here each member is the ``.npy`` bytes of
``numpy.lib.format.write_array``, stored uncompressed under a fixed date with its size known, so
zipfile writes plain headers (zip64 only past 4 GiB). ``numpy.load`` and ``scipy.sparse.load_npz``
read it as they read savez's.
"""

from __future__ import annotations

import io
import zipfile

import numpy as np

_DATE = (1980, 1, 1, 0, 0, 0)  # what numpy.savez writes too: the zip format's first date


def npz_bytes(arrays: dict[str, object]) -> bytes:
    """The archive of ``arrays`` (name -> array-like), members in the dict's order."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as archive:
        for name, value in arrays.items():
            member = io.BytesIO()
            np.lib.format.write_array(member, np.asanyarray(value), allow_pickle=False)
            archive.writestr(zipfile.ZipInfo(f"{name}.npy", date_time=_DATE), member.getvalue())
    return buf.getvalue()


def csr_npz_bytes(matrix) -> bytes:
    """A CSR matrix as ``scipy.sparse.save_npz(compressed=False)`` lays it out (the same members
    in the same order), in ``npz_bytes``' archive."""
    arrays = {"indices": matrix.indices, "indptr": matrix.indptr}
    arrays |= {"format": matrix.format.encode("ascii"), "shape": matrix.shape, "data": matrix.data}
    return npz_bytes(arrays)
