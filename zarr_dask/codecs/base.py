"""Codec ABCs, the per-chunk :class:`ChunkSpec` and small buffer / dtype helpers.

Three codec kinds, named by their *encode* direction (Zarr v3 spec, "codec chain"):

- :class:`ArrayArrayCodec` (AA): ndarray -> ndarray, may change shape and dtype (``resolve``);
- :class:`ArrayBytesCodec` (AB): ndarray -> bytes; exactly one per chain. A codec holding a nested
  pipeline (``sharding_indexed``) is an AB codec whose ``decode`` receives the full runtime
  :class:`ChunkSpec` (shape, data type, fill value);
- :class:`BytesBytesCodec` (BB): bytes -> bytes; ``decode`` is told the expected output size when it is known,
  so decompressors can refuse decompression bombs before allocating.

Codecs are immutable after construction. ``bind(spec)`` returns a codec specialised to its input (e.g. the
transpose ``"F"`` short-hand becomes an explicit permutation); the pipeline calls it once, at construction.
"""

from __future__ import annotations

import math
import warnings
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Self, TypeAlias

import numpy as np

from zarr_dask.errors import ChunkDecodeError
from zarr_dask.spec.dtypes import DataType

__all__ = [
    "ArrayArrayCodec",
    "ArrayBytesCodec",
    "BufferLike",
    "BytesBytesCodec",
    "ChunkSpec",
    "Codec",
    "CodecKind",
    "as_byte_view",
    "derived_data_type",
    "derived_spec",
    "has_endianness",
    "nbytes_of",
    "wrong_size",
]

BufferLike: TypeAlias = "bytes | bytearray | memoryview | np.ndarray[Any, Any]"
"""Anything with the buffer protocol that codecs accept and return (1-D, contiguous)."""

CodecKind = Literal["array_array", "array_bytes", "bytes_bytes"]


@dataclass(frozen=True, kw_only=True)
class ChunkSpec:
    """What a pipeline needs to know about one chunk.

    Attributes
    ----------
    shape
        The stored (full) chunk shape; edge chunks have it too.
    data_type
        The array's data type; decoded chunks have dtype ``data_type.numpy_dtype``.
    fill_value
        0-d array of ``data_type.numpy_dtype`` (v2 ``null`` fill -> the dtype's default).
    order
        v2 memory order of the chunk bytes; v3 chunks are always stored in C order.
    """

    shape: tuple[int, ...]
    data_type: DataType
    fill_value: np.ndarray[Any, Any]
    order: Literal["C", "F"] = "C"

    @property
    def dtype(self) -> np.dtype[Any]:
        """Shortcut for ``data_type.numpy_dtype``."""
        return self.data_type.numpy_dtype

    @property
    def size(self) -> int:
        """Number of elements in the chunk."""
        return math.prod(self.shape)

    @property
    def nbytes_declared(self) -> int:
        """Bytes of the decoded chunk (object arrays: one pointer per element)."""
        return self.size * max(self.dtype.itemsize, 1)


#: Expansion assumed for a codec that does not say how much its decoding can expand the data (bzip2 reaches
#: about 1:10**6 on long runs): large enough for any real codec, small enough to refuse absurd declarations.
UNKNOWN_RATIO = 1 << 24


