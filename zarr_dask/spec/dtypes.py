"""Zarr data types (v2 typestrs and v3 names) bound to in-memory NumPy dtypes, and their fill values.

Formats byte for byte: v2 digest §1.3/§1.4, v3 digest §2.8/§2.9. Reading is lenient (aliases, short-hand and
object forms, ``must_understand``); writing is what zarr-python 3.4 writes. The fill-value codecs live in
:mod:`zarr_dask.spec.fill_values`.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from zarr_dask.errors import DataTypeError, UnsafeCodecError
from zarr_dask.spec import fill_values as fv
from zarr_dask.spec import ml_types as ml

__all__ = ["DataType", "ZarrFormat", "data_type_from_numpy", "parse_data_type"]

ZarrFormat = Literal[2, 3]
Vlen = Literal["str", "bytes"]

#: v3 core names -> NumPy kind + size (native byte order in memory).
_CORE_V3: dict[str, str] = {
    "bool": "b1", "int8": "i1", "int16": "i2", "int32": "i4", "int64": "i8",
    "uint8": "u1", "uint16": "u2", "uint32": "u4", "uint64": "u8",
    "float16": "f2", "float32": "f4", "float64": "f8", "complex64": "c8", "complex128": "c16",
}  # fmt: skip
_CORE_BY_NUMPY: dict[str, str] = {code: name for name, code in _CORE_V3.items()}
_V3_ALIASES: dict[str, str] = {
    "complex_float32": "complex64",
    "complex_float64": "complex128",
    "variable_length_bytes": "bytes",
}
_V3_VLEN: dict[str, Vlen] = {"string": "str", "bytes": "bytes"}
_RAW_BITS = re.compile(r"^r([1-9][0-9]*)$")
_TIME_UNITS = ("Y", "M", "W", "D", "h", "m", "s", "ms", "us", "μs", "ns", "ps", "fs", "as", "generic")

#: v2 object codecs: the two we read, and those that build arbitrary Python objects (refused).
#: ``categorize`` maps integer codes to the string labels listed in the metadata (nothing is built from the
#: stored bytes but indexes into that list): strings, safe.
_SAFE_OBJECT_CODECS: dict[str, Vlen] = {"vlen-utf8": "str", "vlen-bytes": "bytes", "categorize": "str"}
_UNSAFE_OBJECT_CODECS = frozenset({"vlen-array", "json2", "msgpack2", "pickle"})
_V2_TYPESTR = re.compile(
    r"^(?P<order>[<>|])(?:(?P<kind>[biufc])(?P<size>[0-9]+)|(?P<text>[SUV])(?P<length>[1-9][0-9]*)"
    r"|(?P<time>[Mm])8\[(?P<scale>[1-9][0-9]*)?(?P<unit>Y|M|W|D|h|m|s|ms|us|μs|ns|ps|fs|as)\]|(?P<obj>O))$"
)
_V2_SIZES: dict[str, tuple[int, ...]] = {"b": (1,), "i": (1, 2, 4, 8), "u": (1, 2, 4, 8), "f": (2, 4, 8), "c": (8, 16)}
_Config = Mapping[str, Any] | None


@dataclass(frozen=True, kw_only=True)
class DataType:
    """A Zarr data type bound to its in-memory NumPy dtype.

    Attributes
    ----------
    name
        v3: the ``data_type`` name as written ("int32", "string", "numpy.datetime64", "struct", "r16", ...).
        v2: the typestr for simple types (e.g. "<i4"), "structured" for record types, "|O" for objects.
    configuration
        v3 extension configuration (``None`` for core types and v2).
    numpy_dtype
        The dtype of arrays handed to / returned by users. v3: native byte order (endianness lives in the
        ``bytes`` codec). v2: exactly the stored typestr, byte order included (``>i4`` stays ``>i4``).
    vlen
        ``"str"`` / ``"bytes"`` for variable-length types (``numpy_dtype`` is then ``object``), else None.
    zarr_format
        2 or 3.

    Examples
    --------
    >>> dt = parse_data_type({"name": "numpy.datetime64", "configuration": {"unit": "s", "scale_factor": 10}},
    ...                      zarr_format=3)
    >>> dt.numpy_dtype, dt.fill_value_to_json(dt.default_fill_value())
    (dtype('<M8[10s]'), -9223372036854775808)
    """

    name: str
    configuration: Mapping[str, Any] | None = None
    numpy_dtype: np.dtype[Any]
    vlen: Literal["str", "bytes"] | None = None
    zarr_format: ZarrFormat

    def __post_init__(self) -> None:
        if self.zarr_format not in (2, 3):
            raise DataTypeError(f"zarr_format must be 2 or 3, got {self.zarr_format!r}")
        if not isinstance(self.numpy_dtype, np.dtype):
            raise DataTypeError(f"numpy_dtype must be a numpy.dtype, got {self.numpy_dtype!r}")
        if (self.vlen is not None) != (self.numpy_dtype.kind == "O"):
            raise DataTypeError(f"vlen={self.vlen!r} does not match numpy_dtype {self.numpy_dtype}: "
                                "variable-length types (and only they) use the object dtype")

    def __hash__(self) -> int:
        config = json.dumps(self.configuration, sort_keys=True, default=str)
        return hash((self.name, config, self.numpy_dtype, self.vlen, self.zarr_format))

    def __dask_tokenize__(self) -> tuple[Any, ...]:
        return ("zarr_dask.DataType", self.zarr_format, json.dumps(self.to_json(), sort_keys=True),
                self.numpy_dtype.str, self.vlen)  # fmt: skip

    @property
    def itemsize(self) -> int:
        """Bytes per element in memory (0 for variable-length types)."""
        return 0 if self.vlen is not None else self.numpy_dtype.itemsize

    @property
    def has_endianness(self) -> bool:
        """True when the stored form depends on byte order (any multi-byte fixed-size component)."""
        return self.vlen is None and _dtype_has_endianness(self.numpy_dtype)

    @property
    def label(self) -> str:
        """How reprs name the type: the registered name of an ML type (``complex_bfloat16``), else the dtype."""
        return self.name if self.zarr_format == 3 and self.name in ml.ML_NAMES else str(self.numpy_dtype)

    @property
    def _fills(self) -> Any:
        """The fill-value functions of this type: :mod:`.ml_types` for the ML types, else :mod:`.fill_values`."""
        return ml if self.zarr_format == 3 and self.name in ml.ML_NAMES else fv

    def to_json(self) -> Any:
        """v3: core name string or ``{"name", "configuration"}``; v2: typestr or structured descr list.

        Examples
        --------
        >>> data_type_from_numpy("U5", zarr_format=3).to_json()
        {'name': 'fixed_length_utf32', 'configuration': {'length_bytes': 20}}
        >>> data_type_from_numpy([("x", "<f4"), ("y", "<i2", (2,))], zarr_format=2).to_json()
        [['x', '<f4'], ['y', '<i2', [2]]]
        """
        if self.zarr_format == 2:
            return _descr_to_json(self.numpy_dtype.descr) if self.name == "structured" else self.name
        if self.configuration is None:
            return self.name
        return {"name": self.name, "configuration": copy.deepcopy(dict(self.configuration))}

    def _fill_context(self) -> fv.FillContext:
        label = self.name if self.configuration is None else json.dumps(self.to_json())
        return fv.FillContext(dtype=self.numpy_dtype, zarr_format=self.zarr_format, vlen=self.vlen,
                              raw_as_list=bool(_RAW_BITS.match(self.name)), label=label)  # fmt: skip

    def default_fill_value(self) -> np.ndarray[Any, Any]:
        """0-d array holding the default fill (zero / "" / False / NaT for v2 times, as zarr-python)."""
        out: np.ndarray[Any, Any] = self._fills.default_fill_value(self._fill_context())
        return out

    def parse_fill_value(self, obj: Any) -> np.ndarray[Any, Any] | None:
        """JSON fill value -> 0-d array of ``numpy_dtype`` (bit exact, NaN payloads kept). None only for v2 null.

        Examples
        --------
        >>> parse_data_type("float32", zarr_format=3).parse_fill_value("0x7fc00001").tobytes().hex()
        '0100c07f'
        """
        out: np.ndarray[Any, Any] | None = self._fills.parse_fill_value(self._fill_context(), obj)
        return out

    def fill_value_to_json(self, value: np.ndarray[Any, Any] | None) -> Any:
        """0-d array -> JSON value, as zarr-python writes it (canonical NaN as "NaN", other NaNs as hex in v3).

        A scalar is cast first (:meth:`cast_fill_value`); v2 ``None`` ("no fill value") gives ``None``.

        Examples
        --------
        >>> dt = parse_data_type("<f4", zarr_format=2)
        >>> dt.fill_value_to_json(dt.cast_fill_value(0.1))
        0.10000000149011612
        """
        return self._fills.fill_value_to_json(self._fill_context(), value)

    def cast_fill_value(self, value: Any) -> np.ndarray[Any, Any]:
        """A user-given fill (Python/NumPy scalar, str, bytes, tuple/dict for structs) -> 0-d array; errors clearly.

        ``None`` gives :meth:`default_fill_value`.
        """
        out: np.ndarray[Any, Any] = self._fills.cast_fill_value(self._fill_context(), value)
        return out


def _dtype_has_endianness(dtype: np.dtype[Any]) -> bool:
    if dtype.subdtype is not None:
        return _dtype_has_endianness(dtype.subdtype[0])
    if dtype.fields is not None:
        return any(_dtype_has_endianness(field[0]) for field in dtype.fields.values())
    return (dtype.kind == "U" or dtype.kind in "iufcmM" or ml.is_ml(dtype)) and dtype.itemsize > 1


# --- v2 ----------------------------------------------------------------------------------------------


def _v2_simple_dtype(typestr: Any, *, allow_object: bool = False) -> np.dtype[Any]:
    """Validate a v2 typestr (``"<i4"``, ``"|S12"``, ``"<M8[10s]"``...) and return its NumPy dtype."""
    match = _V2_TYPESTR.match(typestr) if isinstance(typestr, str) else None
    if isinstance(typestr, str) and re.fullmatch(r"[<>|][Mm]8(\[\])?", typestr):
        raise DataTypeError(f"Zarr v2 dtype {typestr!r} needs a unit in brackets, e.g. '{typestr[:3]}[ns]' or "
                            f"'{typestr[:3]}[10s]'")  # fmt: skip
    if match is None or (match["obj"] and not allow_object):
        raise DataTypeError(
            f"invalid Zarr v2 dtype {typestr!r}: expected a typestr with byte order, kind and size such as "
            "'<i4', '|b1', '>f8', '<c16', '|S12', '<U12', '|V8', '<M8[ns]' or '<m8[10s]'"
            + ("" if allow_object else " ('|O' is not allowed inside a structured dtype)")
        )
    kind, size = match["kind"], int(match["size"] or 0)
    if kind and size not in _V2_SIZES[kind]:
        raise DataTypeError(f"unsupported Zarr v2 dtype {typestr!r}: sizes for kind {kind!r} are {_V2_SIZES[kind]}")
    dtype: np.dtype[Any] = np.dtype(typestr)
    if match["order"] == "|" and _dtype_has_endianness(dtype):
        raise DataTypeError(f"Zarr v2 dtype {typestr!r} needs an explicit byte order: write "
                            f"'<{typestr[1:]}' (little-endian) or '>{typestr[1:]}' (big-endian)")  # fmt: skip
    return dtype


def _v2_field(entry: Any) -> tuple[str, Any, tuple[int, ...]]:
    if not (isinstance(entry, list | tuple) and len(entry) in (2, 3) and isinstance(entry[0], str)):
        raise DataTypeError(f"invalid structured dtype field {entry!r}: expected [name, typestr] or "
                            "[name, typestr, shape]")  # fmt: skip
    shape = entry[2] if len(entry) == 3 else []
    if not (isinstance(shape, list | tuple) and all(type(n) is int and n >= 0 for n in shape)):
        raise DataTypeError(f"invalid subarray shape {shape!r} in structured dtype field {entry!r}")
    return entry[0], entry[1], tuple(shape)


def _descr_to_dtype(descr: Any) -> np.dtype[Any]:
    """A v2 structured descr list (packed; ``""`` names are padding) -> structured NumPy dtype."""
    if not isinstance(descr, list | tuple) or not descr:
        raise DataTypeError(f"invalid structured dtype {descr!r}: expected a non-empty list of fields")
    names: list[str] = []
    formats: list[Any] = []
    offsets: list[int] = []
    offset = 0
    for entry in descr:
        name, typ, shape = _v2_field(entry)
        base = _descr_to_dtype(typ) if isinstance(typ, list | tuple) else _v2_simple_dtype(typ)
        field = np.dtype((base, shape)) if shape else base
        if name:
            names.append(name)
            formats.append(field)
            offsets.append(offset)
        offset += field.itemsize
    try:
        return np.dtype({"names": names, "formats": formats, "offsets": offsets, "itemsize": offset})
    except (TypeError, ValueError) as err:
        raise DataTypeError(f"invalid structured dtype {descr!r}: {err}") from err


def _descr_to_json(descr: Any) -> list[Any]:
    out: list[Any] = []
    for entry in descr:
        name, typ = entry[0], entry[1]
        item = [name, _descr_to_json(typ) if isinstance(typ, list) else typ]
        out.append(item + [list(entry[2])] if len(entry) == 3 else item)
    return out


def _v2_object(object_codec_id: str | None) -> DataType:
    if object_codec_id in _SAFE_OBJECT_CODECS:
        vlen = _SAFE_OBJECT_CODECS[object_codec_id]
        return DataType(name="|O", numpy_dtype=np.dtype(object), vlen=vlen, zarr_format=2)
    if object_codec_id in _UNSAFE_OBJECT_CODECS:
        raise UnsafeCodecError(
            f"object codec {object_codec_id!r} for dtype '|O' is refused: it builds arbitrary Python objects on "
            "decode; zarr_dask only reads vlen-utf8 / vlen-bytes object arrays (convert the array with "
            "zarr-python first)"
        )
    if object_codec_id is None:
        raise DataTypeError("Zarr v2 dtype '|O' needs an object codec in 'filters' (or 'compressor'): "
                            "add {'id': 'vlen-utf8'} for strings or {'id': 'vlen-bytes'} for bytes")  # fmt: skip
    raise DataTypeError(f"unknown object codec {object_codec_id!r} for Zarr v2 dtype '|O': "
                        "zarr_dask reads only 'vlen-utf8' and 'vlen-bytes'")  # fmt: skip


def _parse_v2(obj: Any, object_codec_id: str | None) -> DataType:
    if isinstance(obj, list):
        return DataType(name="structured", numpy_dtype=_descr_to_dtype(obj), zarr_format=2)
    if obj == "|O":
        return _v2_object(object_codec_id)
    return DataType(name=obj, numpy_dtype=_v2_simple_dtype(obj, allow_object=True), zarr_format=2)


def _v2_from_numpy(dtype: np.dtype[Any], vlen: Vlen | None) -> DataType:
    if ml.is_ml(dtype):
        raise DataTypeError(f"data type {ml.ml_name(dtype) or dtype} exists only in Zarr v3 (zarr-extensions): "
                            "create the array with zarr_format=3")  # fmt: skip
    if vlen is not None:
        return _v2_object("vlen-utf8" if vlen == "str" else "vlen-bytes")
    if dtype.names is not None:
        return _parse_v2(_descr_to_json(dtype.descr), None)
    return DataType(name=dtype.str, numpy_dtype=_v2_simple_dtype(dtype.str), zarr_format=2)


# --- v3 ----------------------------------------------------------------------------------------------


def _split_extension(obj: Any) -> tuple[str, _Config]:
    """Short-hand string or ``{"name", "configuration", "must_understand"}`` object -> (name, configuration)."""
    if isinstance(obj, str):
        return obj, None
    if not isinstance(obj, Mapping) or not isinstance(obj.get("name"), str):
        raise DataTypeError(f"invalid Zarr v3 data_type {obj!r}: expected a name string or an object "
                            '{"name": ..., "configuration": {...}}')  # fmt: skip
    extra = set(obj) - {"name", "configuration", "must_understand"}
    config = obj.get("configuration")
    if extra or not isinstance(obj.get("must_understand", True), bool) or not isinstance(config, Mapping | None):
        raise DataTypeError(f"invalid Zarr v3 data_type {obj!r}: only 'name', 'configuration' (an object) and "
                            "'must_understand' (a bool) are allowed")  # fmt: skip
    return obj["name"], config


def _config_keys(name: str, config: _Config, keys: tuple[str, ...]) -> Mapping[str, Any]:
    if config is None or set(config) != set(keys):
        raise DataTypeError(f"data_type {name!r} needs a configuration with exactly the keys {list(keys)}, "
                            f"got {None if config is None else dict(config)!r}")  # fmt: skip
    return config


def _positive_int(name: str, key: str, value: Any, *, multiple: int = 1, maximum: int = 2**63) -> int:
    if type(value) is not int or not 1 <= value <= maximum or value % multiple:
        extra = f" and a multiple of {multiple}" if multiple > 1 else ""
        raise DataTypeError(f"data_type {name!r}: {key} must be a positive integer{extra}, got {value!r}")
    return value


def _time_dtype(kind: str, name: str, config: _Config) -> np.dtype[Any]:
    conf = _config_keys(name, config, ("unit", "scale_factor"))
    unit, scale = conf["unit"], _positive_int(name, "scale_factor", conf["scale_factor"], maximum=2**31 - 1)
    if unit not in _TIME_UNITS:
        raise DataTypeError(f"data_type {name!r}: unit {unit!r} is not one of {list(_TIME_UNITS)}")
    return np.dtype(f"{kind}8") if unit == "generic" else np.dtype(f"{kind}8[{scale}{unit}]")


def _length_dtype(code: str, multiple: int) -> Callable[[str, _Config], np.dtype[Any]]:
    def parse(name: str, config: _Config) -> np.dtype[Any]:
        length = _config_keys(name, config, ("length_bytes",))["length_bytes"]
        return np.dtype(f"{code}{_positive_int(name, 'length_bytes', length, multiple=multiple) // multiple}")

    return parse


def _struct_dtype(name: str, config: _Config) -> np.dtype[Any]:
    fields = _config_keys(name, config, ("fields",))["fields"]
    if not isinstance(fields, list) or not fields:
        raise DataTypeError(f"data_type {name!r}: 'fields' must be a non-empty list, got {fields!r}")
    pairs = []
    for field in fields:
        legacy = name == "structured" and isinstance(field, list) and len(field) == 2
        if legacy:
            pairs.append((field[0], field[1]))
        elif isinstance(field, Mapping) and set(field) == {"name", "data_type"}:
            pairs.append((field["name"], field["data_type"]))
        else:
            expected = '[name, data_type] pairs' if name == "structured" else '{"name": ..., "data_type": ...}'
            raise DataTypeError(f"data_type {name!r}: invalid field {field!r}, expected {expected}")
    return _packed_struct([(fname, _v3_field_dtype(name, fname, ftype)) for fname, ftype in pairs])


def _v3_field_dtype(struct_name: str, field_name: Any, field_type: Any) -> np.dtype[Any]:
    if not isinstance(field_name, str) or not field_name:
        raise DataTypeError(f"data_type {struct_name!r}: field name {field_name!r} must be a non-empty string")
    inner = _parse_v3(field_type)
    if inner.vlen is not None or ml.is_ml(inner.numpy_dtype):
        what = "variable-length" if inner.vlen is not None else "the ML"
        raise DataTypeError(f"data_type {struct_name!r}: field {field_name!r} has {what} type {field_type!r}; "
                            "zarr_dask's struct fields are fixed-size NumPy types")  # fmt: skip
    return inner.numpy_dtype


def _packed_struct(fields: list[tuple[str, np.dtype[Any]]]) -> np.dtype[Any]:
    try:
        return np.dtype(fields)
    except (TypeError, ValueError) as err:
        raise DataTypeError(f"invalid struct fields {[name for name, _ in fields]!r}: {err}") from err


_V3_CONFIGURED: dict[str, Callable[[str, _Config], np.dtype[Any]]] = {
    "numpy.datetime64": lambda name, config: _time_dtype("M", name, config),
    "numpy.timedelta64": lambda name, config: _time_dtype("m", name, config),
    "fixed_length_utf32": _length_dtype("U", 4),
    "null_terminated_bytes": _length_dtype("S", 1),
    "raw_bytes": _length_dtype("V", 1),
    "struct": _struct_dtype,
    "structured": _struct_dtype,
}


def _no_config(name: str, config: _Config) -> None:
    if config:
        raise DataTypeError(f"data_type {name!r} takes no configuration, got {dict(config)!r}")


def _parse_v3(obj: Any) -> DataType:
    raw_name, config = _split_extension(obj)
    name = _V3_ALIASES.get(raw_name, raw_name)
    if name in _CORE_V3:
        _no_config(raw_name, config)
        return _v3_from_numpy(np.dtype(_CORE_V3[name]), None)
    if name in _V3_VLEN:
        _no_config(raw_name, config)
        return _v3_from_numpy(np.dtype(object), _V3_VLEN[name])
    bits = _RAW_BITS.match(name)
    if bits:
        _no_config(raw_name, config)
        size = _positive_int(name, "N in r<N>", int(bits[1]), multiple=8) // 8
        return DataType(name=name, numpy_dtype=np.dtype(f"V{size}"), zarr_format=3)
    if name in _V3_CONFIGURED:
        return _v3_from_numpy(_V3_CONFIGURED[name](name, config), None)
    if name in ml.ML_NAMES:
        _no_config(raw_name, config)
        return DataType(name=name, numpy_dtype=ml.ml_dtype(name), zarr_format=3)
    raise DataTypeError(f"unknown or unsupported Zarr v3 data_type {obj!r}: zarr_dask reads bool, (u)int8-64, "
                        "float16/32/64, complex64/128, r<N>, string, bytes, numpy.datetime64, numpy.timedelta64, "
                        "fixed_length_utf32, null_terminated_bytes, raw_bytes, struct and (with ml_dtypes) bfloat16, "
                        "float8_*, float4_e2m1fn, float6_*, (u)int2, (u)int4 and their complex_* forms")  # fmt: skip


def _v3_json(dtype: np.dtype[Any]) -> Any:
    """The canonical v3 JSON of a native-order fixed-size NumPy dtype (what zarr-python 3.4 writes)."""
    kind = dtype.kind
    if ml.ml_name(dtype) is not None:
        return ml.ml_name(dtype)
    if kind in "biufc":
        return _CORE_BY_NUMPY[f"{kind}{dtype.itemsize}"]
    if kind in "Mm":
        unit, scale = np.datetime_data(dtype)
        name = "numpy.datetime64" if kind == "M" else "numpy.timedelta64"
        return {"name": name, "configuration": {"unit": unit, "scale_factor": scale}}
    if dtype.names is not None and dtype.fields is not None:
        fields = dtype.fields
        return {"name": "struct", "configuration": {"fields": [
            {"name": n, "data_type": _v3_json(fields[n][0])} for n in dtype.names]}}  # fmt: skip
    name = {"U": "fixed_length_utf32", "S": "null_terminated_bytes", "V": "raw_bytes"}[kind]
    return {"name": name, "configuration": {"length_bytes": dtype.itemsize}}


def _native(dtype: np.dtype[Any]) -> np.dtype[Any]:
    """Native byte order, packed fields (v3 structs have no padding), no subarrays; checks supported kinds."""
    if dtype.subdtype is not None:
        raise DataTypeError(f"dtype {dtype} has a subarray shape; Zarr v3 struct fields must be scalars "
                            "(split the subarray into separate fields, or use zarr_format=2)")  # fmt: skip
    if dtype.names is not None and dtype.fields is not None:
        fields = dtype.fields
        if ml.is_ml(dtype):  # their fill values would be written as opaque bytes
            raise DataTypeError(f"dtype {dtype} has a field of an ml_dtypes type; zarr_dask's struct fields are "
                                "NumPy types (for complex values use the complex_<type> data types)")  # fmt: skip
        return _packed_struct([(name, _native(fields[name][0])) for name in dtype.names])
    if ml.ml_name(dtype) is not None:
        return dtype  # ml_dtypes types are native and lose their identity under newbyteorder
    if dtype.kind not in "biufcMmSUV" or (dtype.kind in "biufc" and f"{dtype.kind}{dtype.itemsize}" not in _CORE_BY_NUMPY):
        raise DataTypeError(f"NumPy dtype {dtype} has no Zarr v3 data type")
    return dtype.newbyteorder("=")


def _v3_from_numpy(dtype: np.dtype[Any], vlen: Vlen | None) -> DataType:
    if vlen is not None:
        return DataType(name="string" if vlen == "str" else "bytes", numpy_dtype=np.dtype(object), vlen=vlen,
                        zarr_format=3)  # fmt: skip
    native = _native(dtype)
    as_json = _v3_json(native)
    if isinstance(as_json, str):
        return DataType(name=as_json, numpy_dtype=native, zarr_format=3)
    return DataType(name=as_json["name"], configuration=as_json["configuration"], numpy_dtype=native, zarr_format=3)


# --- public functions --------------------------------------------------------------------------------


def parse_data_type(obj: Any, *, zarr_format: ZarrFormat, object_codec_id: str | None = None) -> DataType:
    """Parse the ``dtype`` (v2) / ``data_type`` (v3) JSON value.

    v2 ``|O`` needs ``object_codec_id`` ("vlen-utf8" / "vlen-bytes", taken from filters/compressor).

    Parameters
    ----------
    obj
        The JSON value: a v2 typestr or descr list; a v3 name or ``{"name", "configuration"}`` object.
    zarr_format
        2 or 3.
    object_codec_id
        v2 only: the id of the object codec found in ``filters`` / ``compressor``; ignored otherwise.

    Returns
    -------
    DataType

    Raises
    ------
    DataTypeError
        Unknown or invalid data type (names the value and how to fix it).
    UnsafeCodecError
        v2 ``|O`` with an object codec that builds arbitrary Python objects (pickle, json2, ...).

    Examples
    --------
    >>> parse_data_type(">u8", zarr_format=2).numpy_dtype
    dtype('>u8')
    >>> parse_data_type({"name": "int32", "must_understand": True}, zarr_format=3).to_json()
    'int32'
    >>> parse_data_type("|O", zarr_format=2, object_codec_id="vlen-utf8").vlen
    'str'
    """
    if zarr_format == 2:
        return _parse_v2(obj, object_codec_id)
    if zarr_format == 3:
        return _parse_v3(obj)
    raise DataTypeError(f"zarr_format must be 2 or 3, got {zarr_format!r}")


_VLEN_NAMES: dict[Any, Vlen] = {str: "str", "str": "str", "string": "str", bytes: "bytes", "bytes": "bytes"}


def _user_numpy(dtype: Any) -> tuple[np.dtype[Any], Vlen | None]:
    """A user's dtype spelling -> (NumPy dtype, vlen) before format-specific checks."""
    if isinstance(dtype, DataType):
        return dtype.numpy_dtype, dtype.vlen
    if isinstance(dtype, str | type) and dtype in _VLEN_NAMES:
        return np.dtype(object), _VLEN_NAMES[dtype]
    if _is_v3_json(dtype):
        parsed = _parse_v3(dtype)
        return parsed.numpy_dtype, parsed.vlen
    if isinstance(dtype, list) and dtype and all(isinstance(f, list) for f in dtype):
        return _descr_to_dtype(dtype), None
    try:
        np_dtype = np.dtype(dtype)
    except (TypeError, ValueError) as err:
        raise DataTypeError(f"{dtype!r} is not a data type: give a NumPy dtype ('f4', '<i2', 'M8[ns]', 'U5'), "
                            "str / bytes for variable-length data, or a Zarr v3 data type name") from err  # fmt: skip
    if np_dtype.kind == "T" or (np_dtype.kind == "U" and np_dtype.itemsize == 0):
        return np.dtype(object), "str"
    if np_dtype.kind == "S" and np_dtype.itemsize == 0:
        return np.dtype(object), "bytes"
    if np_dtype.kind == "V" and np_dtype.itemsize == 0:
        raise DataTypeError(f"{dtype!r} has size 0: give a size, e.g. 'V8'")
    return np_dtype, None


