"""The optional native reader: batches of small local chunks read and decoded with the GIL released once.

With small chunks (16 KiB), the pure-Python read path drops and retakes the GIL about six times per chunk
(open, fstat, read, close, decompress, copy). Two reader threads then mostly hand the GIL to each other.
The C extension ``zarr_dask._native`` does a whole batch in one call: it opens and reads each file,
decompresses it with numcodecs' own zstd / blosc / lz4 functions (found in the loaded numcodecs extension
modules), and copies it into its place in the output or fills a missing chunk.

It changes nothing but speed. Whatever it cannot do exactly -- a chunk that fails to decode or has the wrong
size, a symbolic link, an I/O error, a file larger than its buffer -- it leaves to the Python path, which
raises the usual errors. It is used for local stores, regular grids, fixed-size data types, and codec
chains that are a ``bytes`` codec in native byte order with at most one of those compressors.

The extension is built at install time where a C compiler exists (``setup.py``); without it everything
works the same, only slower on small chunks. ``ZARR_DASK_NATIVE=0`` turns it off (``available()`` tells
whether it is in use).

Examples
--------
>>> import zarr_dask.native as native
>>> native.codec_id("gzip") is None  # not a native codec: the Python path reads it
True
"""

from __future__ import annotations

import logging
import threading
from types import ModuleType
from typing import Any, NoReturn

from zarr_dask import config
from zarr_dask.codecs.bounded import extension_path
from zarr_dask.codecs.numcodecs_bridge import encoded_sample

__all__ = ["CODECS", "available", "codec_id", "decode_chunks", "read_chunks", "status"]

_ext: ModuleType | None
try:
    from zarr_dask import _native as _ext
except ImportError:  # not built (no compiler, Windows): the Python path does everything
    _ext = None

#: The codecs the native reader decodes, by the id its C code uses ("raw": stored bytes as they are).
CODECS = {"raw": 0, "zstd": 1, "blosc": 2, "lz4": 3}

_bound: dict[str, bool] = {"raw": True}
_reasons: dict[str, str] = {}
_lock = threading.Lock()
_log = logging.getLogger("zarr_dask.native")


def available() -> bool:
    """True when the extension is built and not turned off with ``ZARR_DASK_NATIVE=0``."""
    return _ext is not None and bool(config.get("native"))


def codec_id(name: str) -> int | None:
    """The native id of a codec (``"raw"``, ``"zstd"``, ``"blosc"``, ``"lz4"``), or None when the native
    reader is unavailable or cannot find numcodecs' implementation of it (:func:`status` says why)."""
    if name not in CODECS or not available():
        return None
    with _lock:
        ok = _bound.get(name)
        if ok is None:
            ok = _bound[name] = _bind(name)
    return CODECS[name] if ok else None


def _bind(name: str) -> bool:
    """Bind one codec to numcodecs' functions and check it; records (and logs) why when it fails."""
    path = extension_path(name)
    if path is None:
        reason = f"numcodecs has no compiled module for {name!r}"
    elif _ext is None or not _ext.bind(name, path):
        reason = f"numcodecs' {name} functions were not found by name in {path}"
    elif not _decodes_like_numcodecs(name):
        reason = f"the functions bound from {path} do not decode numcodecs' {name} sample exactly"
    else:
        _reasons[name] = f"bound to numcodecs' functions in {path}"
        _log.debug("native reader: %s %s", name, _reasons[name])
        return True
    _reasons[name] = reason
    _log.warning("native reader: %s stays on the Python path (about 2x slower on small chunks): %s", name, reason)
    return False


def status() -> dict[str, Any]:
    """What the native reader does in this process, per codec, and why not where it does not.

    Examples
    --------
    >>> s = status()
    >>> sorted(s), sorted(s["codecs"])
    (['built', 'codecs', 'enabled'], ['blosc', 'lz4', 'raw', 'zstd'])
    >>> sorted(s["codecs"]["zstd"])
    ['native', 'reason']
    """
    codecs: dict[str, dict[str, Any]] = {}
    for name in CODECS:
        native = codec_id(name) is not None
        if _ext is None:
            reason = "the extension zarr_dask._native is not built (no C compiler at install, or ZARR_DASK_BUILD_NATIVE=0)"
        elif not available():
            reason = "turned off (ZARR_DASK_NATIVE / zarr_dask.native)"
        else:
            reason = _reasons.get(name, "stored bytes, no codec")
        codecs[name] = {"native": native, "reason": reason}
    return {"built": _ext is not None, "enabled": available(), "codecs": codecs}


def _decodes_like_numcodecs(name: str) -> bool:
    """Decode a sample numcodecs encoded with the functions just bound: a numcodecs build whose functions do
    not behave as expected is left to the Python path instead of being trusted."""
    try:
        raw, encoded = encoded_sample(name)
        out = bytearray(len(raw))
        proj = ((0,), (slice(0, len(raw)),), (slice(0, len(raw)),), True)
        left = _ext.decode_chunks([encoded], [proj], out, (len(raw),), CODECS[name], b"\0", bytearray(len(raw)))  # type: ignore[union-attr]
    except Exception:  # noqa: BLE001 - the self-test: any failure means the C reader is not used
        return False
    return not left and bytes(out) == raw


def _not_built(*args: Any) -> NoReturn:
    raise RuntimeError("zarr_dask._native is not built; check zarr_dask.native.available() first")


#: ``read_chunks(paths, projections, out, chunk_shape, codec, fill, readbuf, chunkbuf, flags)``: read, decode
#: and place a batch of chunks; returns ``(files_read, bytes_read, left)``, where ``left`` are the indices the
#: Python path must do (see the module docstring and the C docstring).
read_chunks = _ext.read_chunks if _ext is not None else _not_built
#: ``decode_chunks(sources, projections, out, chunk_shape, codec, fill, chunkbuf)``: the same for chunks whose
#: bytes are in memory (a shard's inner chunks); returns the indices the Python path must do.
decode_chunks = _ext.decode_chunks if _ext is not None else _not_built
