"""Fill values: JSON <-> 0-d NumPy arrays, bit exact (format digest §1.4 for v2, §2.9 for v3).

This module knows NumPy dtypes only; :class:`zarr_dask.spec.dtypes.DataType` binds a :class:`FillContext`
to every data type and delegates here. A fill value is always a 0-d array of the context's dtype, so
NaN payloads, the sign of zero and NaT survive every round trip.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from zarr_dask.errors import FillValueError
from zarr_dask.spec.fill_context import (
    Array,
    FillContext,
    b64,
    b64decode,
    bits,
    component,
    error,
    family,
    from_bits,
    from_bytes,
    json_bytes,
    object_scalar,
    sized,
    sub,
)

__all__ = ["FillContext", "cast_fill_value", "default_fill_value", "fill_value_to_json", "parse_fill_value"]


#: Bit patterns of the canonical quiet NaN (sign 0, mantissa MSB 1, rest 0) by float width in bytes.
CANONICAL_NAN_BITS: dict[int, int] = {2: 0x7E00, 4: 0x7FC00000, 8: 0x7FF8000000000000}
_NAT = -(2**63)
_INF_JSON = {"Infinity": np.inf, "-Infinity": -np.inf}


# --- bool / int --------------------------------------------------------------------------------------


def _parse_bool(ctx: FillContext, obj: Any) -> Array:
    if isinstance(obj, bool) or (type(obj) is int and obj in (0, 1)):
        return np.array(bool(obj), dtype=ctx.dtype)
    raise error(ctx, obj, "true or false")


def _bool_to_json(ctx: FillContext, arr: Array) -> Any:
    return bool(arr[()])


def _cast_bool(ctx: FillContext, value: Any) -> Array:
    if isinstance(value, bool | np.bool_) or (isinstance(value, int | np.integer) and int(value) in (0, 1)):
        return np.array(bool(value), dtype=ctx.dtype)
    raise error(ctx, value, "a bool")


def _check_int(ctx: FillContext, value: Any, number: int) -> Array:
    info = np.iinfo(ctx.dtype)
    if not info.min <= number <= info.max:
        raise error(ctx, value, f"an integer in [{info.min}, {info.max}]")
    return np.array(number, dtype=ctx.dtype)


def _as_int(ctx: FillContext, value: Any) -> int:
    if isinstance(value, bool | np.bool_):
        raise error(ctx, value, "an integer, not a bool")
    if isinstance(value, float | np.floating):
        if not float(value).is_integer():
            raise error(ctx, value, "an integer (a float must have no fractional part)")
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError as err:
            raise error(ctx, value, "an integer") from err
    if isinstance(value, int | np.integer):
        return int(value)
    raise error(ctx, value, "an integer")


def _parse_int(ctx: FillContext, obj: Any) -> Array:
    return _check_int(ctx, obj, _as_int(ctx, obj))


def _int_to_json(ctx: FillContext, arr: Array) -> Any:
    return int(arr[()])


def _cast_int(ctx: FillContext, value: Any) -> Array:
    return _check_int(ctx, value, _as_int(ctx, value))


# --- float / complex ---------------------------------------------------------------------------------


def _float_from_hex(ctx: FillContext, dtype: np.dtype[Any], obj: str) -> Array:
    digits = obj[2:]
    try:
        pattern = int(digits, 16)
    except ValueError as err:
        raise error(ctx, obj, "a hex float such as '0x7fc00000'") from err
    if len(digits) == 2 * dtype.itemsize:
        return from_bits(dtype, pattern)
    if len(digits) not in (4, 8, 16):
        raise error(ctx, obj, f"'0x' followed by {2 * dtype.itemsize} hex digits")
    other = from_bits(np.dtype(f">f{len(digits) // 2}"), pattern)
    with np.errstate(over="ignore"):
        return other.astype(dtype)


def _float_from_number(ctx: FillContext, dtype: np.dtype[Any], obj: Any) -> Array:
    try:
        number = float(obj)
    except (OverflowError, ValueError) as err:
        raise error(ctx, obj, "a number representable as a float") from err
    with np.errstate(over="ignore"):
        return np.array(number, dtype=dtype)


def _parse_float_in(ctx: FillContext, dtype: np.dtype[Any], obj: Any) -> Array:
    if isinstance(obj, int | float) and not isinstance(obj, bool):
        return _float_from_number(ctx, dtype, obj)
    if isinstance(obj, str):
        if obj == "NaN":
            return from_bits(dtype, CANONICAL_NAN_BITS[dtype.itemsize])
        if obj in _INF_JSON:
            return np.array(_INF_JSON[obj], dtype=dtype)
        if obj[:2].lower() == "0x":
            return _float_from_hex(ctx, dtype, obj)
        return _float_from_number(ctx, dtype, obj)  # lenient, as zarr-python: "1.5", "nan", "inf"
    raise error(ctx, obj, 'a number, "NaN", "Infinity", "-Infinity" or (v3) a hex string "0x..."')


def _float_json(ctx: FillContext, arr: Array) -> Any:
    value = float(arr[()])
    if np.isnan(value):
        if ctx.zarr_format == 2 or bits(arr) == CANONICAL_NAN_BITS[arr.dtype.itemsize]:
            return "NaN"
        return "0x" + format(bits(arr), f"0{2 * arr.dtype.itemsize}x")
    if np.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return value


def _cast_float_in(ctx: FillContext, dtype: np.dtype[Any], value: Any) -> Array:
    if isinstance(value, str):
        return _parse_float_in(ctx, dtype, value)
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | float | np.integer | np.floating):
        raise error(ctx, value, "a real number")
    try:
        with np.errstate(over="ignore"):
            source = np.asarray(value) if isinstance(value, np.generic) else np.array(float(value))
            out = source.astype(dtype)
    except OverflowError as err:
        raise error(ctx, value, "a number within the float64 range") from err
    if np.isinf(out) and not np.isinf(source):
        raise error(ctx, value, f"a number within the range of {dtype} (it would overflow to infinity)")
    return out


def _join_complex(ctx: FillContext, real: Array, imag: Array) -> Array:
    return from_bytes(ctx.dtype, real.tobytes() + imag.tobytes())


def _parse_complex(ctx: FillContext, obj: Any) -> Array:
    comp = component(ctx.dtype)
    if isinstance(obj, list | tuple) and len(obj) == 2:
        return _join_complex(ctx, _parse_float_in(ctx, comp, obj[0]), _parse_float_in(ctx, comp, obj[1]))
    if isinstance(obj, int | float) and not isinstance(obj, bool):  # lenient: a real number
        return _join_complex(ctx, _parse_float_in(ctx, comp, obj), np.zeros((), comp))
    raise error(ctx, obj, "a [real, imaginary] pair of float encodings")


def _complex_to_json(ctx: FillContext, arr: Array) -> Any:
    parts = arr.reshape(1).view(component(arr.dtype))
    return [_float_json(ctx, parts[0:1].reshape(())), _float_json(ctx, parts[1:2].reshape(()))]


def _cast_complex(ctx: FillContext, value: Any) -> Array:
    comp = component(ctx.dtype)
    if isinstance(value, Sequence) and not isinstance(value, str | bytes) and len(value) == 2:
        return _join_complex(ctx, _cast_float_in(ctx, comp, value[0]), _cast_float_in(ctx, comp, value[1]))
    if isinstance(value, np.complexfloating):
        with np.errstate(over="ignore"):
            return np.asarray(value).astype(ctx.dtype)
    if isinstance(value, complex):
        return _join_complex(ctx, _cast_float_in(ctx, comp, value.real), _cast_float_in(ctx, comp, value.imag))
    return _join_complex(ctx, _cast_float_in(ctx, comp, value), np.zeros((), comp))


# --- datetime64 / timedelta64 ------------------------------------------------------------------------


def _from_count(ctx: FillContext, count: int) -> Array:
    return np.array(count, dtype=np.dtype(f"{ctx.dtype.str[0]}i8")).view(ctx.dtype)


def _parse_time(ctx: FillContext, obj: Any) -> Array:
    if obj == "NaT":
        return _from_count(ctx, _NAT)
    if isinstance(obj, int | float) and not isinstance(obj, bool):
        count = _as_int(ctx, obj)
        if -(2**63) <= count < 2**63:
            return _from_count(ctx, count)
    raise error(ctx, obj, 'an integer count of units in the int64 range, or "NaT"')


def _time_to_json(ctx: FillContext, arr: Array) -> Any:
    return int(arr.view(np.dtype(f"{arr.dtype.str[0]}i8"))[()])


def _cast_time(ctx: FillContext, value: Any) -> Array:
    if isinstance(value, str) and value.strip().lower() == "nat":
        return _from_count(ctx, _NAT)
    if isinstance(value, int | np.integer) and not isinstance(value, bool | np.datetime64 | np.timedelta64):
        return _parse_time(ctx, int(value))
    time_kind = ctx.dtype.kind == "M"
    try:
        if time_kind and isinstance(value, str | datetime.date):
            value = np.datetime64(value)
        elif not time_kind and isinstance(value, datetime.timedelta):
            value = np.timedelta64(value)
    except ValueError as err:
        raise error(ctx, value, "an ISO 8601 date/time string") from err
    expected = np.datetime64 if time_kind else np.timedelta64
    if not isinstance(value, expected):
        raise error(ctx, value, f"an integer, 'NaT' or a {expected.__name__}")
    out = np.asarray(value).astype(ctx.dtype)
    if not np.isnat(out) and out.astype(value.dtype) != value:
        raise error(ctx, value, f"a value exactly representable in units of {np.datetime_data(ctx.dtype)}")
    return out


# --- fixed-size bytes / str / raw --------------------------------------------------------------------


def _parse_fixed_bytes(ctx: FillContext, obj: Any) -> Array:
    return np.array(sized(ctx, obj, json_bytes(ctx, obj), exact=False), dtype=ctx.dtype)


def _fixed_bytes_to_json(ctx: FillContext, arr: Array) -> Any:
    return b64(bytes(arr[()]))


def _user_bytes(ctx: FillContext, value: Any) -> bytes:
    if isinstance(value, str):
        try:
            return value.encode("ascii")
        except UnicodeEncodeError as err:
            raise error(ctx, value, "bytes (or an ASCII str)") from err
    if isinstance(value, np.void):
        return value.tobytes()
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    if isinstance(value, list) and all(isinstance(b, int) and 0 <= b <= 255 for b in value):
        return bytes(value)
    raise error(ctx, value, "bytes")


def _cast_fixed_bytes(ctx: FillContext, value: Any) -> Array:
    return np.array(sized(ctx, value, _user_bytes(ctx, value), exact=False), dtype=ctx.dtype)


def _parse_str(ctx: FillContext, obj: Any) -> Array:
    if not isinstance(obj, str):
        raise error(ctx, obj, "a string")
    if len(obj) > ctx.dtype.itemsize // 4:
        raise error(ctx, obj, f"a string of at most {ctx.dtype.itemsize // 4} characters")
    return np.array(obj, dtype=ctx.dtype)


def _str_to_json(ctx: FillContext, arr: Array) -> Any:
    return str(arr[()])


def _parse_raw(ctx: FillContext, obj: Any) -> Array:
    return from_bytes(ctx.dtype, sized(ctx, obj, json_bytes(ctx, obj), exact=True))


def _raw_to_json(ctx: FillContext, arr: Array) -> Any:
    raw = arr.tobytes()
    return list(raw) if ctx.raw_as_list else b64(raw)


def _cast_raw(ctx: FillContext, value: Any) -> Array:
    return from_bytes(ctx.dtype, sized(ctx, value, _user_bytes(ctx, value), exact=True))


# --- variable-length ---------------------------------------------------------------------------------


def _parse_vlen_str(ctx: FillContext, obj: Any) -> Array:
    if isinstance(obj, str):
        return object_scalar(obj)
    if ctx.zarr_format == 2 and type(obj) is int:  # zarr-python 2 wrote 0; zarr-python 3 reads it as "0"
        return object_scalar(str(obj))
    raise error(ctx, obj, "a string")


def _vlen_str_to_json(ctx: FillContext, arr: Array) -> Any:
    return str(arr[()])


def _cast_vlen_str(ctx: FillContext, value: Any) -> Array:
    if isinstance(value, str):
        return object_scalar(str(value))
    raise error(ctx, value, "a str")


def _parse_vlen_bytes(ctx: FillContext, obj: Any) -> Array:
    return object_scalar(json_bytes(ctx, obj))


def _vlen_bytes_to_json(ctx: FillContext, arr: Array) -> Any:
    return b64(bytes(arr[()]))


def _cast_vlen_bytes(ctx: FillContext, value: Any) -> Array:
    if isinstance(value, bytes | bytearray | memoryview):
        return object_scalar(bytes(value))
    raise error(ctx, value, "bytes")


# --- structured --------------------------------------------------------------------------------------


def _fields(dtype: np.dtype[Any]) -> list[tuple[str, np.dtype[Any], int]]:
    if dtype.names is None or dtype.fields is None:
        return []
    return [(name, dtype.fields[name][0], dtype.fields[name][1]) for name in dtype.names]


def _assemble(ctx: FillContext, parts: Mapping[str, Array]) -> Array:
    buf = bytearray(ctx.dtype.itemsize)
    for name, fdtype, offset in _fields(ctx.dtype):
        buf[offset : offset + fdtype.itemsize] = parts[name].tobytes()
    return from_bytes(ctx.dtype, bytes(buf))


def _field_value(arr: Array, fdtype: np.dtype[Any], offset: int) -> Array:
    return from_bytes(fdtype, arr.tobytes()[offset : offset + fdtype.itemsize])


def _parse_struct(ctx: FillContext, obj: Any) -> Array:
    if isinstance(obj, str):  # v2, and legacy v3 "structured": base64 of the packed little-endian record
        raw = sized(ctx, obj, b64decode(ctx, obj), exact=True)
        stored = ctx.dtype if ctx.zarr_format == 2 else ctx.dtype.newbyteorder("<")
        return from_bytes(stored, raw).astype(ctx.dtype)
    names = ctx.dtype.names or ()
    if ctx.zarr_format == 2 or not isinstance(obj, dict) or set(obj) != set(names):
        expected = "a base64 string" if ctx.zarr_format == 2 else f"an object with exactly the fields {list(names)}"
        raise error(ctx, obj, expected)
    parts = {name: _struct_field(ctx, obj, name, fdt) for name, fdt, _ in _fields(ctx.dtype)}
    return _assemble(ctx, parts)


def _struct_field(ctx: FillContext, obj: dict[str, Any], name: str, fdtype: np.dtype[Any]) -> Array:
    try:
        value = parse_fill_value(sub(ctx, fdtype), obj[name])
    except FillValueError as err:
        raise error(ctx, obj, f"valid field values; field {name!r}: {err.problem}") from err
    if value is None:  # pragma: no cover - v3 never returns None
        raise error(ctx, obj, f"a value for field {name!r}")
    return value


def _struct_to_json(ctx: FillContext, arr: Array) -> Any:
    if ctx.zarr_format == 2:
        return b64(arr.tobytes())
    return {
        name: fill_value_to_json(sub(ctx, fdt), _field_value(arr, fdt, offset))
        for name, fdt, offset in _fields(arr.dtype)
    }


def _cast_field(ctx: FillContext, fdtype: np.dtype[Any], value: Any) -> Array:
    if fdtype.subdtype is None:
        return cast_fill_value(sub(ctx, fdtype), value)
    base, shape = fdtype.subdtype
    try:
        return np.broadcast_to(np.asarray(value, dtype=base), shape).copy()
    except (TypeError, ValueError) as err:
        raise error(ctx, value, f"an array-like of shape {shape} for a subarray field") from err


def _cast_struct(ctx: FillContext, value: Any) -> Array:
    fields = _fields(ctx.dtype)
    if isinstance(value, bytes | bytearray):
        return _cast_raw(ctx, value)
    if isinstance(value, np.void):
        value = value.item()
    if isinstance(value, Mapping) and set(value) == {name for name, _, _ in fields}:
        items = [value[name] for name, _, _ in fields]
    elif isinstance(value, list | tuple) and len(value) == len(fields):
        items = list(value)
    else:
        raise error(ctx, value, f"a tuple or dict with the fields {[name for name, _, _ in fields]}")
    parts = {name: _cast_field(ctx, fdt, item) for (name, fdt, _), item in zip(fields, items, strict=True)}
    return _assemble(ctx, parts)


# --- tables and public functions ---------------------------------------------------------------------

_Parser = Callable[[FillContext, Any], Array]
_Encoder = Callable[[FillContext, Array], Any]

#: family -> (parse JSON, write JSON, cast a user value)
_TABLE: dict[str, tuple[_Parser, _Encoder, _Parser]] = {
    "bool": (_parse_bool, _bool_to_json, _cast_bool),
    "int": (_parse_int, _int_to_json, _cast_int),
    "float": (lambda c, o: _parse_float_in(c, c.dtype, o), _float_json, lambda c, v: _cast_float_in(c, c.dtype, v)),
    "complex": (_parse_complex, _complex_to_json, _cast_complex),
    "time": (_parse_time, _time_to_json, _cast_time),
    "bytes": (_parse_fixed_bytes, _fixed_bytes_to_json, _cast_fixed_bytes),
    "str": (_parse_str, _str_to_json, _parse_str),
    "raw": (_parse_raw, _raw_to_json, _cast_raw),
    "struct": (_parse_struct, _struct_to_json, _cast_struct),
    "vlen_str": (_parse_vlen_str, _vlen_str_to_json, _cast_vlen_str),
    "vlen_bytes": (_parse_vlen_bytes, _vlen_bytes_to_json, _cast_vlen_bytes),
}


def default_fill_value(ctx: FillContext) -> Array:
    """The default fill: zero / False / "" / b"" / zero bytes, and NaT for datetime64 and timedelta64.

    Examples
    --------
    >>> import numpy as np
    >>> default_fill_value(FillContext(dtype=np.dtype("M8[s]"), zarr_format=3))
    array('NaT', dtype='datetime64[s]')
    """
    kind = family(ctx)
    if kind == "vlen_str":
        return object_scalar("")
    if kind == "vlen_bytes":
        return object_scalar(b"")
    if kind == "time":
        return _from_count(ctx, _NAT)
    return np.zeros((), dtype=ctx.dtype)


def parse_fill_value(ctx: FillContext, obj: Any) -> Array | None:
    """JSON fill value -> 0-d array of ``ctx.dtype``; ``None`` for a v2 ``null``.

    Raises
    ------
    FillValueError
        The value does not fit the data type (wrong JSON type, out of range, too long, bad base64).

    Examples
    --------
    >>> import numpy as np
    >>> parse_fill_value(FillContext(dtype=np.dtype("f4"), zarr_format=3), "0x7fc00001").tobytes().hex()
    '0100c07f'
    """
    if obj is None:
        if ctx.zarr_format == 2:
            return None
        raise error(ctx, obj, "a value (v3 requires a fill_value; use the type's default, e.g. 0)")
    return _TABLE[family(ctx)][0](ctx, obj)


def fill_value_to_json(ctx: FillContext, value: Any) -> Any:
    """0-d array (or scalar, cast first) -> plain JSON value, as zarr-python writes it; v2 ``None`` -> ``null``.

    v3 writes ``"NaN"`` only for the canonical quiet NaN and the bit pattern as hex for any other NaN.

    Examples
    --------
    >>> import numpy as np
    >>> fill_value_to_json(FillContext(dtype=np.dtype("f4"), zarr_format=3), np.array(0.1, "f4"))
    0.10000000149011612
    """
    if value is None:
        if ctx.zarr_format == 2:
            return None  # v2 "no fill value"
        raise error(ctx, value, "a value (v3 requires a fill_value)")
    arr = value if isinstance(value, np.ndarray) and value.dtype == ctx.dtype else cast_fill_value(ctx, value)
    if arr.ndim != 0:
        raise error(ctx, value, "a scalar (0-d array)")
    return _TABLE[family(ctx)][1](ctx, arr)


def cast_fill_value(ctx: FillContext, value: Any) -> Array:
    """A user-given fill (Python/NumPy scalar, str, bytes, tuple/dict for structs) -> 0-d array.

    ``None`` gives :func:`default_fill_value`. A NumPy scalar/0-d array of the exact dtype is kept bit for bit.

    Examples
    --------
    >>> import numpy as np
    >>> cast_fill_value(FillContext(dtype=np.dtype("u8"), zarr_format=2), 2**64 - 1)
    array(18446744073709551615, dtype=uint64)
    """
    if value is None:
        return default_fill_value(ctx)
    if isinstance(value, np.ndarray):
        if value.ndim != 0:
            raise error(ctx, value, "a scalar, not an array of shape " + str(value.shape))
        if value.dtype == ctx.dtype and ctx.vlen is None:
            return value.copy()
        value = value[()]
    if isinstance(value, np.generic) and value.dtype == ctx.dtype and ctx.vlen is None:
        return np.asarray(value).copy()
    return _TABLE[family(ctx)][2](ctx, value)
