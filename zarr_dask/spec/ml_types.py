"""The machine-learning data types of the zarr-extensions registry, held in memory by ``ml_dtypes``.

``bfloat16``, the ``float8_*`` family, ``float4_e2m1fn``, ``float6_e2m3fn`` / ``float6_e3m2fn``, ``int2``,
``int4``, ``uint2``, ``uint4`` and their ``complex_*`` variants (plus ``complex_float16``) are v3-only data
types. The scalar types are the ``ml_dtypes`` NumPy dtypes (what tensorstore and JAX use); a ``complex_<T>``
type is the packed record ``[("real", T), ("imag", T)]`` (NumPy has no complex type of those components), so
values and NaN payloads stay bit exact. ``ml_dtypes`` is an optional dependency (``pip install
zarr-dask[ml]``); without it these names are a :class:`~zarr_dask.errors.DataTypeError` naming the package.

Fill values follow the registry: core-float encodings (numbers, ``"NaN"``, ``"Infinity"``, ``"0x.."`` of the
type's byte width) where the type has that value, and a clear error where it has not (``"NaN"`` for the
``float4``/``float6`` types, ``"Infinity"`` for the ``fn``/``fnu`` types). Two decisions:

- ``float8_e4m3fn`` is **not registered**, but tensorstore writes it: zarr_dask reads and writes it by that
  name (NaN ``0x7f``), so data written by tensorstore round-trips.
- ``float8_e8m0fnu`` has no zero. tensorstore 0.1.86 writes its default fill (bits ``0x00``, 2**-127) as
  ``0.0`` and maps other numbers with another exponent bias (bits ``b`` as ``2**(b - 63)``, negative from
  ``0x80``), but reads ``"0x.."`` exactly; so zarr_dask reads the number ``0`` as bits ``0x00`` (the value
  tensorstore means, and the nearest one) rather than NaN, reads other numbers as the registry says (their
  value) with a :class:`~zarr_dask.errors.FillValueWarning` naming the bits tensorstore means (negative
  numbers: a FillValueError naming them), and writes every non-NaN e8m0fnu fill value as hex, which both
  implementations read bit exact.
"""

from __future__ import annotations

import importlib
import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from zarr_dask.errors import DataTypeError, FillValueError, FillValueWarning
from zarr_dask.spec import fill_values as fv

__all__ = ["ML_NAMES", "bits_dtype", "cast_values", "complex_name", "is_ml", "low_bits", "ml_dtype", "ml_name",
           "record_name", "require_ml_dtypes", "sub_byte"]

Array = np.ndarray[Any, Any]


@dataclass(frozen=True, kw_only=True)
class _Float:
    nan: int | None  # the bits "NaN" stands for; None: the type has no NaN
    inf: bool  # the type has infinities


#: scalar float types -> their special values (the registry's "NaN" constant per type)
_FLOATS: dict[str, _Float] = {
    "bfloat16": _Float(nan=0x7FC0, inf=True),
    "float8_e3m4": _Float(nan=0x78, inf=True),
    "float8_e4m3": _Float(nan=0x7C, inf=True),
    "float8_e4m3b11fnuz": _Float(nan=0x80, inf=False),
    "float8_e4m3fn": _Float(nan=0x7F, inf=False),  # unregistered; tensorstore writes it
    "float8_e4m3fnuz": _Float(nan=0x80, inf=False),
    "float8_e5m2": _Float(nan=0x7E, inf=True),
    "float8_e5m2fnuz": _Float(nan=0x80, inf=False),
    "float8_e8m0fnu": _Float(nan=0xFF, inf=False),
    "float4_e2m1fn": _Float(nan=None, inf=False),
    "float6_e2m3fn": _Float(nan=None, inf=False),
    "float6_e3m2fn": _Float(nan=None, inf=False),
}
_BITS: dict[str, int] = {"float4_e2m1fn": 4, "float6_e2m3fn": 6, "float6_e3m2fn": 6,
                         "int2": 2, "uint2": 2, "int4": 4, "uint4": 4}  # fmt: skip
_INTS = ("int2", "int4", "uint2", "uint4")
_COMPLEX: dict[str, str] = {f"complex_{name}": name for name in _FLOATS if name != "float8_e4m3fn"}
_COMPLEX["complex_float16"] = "float16"
#: the ``ml_dtypes`` complex types -> the registered data type of the same layout (real, then imaginary part)
_ML_COMPLEX: dict[str, str] = {"bcomplex32": "complex_bfloat16", "complex32": "complex_float16"}
#: every data type name this module handles
ML_NAMES = frozenset([*_FLOATS, *_INTS, *_COMPLEX])


