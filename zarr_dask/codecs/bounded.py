"""Bounded decompression for numcodecs' compressors: nothing is allocated beyond what the chunk declares.

Compressors that decode into a caller's buffer (zstd, blosc, lz4: :data:`INTO`) have their container header
checked against the expected size first (Blosc ``nbytes``, the zstd frame content size, the LZ4 size prefix);
streaming ones (gzip, zlib, bz2, lzma: :data:`STREAM`) decompress with a ``max_length`` of the expected size
plus one byte, so a corrupt or hostile chunk is an error, not an allocation of its claimed size.

Examples
--------
>>> zstd_content_size(b"not zstd") is None
True
"""

from __future__ import annotations

import bz2
import importlib
import lzma
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np

from zarr_dask.codecs.base import BufferLike, as_byte_view, nbytes_of, wrong_size
from zarr_dask.errors import ChunkDecodeError

__all__ = ["INTO", "STREAM", "Decompress", "decompress_function", "extension_path", "zstd_content_size"]

_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def _fcs_layout(fhd: int) -> tuple[int, int]:
    single = (fhd >> 5) & 1
    offset = 5 + (0 if single else 1) + (0, 1, 2, 4)[fhd & 3]
    size = (1 if single else 0, 2, 4, 8)[fhd >> 6]
    return offset, size


_FCS = tuple(_fcs_layout(b) for b in range(256))


def _head(data: BufferLike, n: int) -> bytes:
    if isinstance(data, bytes):
        return data[:n]
    return as_byte_view(data)[:n].tobytes()


def zstd_content_size(data: BufferLike) -> int | None:
    """The frame content size declared by the first zstd frame's header, or None when absent/unknown."""
    head = _head(data, 18)
    if len(head) < 6 or head[:4] != _ZSTD_MAGIC:
        return None
    offset, size = _FCS[head[4]]
    if size == 0 or len(head) < offset + size:
        return None
    value = int.from_bytes(head[offset : offset + size], "little")
    return value + 256 if size == 2 else value


Decompress = Callable[[BufferLike, np.ndarray[Any, Any]], Any]


def _zstd_into(decompress: Decompress, data: BufferLike, out: np.ndarray[Any, Any]) -> None:
    declared = zstd_content_size(data)
    if declared is not None and declared != out.nbytes:
        raise wrong_size("zstd", declared, out.nbytes)
    decompress(data, out)  # bounded by out (frames without a content size stream into it)


def _blosc_into(decompress: Decompress, data: BufferLike, out: np.ndarray[Any, Any]) -> None:
    head = _head(data, 16)
    if len(head) < 16:
        raise ChunkDecodeError(f"codec 'blosc': chunk is {len(head)} bytes, shorter than the 16-byte header")
    declared = int.from_bytes(head[4:8], "little")
    if declared != out.nbytes:
        raise wrong_size("blosc", declared, out.nbytes)
    cbytes = int.from_bytes(head[12:16], "little")
    if cbytes > nbytes_of(data):
        raise ChunkDecodeError(
            f"codec 'blosc': header says {cbytes} compressed bytes, chunk has {nbytes_of(data)}: truncated"
        )
    decompress(data, out)


def _lz4_into(decompress: Decompress, data: BufferLike, out: np.ndarray[Any, Any]) -> None:
    head = _head(data, 4)
    declared = int.from_bytes(head, "little") if len(head) == 4 else -1
    if declared != out.nbytes:
        raise wrong_size("lz4", declared, out.nbytes)
    decompress(data, out)


INTO: dict[str, Callable[[Decompress, BufferLike, np.ndarray[Any, Any]], None]] = {
    "zstd": _zstd_into,
    "blosc": _blosc_into,
    "lz4": _lz4_into,
}


def extension_path(codec_id: str) -> str | None:
    """The file of numcodecs' compiled module for ``codec_id`` (``"zstd"`` -> ``numcodecs/zstd.*.so``), for
    the native reader, which calls the same C functions; None when there is no such module."""
    try:
        module = importlib.import_module(f"numcodecs.{codec_id}")
    except ImportError:
        return None
    path = getattr(module, "__file__", None)
    return path if isinstance(path, str) and not path.endswith(".py") else None


def decompress_function(codec_id: str, codec: Any) -> Decompress:
    """numcodecs' module-level ``decompress(source, dest)`` (what ``Codec.decode`` calls after a few
    Python-level buffer conversions that cost more than small chunks take to decompress)."""
    module = importlib.import_module(type(codec).__module__)
    fn = getattr(module, "decompress", None)
    if callable(fn):
        return fn  # type: ignore[no-any-return]
    return lambda data, out: codec.decode(data, out=out)


def _stream(make: Callable[[], Any], data: BufferLike, expected: int | None, multi: bool, name: str) -> bytes:
    """Decompress with a bound of ``expected + 1`` bytes (all members when ``multi``)."""
    parts: list[bytes] = []
    total = 0
    buf: bytes | memoryview = data if isinstance(data, bytes) else as_byte_view(data)
    while True:
        d = make()
        room = 0 if expected is None else expected + 1 - total
        part = d.decompress(buf, room) if room > 0 else d.decompress(buf)
        total += len(part)
        parts.append(part)
        if expected is not None and total > expected:
            raise ChunkDecodeError(
                f"codec {name!r}: chunk decodes to more than the expected {expected} bytes: corrupt"
            )
        if not d.eof:
            raise ChunkDecodeError(f"codec {name!r}: compressed stream ends early: truncated or corrupt")
        rest: bytes = d.unused_data
        if not multi or not rest.strip(b"\x00"):
            return b"".join(parts)
        buf = rest


def _lzma_make(codec: Any) -> Callable[[], Any]:
    return lambda: lzma.LZMADecompressor(format=codec.format, filters=codec.filters)


STREAM: dict[str, Callable[[Any, BufferLike, int | None], bytes]] = {
    "gzip": lambda c, d, n: _stream(lambda: zlib.decompressobj(47), d, n, True, "gzip"),
    "zlib": lambda c, d, n: _stream(lambda: zlib.decompressobj(15), d, n, False, "zlib"),
    "bz2": lambda c, d, n: _stream(bz2.BZ2Decompressor, d, n, True, "bz2"),
    "lzma": lambda c, d, n: _stream(_lzma_make(c), d, n, True, "lzma"),
}
