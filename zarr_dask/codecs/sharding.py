"""``sharding_indexed``: an array->bytes codec holding a nested pipeline (whole-shard encode/decode, no IO).

A shard (the array's chunk) is cut into inner chunks of ``chunk_shape``, each encoded with the inner
``codecs``; the shard value is the concatenated payloads plus an index (uint64 ``(offset, nbytes)`` per inner
chunk, ``2**64 - 1`` twice for an empty one) encoded with ``index_codecs``, at the ``start`` or ``end``.
Payloads are written in Morton order and inner chunks equal to the fill value are left out, as zarr-python
does. Index entries are validated against the shard before any payload is read.

The index helpers (:meth:`ShardingCodec.index_size`, :meth:`ShardingCodec.decode_index`) are the building
blocks for partial reads (fetch the index by range, then only the inner chunks needed).
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Self

import numpy as np

from zarr_dask.codecs.base import ArrayBytesCodec, BufferLike, ChunkSpec, as_byte_view
from zarr_dask.errors import ChunkDecodeError, MetadataError
from zarr_dask.spec.dtypes import DataType

if TYPE_CHECKING:
    from zarr_dask.codecs.pipeline import CodecPipeline

__all__ = ["EMPTY", "ShardingCodec", "morton_order", "parse_sharding"]

EMPTY = 2**64 - 1
"""Offset and nbytes of an inner chunk that is not stored."""

DEFAULT_INDEX_CODECS: list[dict[str, Any]] = [
    {"name": "bytes", "configuration": {"endian": "little"}},
    {"name": "crc32c"},
]
_UINT64 = DataType(name="uint64", numpy_dtype=np.dtype("uint64"), zarr_format=3)


@functools.lru_cache(maxsize=64)
def morton_order(shape: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
    """Inner-chunk coordinates in zarr-python's (compressed) Morton order; the first axis is the lowest bit."""
    coords = np.indices(shape, dtype=np.uint64).reshape(len(shape), -1).T
    bits = [(s - 1).bit_length() for s in shape]
    code = np.zeros(len(coords), dtype=np.uint64)
    out_bit = 0
    for coord_bit in range(max(bits, default=0)):
        for dim, nbits in enumerate(bits):
            if coord_bit < nbits:
                bit = (coords[:, dim] >> np.uint64(coord_bit)) & np.uint64(1)
                code |= bit << np.uint64(out_bit)
                out_bit += 1
    order = np.argsort(code, kind="stable")
    return tuple(tuple(int(c) for c in row) for row in coords[order])


@dataclass(frozen=True)
class _Bound:
    inner: CodecPipeline
    index: CodecPipeline
    chunks_per_shard: tuple[int, ...]
    index_size: int


def _shape_list(value: Any) -> tuple[int, ...]:
    if (
        not isinstance(value, list | tuple)
        or not value
        or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in value)
    ):
        raise MetadataError(
            f"codec 'sharding_indexed': 'chunk_shape' must be a list of positive integers, got {value!r}"
        )
    return tuple(value)


def _codec_list(value: Any, key: str) -> list[Any]:
    if not isinstance(value, list | tuple) or not value:
        raise MetadataError(
            f"codec 'sharding_indexed': {key!r} must be a non-empty list of codecs, got {value!r}"
        )
    return list(value)