def require_ml_dtypes(name: str) -> Any:
    """The ``ml_dtypes`` module, or a DataTypeError naming the package and data type."""
    try:
        return importlib.import_module("ml_dtypes")
    except ImportError as err:
        raise DataTypeError(
            f"data type {name!r} needs the 'ml_dtypes' package, which is not installed: "
            "pip install 'zarr-dask[ml]' (or pip install ml_dtypes)"
        ) from err


def _scalar(name: str) -> np.dtype[Any]:
    if name == "float16":
        return np.dtype("f2")
    out: np.dtype[Any] = np.dtype(getattr(require_ml_dtypes(name), name))
    return out


def ml_dtype(name: str) -> np.dtype[Any]:
    """The in-memory NumPy dtype of a registered ML data type name (packed real/imag record for complex_*).

    Examples
    --------
    >>> ml_dtype("bfloat16")
    dtype(bfloat16)
    >>> ml_dtype("complex_float16")
    dtype([('real', '<f2'), ('imag', '<f2')])
    """
    if name in _COMPLEX:
        part = _scalar(_COMPLEX[name])
        return np.dtype([("real", part), ("imag", part)])
    return _scalar(name)


def _scalar_name(dtype: np.dtype[Any]) -> str | None:
    if dtype.fields is None and dtype.type.__module__ == "ml_dtypes":
        return dtype.name if dtype.name in _FLOATS or dtype.name in _INTS else None
    return None


def ml_name(dtype: np.dtype[Any]) -> str | None:
    """The data type name of an ``ml_dtypes`` dtype (``bfloat16``, ``int4``, ...), else None.

    A record ``[("real", T), ("imag", T)]`` is named ``complex_<T>`` only through a parsed data type (a user's
    record of ML types is refused: :func:`zarr_dask.spec.dtypes.data_type_from_numpy`).
    """
    return _scalar_name(dtype)


def complex_name(dtype: np.dtype[Any]) -> str | None:
    """The data type name of an ``ml_dtypes`` complex dtype (``bcomplex32``: ``complex_bfloat16``,
    ``complex32``: ``complex_float16``, whose in-memory dtype is the record of the same bytes), else None."""
    if dtype.fields is None and dtype.type.__module__ == "ml_dtypes":
        return _ML_COMPLEX.get(dtype.name)
    return None


def record_name(dtype: np.dtype[Any]) -> str | None:
    """The complex ML type whose in-memory record ``dtype`` is (``[("real", T), ("imag", T)]``, T float16 or an ML
    float: what zarr_dask reads such an array as, so writing it back keeps its type), else None.

    Examples
    --------
    >>> record_name(ml_dtype("complex_float16")), record_name(np.dtype([("real", "f4"), ("imag", "f4")]))
    ('complex_float16', None)
    """
    part = _complex_part(dtype)
    if part is None:
        return None
    name = "complex_" + ("float16" if part == np.dtype("f2") else part.name)
    return name if name in _COMPLEX and ml_dtype(name) == dtype else None


def is_ml(dtype: np.dtype[Any]) -> bool:
    """True for an ``ml_dtypes`` scalar dtype, or a record holding one."""
    if dtype.fields is not None:
        return any(is_ml(field[0]) for field in dtype.fields.values())
    return _scalar_name(dtype) is not None


def bits_dtype(dtype: np.dtype[Any]) -> np.dtype[Any]:
    """``dtype`` with every ``ml_dtypes`` scalar replaced by the native unsigned int of its size.

    ``ml_dtypes`` types lose their identity under ``newbyteorder``; byte swapping goes through this view.

    Examples
    --------
    >>> bits_dtype(ml_dtype("complex_bfloat16"))
    dtype([('real', '<u2'), ('imag', '<u2')])
    """
    if dtype.fields is not None and dtype.names is not None:
        fields = dtype.fields
        return np.dtype({"names": list(dtype.names), "formats": [bits_dtype(fields[n][0]) for n in dtype.names],
                         "offsets": [fields[n][1] for n in dtype.names], "itemsize": dtype.itemsize})  # fmt: skip
    return np.dtype(f"u{dtype.itemsize}") if _scalar_name(dtype) is not None else dtype


def _sub_byte_width(dtype: np.dtype[Any]) -> int | None:
    fields = dtype.fields
    base = fields["real"][0] if fields is not None and "real" in fields else dtype
    return _BITS.get(base.name) if _scalar_name(base) is not None else None


