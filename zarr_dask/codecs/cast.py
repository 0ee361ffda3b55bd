"""Value casts between integer and floating-point arrays, as the zarr-extensions ``cast_value`` codec defines them.

One element goes through these steps, in order (zarr-extensions ``codecs/cast_value``):

1. an explicit ``scalar_map`` entry (first match wins; ``NaN`` keys match every NaN);
2. an exactly representable value is kept;
3. otherwise the value is rounded (``rounding``) and an out-of-range result is refused, clamped or wrapped
   (``out_of_range``).

"Out of range" is judged on the value rounded in the target's precision with an unbounded exponent: for a
float target, ``65519.0`` rounds to ``65504`` (in ``float16`` range) while ``65520.0`` rounds to ``65536`` (out
of range), and ``"clamp"`` maps out-of-range values to ±infinity. NaN and ±infinity cast to an integer type
are errors unless mapped. Everything is vectorised NumPy; wrapping values beyond ``int64`` uses Python ints
for the few elements concerned.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

__all__ = ["OUT_OF_RANGE", "ROUNDING", "CastError", "OutOfRange", "Rounding", "cast_values"]

Rounding = Literal["nearest-even", "towards-zero", "towards-positive", "towards-negative", "nearest-away"]
OutOfRange = Literal["clamp", "wrap"]
ROUNDING: tuple[Rounding, ...] = (
    "nearest-even",
    "towards-zero",
    "towards-positive",
    "towards-negative",
    "nearest-away",
)
OUT_OF_RANGE: tuple[OutOfRange, ...] = ("clamp", "wrap")

Array = np.ndarray[Any, Any]


class CastError(ValueError):
    """A value the cast cannot represent under its configuration (the message says which and why)."""


def cast_values(
    arr: Array,
    target: np.dtype[Any],
    *,
    rounding: Rounding = "nearest-even",
    out_of_range: OutOfRange | None = None,
    scalar_map: Sequence[tuple[Array, Array]] = (),
) -> Array:
    """Cast ``arr`` (integer or float) to ``target`` (integer or float) by value.

    Parameters
    ----------
    arr
        The input values (any byte order and layout).
    target
        The target dtype (``int8`` ... ``uint64``, ``float16`` ... ``float64``).
    rounding, out_of_range
        As the ``cast_value`` configuration names them; ``out_of_range=None`` refuses out-of-range values.
    scalar_map
        ``(input, output)`` pairs of 0-d arrays of the input and the target dtype, in order.

    Returns
    -------
    numpy.ndarray
        A new native-order array of ``target`` with the shape of ``arr``.

    Raises
    ------
    CastError
        NaN or infinity to an integer type, or a value out of range without ``out_of_range``.

    Examples
    --------
    >>> import numpy as np
    >>> cast_values(np.array([2.5, 3.5, -2.5]), np.dtype("int8"))
    array([ 2,  4, -2], dtype=int8)
    >>> cast_values(np.array([300, -5]), np.dtype("uint8"), out_of_range="wrap")
    array([ 44, 251], dtype=uint8)
    >>> cast_values(np.array([np.nan, 1.0]), np.dtype("uint8"), scalar_map=[(np.array(np.nan), np.array(0, "u1"))])
    array([0, 1], dtype=uint8)
    """
    target = np.dtype(target).newbyteorder("=")
    x = np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("="))
    out = np.empty(x.shape, dtype=target)
    todo = np.ones(x.shape, dtype=bool)
    for key, value in scalar_map:
        hit = (np.isnan(x) if key.dtype.kind == "f" and np.isnan(key) else x == key) & todo
        out[hit] = value
        todo &= ~hit
    with np.errstate(all="ignore"):  # overflows are detected and handled explicitly
        if todo.all():
            return _cast(x, target, rounding, out_of_range, out)
        if todo.any():
            out[todo] = _cast(x[todo], target, rounding, out_of_range, np.empty(int(todo.sum()), dtype=target))
    return out


def _cast(x: Array, target: np.dtype[Any], rounding: Rounding, oor: OutOfRange | None, out: Array) -> Array:
    if target.kind == "f":
        return _to_float(x, target, rounding, oor, out)
    if x.dtype.kind == "f":
        bad = ~np.isfinite(x)
        if bad.any():
            raise CastError(
                f"cannot cast {x[bad].flat[0]} to the integer type {target} (map it with 'scalar_map')"
            )
        x = _round_float(x, rounding)
    return _to_int(x, target, oor, out)


# ------------------------------------------------------------------------------------------------ to int
def _round_float(x: Array, rounding: Rounding) -> Array:
    """Round float values to integral values (still floats)."""
    if rounding == "nearest-even":
        return np.rint(x)
    if rounding == "towards-zero":
        return np.trunc(x)
    if rounding == "towards-positive":
        return np.ceil(x)
    if rounding == "towards-negative":
        return np.floor(x)
    mag = np.abs(x)
    whole = np.floor(mag)
    return np.asarray(np.copysign(whole + (mag - whole >= 0.5), x))  # nearest-away; mag - whole is exact


def _to_int(x: Array, target: np.dtype[Any], oor: OutOfRange | None, out: Array) -> Array:
    """Integral values (ints, or integral floats) -> ``target``; range checked, clamped or wrapped."""
    info = np.iinfo(target)
    lo, hi = int(info.min), int(info.max)
    below, above = _outside(x, lo, hi)
    if not (below.any() or above.any()):
        out[...] = x
        return out
    if oor is None:
        bad = x[below | above].flat[0]
        raise CastError(
            f"value {bad} is out of the range [{lo}, {hi}] of {target}; set out_of_range to 'clamp' or 'wrap'"
        )
    inside = ~(below | above)
    out[inside] = x[inside]
    if oor == "clamp":
        out[below], out[above] = lo, hi
        return out
    span = 1 << (8 * target.itemsize)
    wrong = below | above
    wrapped = [(int(v) - lo) % span + lo for v in x[wrong].tolist()]
    out[wrong] = np.array(wrapped, dtype=object).astype(target) if wrapped else []
    return out


def _outside(x: Array, lo: int, hi: int) -> tuple[Array, Array]:
    """Masks of ``x < lo`` and ``x > hi``, exact for every integer and float dtype."""
    if x.dtype.kind == "f":  # lo and hi are powers of two (minus one): compare with the exact bounds
        return x < float(lo), x >= float(hi + 1)
    src = np.iinfo(x.dtype)
    below = x < lo if lo > int(src.min) else np.zeros(x.shape, dtype=bool)
    above = x > hi if hi < int(src.max) else np.zeros(x.shape, dtype=bool)
    return below, above


# ---------------------------------------------------------------------------------------------- to float
def _to_float(
    x: Array, target: np.dtype[Any], rounding: Rounding, oor: OutOfRange | None, out: Array
) -> Array:
    finfo = np.finfo(target)
    if x.dtype.kind == "f" and x.dtype.itemsize <= target.itemsize:
        out[...] = x  # widening: exact
        return out
    if x.dtype.kind in "iu" and x.dtype.itemsize * 8 <= finfo.nmant + 1:
        out[...] = x  # every value of the integer type is exact
        return out
    if x.dtype.kind in "iu" and x.dtype.itemsize == 8:
        return _int64_to_float(x, target, rounding, oor, out)
    wide = x.astype(np.float64) if x.dtype.kind in "iu" else x  # exact for ints up to 32 bits
    with np.errstate(over="ignore"):
        y = wide.astype(target)
    if rounding != "nearest-even":
        y = _directed(wide, y, rounding)
    over = _over(wide, y, target, rounding)
    if over.any():
        if oor is None:
            raise CastError(
                f"value {wide[over].flat[0]} is out of the range [{-finfo.max}, {finfo.max}] of {target}; set "
                "out_of_range to 'clamp' (maps it to ±infinity)"
            )
        y = np.where(over, np.copysign(np.inf, wide).astype(target), y)
    out[...] = y
    return out


def _directed(x: Array, y: Array, rounding: Rounding) -> Array:
    """Turn the nearest-even result ``y`` of ``x`` (a wider float dtype) into the ``rounding`` result."""
    yx = y.astype(x.dtype)
    finite = np.isfinite(x)
    if rounding == "towards-zero":
        step = finite & (np.abs(yx) > np.abs(x))
        return np.where(step, np.nextafter(y, np.zeros((), y.dtype)), y)
    if rounding == "towards-positive":
        return np.where(finite & (yx < x), np.nextafter(y, np.array(np.inf, y.dtype)), y)
    if rounding == "towards-negative":
        return np.where(finite & (yx > x), np.nextafter(y, np.array(-np.inf, y.dtype)), y)
    # nearest-away: only ties change, to the neighbour of larger magnitude
    inexact = finite & np.isfinite(yx) & (yx != x)
    if not inexact.any():
        return y
    other = np.nextafter(y, np.where(x > yx, np.inf, -np.inf).astype(y.dtype))
    tie = inexact & (np.abs(x - yx) == np.abs(other.astype(x.dtype) - x)) & (np.abs(other) > np.abs(y))
    return np.where(tie, other, y)


def _over(x: Array, y: Array, target: np.dtype[Any], rounding: Rounding) -> Array:
    """Finite inputs whose rounding (unbounded exponent) lies beyond the target's largest finite value."""
    finfo = np.finfo(target)
    top = float(finfo.max)
    beyond = 2.0 ** (finfo.maxexp)  # the next power of two above the largest finite value
    finite = np.isfinite(x)
    if rounding in ("nearest-even", "nearest-away"):
        return finite & np.isinf(y)
    if rounding == "towards-zero":
        return finite & (np.abs(x) >= beyond)
    if rounding == "towards-positive":
        return finite & ((x > top) | (x <= -beyond))
    return finite & ((x < -top) | (x >= beyond))


