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
from typing import TYPE_CHECKING, Any, Literal, Self, overload

import numpy as np

from zarr_dask.codecs.base import ArrayBytesCodec, BufferLike, ChunkSpec, as_byte_view, nbytes_of
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
    if not shape:  # a 0-d shard holds one inner chunk
        return ((),)
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
    if not isinstance(value, list | tuple) or any(
        isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in value
    ):  # [] is a 0-d array's (zarr-python and tensorstore write it)
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
    max_ratio = None  # inner chunks are checked one by one; the index size follows from the limits

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

    @property
    def chunks_per_shard(self) -> tuple[int, ...]:
        """Number of inner chunks along each dimension of the (bound) shard."""
        return self._state().chunks_per_shard

    @property
    def inner_pipeline(self) -> CodecPipeline:
        """The pipeline of the inner chunks (bound to the inner ``chunk_shape``)."""
        return self._state().inner

    def inner_spec(self, spec: ChunkSpec) -> ChunkSpec:
        """The spec of one inner chunk of a shard described by ``spec``."""
        return ChunkSpec(shape=self.chunk_shape, data_type=spec.data_type, fill_value=spec.fill_value)

    def index_size(self) -> int:
        """Encoded size of the shard index in bytes (``16 * n + 4`` with bytes + crc32c)."""
        return self._state().index_size

    def index_range(self, shard_nbytes: int) -> tuple[int, int]:
        """``(start, stop)`` of the index inside a shard value of ``shard_nbytes`` bytes."""
        size = self._state().index_size
        return (0, size) if self.index_location == "start" else (shard_nbytes - size, shard_nbytes)

    def index_request(self) -> tuple[int, int | None]:
        """``(start, end)`` of the index as a store byte range: a prefix or a suffix (negative start)."""
        size = self._state().index_size
        return (0, size) if self.index_location == "start" else (-size, None)

    def payload_bounds(self, shard_nbytes: int | None) -> tuple[int, int | None]:
        """``[lo, hi)`` of the payload area (``hi`` is None when the shard size is not known)."""
        size = self._state().index_size
        if self.index_location == "start":
            return size, shard_nbytes
        return 0, None if shard_nbytes is None else shard_nbytes - size

    def decode_index(self, index_bytes: BufferLike, shard_nbytes: int | None) -> np.ndarray[Any, Any]:
        """Decode and validate the index: uint64 ``(*chunks_per_shard, 2)`` of ``(offset, nbytes)``.

        Every stored entry must lie inside the shard's payload area (not overlapping the index). With
        ``shard_nbytes=None`` (only the index was fetched) the upper bound is left to the caller, who learns
        it from the payload reads.

        Raises
        ------
        ChunkDecodeError
            A truncated index, a checksum mismatch, or an entry outside the payload area.
        """
        b = self._state()
        view = as_byte_view(index_bytes)
        if len(view) != b.index_size:
            raise ChunkDecodeError(
                f"shard index is {len(view)} bytes, expected {b.index_size} ({b.index_size // 16} inner chunks x "
                "16 bytes + checksum): the shard is truncated or corrupt"
            )
        shape = (*b.chunks_per_shard, 2)
        zero = np.zeros((), dtype=np.uint64)
        try:
            index = b.index.decode(view, ChunkSpec(shape=shape, data_type=_UINT64, fill_value=zero))
        except ChunkDecodeError as e:
            raise ChunkDecodeError(f"shard index cannot be decoded: {e.problem}") from None
        lo, hi = self.payload_bounds(shard_nbytes)
        top = EMPTY - 1 if hi is None else hi
        offsets, sizes = index[..., 0], index[..., 1]
        empty = (offsets == EMPTY) & (sizes == EMPTY)
        with np.errstate(over="ignore"):
            bad = ~empty & ((offsets < lo) | (sizes > top - lo) | (offsets > top - np.minimum(sizes, top)))
        if bad.any():
            where = tuple(int(i) for i in np.argwhere(bad)[0])
            off, nb = (int(v) for v in index[where])
            area = f"[{lo}, {hi})" if hi is not None else f"[{lo}, ...)"
            raise ChunkDecodeError(
                f"shard index: inner chunk {where} has offset {off} and {nb} bytes, outside the shard's payload "
                f"bytes {area} (past the end or overlapping the {b.index_size}-byte index): corrupt index"
            )
        return index

    def encode_index(self, index: np.ndarray[Any, Any]) -> bytes:
        """Encode a uint64 ``(*chunks_per_shard, 2)`` index with the ``index_codecs``."""
        zero = np.zeros((), dtype=np.uint64)
        return self._state().index.encode(index, ChunkSpec(shape=index.shape, data_type=_UINT64, fill_value=zero))

    @overload
    def assemble(self, payloads: Mapping[tuple[int, ...], BufferLike], pieces: Literal[False] = False) -> bytes | None: ...
    @overload
    def assemble(self, payloads: Mapping[tuple[int, ...], BufferLike], pieces: bool) -> bytes | list[bytes | memoryview] | None: ...
    def assemble(self, payloads: Mapping[tuple[int, ...], BufferLike], pieces: bool = False) -> bytes | list[bytes | memoryview] | None:
        """The shard value holding the encoded inner chunks ``payloads`` (by inner coordinates), laid out in
        Morton order as zarr-python does; None when there is no payload (the shard is not to be stored).
        ``pieces``: the value as the list of its buffers in stored order (index and inner chunks), not joined --
        for stores that write a value in pieces."""
        if not payloads:
            return None
        b = self._state()
        index = np.full((*b.chunks_per_shard, 2), EMPTY, dtype=np.uint64)
        parts: list[bytes | memoryview] = []
        offset = b.index_size if self.index_location == "start" else 0
        for coords in morton_order(b.chunks_per_shard):
            data = payloads.get(coords)
            if data is None:
                continue
            n = nbytes_of(data)
            index[coords] = (offset, n)
            parts.append(data if isinstance(data, bytes) else as_byte_view(data))
            offset += n
        index_bytes = self.encode_index(index)
        ordered: list[bytes | memoryview] = [index_bytes, *parts] if self.index_location == "start" else [*parts, index_bytes]
        return ordered if pieces else b"".join(ordered)

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
        inner_spec = self.inner_spec(spec)
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
        inner_spec = self.inner_spec(spec)
        fill = _fill_bytes(spec, self.chunk_shape)
        payloads: dict[tuple[int, ...], BufferLike] = {}
        for coords in np.ndindex(*b.chunks_per_shard):
            region = tuple(slice(i * c, (i + 1) * c) for i, c in zip(coords, self.chunk_shape, strict=True))
            piece = np.ascontiguousarray(chunk[region])
            if not _is_fill(piece, spec, fill):
                payloads[coords] = b.inner.encode(piece, inner_spec)
        if not payloads:  # a whole-shard encode always yields a value: just the all-empty index
            index = np.full((*b.chunks_per_shard, 2), EMPTY, dtype=np.uint64)
            return self.encode_index(index)
        result = self.assemble(payloads)
        assert result is not None
        return result


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