def sub_byte(dtype: np.dtype[Any]) -> bool:
    """True for the types of fewer than 8 bits per byte (int2/4, uint2/4, float4/6, their complex records)."""
    return _sub_byte_width(dtype) is not None


def low_bits(arr: Array) -> Array:
    """``arr`` of a sub-byte type (int2/4, uint2/4, float4/6, or their complex records) with the upper bits of
    every byte cleared: the registry ignores them, but ``ml_dtypes`` reads some of them (float6 ``0x43`` is
    -0.375 to it, +0.375 to the spec; tensorstore writes int4 -8 sign-extended as ``0xf8``). Others: ``arr``.
    """
    width = _sub_byte_width(arr.dtype)
    if width is None:
        return arr
    raw = np.ascontiguousarray(arr).reshape(-1).view(np.uint8) & np.uint8((1 << width) - 1)
    return raw.view(arr.dtype).reshape(arr.shape)


# --- values -------------------------------------------------------------------------------------------


def _complex_part(dtype: np.dtype[Any]) -> np.dtype[Any] | None:
    """The component type of a complex record ``[("real", T), ("imag", T)]`` of floats, else None."""
    fields = dtype.fields
    if fields is None or dtype.names != ("real", "imag") or fields["real"][0] != fields["imag"][0]:
        return None
    part: np.dtype[Any] = fields["real"][0]
    return part if part.kind == "f" or _scalar_name(part) in _FLOATS else None


def _record_spelling(value: Any) -> bool:
    """True for NumPy's spelling of records: a tuple of real numbers, or lists of them."""
    while isinstance(value, list) and value:
        value = value[0]
    return isinstance(value, tuple) and not any(isinstance(v, complex | np.complexfloating) for v in value)


def cast_values(value: Any, dtype: np.dtype[Any]) -> Array:
    """``value`` as an array of ``dtype``: ``np.asarray(value, dtype=dtype)``, except into a complex record
    ``[("real", T), ("imag", T)]`` (the ``complex_*`` ML types), where NumPy copies a complex number's real part
    into both fields (and a real number into both): there the real and imaginary parts go to their own fields,
    a real number has imaginary part 0, and an ``ml_dtypes`` ``bcomplex32`` / ``complex32`` array of the same
    layout is taken bit for bit. Records and tuples (NumPy's record spelling) are cast as NumPy casts them.

    Every write path casts its values here (the Array setters, dask and xarray writes, conversions).

    Examples
    --------
    >>> cast_values(np.array([1 + 2j, 3 - 4j]), ml_dtype("complex_float16")).tolist()
    [(1.0, 2.0), (3.0, -4.0)]
    >>> cast_values(5, ml_dtype("complex_float16")).tolist()
    (5.0, 0.0)
    """
    part = _complex_part(dtype)
    if part is None or (not isinstance(value, np.ndarray | np.generic) and _record_spelling(value)):
        return np.asarray(value, dtype=dtype)
    arr = np.asarray(value)
    name = complex_name(arr.dtype)
    if arr.dtype == dtype or (name is None and arr.dtype.kind not in "biufc" and _scalar_name(arr.dtype) is None):
        return np.asarray(arr, dtype=dtype)  # records field by field, and what NumPy refuses stays refused
    if name is not None and ml_dtype(name) == dtype:
        return arr.view(dtype)  # the same bytes: bit exact
    if name is not None:
        arr = arr.astype(np.complex128)  # exact: the components are float16 / bfloat16
    out = np.empty(arr.shape, dtype=dtype)
    with np.errstate(invalid="ignore", over="ignore"):
        out["real"] = arr.real if arr.dtype.kind == "c" else arr
        out["imag"] = arr.imag if arr.dtype.kind == "c" else 0
    return out


# --- fill values --------------------------------------------------------------------------------------


def _error(ctx: fv.FillContext, value: Any, expected: str) -> FillValueError:
    return FillValueError(f"fill_value {value!r} is not valid for data type {ctx.label}: expected {expected}")


def _bits(arr: Array) -> int:
    return int(arr.reshape(1).view(f"u{arr.dtype.itemsize}")[0])


def _from_bits(dtype: np.dtype[Any], bits: int) -> Array:
    return np.array(bits, dtype=f"u{dtype.itemsize}").view(dtype).reshape(())


def _as_float(arr: Array) -> float:
    with np.errstate(invalid="ignore", over="ignore"):
        return float(arr.astype(np.float64))


