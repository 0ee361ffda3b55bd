"""The zarr-extensions ``bitround`` codec (array->array): keep ``keepbits`` significant bits, round the rest.

Floating-point types keep ``keepbits`` bits of the mantissa (round half to even; sign and exponent kept), as
``numcodecs.bitround`` does: float16/32/64 and complex64/128 go through numcodecs' ``BitRound``; bfloat16,
``complex_float16`` and ``complex_bfloat16`` through the same formula on their bit patterns. Integer types (and
``numpy.datetime64`` / ``numpy.timedelta64``, as int64) keep ``keepbits`` bits from the most significant set bit
of their (two's complement) bit pattern, saturating instead of overflowing, as the registry's sample data
shows (uint8 255 -> 224 with 3 bits). Decoding returns the data as stored: the rounding is lossy.
``numcodecs.bitround`` (through the bridge) remains readable as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self

import numcodecs
import numpy as np

from zarr_dask.codecs.base import ArrayArrayCodec, ChunkSpec, Codec
from zarr_dask.errors import MetadataError
from zarr_dask.spec.ml_types import ml_name

__all__ = ["BitroundCodec", "parse_bitround"]

Array = np.ndarray[Any, Any]

#: mantissa bits of the float types (the bits numcodecs' BitRound may drop)
_MANTISSA = {"f2": 10, "f4": 23, "f8": 52, "bfloat16": 7}
_SUPPORTED = ("float16, float32, float64, bfloat16, complex64, complex128, complex_float16, complex_bfloat16, "
              "(u)int8-64, numpy.datetime64, numpy.timedelta64")  # fmt: skip


def _float_part(dtype: np.dtype[Any]) -> str | None:
    """The key of ``_MANTISSA`` for a float dtype or the component of a complex one, else None."""
    if dtype.kind in "fc" and ml_name(dtype) is None:
        size = dtype.itemsize // (2 if dtype.kind == "c" else 1)
        return f"f{size}" if f"f{size}" in _MANTISSA else None
    if dtype.fields is not None and set(dtype.fields) == {"real", "imag"}:
        return _float_part(dtype.fields["real"][0])
    return "bfloat16" if ml_name(dtype) == "bfloat16" else None


def _round_bits(u: Array, keepbits: int, maxbits: Array | int) -> Array:
    """Round the unsigned bit patterns ``u`` to ``keepbits`` bits below bit ``maxbits`` (half to even, saturating)."""
    dtype = u.dtype
    maskbits = np.asarray(maxbits, dtype=np.int64) - keepbits
    shift = np.maximum(maskbits, 1).astype(dtype)
    top = np.array(np.iinfo(dtype).max, dtype=dtype)
    mask = (top >> shift) << shift
    add = ((u >> shift) & dtype.type(1)) + ((dtype.type(1) << (shift - dtype.type(1))) - dtype.type(1))
    rounded = np.where(u > top - add, top, u + add) & mask
    return np.where(maskbits > 0, rounded, u).astype(dtype)


def _bit_length(u: Array) -> Array:
    """Per element, the number of significant bits of the unsigned ``u`` (0 for 0)."""
    n = np.zeros(u.shape, dtype=np.int64)
    x = u.copy()
    step = 8 * u.dtype.itemsize // 2
    while step:
        big = x >> u.dtype.type(step) != 0
        x = np.where(big, x >> u.dtype.type(step), x)
        n += np.where(big, step, 0)
        step //= 2
    out: Array = n + (x != 0)
    return out


class BitroundCodec(ArrayArrayCodec):
    """``{"name": "bitround", "configuration": {"keepbits": K}}``.

    Examples
    --------
    >>> import numpy as np
    >>> codec = parse_bitround({"keepbits": 3})
    >>> codec.round(np.array([0, 1, 10, 11, 100, 123, 200, 208, 209, 255], "u1")).tolist()
    [0, 1, 10, 12, 96, 128, 192, 192, 224, 224]
    """

    name = "bitround"
    max_ratio = 1

    def __init__(self, keepbits: int) -> None:
        self.keepbits = keepbits

    def bind(self, spec: ChunkSpec) -> Self:
        dtype = spec.dtype
        if _float_part(dtype) is None and dtype.kind not in "iumM":
            raise MetadataError(f"codec 'bitround' does not take the data type {spec.data_type.name!r}; "
                                f"it takes {_SUPPORTED}")  # fmt: skip
        return self

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "configuration": {"keepbits": self.keepbits}}

    def round(self, chunk: Array) -> Array:
        """``chunk`` bit-rounded (a new array)."""
        dtype = chunk.dtype.newbyteorder("=") if chunk.dtype.fields is None and ml_name(chunk.dtype) is None \
            else chunk.dtype  # fmt: skip
        arr = np.array(chunk, dtype=dtype, order="C")  # a native-order copy (numcodecs may round in place)
        part = _float_part(dtype)
        if part is None:  # integers, datetimes: from the most significant set bit
            u = arr.view(f"u{dtype.itemsize}")
            return _round_bits(u, self.keepbits, _bit_length(u)).view(dtype)
        if self.keepbits >= _MANTISSA[part]:
            return arr
        if part == "bfloat16":
            u = arr.view(np.uint16)
            return _round_bits(u, self.keepbits, _MANTISSA[part]).view(dtype)
        rounded = np.asarray(numcodecs.BitRound(keepbits=self.keepbits).encode(arr.view(part)))
        out: Array = rounded.view(part).view(dtype).reshape(arr.shape)
        return out

    def encode(self, chunk: Array, spec: ChunkSpec) -> Array:
        return self.round(chunk)

    def decode(self, chunk: Array, spec: ChunkSpec) -> Array:
        return chunk


def parse_bitround(configuration: Mapping[str, Any] | None) -> Codec:
    """``bitround``: ``keepbits`` (an integer >= 1) is required."""
    config = dict(configuration or {})
    keepbits = config.pop("keepbits", None)
    if config:
        raise MetadataError(f"codec 'bitround': unknown configuration key(s) {sorted(config)}; it takes 'keepbits'")
    if isinstance(keepbits, bool) or not isinstance(keepbits, int) or not 1 <= keepbits <= 64:
        raise MetadataError(f"codec 'bitround': 'keepbits' must be an integer from 1 to 64, got {keepbits!r}")
    return BitroundCodec(keepbits)
