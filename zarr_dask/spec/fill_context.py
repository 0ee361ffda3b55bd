"""What the fill-value functions know about a data type (:class:`FillContext`), and the byte-level helpers
that every family of :mod:`zarr_dask.spec.fill_values` shares: 0-d arrays from bytes and bit patterns,
base64 and byte lists from JSON, the errors that name the data type.

Examples
--------
>>> import numpy as np
>>> ctx = FillContext(dtype=np.dtype("<u2"), zarr_format=3)
>>> family(ctx), from_bits(ctx.dtype, 0x0102), json_bytes(ctx, [1, 2])
('int', array(258, dtype=uint16), b'\\x01\\x02')
"""

from __future__ import annotations

import base64
import binascii
import sys
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from zarr_dask.errors import FillValueError

__all__ = [
    "Array", "FillContext", "b64", "b64decode", "bits", "byteorder", "component", "error", "family", "from_bits",
    "from_bytes", "json_bytes", "object_scalar", "sized", "sub",
]  # fmt: skip

Array = np.ndarray[Any, Any]


@dataclass(frozen=True, kw_only=True)
class FillContext:
    """What the fill-value functions need to know about a data type.

    Attributes
    ----------
    dtype
        The in-memory dtype (``object`` for variable-length types).
    zarr_format
        2 or 3: selects the JSON encoding.
    vlen
        ``"str"`` / ``"bytes"`` for variable-length types, else None.
    raw_as_list
        v3 core ``r<N>``: write raw bytes as a list of ints (the spec form) instead of base64.
    label
        How error messages name the data type (``"float32"``, ``"<f4"``...).
    """

    dtype: np.dtype[Any]
    zarr_format: Literal[2, 3]
    vlen: Literal["str", "bytes"] | None = None
    raw_as_list: bool = False
    label: str = ""


def family(ctx: FillContext) -> str:
    if ctx.vlen is not None:
        return "vlen_" + ctx.vlen
    kind = ctx.dtype.kind
    if kind == "V":
        return "struct" if ctx.dtype.names is not None else "raw"
    return {"b": "bool", "i": "int", "u": "int", "f": "float", "c": "complex", "M": "time", "m": "time",
            "S": "bytes", "U": "str"}[kind]


def error(ctx: FillContext, value: Any, expected: str) -> FillValueError:
    label = ctx.label or str(ctx.dtype)
    return FillValueError(f"fill_value {value!r} is not valid for data type {label}: expected {expected}")


def sub(ctx: FillContext, dtype: np.dtype[Any]) -> FillContext:
    return FillContext(dtype=dtype, zarr_format=ctx.zarr_format, label=ctx.label or str(ctx.dtype))


# --- byte-level helpers shared by the families ----------------------------------------------------


def byteorder(dtype: np.dtype[Any]) -> Literal["little", "big"]:
    if dtype.byteorder == ">":
        return "big"
    if dtype.byteorder == "<":
        return "little"
    return "big" if sys.byteorder == "big" else "little"


def from_bytes(dtype: np.dtype[Any], raw: bytes) -> Array:
    return np.frombuffer(raw, dtype=dtype).reshape(()).copy()


def from_bits(dtype: np.dtype[Any], bits: int) -> Array:
    return from_bytes(dtype, bits.to_bytes(dtype.itemsize, byteorder(dtype)))


def bits(arr: Array) -> int:
    return int.from_bytes(arr.tobytes(), byteorder(arr.dtype))


def object_scalar(value: Any) -> Array:
    out = np.empty((), dtype=object)
    out[()] = value
    return out


def component(dtype: np.dtype[Any]) -> np.dtype[Any]:
    """The float dtype of one component of a complex dtype (same byte order)."""
    return np.dtype(f"{dtype.str[0]}f{dtype.itemsize // 2}")


def b64decode(ctx: FillContext, obj: str) -> bytes:
    try:
        return base64.b64decode(obj.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError) as err:
        raise error(ctx, obj, "a standard base64 string") from err


def json_bytes(ctx: FillContext, obj: Any) -> bytes:
    """Bytes from JSON: base64 string (v2, v3) or a list of ints 0-255 (v3)."""
    if isinstance(obj, str):
        return b64decode(ctx, obj)
    ints_ok = isinstance(obj, list) and all(type(b) is int and 0 <= b <= 255 for b in obj)
    if ctx.zarr_format == 3 and ints_ok:
        return bytes(obj)
    raise error(ctx, obj, "a base64 string" + (" or a list of byte values 0-255" if ctx.zarr_format == 3 else ""))


def sized(ctx: FillContext, value: Any, raw: bytes, *, exact: bool) -> bytes:
    size = ctx.dtype.itemsize
    if len(raw) > size or (exact and len(raw) != size):
        what = f"exactly {size} bytes" if exact else f"at most {size} bytes"
        raise error(ctx, value, f"{what}, got {len(raw)}")
    return raw


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")