class Codec(ABC):
    """Base of all codecs: a name, a kind and the JSON it is written as."""

    kind: ClassVar[CodecKind]
    max_ratio: int | None = UNKNOWN_RATIO
    """Most bytes decoding can produce per encoded byte (None: no bound at this level, e.g. sharding, whose
    inner chunks are checked one by one). A stored object declaring more is refused before any allocation."""
    name: str
    """The v3 name (``"bytes"``, ``"zstd"``, ``"numcodecs.delta"``) or, for v2-only codecs, the numcodecs id."""

    def bind(self, spec: ChunkSpec) -> Self:
        """Return this codec specialised to its input ``spec`` (default: itself); errors name the codec."""
        return self

    @abstractmethod
    def to_json(self) -> dict[str, Any]:
        """The v3 codec object, as zarr-python writes it."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.to_json()!r})"


class ArrayArrayCodec(Codec):
    """ndarray -> ndarray (``transpose``, ``numcodecs.delta``, the v2 ``order="F"`` layout, ...)."""

    kind: ClassVar[CodecKind] = "array_array"
    max_ratio: int | None = 16  # a change of data type (packbits, astype) expands at most 8x

    def resolve(self, spec: ChunkSpec) -> ChunkSpec:
        """The spec of the encoded array given the input ``spec`` (default: unchanged)."""
        return spec

    @abstractmethod
    def encode(self, chunk: np.ndarray[Any, Any], spec: ChunkSpec) -> np.ndarray[Any, Any]:
        """Encode ``chunk`` (described by the input ``spec``)."""

    @abstractmethod
    def decode(self, chunk: np.ndarray[Any, Any], spec: ChunkSpec) -> np.ndarray[Any, Any]:
        """Decode back to an array described by the input ``spec``."""


class ArrayBytesCodec(Codec):
    """ndarray -> bytes (``bytes``, ``vlen-utf8``, ``numcodecs.pcodec``, later ``sharding_indexed``)."""

    kind: ClassVar[CodecKind] = "array_bytes"
    uses_fill_value: ClassVar[bool] = False
    """True when ``decode`` reads ``spec.fill_value`` (sharding: empty inner chunks)."""

    def encoded_size(self, spec: ChunkSpec) -> int | None:
        """Exact encoded size for ``spec`` when fixed (``bytes``), else None."""
        return None

    @abstractmethod
    def encode(self, chunk: np.ndarray[Any, Any], spec: ChunkSpec) -> BufferLike:
        """Serialise ``chunk``; the result feeds the bytes->bytes codecs."""

    @abstractmethod
    def decode(self, data: BufferLike, spec: ChunkSpec) -> np.ndarray[Any, Any]:
        """Deserialise to an array of ``spec.shape`` and ``spec.dtype`` (may be read-only)."""


class BytesBytesCodec(Codec):
    """bytes -> bytes (compressors, checksums, shuffles)."""

    kind: ClassVar[CodecKind] = "bytes_bytes"
    decodes_into: bool = False
    """True when :meth:`decode_into` writes straight into the destination (no intermediate buffer)."""

    def encoded_size(self, nbytes: int) -> int | None:
        """Encoded size of an input of ``nbytes`` when fixed (crc32c: ``n + 4``), else None."""
        return None

    @abstractmethod
    def encode(self, data: BufferLike) -> BufferLike:
        """Encode a 1-D buffer (typed ndarrays keep their itemsize, which Blosc records)."""

    @abstractmethod
    def decode(self, data: BufferLike, expected: int | None) -> BufferLike:
        """Decode; ``expected`` is the exact decoded size when known (raise ChunkDecodeError otherwise)."""

    def decode_into(self, data: BufferLike, out: np.ndarray[Any, Any]) -> None:
        """Decode into the C-contiguous, writable ``out`` whose ``nbytes`` is the exact expected size."""
        decoded = self.decode(data, out.nbytes)
        out.reshape(-1).view(np.uint8)[:] = as_byte_view(decoded)


# ---------------------------------------------------------------------------------------------- helpers
def nbytes_of(buf: BufferLike) -> int:
    """Size in bytes of any buffer."""
    if isinstance(buf, bytes | bytearray):
        return len(buf)
    if isinstance(buf, np.ndarray):
        return int(buf.nbytes)
    return memoryview(buf).nbytes


def as_byte_view(buf: BufferLike) -> memoryview:
    """A flat, unsigned-byte memoryview of ``buf`` (zero copy for contiguous input)."""
    if isinstance(buf, np.ndarray):
        if not buf.flags.c_contiguous:
            buf = np.ascontiguousarray(buf)
        return buf.reshape(-1).view(np.uint8).data
    mv = memoryview(buf)
    if mv.format == "B" and mv.ndim == 1:
        return mv
    if not mv.c_contiguous:
        return memoryview(mv.tobytes())
    return mv.cast("B")


def has_endianness(dtype: np.dtype[Any]) -> bool:
    """True when the stored form of ``dtype`` depends on byte order (any multi-byte scalar component)."""
    if dtype.fields is not None:
        return any(has_endianness(f[0]) for f in dtype.fields.values())
    if dtype.subdtype is not None:
        return has_endianness(dtype.subdtype[0])
    return dtype.byteorder != "|" and dtype.kind != "O" and dtype.itemsize > 1  # 1-byte ml_dtypes types say "="


def derived_data_type(base: DataType, dtype: np.dtype[Any]) -> DataType:
    """The data type of an intermediate array (after an AA codec changed the dtype).

    Intermediate representations are described by their exact NumPy dtype, i.e. in the v2 manner.
    """
    if dtype == base.numpy_dtype:
        return base
    if dtype.kind == "O":
        return DataType(name="|O", numpy_dtype=dtype, vlen=base.vlen or "str", zarr_format=2)
    return DataType(name=dtype.str, numpy_dtype=dtype, zarr_format=2)


def derived_spec(
    spec: ChunkSpec, *, shape: tuple[int, ...] | None = None, dtype: np.dtype[Any] | None = None
) -> ChunkSpec:
    """``spec`` with a new shape and/or dtype (the fill value is cast, or zero when it does not cast)."""
    new_shape = spec.shape if shape is None else shape
    if dtype is None or dtype == spec.dtype:
        return ChunkSpec(
            shape=new_shape, data_type=spec.data_type, fill_value=spec.fill_value, order=spec.order
        )
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            fill = np.asarray(spec.fill_value).astype(dtype)
    except (TypeError, ValueError):
        fill = np.zeros((), dtype=dtype)
    data_type = derived_data_type(spec.data_type, dtype)
    return ChunkSpec(shape=new_shape, data_type=data_type, fill_value=fill, order=spec.order)


def wrong_size(codec: str, got: int, expected: int) -> ChunkDecodeError:
    """The error for a decoded buffer of the wrong size."""
    return ChunkDecodeError(
        f"codec {codec!r}: chunk decodes to {got} bytes, expected {expected}: truncated or corrupt"
    )
