"""The zarr-extensions ``packbits`` codec (array->bytes): elements packed at their own bit width.

Each component (two for complex types) keeps its bits ``first_bit`` .. ``last_bit`` (default: all ``N`` bits of
the type: 1 for bool, 2 for (u)int2, 4 for (u)int4 / float4_e2m1fn, 6 for the float6 types, else 8 x the byte
size); the components are laid end to end, least significant bit first ("PackedLsb0", as zarrs writes: a
full-width type packs to exactly its little-endian bytes), padded with zero bits to a whole byte. Decoding
shifts the bits back to ``first_bit`` and sign-extends signed integers. ``padding_encoding`` ``"first_byte"`` /
``"last_byte"`` adds a byte counting the padding bits. The registry's README names the options
``first_byte``/``last_byte``/``first_bit``/``last_bit`` while its schema.json says ``start_byte``/``end_byte``/
``start_bit``/``end_bit``: both are read; the JSON is written back as given. numcodecs' ``PackBits`` (bool
only) packs the most significant bit first, so its chunks are not this codec's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Literal, Self

import numpy as np

from zarr_dask.codecs.base import (
    ArrayBytesCodec,
    BufferLike,
    ChunkSpec,
    Codec,
    as_byte_view,
    nbytes_of,
    wrong_size,
)
from zarr_dask.errors import ChunkDecodeError, MetadataError
from zarr_dask.spec.ml_types import ml_name, sub_byte

__all__ = ["PackbitsCodec", "parse_packbits"]

Array = np.ndarray[Any, Any]
Padding = Literal["none", "first_byte", "last_byte"]
_PADDING: dict[str, Padding] = {"none": "none", "first_byte": "first_byte", "start_byte": "first_byte",
                                "last_byte": "last_byte", "end_byte": "last_byte"}  # fmt: skip


def _layout(dtype: np.dtype[Any]) -> tuple[int, int, bool]:
    """``(components, bits per component N, signed)`` of a data type, or MetadataError."""
    fields = dtype.fields
    if fields is not None and set(fields) == {"real", "imag"}:
        part = fields["real"][0]
        return 2, _layout(part)[1], False
    if dtype.kind == "c":
        return 2, 4 * dtype.itemsize, False
    name = ml_name(dtype)
    if dtype.kind == "b":
        return 1, 1, False
    if name in ("int2", "uint2"):
        return 1, 2, name == "int2"
    if name in ("int4", "uint4", "float4_e2m1fn"):
        return 1, 4, name == "int4"
    if name in ("float6_e2m3fn", "float6_e3m2fn"):
        return 1, 6, False
    if dtype.kind in "iuf" or name is not None:
        return 1, 8 * dtype.itemsize, dtype.kind == "i"
    raise MetadataError(f"codec 'packbits' does not take the data type {dtype}; it takes bool, integers, floats, "
                        "complex and the ML types (int2/int4, float4/6/8, bfloat16...)")  # fmt: skip


def _components(chunk: Array, count: int) -> Array:
    """The components of ``chunk`` (their bit patterns) as a flat uint64 array."""
    size = chunk.dtype.itemsize // count
    return np.ascontiguousarray(chunk).reshape(-1).view(f"u{size}").astype(np.uint64)


def _pack(values: Array, first: int, width: int) -> bytes:
    """Bits ``first`` .. ``first + width - 1`` of each value, end to end, least significant bit first."""
    if first % 8 == 0 and width % 8 == 0:  # whole bytes: slices of the little-endian bytes
        return values.astype("<u8").view(np.uint8).reshape(-1, 8)[:, first // 8 : (first + width) // 8].tobytes()
    bits = np.empty((values.size, width), dtype=np.uint8)
    for t in range(width):
        bits[:, t] = (values >> np.uint64(first + t)) & np.uint64(1)
    return np.packbits(bits.reshape(-1), bitorder="little").tobytes()


def _unpack(raw: Array, count: int, first: int, width: int) -> Array:
    """The inverse of :func:`_pack`: ``count`` values with their bits back at ``first``."""
    if first % 8 == 0 and width % 8 == 0:
        full = np.zeros((count, 8), dtype=np.uint8)
        full[:, first // 8 : (first + width) // 8] = raw[: count * width // 8].reshape(count, width // 8)
        return full.view("<u8").reshape(-1).astype(np.uint64)
    bits = np.unpackbits(raw, count=count * width, bitorder="little").reshape(count, width)
    values = np.zeros(count, dtype=np.uint64)
    for t in range(width):
        values |= bits[:, t].astype(np.uint64) << np.uint64(first + t)
    return values


class PackbitsCodec(ArrayBytesCodec):
    """``{"name": "packbits", "configuration": {"padding_encoding", "first_bit", "last_bit"}}``.

    Examples
    --------
    >>> import numpy as np
    >>> from zarr_dask.codecs import ChunkSpec
    >>> from zarr_dask.spec import parse_data_type
    >>> spec = ChunkSpec(shape=(4,), data_type=parse_data_type("uint8", zarr_format=3), fill_value=np.zeros((), "u1"))
    >>> codec = parse_packbits({"last_bit": 3}).bind(spec)  # the low 4 bits of each uint8
    >>> bytes(codec.encode(np.array([1, 2, 3, 4], "u1"), spec)).hex()
    '2143'
    """

    name = "packbits"
    max_ratio = 64  # one stored bit may decode to 8 bytes (a single bit kept of each int64)

    def __init__(self, config: Mapping[str, Any], padding: Padding, first: int | None, last: int | None,
                 layout: tuple[int, int, bool] | None = None) -> None:  # fmt: skip
        self.config, self.padding, self.first, self.last, self.layout = dict(config), padding, first, last, layout

    def bind(self, spec: ChunkSpec) -> Self:
        count, n, signed = _layout(spec.dtype)
        first, last = self.first or 0, n - 1 if self.last is None else self.last
        if not first <= last < n:
            raise MetadataError(f"codec 'packbits': bits {first}..{last} are not within the {n} bits of "
                                f"{spec.data_type.name!r} (need first_bit <= last_bit <= {n - 1})")  # fmt: skip
        return type(self)(self.config, self.padding, first, last, (count, n, signed))

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "configuration": dict(self.config)} if self.config else {"name": self.name}

    def _widths(self) -> tuple[int, int, int, bool]:
        assert self.layout is not None and self.first is not None and self.last is not None, "bind() first"
        count, _, signed = self.layout
        return count, self.first, self.last - self.first + 1, signed

    def encoded_size(self, spec: ChunkSpec) -> int | None:
        count, _, width, _ = self._widths()
        return math.ceil(spec.size * count * width / 8) + (self.padding != "none")

    def encode(self, chunk: Array, spec: ChunkSpec) -> BufferLike:
        count, first, width, _ = self._widths()
        packed = _pack(_components(chunk, count), first, width)
        pad = bytes([(-spec.size * count * width) % 8])
        return {"none": packed, "first_byte": pad + packed, "last_byte": packed + pad}[self.padding]

    def decode(self, data: BufferLike, spec: ChunkSpec) -> Array:
        count, first, width, signed = self._widths()
        expected = self.encoded_size(spec)
        got = nbytes_of(data)
        if got != expected:
            raise wrong_size("packbits", got, expected or 0)
        raw = np.frombuffer(as_byte_view(data), dtype=np.uint8)
        nbits = spec.size * count * width
        if self.padding != "none":
            pad, raw = (raw[0], raw[1:]) if self.padding == "first_byte" else (raw[-1], raw[:-1])
            if int(pad) != (-nbits) % 8:
                raise ChunkDecodeError(f"codec 'packbits': the chunk says {int(pad)} padding bits, its shape "
                                       f"{list(spec.shape)} needs {(-nbits) % 8}: corrupt")  # fmt: skip
        values = _unpack(raw, spec.size * count, first, width)
        if signed and first + width < 64:  # sign-extend from last_bit
            top = np.uint64(1 << (first + width - 1))
            values = np.where(values & top, values | ~np.uint64((1 << (first + width)) - 1), values)
        return self._typed(values.astype(f"u{spec.dtype.itemsize // count}"), spec)

    def _typed(self, parts: Array, spec: ChunkSpec) -> Array:
        if sub_byte(spec.dtype) and self.layout is not None:  # keep the type's own bits only
            parts = parts & np.uint8((1 << self.layout[1]) - 1)
        return parts.view(spec.dtype).reshape(spec.shape)


def parse_packbits(configuration: Mapping[str, Any] | None) -> Codec:
    """``packbits``: ``padding_encoding`` ("none", "first_byte", "last_byte"), ``first_bit``, ``last_bit``."""
    config = dict(configuration or {})
    keys = {"padding_encoding", "first_bit", "last_bit", "start_bit", "end_bit"}
    if set(config) - keys:
        raise MetadataError(f"codec 'packbits': unknown configuration key(s) {sorted(set(config) - keys)}")
    given = config.get("padding_encoding", "none")
    padding = _PADDING.get(given) if isinstance(given, str) else None
    if padding is None:
        raise MetadataError(f"codec 'packbits': 'padding_encoding' must be 'none', 'first_byte' or 'last_byte', "
                            f"got {config['padding_encoding']!r}")  # fmt: skip
    first, last = config.get("first_bit", config.get("start_bit")), config.get("last_bit", config.get("end_bit"))
    for key, value in (("first_bit", first), ("last_bit", last)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise MetadataError(f"codec 'packbits': {key!r} must be a non-negative integer or null, got {value!r}")
    return PackbitsCodec(config, padding, first, last)