class ShardingCodec(ArrayBytesCodec):
    """The ``sharding_indexed`` codec (whole shards; partial reads are built on :meth:`decode_index`)."""

    name = "sharding_indexed"
    uses_fill_value = True

    def __init__(
        self,
        *,
        chunk_shape: tuple[int, ...],
        codecs: Sequence[Any],
        index_codecs: Sequence[Any],
        index_location: Literal["start", "end"],
        allow_unsafe: bool = False,
        bound: _Bound | None = None,
    ) -> None:
        from zarr_dask.codecs.registry import codec_from_v3

        for entry in codecs:  # fail early on unknown / unsafe inner codecs; the lists are kept as given
            codec_from_v3(entry, allow_unsafe=allow_unsafe)
        for entry in index_codecs:
            codec_from_v3(entry)
        self.chunk_shape = chunk_shape
        self.codecs = copy.deepcopy(list(codecs))
        self.index_codecs = copy.deepcopy(list(index_codecs))
        self.index_location = index_location
        self._allow_unsafe = allow_unsafe
        self._bound = bound

    def bind(self, spec: ChunkSpec) -> Self:
        from zarr_dask.codecs.pipeline import pipeline_from_v3

        if len(spec.shape) != len(self.chunk_shape) or any(
            s % c for s, c in zip(spec.shape, self.chunk_shape, strict=True)
        ):
            raise MetadataError(
                f"codec 'sharding_indexed': the inner 'chunk_shape' {list(self.chunk_shape)} must divide the "
                f"shard shape {list(spec.shape)} in every dimension"
            )
        cps = tuple(s // c for s, c in zip(spec.shape, self.chunk_shape, strict=True))
        inner = pipeline_from_v3(
            self.codecs,
            data_type=spec.data_type,
            chunk_shape=self.chunk_shape,
            allow_unsafe_codecs=self._allow_unsafe,
        )
        index = pipeline_from_v3(self.index_codecs, data_type=_UINT64, chunk_shape=(*cps, 2))
        index_size = index.fixed_encoded_size((*cps, 2))
        if index_size is None:
            raise MetadataError(
                f"codec 'sharding_indexed': 'index_codecs' {self.index_codecs} must have a fixed encoded size "
                "(no compression); use [bytes (little endian), crc32c]"
            )
        bound = _Bound(inner=inner, index=index, chunks_per_shard=cps, index_size=index_size)
        return type(self)(
            chunk_shape=self.chunk_shape,
            codecs=self.codecs,
            index_codecs=self.index_codecs,
            index_location=self.index_location,
            allow_unsafe=self._allow_unsafe,
            bound=bound,
        )

    def to_json(self) -> dict[str, Any]:
        b = self._bound
        return {
            "name": "sharding_indexed",
            "configuration": {
                "chunk_shape": list(self.chunk_shape),
                "codecs": b.inner.to_json() if b else self.codecs,
                "index_codecs": b.index.to_json() if b else self.index_codecs,
                "index_location": self.index_location,
            },
        }

    # ------------------------------------------------------------------------------------------ index
    def _state(self) -> _Bound:
        assert self._bound is not None, "bind() first"
        return self._bound

    def index_size(self) -> int:
        """Encoded size of the shard index in bytes (``16 * n + 4`` with bytes + crc32c)."""
        return self._state().index_size

    def index_range(self, shard_nbytes: int) -> tuple[int, int]:
        """``(start, stop)`` of the index inside a shard value of ``shard_nbytes`` bytes."""
        size = self._state().index_size
        return (0, size) if self.index_location == "start" else (shard_nbytes - size, shard_nbytes)

    def decode_index(self, index_bytes: BufferLike, shard_nbytes: int) -> np.ndarray[Any, Any]:
        """Decode and validate the index: uint64 ``(*chunks_per_shard, 2)`` of ``(offset, nbytes)``.

        Every stored entry must lie inside the shard's payload area (not overlapping the index).
        """
        b = self._state()
        shape = (*b.chunks_per_shard, 2)
        zero = np.zeros((), dtype=np.uint64)
        index = b.index.decode(index_bytes, ChunkSpec(shape=shape, data_type=_UINT64, fill_value=zero))
        lo, hi = (
            (b.index_size, shard_nbytes)
            if self.index_location == "start"
            else (0, shard_nbytes - b.index_size)
        )
        offsets, sizes = index[..., 0], index[..., 1]
        empty = (offsets == EMPTY) & (sizes == EMPTY)
        with np.errstate(over="ignore"):
            bad = ~empty & ((offsets < lo) | (sizes > hi - lo) | (offsets > hi - np.minimum(sizes, hi)))
        if bad.any():
            where = tuple(int(i) for i in np.argwhere(bad)[0])
            off, nb = (int(v) for v in index[where])
            raise ChunkDecodeError(
                f"codec 'sharding_indexed': inner chunk {where} has offset {off} and {nb} bytes, outside the "
                f"shard's payload bytes [{lo}, {hi}): corrupt index"
            )
        return index

    # ------------------------------------------------------------------------------------ decode/encode
    def decode(self, data: BufferLike, spec: ChunkSpec) -> np.ndarray[Any, Any]:
        b = self._state()
        view = as_byte_view(data)
        if len(view) < b.index_size:
            raise ChunkDecodeError(
                f"codec 'sharding_indexed': shard is {len(view)} bytes, smaller than its {b.index_size}-byte index"
            )
        start, stop = self.index_range(len(view))
        index = self.decode_index(view[start:stop], len(view))
        out = np.empty(spec.shape, dtype=spec.dtype)
        inner_spec = ChunkSpec(shape=self.chunk_shape, data_type=spec.data_type, fill_value=spec.fill_value)
        entries = index.reshape(-1, 2).tolist()  # C order, like np.ndindex
        for coords, (off, nb) in zip(np.ndindex(*b.chunks_per_shard), entries, strict=True):
            region = tuple(slice(i * c, (i + 1) * c) for i, c in zip(coords, self.chunk_shape, strict=True))
            if off == EMPTY:
                out[region] = spec.fill_value
            else:
                b.inner.decode_into(view[off : off + nb], inner_spec, out[region])
        return out

    def encode(self, chunk: np.ndarray[Any, Any], spec: ChunkSpec) -> BufferLike:
        b = self._state()
        inner_spec = ChunkSpec(shape=self.chunk_shape, data_type=spec.data_type, fill_value=spec.fill_value)
        index = np.full((*b.chunks_per_shard, 2), EMPTY, dtype=np.uint64)
        parts: list[bytes] = []
        offset = b.index_size if self.index_location == "start" else 0
        fill = _fill_bytes(spec, self.chunk_shape)
        for coords in morton_order(b.chunks_per_shard):
            region = tuple(slice(i * c, (i + 1) * c) for i, c in zip(coords, self.chunk_shape, strict=True))
            piece = np.ascontiguousarray(chunk[region])
            if _is_fill(piece, spec, fill):
                continue
            encoded = b.inner.encode(piece, inner_spec)
            index[coords] = (offset, len(encoded))
            parts.append(encoded)
            offset += len(encoded)
        zero = np.zeros((), dtype=np.uint64)
        index_spec = ChunkSpec(shape=index.shape, data_type=_UINT64, fill_value=zero)
        index_bytes = b.index.encode(index, index_spec)
        return b"".join([index_bytes, *parts] if self.index_location == "start" else [*parts, index_bytes])


def _fill_bytes(spec: ChunkSpec, shape: tuple[int, ...]) -> bytes | None:
    if spec.dtype.kind == "O":
        return None
    return np.broadcast_to(np.asarray(spec.fill_value, dtype=spec.dtype), shape).tobytes()


def _is_fill(piece: np.ndarray[Any, Any], spec: ChunkSpec, fill: bytes | None) -> bool:
    """Bit-exact comparison with the fill value (element-wise equality for object arrays)."""
    if fill is not None:
        return piece.tobytes() == fill
    value = spec.fill_value[()]
    return all(x == value for x in piece.flat)


def parse_sharding(configuration: Mapping[str, Any] | None, *, allow_unsafe: bool = False) -> ShardingCodec:
    """``{"name": "sharding_indexed", "configuration": {chunk_shape, codecs, index_codecs, index_location}}``."""
    config = dict(configuration or {})
    unknown = sorted(set(config) - {"chunk_shape", "codecs", "index_codecs", "index_location"})
    if unknown:
        raise MetadataError(f"codec 'sharding_indexed': unknown configuration key(s) {unknown}")
    location = config.get("index_location", "end")
    if location not in ("start", "end"):
        raise MetadataError(
            f"codec 'sharding_indexed': 'index_location' must be 'start' or 'end', got {location!r}"
        )
    return ShardingCodec(
        chunk_shape=_shape_list(config.get("chunk_shape")),
        codecs=_codec_list(config.get("codecs"), "codecs"),
        index_codecs=_codec_list(config.get("index_codecs", DEFAULT_INDEX_CODECS), "index_codecs"),
        index_location="start" if location == "start" else "end",
        allow_unsafe=allow_unsafe,
    )