def _is_v3_json(obj: Any) -> bool:
    if isinstance(obj, Mapping):
        return True
    if not isinstance(obj, str):
        return False
    name = _V3_ALIASES.get(obj, obj)
    return (name in _CORE_V3 or name in _V3_VLEN or name in _V3_CONFIGURED or name in ml.ML_NAMES
            or bool(_RAW_BITS.match(name)))  # fmt: skip


def data_type_from_numpy(dtype: Any, *, zarr_format: ZarrFormat, object_codec_id: str | None = None) -> DataType:
    """What to store for a user-given dtype: NumPy dtype or string ("f4", "<i2", "M8[ns]"), Python ``str`` /
    ``bytes`` (variable length), or a v3 data type name / JSON ("int32", "string", {"name": ...}).

    Object dtypes become variable-length strings, or (v2) whatever ``object_codec_id`` says ("vlen-utf8" by
    default, "vlen-bytes"). v3 normalises byte order to native; v2 keeps it.

    Raises
    ------
    DataTypeError
        The dtype has no Zarr form (e.g. float128, object with an unknown codec, v3 subarray fields).
    UnsafeCodecError
        v2 object dtype with an object codec that builds arbitrary Python objects.

    Examples
    --------
    >>> data_type_from_numpy(">f8", zarr_format=3).numpy_dtype.str
    '<f8'
    >>> data_type_from_numpy(">f8", zarr_format=2).to_json()
    '>f8'
    >>> data_type_from_numpy(str, zarr_format=3).to_json()
    'string'
    """
    if zarr_format not in (2, 3):
        raise DataTypeError(f"zarr_format must be 2 or 3, got {zarr_format!r}")
    if zarr_format == 3 and _is_v3_json(dtype):
        return _parse_v3(dtype)  # a v3 name / JSON is kept as given ("r16" stays "r16")
    if isinstance(dtype, DataType) and dtype.zarr_format == zarr_format:
        return dtype
    np_dtype, vlen = _user_numpy(dtype)
    complex_name = ml.complex_name(np_dtype) or (ml.record_name(np_dtype) if zarr_format == 3 else None)
    if complex_name is not None:  # bcomplex32 / complex32, or the record a complex_* array reads as
        if zarr_format == 3:
            return _parse_v3(complex_name)
        raise DataTypeError(f"data type {np_dtype} ({complex_name}) exists only in Zarr v3 "
                            "(zarr-extensions): create the array with zarr_format=3")  # fmt: skip
    if vlen is None and np_dtype.kind == "O":
        if zarr_format == 3:
            vlen = "str"
        else:
            return _v2_object(object_codec_id or "vlen-utf8")
    if vlen is not None and object_codec_id is not None and _SAFE_OBJECT_CODECS.get(object_codec_id) != vlen:
        if zarr_format == 2:
            _v2_object(object_codec_id)  # raises for unsafe / unknown codecs
        raise DataTypeError(f"object codec {object_codec_id!r} does not match variable-length {vlen} data: use "
                            f"{'vlen-utf8' if vlen == 'str' else 'vlen-bytes'}")  # fmt: skip
    return _v2_from_numpy(np_dtype, vlen) if zarr_format == 2 else _v3_from_numpy(np_dtype, vlen)
