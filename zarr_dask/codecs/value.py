"""The zarr-extensions value codecs zarr-python 3.4 writes: ``scale_offset`` and ``cast_value`` (array->array).

``scale_offset`` encodes ``(x - offset) * scale`` and decodes ``x / scale + offset`` in the arithmetic of the
input data type: integer results out of range and integer divisions with a remainder are errors, float
arithmetic stays in the input's float type. ``cast_value`` converts values to another integer / float data
type (:mod:`zarr_dask.codecs.cast`). Both carry the fill value through the chain (``resolve``), and their
JSON is written as zarr-python writes it (``scale_offset`` without defaults, ``cast_value`` without
``"rounding": "nearest-even"``). Data types: ``(u)int8`` ... ``(u)int64``, ``float16/32/64``.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any, Self

import numpy as np

from zarr_dask.codecs.base import ArrayArrayCodec, ChunkSpec, derived_spec
from zarr_dask.codecs.cast import OUT_OF_RANGE, ROUNDING, CastError, OutOfRange, Rounding, cast_values
from zarr_dask.errors import ChunkDecodeError, ChunkEncodeError, DataTypeError, FillValueError, MetadataError
from zarr_dask.spec.dtypes import parse_data_type
from zarr_dask.spec.fill_values import FillContext, parse_fill_value

__all__ = ["CastValueCodec", "ScaleOffsetCodec", "parse_cast_value", "parse_scale_offset"]

Array = np.ndarray[Any, Any]

#: Data types both codecs take (zarr-extensions lists more: int2/int4, bfloat16, the float8 family...,
#: which zarr_dask stores (:mod:`zarr_dask.spec.ml_types`) but does not cast to or from).
NUMERIC_TYPES = frozenset(
    [
        "int8",
        "int16",
        "int32",
        "int64",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "float16",
        "float32",
        "float64",
    ]
)
_ELSEWHERE = frozenset(["int2", "int4", "uint2", "uint4", "bfloat16", "float4_e2m1fn", "float6_e2m3fn",
                        "float6_e3m2fn", "float8_e3m4", "float8_e4m3", "float8_e4m3b11fnuz", "float8_e4m3fnuz",
                        "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu"])  # fmt: skip


def _numeric(codec: str, dtype: np.dtype[Any], role: str) -> np.dtype[Any]:
    if (
        dtype.kind not in "iuf"
        or dtype.itemsize not in (1, 2, 4, 8)
        or (dtype.kind == "f" and dtype.itemsize == 1)
    ):
        raise MetadataError(
            f"codec {codec!r} needs an integer or float data type as its {role}, got {dtype}; supported: "
            f"{', '.join(sorted(NUMERIC_TYPES))}"
        )
    return dtype.newbyteorder("=")


def _scalar(codec: str, what: str, dtype: np.dtype[Any], value: Any) -> Array:
    """A JSON scalar (fill-value encoding of ``dtype``) as a 0-d array of ``dtype``."""
    try:
        parsed = parse_fill_value(FillContext(dtype=dtype, zarr_format=3, label=str(dtype)), value)
    except FillValueError as e:
        raise MetadataError(
            f"codec {codec!r}: {what} {value!r} is not a value of {dtype}: {e.problem}"
        ) from None
    assert parsed is not None  # v3 never gives None
    return parsed


# ------------------------------------------------------------------------------------------ scale_offset
class ScaleOffsetCodec(ArrayArrayCodec):
    """``scale_offset``: ``encoded = (x - offset) * scale``, ``decoded = encoded / scale + offset``.

    Parameters
    ----------
    offset, scale
        The JSON values as written (kept for ``to_json``); parsed in the input data type by ``bind``.
    """

    name = "scale_offset"
    max_ratio = 1

    def __init__(self, offset: Any = 0, scale: Any = 1, *, dtype: np.dtype[Any] | None = None) -> None:
        self.offset_json, self.scale_json = offset, scale
        self.dtype = dtype
        if dtype is not None:
            self._offset = _scalar(self.name, "offset", dtype, offset)
            self._scale = _scalar(self.name, "scale", dtype, scale)
            if self._scale == 0:
                raise MetadataError(f"codec 'scale_offset': 'scale' must not be zero, got {scale!r}")

    def bind(self, spec: ChunkSpec) -> Self:
        dtype = _numeric(self.name, spec.dtype, "input")
        if self.dtype is not None and self.dtype == dtype:
            return self
        return type(self)(self.offset_json, self.scale_json, dtype=dtype)

    def to_json(self) -> dict[str, Any]:
        config = {}
        if self.offset_json != 0:
            config["offset"] = self.offset_json
        if self.scale_json != 1:
            config["scale"] = self.scale_json
        return {"name": self.name, "configuration": config} if config else {"name": self.name}

    def resolve(self, spec: ChunkSpec) -> ChunkSpec:
        fill = _carry_fill(self, spec)
        return ChunkSpec(shape=spec.shape, data_type=spec.data_type, fill_value=fill, order=spec.order)

    def encode(self, chunk: Array, spec: ChunkSpec) -> Array:
        return self._apply(chunk, encode=True)

    def decode(self, chunk: Array, spec: ChunkSpec) -> Array:
        return self._apply(chunk, encode=False)

    def _apply(self, chunk: Array, *, encode: bool) -> Array:
        assert self.dtype is not None, "bind() first"
        x = np.asarray(chunk, dtype=self.dtype)
        error = ChunkEncodeError if encode else ChunkDecodeError
        try:
            if self.dtype.kind == "f":
                with np.errstate(all="ignore"):
                    out = (x - self._offset) * self._scale if encode else x / self._scale + self._offset
                return np.asarray(out)
            return np.asarray(_int_apply(x, int(self._offset), int(self._scale), encode=encode))
        except CastError as e:
            raise error(f"codec 'scale_offset' ({'encode' if encode else 'decode'}): {e}") from None


def _int_apply(x: Array, offset: int, scale: int, *, encode: bool) -> Array:
    """Exact integer ``(x - offset) * scale`` or ``x / scale + offset``: out of range and remainders are errors."""
    info = np.iinfo(x.dtype)
    lo, hi = int(info.min), int(info.max)
    if not encode:
        rem = x % x.dtype.type(scale)
        if rem.any():
            raise CastError(
                f"{x[rem != 0].flat[0]} is not divisible by the scale {scale}: the result is not an integer"
            )
    ends = [(v - offset) * scale for v in (lo, hi)] if encode else [v // scale + offset for v in (lo, hi)]
    if lo <= min(ends) and max(ends) <= hi:  # no value of the type can leave its range: compute in place
        s, o = x.dtype.type(scale), x.dtype.type(offset)
        with np.errstate(all="ignore"):
            return np.asarray((x - o) * s if encode else x // s + o)
    bound = 2 * max(abs(lo), abs(hi), abs(offset)) * max(abs(scale), 1)  # |any intermediate| <= bound
    wide = x.astype(np.int64) if bound < 2**63 else x.astype(object)
    result = (wide - offset) * scale if encode else wide // scale + offset
    bad = (result < lo) | (result > hi)
    if np.any(bad):
        raise CastError(
            f"the result {np.asarray(result)[np.asarray(bad)].flat[0]} is out of the range [{lo}, {hi}] of {x.dtype}"
        )
    return np.asarray(result).astype(x.dtype)


# -------------------------------------------------------------------------------------------- cast_value
class CastValueCodec(ArrayArrayCodec):
    """``cast_value``: converts the values to ``data_type`` (and back), see :mod:`zarr_dask.codecs.cast`.

    Parameters
    ----------
    data_type
        The target data type's JSON (``"uint8"``).
    rounding, out_of_range
        The rounding mode and the handling of out-of-range values (None: refuse them).
    scalar_map
        ``{"encode": [[in, out], ...], "decode": [[in, out], ...]}`` as written, or None.
    """

    name = "cast_value"

    def __init__(
        self,
        data_type: Any,
        *,
        rounding: Rounding = "nearest-even",
        out_of_range: OutOfRange | None = None,
        scalar_map: Mapping[str, Any] | None = None,
        source: np.dtype[Any] | None = None,
    ) -> None:
        self.target, self.data_type_json = _cast_target(data_type)
        self.rounding, self.out_of_range, self.scalar_map = rounding, out_of_range, scalar_map
        if out_of_range == "wrap" and self.target.kind == "f":
            raise MetadataError(
                f"codec 'cast_value': out_of_range 'wrap' needs an integer data_type, got {data_type!r}; use 'clamp'"
            )
        self.source = source
        self._maps: dict[str, list[tuple[Array, Array]]] = {}
        if source is not None:
            self._maps = {
                "encode": _parse_map(scalar_map, "encode", source, self.target),
                "decode": _parse_map(scalar_map, "decode", self.target, source),
            }

    def bind(self, spec: ChunkSpec) -> Self:
        source = _numeric(self.name, spec.dtype, "input data type")
        if self.source is not None and self.source == source:
            return self
        return type(self)(
            self.data_type_json,
            rounding=self.rounding,
            out_of_range=self.out_of_range,
            scalar_map=self.scalar_map,
            source=source,
        )

    def to_json(self) -> dict[str, Any]:
        config: dict[str, Any] = {"data_type": self.data_type_json}
        if self.rounding != "nearest-even":
            config["rounding"] = self.rounding
        if self.out_of_range is not None:
            config["out_of_range"] = self.out_of_range
        if self.scalar_map is not None:
            config["scalar_map"] = {k: [list(p) for p in v] for k, v in self.scalar_map.items()}
        return {"name": self.name, "configuration": config}

    def resolve(self, spec: ChunkSpec) -> ChunkSpec:
        fill = _carry_fill(self, spec)
        new = derived_spec(spec, dtype=self.target)
        return ChunkSpec(shape=new.shape, data_type=new.data_type, fill_value=fill, order=new.order)

    def encode(self, chunk: Array, spec: ChunkSpec) -> Array:
        return self._cast(chunk, self.target, "encode")

    def decode(self, chunk: Array, spec: ChunkSpec) -> Array:
        assert self.source is not None, "bind() first"
        return self._cast(chunk, self.source, "decode")

    def _cast(self, chunk: Array, target: np.dtype[Any], direction: str) -> Array:
        try:
            return cast_values(
                np.asarray(chunk),
                target,
                rounding=self.rounding,
                out_of_range=self.out_of_range,
                scalar_map=self._maps.get(direction, ()),
            )
        except CastError as e:
            error = ChunkEncodeError if direction == "encode" else ChunkDecodeError
            raise error(f"codec 'cast_value' ({direction} to {target}): {e}") from None


def _cast_target(data_type: Any) -> tuple[np.dtype[Any], Any]:
    """The target NumPy dtype and its canonical JSON (``{"name": "uint8"}`` is written ``"uint8"``)."""
    name = (
        data_type
        if isinstance(data_type, str)
        else (data_type or {}).get("name")
        if isinstance(data_type, Mapping)
        else None
    )
    if name in _ELSEWHERE:
        raise MetadataError(
            f"codec 'cast_value': data_type {name!r} is not supported by zarr_dask (it stores that type, but "
            "does not cast to it); "
            f"supported: {', '.join(sorted(NUMERIC_TYPES))}"
        )
    try:
        dt = parse_data_type(data_type, zarr_format=3)
    except DataTypeError as e:
        raise MetadataError(f"codec 'cast_value': 'data_type' {data_type!r}: {e.problem}") from None
    return _numeric("cast_value", dt.numpy_dtype, "data_type"), dt.to_json()


def _parse_map(
    scalar_map: Mapping[str, Any] | None, direction: str, key_dtype: np.dtype[Any], value_dtype: np.dtype[Any]
) -> list[tuple[Array, Array]]:
    pairs = (scalar_map or {}).get(direction) or []
    out: list[tuple[Array, Array]] = []
    for pair in pairs:
        where = f"scalar_map {direction!r} entry {pair!r}"
        if not isinstance(pair, list | tuple) or len(pair) != 2:
            raise MetadataError(f"codec 'cast_value': {where} must be a pair [input, output]")
        out.append(
            (
                _scalar("cast_value", where, key_dtype, pair[0]),
                _scalar("cast_value", where, value_dtype, pair[1]),
            )
        )
    return out


def _carry_fill(codec: ScaleOffsetCodec | CastValueCodec, spec: ChunkSpec) -> Array:
    """The fill value after ``codec``; a fill the codec cannot encode becomes the new type's zero (a
    placeholder: pipelines are planned with a zero fill; :func:`check_fill` refuses real fills that fail)."""
    try:
        return np.asarray(codec.encode(np.asarray(spec.fill_value).reshape(()), spec)).reshape(())
    except (ChunkEncodeError, ValueError, TypeError):
        dtype = codec.target if isinstance(codec, CastValueCodec) else spec.dtype
        return np.zeros((), dtype=dtype)


def check_fill(codec: ArrayArrayCodec, spec: ChunkSpec) -> None:
    """Refuse a fill value that ``codec`` (bound to ``spec``) cannot encode and decode back, as zarr-python
    does when an array is created.

    Examples
    --------
    >>> import numpy as np
    >>> from zarr_dask.spec.dtypes import data_type_from_numpy
    >>> spec = ChunkSpec(shape=(2,), data_type=data_type_from_numpy("u2", zarr_format=3), fill_value=np.array(0, "u2"))
    >>> check_fill(ScaleOffsetCodec(offset=1000).bind(spec), spec)
    Traceback (most recent call last):
    ...
    zarr_dask.errors.MetadataError: codec 'scale_offset' cannot encode the fill value 0: ...
    """
    if not isinstance(codec, ScaleOffsetCodec | CastValueCodec):
        return
    fill = np.asarray(spec.fill_value).reshape(())
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            encoded = codec.encode(fill, spec)
            codec.decode(encoded, spec)
    except (ChunkEncodeError, ChunkDecodeError) as e:
        raise MetadataError(
            f"codec {codec.name!r} cannot encode the fill value {fill.item()!r}: {e.problem}; choose a fill_value the "
            "codec maps into range (or change its configuration)"
        ) from None


# ------------------------------------------------------------------------------------------------ parsers
def _config(name: str, configuration: Mapping[str, Any] | None, allowed: set[str]) -> dict[str, Any]:
    config = dict(configuration or {})
    unknown = sorted(set(config) - allowed)
    if unknown:
        raise MetadataError(
            f"codec {name!r}: unknown configuration key(s) {unknown}; allowed: {sorted(allowed)}"
        )
    return config


def parse_scale_offset(configuration: Mapping[str, Any] | None) -> ScaleOffsetCodec:
    """``{"name": "scale_offset", "configuration": {"offset": 5, "scale": 0.1}}`` (both optional).

    Examples
    --------
    >>> parse_scale_offset({"offset": 0, "scale": 1}).to_json()
    {'name': 'scale_offset'}
    """
    config = _config("scale_offset", configuration, {"offset", "scale"})
    for key in ("offset", "scale"):
        value = config.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float | str)):
            raise MetadataError(
                f"codec 'scale_offset': {key!r} must be a number (or a fill-value string), got {value!r}"
            )
    return ScaleOffsetCodec(config.get("offset", 0), config.get("scale", 1))


def parse_cast_value(configuration: Mapping[str, Any] | None) -> CastValueCodec:
    """``{"name": "cast_value", "configuration": {"data_type": "uint8", "rounding": ..., "out_of_range": ...,
    "scalar_map": {"encode": [[in, out]], "decode": [[in, out]]}}}``.

    Examples
    --------
    >>> parse_cast_value({"data_type": "uint8", "rounding": "nearest-even"}).to_json()
    {'name': 'cast_value', 'configuration': {'data_type': 'uint8'}}
    """
    if configuration is None or "data_type" not in configuration:
        raise MetadataError("codec 'cast_value' needs a 'configuration' with a 'data_type' (e.g. \"uint8\")")
    config = _config("cast_value", configuration, {"data_type", "rounding", "out_of_range", "scalar_map"})
    rounding = config.get("rounding", "nearest-even")
    if rounding not in ROUNDING:
        raise MetadataError(
            f"codec 'cast_value': 'rounding' must be one of {list(ROUNDING)}, got {rounding!r}"
        )
    out_of_range = config.get("out_of_range")
    if out_of_range is not None and out_of_range not in OUT_OF_RANGE:
        raise MetadataError(
            f"codec 'cast_value': 'out_of_range' must be one of {list(OUT_OF_RANGE)}, got {out_of_range!r}"
        )
    scalar_map = config.get("scalar_map")
    if scalar_map is not None:
        if not isinstance(scalar_map, Mapping) or set(scalar_map) - {"encode", "decode"}:
            raise MetadataError(
                f"codec 'cast_value': 'scalar_map' must be an object with 'encode' / 'decode' lists, got {scalar_map!r}"
            )
        for direction, pairs in scalar_map.items():
            if not isinstance(pairs, list | tuple):
                raise MetadataError(
                    f"codec 'cast_value': scalar_map {direction!r} must be a list of pairs, got {pairs!r}"
                )
    return CastValueCodec(
        config["data_type"], rounding=rounding, out_of_range=out_of_range, scalar_map=scalar_map
    )