def _tensorstore_e8m0(number: float) -> int | None:
    """The e8m0fnu bits tensorstore 0.1.86 means by a JSON number: it writes bits ``b`` as ``2**(b - 63)``, negative
    from ``b = 0x80`` on (another exponent bias, and bit 7 taken for a sign); None where no bits give ``number``."""
    mantissa, exponent = math.frexp(abs(number)) if math.isfinite(number) else (0.0, 0)
    bits = exponent - 1 + 63
    if mantissa != 0.5 or (number < 0) != (bits >= 0x80) or not 0 < bits < 0xFF:
        return None
    return bits


def _e8m0_number(ctx: fv.FillContext, dtype: np.dtype[Any], obj: Any, number: float, warn: bool) -> Array | None:
    """float8_e8m0fnu: 0 is bits 0x00 (it has no zero; tensorstore writes its default fill so), and a number that
    tensorstore reads as other bits warns (the registry's reading stands) or, negative, is refused naming them."""
    if number == 0:
        return _from_bits(dtype, 0)  # no zero: tensorstore's 0.0 means bits 0x00 (2**-127), see the module doc
    theirs = _tensorstore_e8m0(number)
    if theirs is None or not math.isfinite(number):
        return None
    if number < 0 and warn:  # no sign: only tensorstore writes these
        raise _error(ctx, obj, f"a number within the range of {dtype.name} (it has no sign; tensorstore 0.1.86 "
                               f"writes the bits 0x{theirs:02x} so: if it wrote this array, set the fill value to "
                               f"'0x{theirs:02x}', which every implementation reads alike)")  # fmt: skip
    if number < 0 or not warn:  # a user's number (not read from a document): the range check below, no warning
        return None
    ours = _bits(np.array(number).astype(dtype))
    warnings.warn(
        f"fill_value {obj!r} of data type {ctx.label}: read as the registry says, the number's value (bits "
        f"0x{ours:02x}); tensorstore 0.1.86 writes and reads e8m0fnu numbers with another exponent bias and means bits "
        f"0x{theirs:02x}. If tensorstore wrote this array, set the fill value to '0x{theirs:02x}' (hex is read "
        "alike by every implementation; zarr_dask writes e8m0fnu fill values as hex)",
        FillValueWarning,
        stacklevel=2,
    )
    return None


def _float_from_number(ctx: fv.FillContext, dtype: np.dtype[Any], obj: Any, number: float, warn: bool) -> Array:
    if dtype.name == "float8_e8m0fnu":
        zero = _e8m0_number(ctx, dtype, obj, number, warn)
        if zero is not None:
            return zero
    with np.errstate(invalid="ignore", over="ignore"):
        out = np.array(number).astype(dtype)
    largest = float(require_ml_dtypes(dtype.name).finfo(dtype).max)
    if np.isfinite(number) and (abs(number) > largest or not np.isfinite(_as_float(out))):
        raise _error(ctx, obj, f"a number within the range of {dtype.name}")
    return out


def _parse_float(ctx: fv.FillContext, dtype: np.dtype[Any], obj: Any, warn: bool) -> Array:
    info = _FLOATS[dtype.name]
    if isinstance(obj, int | float | np.integer | np.floating) and not isinstance(obj, bool | np.bool_):
        return _float_from_number(ctx, dtype, obj, float(obj), warn)
    if obj == "NaN" and info.nan is not None:
        return _from_bits(dtype, info.nan)
    if obj in ("Infinity", "-Infinity") and info.inf:
        with np.errstate(invalid="ignore", over="ignore"):
            return np.array(float(obj.replace("Infinity", "inf"))).astype(dtype)
    if isinstance(obj, str) and obj[:2].lower() == "0x" and len(obj) == 2 + 2 * dtype.itemsize:
        try:
            bits = int(obj[2:], 16)
        except ValueError:
            bits = -1
        if 0 <= bits < 2 ** _BITS.get(dtype.name, 8 * dtype.itemsize):
            return _from_bits(dtype, bits)
    specials = (['"NaN"'] if info.nan is not None else []) + (['"Infinity"', '"-Infinity"'] if info.inf else [])
    width = _BITS.get(dtype.name, 8 * dtype.itemsize)
    raise _error(ctx, obj, f"a number, {', '.join([*specials, ''])}or '0x' and {2 * dtype.itemsize} hex digits "
                           f"of a {width}-bit pattern")  # fmt: skip