def _int64_to_float(
    x: Array, target: np.dtype[Any], rounding: Rounding, oor: OutOfRange | None, out: Array
) -> Array:
    """64-bit integers -> float: exact comparisons through Python ints for the values that round."""
    y = x.astype(target)  # nearest-even (no 64-bit integer overflows float32/float64)
    if target.itemsize == 2:  # float16: every value beyond 65504 is out of range; go through float64
        # 64-bit integers float64 cannot hold exactly are far out of float16's range either way
        return _to_float(x.astype(np.float64), target, rounding, oor, out)
    if rounding == "nearest-even":
        out[...] = y
        return out
    limit = 1 << (np.finfo(target).nmant + 1)
    rounded = (x > limit) | (x < -limit) if x.dtype.kind == "i" else x > limit
    idx = np.flatnonzero(rounded)
    flat_y, flat_x = y.reshape(-1), x.reshape(-1)
    for i in idx.tolist():
        flat_y[i] = _round_int(int(flat_x[i]), flat_y[i], rounding)
    out[...] = y
    return out


def _round_int(v: int, nearest: Any, rounding: Rounding) -> Any:
    """Round the Python int ``v`` to the float type of ``nearest`` (its nearest-even value) by ``rounding``."""
    ftype = type(nearest)
    n = int(nearest)
    if n == v:
        return nearest
    toward = ftype(np.inf if v > n else -np.inf)
    other = np.nextafter(nearest, toward)
    if rounding == "towards-zero":
        return nearest if abs(n) < abs(v) else other
    if rounding == "towards-positive":
        return nearest if n > v else other
    if rounding == "towards-negative":
        return nearest if n < v else other
    o = int(other)
    if abs(o - v) == abs(v - n) and abs(o) > abs(n):  # nearest-away tie
        return other
    return nearest
