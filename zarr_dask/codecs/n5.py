"""The zarr-extensions ``n5_default`` codec (array->bytes): N5 blocks in "default" mode.

A block is a header -- mode (uint16, big-endian, 0 = default), number of dimensions (uint16) and the block
shape (uint32 each, in the array's dimension order) -- then the nested ``codecs``: a full ``transpose``
(N5 stores F order), ``bytes`` with ``endian: "big"`` (optional for 1-byte types) and at most one
bytes->bytes codec. Decoding pads a truncated edge block (as Java N5 writes) with the fill value; blocks
larger than the chunk, other modes (varlength, object) and other ranks are decode errors. Encoding writes
whole (padded) blocks, as tensorstore and zarr-python 2 do.
"""

from __future__ import annotations

import copy
import struct
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Self

import numpy as np

from zarr_dask.codecs.base import ArrayBytesCodec, BufferLike, ChunkSpec, Codec, as_byte_view
from zarr_dask.errors import ChunkDecodeError, MetadataError

if TYPE_CHECKING:
    from zarr_dask.codecs.pipeline import CodecPipeline

__all__ = ["N5DefaultCodec", "parse_n5_default"]

Array = np.ndarray[Any, Any]


def _name(entry: Any) -> Any:
    return entry if isinstance(entry, str) else entry.get("name") if isinstance(entry, Mapping) else None


def _config(entry: Any) -> Mapping[str, Any]:
    config = entry.get("configuration") if isinstance(entry, Mapping) else None
    return config if isinstance(config, Mapping) else {}


class N5DefaultCodec(ArrayBytesCodec):
    """``{"name": "n5_default", "configuration": {"codecs": [transpose, bytes (big), compressor?]}}``.

    Examples
    --------
    >>> import numpy as np
    >>> from zarr_dask.codecs import ChunkSpec
    >>> from zarr_dask.spec import parse_data_type
    >>> spec = ChunkSpec(shape=(2, 3), data_type=parse_data_type("uint8", zarr_format=3), fill_value=np.zeros((), "u1"))
    >>> codec = parse_n5_default({"codecs": [{"name": "transpose", "configuration": {"order": [1, 0]}},
    ...                                      {"name": "bytes"}]}).bind(spec)
    >>> bytes(codec.encode(np.arange(6, dtype="u1").reshape(2, 3), spec)).hex()  # header, then F order
    '000000020000000200000003000301040205'
    """

    name = "n5_default"
    max_ratio = None  # the nested pipeline checks its own stored sizes
    uses_fill_value = True  # truncated blocks are padded with it

    def __init__(self, codecs: Sequence[Any], inner: CodecPipeline | None = None) -> None:
        self.codecs, self.inner = copy.deepcopy(list(codecs)), inner

    def bind(self, spec: ChunkSpec) -> Self:
        from zarr_dask.codecs.pipeline import pipeline_from_v3

        ndim = len(spec.shape)
        codecs = self.codecs
        order = _config(codecs[0]).get("order") if codecs else None
        if not codecs or _name(codecs[0]) != "transpose" or list(order or ()) != list(range(ndim))[::-1]:
            raise MetadataError(f"codec 'n5_default': the first nested codec must be a transpose with order "
                                f"{list(range(ndim))[::-1]} (N5 blocks are in F order), got {codecs[:1]}")  # fmt: skip
        endian = _config(codecs[1]).get("endian") if len(codecs) > 1 else None
        big = endian == "big" or (endian is None and spec.dtype.itemsize == 1)
        if len(codecs) < 2 or _name(codecs[1]) != "bytes" or not big:
            raise MetadataError("codec 'n5_default': the second nested codec must be bytes with endian 'big' "
                                f"(N5 blocks are big-endian), got {codecs[1:2]}")  # fmt: skip
        if len(codecs) > 3:
            raise MetadataError(f"codec 'n5_default': at most one codec may follow bytes, got {codecs[2:]}")
        from zarr_dask.codecs.registry import codec_from_v3  # the registry imports this module

        if len(codecs) == 3 and codec_from_v3(codecs[2]).kind != "bytes_bytes":
            raise MetadataError(f"codec 'n5_default': {codecs[2]!r} is not a bytes->bytes codec")
        return type(self)(self.codecs, pipeline_from_v3(codecs, data_type=spec.data_type, chunk_shape=spec.shape))

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "configuration": {"codecs": copy.deepcopy(self.codecs)}}

    def encode(self, chunk: Array, spec: ChunkSpec) -> BufferLike:
        assert self.inner is not None, "bind() first"
        header = struct.pack(f">HH{len(spec.shape)}I", 0, len(spec.shape), *spec.shape)
        return header + self.inner.encode(np.ascontiguousarray(chunk), spec)

    def decode(self, data: BufferLike, spec: ChunkSpec) -> Array:
        assert self.inner is not None, "bind() first"
        view = as_byte_view(data)
        ndim = len(spec.shape)
        size = 4 + 4 * ndim
        if len(view) < size:
            raise ChunkDecodeError(f"codec 'n5_default': the block has {len(view)} bytes, fewer than its "
                                   f"{size}-byte header")  # fmt: skip
        mode, rank = struct.unpack(">HH", view[:4])
        if mode != 0 or rank != ndim:
            what = f"mode {mode} (only 0, default, is read)" if mode != 0 else f"{rank} dimensions, the array {ndim}"
            raise ChunkDecodeError(f"codec 'n5_default': the block header says {what}")
        block = struct.unpack(f">{ndim}I", view[4:size])
        if any(b > s for b, s in zip(block, spec.shape, strict=True)):
            raise ChunkDecodeError(f"codec 'n5_default': the block shape {list(block)} is larger than the chunk "
                                   f"{list(spec.shape)}")  # fmt: skip
        sub = ChunkSpec(shape=tuple(block), data_type=spec.data_type, fill_value=spec.fill_value, order=spec.order)
        arr = self.inner.decode(view[size:], sub)
        if tuple(block) == spec.shape:
            return arr
        out = np.full(spec.shape, spec.fill_value, dtype=spec.dtype)  # a truncated edge block
        out[tuple(slice(0, b) for b in block)] = arr
        return out


def parse_n5_default(configuration: Mapping[str, Any] | None) -> Codec:
    """``n5_default``: ``codecs`` (required; checked against the array when bound)."""
    config = dict(configuration or {})
    if set(config) != {"codecs"} or not isinstance(config["codecs"], list):
        raise MetadataError(f"codec 'n5_default' takes exactly a 'codecs' list, got {dict(config)!r}")
    return N5DefaultCodec(config["codecs"])