def _float_to_json(dtype: np.dtype[Any], arr: Array) -> Any:
    info = _FLOATS[dtype.name]
    bits = _bits(arr)
    value = _as_float(arr)
    if np.isnan(value) and bits == info.nan:
        return "NaN"
    if np.isnan(value) or dtype.name == "float8_e8m0fnu":
        return "0x" + format(bits, f"0{2 * dtype.itemsize}x")
    if np.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return value


def _parse_int(ctx: fv.FillContext, dtype: np.dtype[Any], obj: Any) -> Array:
    info = require_ml_dtypes(dtype.name).iinfo(dtype)
    if isinstance(obj, float | np.floating) and float(obj).is_integer():
        obj = int(obj)
    if isinstance(obj, int | np.integer) and not isinstance(obj, bool | np.bool_) and info.min <= obj <= info.max:
        return np.array(int(obj), dtype=np.int8).astype(dtype)
    raise _error(ctx, obj, f"an integer in [{info.min}, {info.max}]")


def _parse_part(ctx: fv.FillContext, dtype: np.dtype[Any], obj: Any, warn: bool) -> Array:
    if dtype.name in _FLOATS:
        return _parse_float(ctx, dtype, obj, warn)
    if dtype.name in _INTS:
        return _parse_int(ctx, dtype, obj)
    out = fv.parse_fill_value(fv.FillContext(dtype=dtype, zarr_format=3, label=ctx.label), obj)  # float16
    assert out is not None
    return out


def _part_to_json(dtype: np.dtype[Any], arr: Array) -> Any:
    if dtype.name in _FLOATS:
        return _float_to_json(dtype, arr)
    if dtype.name in _INTS:
        return int(arr.astype(np.int8))
    return fv.fill_value_to_json(fv.FillContext(dtype=dtype, zarr_format=3), arr)


def _component(ctx: fv.FillContext) -> np.dtype[Any] | None:
    fields = ctx.dtype.fields
    return None if fields is None else fields["real"][0]


def default_fill_value(ctx: fv.FillContext) -> Array:
    """Zero bits (for float8_e8m0fnu, which has no zero: 2**-127)."""
    return np.zeros((), dtype=ctx.dtype)


def parse_fill_value(ctx: fv.FillContext, obj: Any, *, warn: bool = True) -> Array:
    """JSON fill value -> 0-d array of ``ctx.dtype`` (bit exact); ``warn``: a :class:`~zarr_dask.errors.FillValueWarning`
    where another implementation reads ``obj`` differently (a document's value; not a user's number to write)."""
    part = _component(ctx)
    if part is None:
        return _parse_part(ctx, ctx.dtype, obj, warn)
    if not (isinstance(obj, list | tuple) and len(obj) == 2):
        raise _error(ctx, obj, "a [real, imaginary] pair")
    real, imag = (_parse_part(ctx, part, item, warn) for item in obj)
    return np.frombuffer(real.tobytes() + imag.tobytes(), dtype=ctx.dtype).reshape(()).copy()


def fill_value_to_json(ctx: fv.FillContext, value: Any) -> Any:
    """0-d array (or a value, cast first) -> JSON, bit exact (hex for non-canonical NaNs)."""
    arr = value if isinstance(value, np.ndarray) and value.dtype == ctx.dtype else cast_fill_value(ctx, value)
    part = _component(ctx)
    if part is None:
        return _part_to_json(ctx.dtype, arr)
    return [_part_to_json(part, arr["real"].astype(part)), _part_to_json(part, arr["imag"].astype(part))]


def cast_fill_value(ctx: fv.FillContext, value: Any) -> Array:
    """A user value (number, JSON string, complex or pair for complex_*, 0-d array of the type) -> 0-d array."""
    if value is None:
        return default_fill_value(ctx)
    part = _component(ctx)
    if part is not None and isinstance(value, np.ndarray | np.generic) and complex_name(np.asarray(value).dtype):
        value = cast_values(value, ctx.dtype)
    if isinstance(value, np.ndarray | np.generic) and np.ndim(value) == 0 and np.asarray(value).dtype == ctx.dtype:
        return np.array(value, dtype=ctx.dtype).reshape(())
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if part is not None and isinstance(value, complex | np.complexfloating):
        value = [float(value.real), float(value.imag)]
    elif part is not None and not isinstance(value, list | tuple):
        value = [value, 0]
    if part is None and isinstance(value, np.generic) and _scalar_name(value.dtype) is not None:
        value = float(value) if value.dtype.name in _FLOATS else int(value)
    return parse_fill_value(ctx, value, warn=False)
