"""A codec chain bound to one chunk shape and order: :class:`ChunkPlan`, what a pipeline resolves once per shape.

Binding resolves every codec against the chunk spec it will see (array->array codecs change the spec the next
codec gets), records the sizes each bytes->bytes codec should produce, the largest expansion the chain allows
(to refuse implausible stored objects before allocating) and the decode path: the generic chain, or the fast
path where a ``bytes`` codec is followed by a compressor that decompresses straight into a NumPy buffer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from zarr_dask.codecs.base import (
    ArrayArrayCodec,
    ArrayBytesCodec,
    BufferLike,
    BytesBytesCodec,
    ChunkSpec,
    Codec,
    as_byte_view,
    nbytes_of,
)
from zarr_dask.codecs.builtin import BytesCodec, TransposeCodec
from zarr_dask.errors import ChunkDecodeError

__all__ = ["PLAUSIBLE_FLOOR", "ChunkPlan"]

#: Decoded chunk sizes never refused for their stored size (:meth:`CodecPipeline.check_stored`).
PLAUSIBLE_FLOOR = 1 << 20


class ChunkPlan:
    """A chain bound to one chunk shape / order: bound codecs, intermediate specs and the decode path."""

    __slots__ = (
        "aa",
        "ab",
        "ab_spec",
        "bb",
        "_aa_rev",
        "_bb_rev",
        "_bb_outer",
        "_bb0",
        "_fast",
        "_stored",
        "_swap",
        "decode",
        "declared",
        "encoded_size",
        "max_ratio",
    )

    def __init__(
        self,
        aa: Sequence[ArrayArrayCodec],
        ab: ArrayBytesCodec,
        bb: Sequence[BytesBytesCodec],
        spec: ChunkSpec,
    ):
        bound_aa: list[tuple[ArrayArrayCodec, ChunkSpec]] = []
        for codec in aa:
            codec = codec.bind(spec)
            bound_aa.append((codec, spec))
            spec = codec.resolve(spec)
        self.aa = tuple(bound_aa)
        self.ab = ab.bind(spec)
        self.ab_spec = spec
        self.bb = tuple(c.bind(spec) for c in bb)
        expected: list[int | None] = []
        size = self.ab.encoded_size(spec)
        for bb_codec in self.bb:
            expected.append(size)
            size = None if size is None else bb_codec.encoded_size(size)
        self.encoded_size = size
        self._aa_rev = self.aa[::-1]
        self._bb_rev = tuple(zip(self.bb, expected, strict=True))[::-1]
        self._bb_outer = self._bb_rev[:-1]
        self._bb0 = self.bb[0] if self.bb else None
        fast = (
            isinstance(self.ab, BytesCodec)
            and self._bb0 is not None
            and self._bb0.decodes_into
            and all(isinstance(c, TransposeCodec) for c, _ in self.aa)
        )
        self._fast = fast
        self.declared = spec.nbytes_declared
        ratio: int | None = 1
        for c in self.codecs():
            ratio = None if ratio is None or c.max_ratio is None else ratio * c.max_ratio
        self.max_ratio = ratio
        self._stored = self.ab.stored_dtype(spec.dtype) if isinstance(self.ab, BytesCodec) else spec.dtype
        self._swap = self._stored != spec.dtype
        self.decode: Callable[[BufferLike, ChunkSpec], np.ndarray[Any, Any]] = (
            self._decode_fast if fast else self._decode_generic
        )

    def check_stored(self, data: BufferLike) -> None:
        """Refuse a stored object too small to decode to the declared chunk (before anything is allocated)."""
        declared, ratio = self.declared, self.max_ratio
        if ratio is None or declared <= PLAUSIBLE_FLOOR:
            return
        stored = nbytes_of(data)
        if declared > stored * ratio + PLAUSIBLE_FLOOR:
            names = [c.name for c in self.codecs()]
            raise ChunkDecodeError(
                f"the stored object has {stored} bytes but the chunk is declared to decode to {declared} bytes; "
                f"the codecs {names} expand data at most {ratio}x, so the object is corrupt or the metadata's "
                "chunk shape is wrong (refused before allocating the chunk)"
            )

    def _decode_generic(self, data: BufferLike, spec: ChunkSpec) -> np.ndarray[Any, Any]:
        buf = data
        for codec, expected in self._bb_rev:
            buf = codec.decode(buf, expected)
        arr = self.ab.decode(buf, self._ab_spec(spec))
        for aa_codec, aa_spec in self._aa_rev:
            arr = aa_codec.decode(arr, aa_spec)
        return arr

    def _ab_spec(self, spec: ChunkSpec) -> ChunkSpec:
        """The array->bytes codec's input spec, with the runtime fill value where the codec reads it."""
        if not self.aa:
            return spec
        if not self.ab.uses_fill_value:
            return self.ab_spec
        for codec, _ in self.aa:
            spec = codec.resolve(spec)
        return spec

    def _decode_fast(self, data: BufferLike, spec: ChunkSpec) -> np.ndarray[Any, Any]:
        buf = data
        for codec, expected in self._bb_outer:
            buf = codec.decode(buf, expected)
        out = np.empty(self.ab_spec.shape, dtype=self._stored)
        self._bb0.decode_into(buf, out)  # type: ignore[union-attr]  # fast path implies a bb0
        if self._swap:
            out = self.ab.from_stored(out, self.ab_spec.dtype)  # type: ignore[attr-defined]  # a BytesCodec
        for aa_codec, aa_spec in self._aa_rev:
            out = aa_codec.decode(out, aa_spec)
        return out

    def decode_into(self, data: BufferLike, spec: ChunkSpec, out: np.ndarray[Any, Any]) -> bool:
        """Decode straight into ``out`` when the fast path applies without a transform; False otherwise."""
        if not self._fast or self.aa or self._swap:
            return False
        if not (out.flags.c_contiguous and out.flags.writeable and out.dtype == self._stored):
            return False
        buf = data
        for codec, expected in self._bb_outer:
            buf = codec.decode(buf, expected)
        self._bb0.decode_into(buf, out)  # type: ignore[union-attr]
        return True

    def encode(self, chunk: np.ndarray[Any, Any], spec: ChunkSpec) -> bytes:
        arr = chunk
        for codec, aa_spec in self.aa:
            arr = codec.encode(arr, aa_spec)
        buf = self.ab.encode(arr, self._ab_spec(spec))
        for bb_codec in self.bb:
            buf = bb_codec.encode(buf)
        return buf if isinstance(buf, bytes) else as_byte_view(buf).tobytes()

    def codecs(self) -> list[Codec]:
        return [c for c, _ in self.aa] + [self.ab, *self.bb]
