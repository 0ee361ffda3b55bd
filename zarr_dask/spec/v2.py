"""Zarr v2 metadata: ``.zarray`` + ``.zattrs`` for arrays, ``.zgroup`` + ``.zattrs`` for groups.

Documents are written exactly as zarr-python writes them (key order, ``indent=2``, ``.zattrs`` always
present).  Reading follows zarr-python's leniency where it is harmless: unknown ``.zarray`` keys are ignored,
absent ``compressor``/``filters`` mean none, ``filters: []`` means none, ``dimension_separator`` absent or
``null`` means ``"."``.

NCZarr (netCDF-C >= 4.8) puts its bookkeeping into these documents: ``_nczarr_superblock`` (root) and
``_nczarr_group`` in ``.zgroup``, ``_nczarr_array`` (``dimrefs``, ``storage``) in ``.zarray`` -- spelled
``_NCZARR_SUPERBLOCK`` / ``_NCZARR_GROUP`` / ``_NCZARR_ARRAY`` by netCDF-C 4.8 -- and ``_nczarr_attr``
(``_NCZARR_ATTR``; attribute types) in ``.zattrs``. netCDF-C releases from 2024 on write all of them into
``.zattrs``, where they are ordinary attributes.  Keys of ``.zgroup`` and ``.zarray`` starting with
``_nczarr`` (any case) are kept in :attr:`ArrayMetadataV2.nczarr` / :attr:`GroupMetadataV2.nczarr` and
written back after the standard keys, so a dataset stays readable by netCDF-C after zarr_dask rewrites its
metadata.  Any other unknown ``.zgroup`` key is still an error (zarr-python ignores those too).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, ClassVar, Literal

import numpy as np

from zarr_dask.errors import FillValueError, MetadataError, ZarrDaskError
from zarr_dask.spec.chunk_grid import RegularChunkGrid
from zarr_dask.spec.chunk_keys import V2ChunkKeyEncoding
from zarr_dask.spec.dtypes import DataType, parse_data_type
from zarr_dask.spec.json import (
    JsonEquality,
    coerce_int_tuple,
    dumps,
    parse_attributes,
    parse_int_tuple,
    prefixed,
    require_object,
)
from zarr_dask.spec.limits import check_geometry

__all__ = ["OBJECT_CODEC_IDS", "ArrayMetadataV2", "GroupMetadataV2"]

#: numcodecs ids that encode object arrays (they decide what a ``|O`` dtype holds), as in zarr-python.
OBJECT_CODEC_IDS = ("vlen-utf8", "vlen-bytes", "vlen-array", "pickle", "json2", "msgpack2", "categorize")

_REQUIRED = ("zarr_format", "shape", "chunks", "dtype", "fill_value", "order")
_NCZARR_PREFIX = "_nczarr"


def _is_nczarr_key(key: Any) -> bool:
    return isinstance(key, str) and key.lower().startswith(_NCZARR_PREFIX)


def _check_nczarr(obj: Any) -> dict[str, Any]:
    if not isinstance(obj, Mapping):
        raise MetadataError(f"nczarr must be a dict of NCZarr keys, got {type(obj).__name__}")
    bad = sorted(str(k) for k in obj if not _is_nczarr_key(k))
    if bad:
        raise MetadataError(f"nczarr holds only keys starting with '_nczarr' (any case), got {bad}")
    return dict(obj)


def _check_codec(obj: Any, what: str) -> dict[str, Any]:
    if not isinstance(obj, Mapping) or not isinstance(obj.get("id"), str) or not obj.get("id"):
        raise MetadataError(
            f"{what} must be a numcodecs configuration object with a string 'id', got {obj!r}"
        )
    return dict(obj)


def _object_codec_id(
    filters: tuple[dict[str, Any], ...] | None, compressor: dict[str, Any] | None
) -> str | None:
    for codec in (*(filters or ()), compressor):
        if codec is not None and codec.get("id") in OBJECT_CODEC_IDS:
            return str(codec["id"])
    return None


def _check_fill(fill_value: Any, data_type: DataType) -> None:
    if fill_value is None:
        return
    if not isinstance(fill_value, np.ndarray) or fill_value.shape != ():
        raise FillValueError(f"fill_value must be None or a 0-d NumPy array, got {fill_value!r}")
    if fill_value.dtype != data_type.numpy_dtype:
        raise FillValueError(
            f"fill_value has dtype {fill_value.dtype}, the array's data type is {data_type.numpy_dtype}; "
            "build it with data_type.cast_fill_value(...)"
        )


def _check_attributes(attributes: Any) -> dict[str, Any]:
    if not isinstance(attributes, dict):
        raise MetadataError(f"attributes must be a dict, got {type(attributes).__name__}")
    if not all(isinstance(k, str) for k in attributes):
        raise MetadataError("attribute names must be strings")
    return attributes


@dataclass(frozen=True, kw_only=True, eq=False)
class ArrayMetadataV2(JsonEquality):
    """The metadata of a Zarr v2 array (``.zarray`` fields + ``.zattrs``).

    Equality, hashing and dask tokens compare the JSON documents (NaN fill values compare equal).

    Examples
    --------
    >>> import json
    >>> meta = ArrayMetadataV2.from_json(
    ...     {"zarr_format": 2, "shape": [5, 7], "chunks": [2, 3], "dtype": "<i4", "fill_value": 0,
    ...      "order": "C", "filters": None, "compressor": None})
    >>> meta.chunk_key_encoding.encode((1, 2))
    '1.2'
    >>> json.loads(meta.to_documents()[".zarray"])["dimension_separator"]
    '.'
    """

    zarr_format: ClassVar[Literal[2]] = 2
    node_type: ClassVar[Literal["array"]] = "array"
    _memoize: ClassVar[bool] = True  # never changed in place; reused by the parse cache

    shape: tuple[int, ...]
    chunks: tuple[int, ...]
    data_type: DataType
    fill_value: np.ndarray[Any, Any] | None
    order: Literal["C", "F"] = "C"
    compressor: dict[str, Any] | None = None
    filters: tuple[dict[str, Any], ...] | None = None
    dimension_separator: Literal[".", "/"] = "."
    attributes: dict[str, Any] = field(default_factory=dict)
    nczarr: dict[str, Any] = field(default_factory=dict)
    """NCZarr keys of ``.zarray`` (``_nczarr_array`` / ``_NCZARR_ARRAY``...), kept as read and written back."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "nczarr", _check_nczarr(self.nczarr))
        object.__setattr__(self, "shape", coerce_int_tuple(self.shape, "shape"))
        object.__setattr__(self, "chunks", coerce_int_tuple(self.chunks, "chunks", minimum=1))
        if len(self.chunks) != len(self.shape):
            raise MetadataError(
                f"chunks {list(self.chunks)} and shape {list(self.shape)} must have the same length; "
                "give one chunk size per dimension"
            )
        if not isinstance(self.data_type, DataType) or self.data_type.zarr_format != 2:
            raise MetadataError(f"data_type must be a Zarr v2 DataType, got {self.data_type!r}")
        _check_fill(self.fill_value, self.data_type)
        if self.order not in ("C", "F"):
            raise MetadataError(f"order must be 'C' or 'F', got {self.order!r}")
        if self.dimension_separator not in (".", "/"):
            raise MetadataError(f"dimension_separator must be '.' or '/', got {self.dimension_separator!r}")
        if self.compressor is not None:
            object.__setattr__(self, "compressor", _check_codec(self.compressor, "compressor"))
        if self.filters is not None:
            if isinstance(self.filters, Mapping) or not isinstance(self.filters, list | tuple):
                raise MetadataError(f"filters must be None or a list of codec objects, got {self.filters!r}")
            checked = tuple(_check_codec(f, f"filters[{i}]") for i, f in enumerate(self.filters))
            object.__setattr__(self, "filters", checked or None)
        _check_attributes(self.attributes)
        check_geometry(self.shape, self.chunks, self.data_type.numpy_dtype.itemsize)

    # ------------------------------------------------------------------ common read-only properties
    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return len(self.shape)

    @property
    def chunk_shape(self) -> tuple[int, ...]:
        """The chunk shape (``chunks``)."""
        return self.chunks

    @cached_property
    def chunk_grid(self) -> RegularChunkGrid:
        """``RegularChunkGrid(chunk_shape=chunks)``."""
        return RegularChunkGrid(chunk_shape=self.chunks)

    @cached_property
    def chunk_key_encoding(self) -> V2ChunkKeyEncoding:
        """``V2ChunkKeyEncoding(separator=dimension_separator)``."""
        return V2ChunkKeyEncoding(separator=self.dimension_separator)

    @property
    def dimension_names(self) -> tuple[str, ...] | None:
        """The xarray ``_ARRAY_DIMENSIONS`` attribute when it is a list of ``ndim`` strings, else None."""
        dims = self.attributes.get("_ARRAY_DIMENSIONS")
        if (
            isinstance(dims, list | tuple)
            and len(dims) == self.ndim
            and all(isinstance(d, str) for d in dims)
        ):
            return tuple(dims)
        return None

    # ------------------------------------------------------------------ JSON
    @classmethod
    def from_json(cls, zarray: Any, zattrs: Any = None) -> ArrayMetadataV2:
        """Parse a ``.zarray`` document (and the optional ``.zattrs``) decoded from JSON.

        Raises
        ------
        MetadataError
            For a missing or mistyped field (the message names it and the value).
        DataTypeError, FillValueError
            For an invalid ``dtype`` / ``fill_value``.
        """
        try:
            return cls._from_json(require_object(zarray, "the document"), zattrs)
        except ZarrDaskError as e:
            raise prefixed(e, "invalid .zarray") from e

    @classmethod
    def _from_json(cls, doc: dict[str, Any], zattrs: Any) -> ArrayMetadataV2:
        missing = [k for k in _REQUIRED if k not in doc]
        if missing:
            raise MetadataError(f"missing required field(s) {missing}; a v2 array needs {list(_REQUIRED)}")
        if type(doc["zarr_format"]) is not int or doc["zarr_format"] != 2:
            raise MetadataError(f"field 'zarr_format' must be 2, got {doc['zarr_format']!r}")
        compressor = doc.get("compressor")
        compressor = None if compressor is None else _check_codec(compressor, "field 'compressor'")
        filters = doc.get("filters")
        if filters is not None:
            if not isinstance(filters, list):
                raise MetadataError(
                    f"field 'filters' must be null or a list of codec objects, got {filters!r}"
                )
            filters = tuple(_check_codec(f, f"field 'filters'[{i}]") for i, f in enumerate(filters)) or None
        data_type = parse_data_type(
            doc["dtype"], zarr_format=2, object_codec_id=_object_codec_id(filters, compressor)
        )
        separator = doc.get("dimension_separator")
        return cls(
            shape=parse_int_tuple(doc["shape"], "field 'shape'"),
            chunks=parse_int_tuple(doc["chunks"], "field 'chunks'", minimum=1),
            data_type=data_type,
            fill_value=data_type.parse_fill_value(doc["fill_value"]),
            order=_parse_order(doc["order"]),
            compressor=compressor,
            filters=filters,
            dimension_separator="." if separator is None else _parse_separator(separator),
            attributes=parse_attributes(zattrs, ".zattrs"),
            nczarr={k: v for k, v in doc.items() if _is_nczarr_key(k)},
        )

    def to_json(self) -> dict[str, Any]:
        """The ``.zarray`` content, in zarr-python's key order (NCZarr keys, if any, last)."""
        return {
            "shape": list(self.shape),
            "chunks": list(self.chunks),
            "dtype": self.data_type.to_json(),
            "fill_value": None
            if self.fill_value is None
            else self.data_type.fill_value_to_json(self.fill_value),
            "order": self.order,
            "filters": None if self.filters is None else [dict(f) for f in self.filters],
            "dimension_separator": self.dimension_separator,
            "compressor": None if self.compressor is None else dict(self.compressor),
            "zarr_format": 2,
            **self.nczarr,
        }

    def to_documents(self) -> dict[str, bytes]:
        """``{".zarray": bytes, ".zattrs": bytes}`` exactly as zarr-python writes them."""
        return {
            ".zarray": dumps(self.to_json(), where=".zarray"),
            ".zattrs": dumps(self.attributes, where="attributes"),
        }

    def _json_key(self) -> Any:
        return [self.to_json(), self.attributes]


def _parse_order(obj: Any) -> Literal["C", "F"]:
    if obj == "C":
        return "C"
    if obj == "F":
        return "F"
    raise MetadataError(f"field 'order' must be 'C' or 'F', got {obj!r}")


def _parse_separator(obj: Any) -> Literal[".", "/"]:
    if obj == ".":
        return "."
    if obj == "/":
        return "/"
    raise MetadataError(f"field 'dimension_separator' must be '.' or '/' (or absent), got {obj!r}")


@dataclass(frozen=True, kw_only=True, eq=False)
class GroupMetadataV2(JsonEquality):
    """The metadata of a Zarr v2 group: ``.zgroup`` (``{"zarr_format": 2}``) + ``.zattrs``.

    Examples
    --------
    >>> GroupMetadataV2(attributes={"title": "t"}).to_documents()[".zgroup"]
    b'{\\n  "zarr_format": 2\\n}'
    """

    zarr_format: ClassVar[Literal[2]] = 2
    node_type: ClassVar[Literal["group"]] = "group"

    attributes: dict[str, Any] = field(default_factory=dict)
    nczarr: dict[str, Any] = field(default_factory=dict)
    """NCZarr keys of ``.zgroup`` (``_nczarr_superblock``, ``_nczarr_group``...), kept and written back."""

    def __post_init__(self) -> None:
        _check_attributes(self.attributes)
        object.__setattr__(self, "nczarr", _check_nczarr(self.nczarr))

    @classmethod
    def from_json(cls, zgroup: Any, zattrs: Any = None) -> GroupMetadataV2:
        """Parse ``.zgroup`` (``{"zarr_format": 2}``, plus NCZarr's ``_nczarr*`` keys) and the optional
        ``.zattrs``.

        Examples
        --------
        >>> g = GroupMetadataV2.from_json({"zarr_format": 2, "_nczarr_superblock": {"version": "2.0.0"}})
        >>> g.nczarr
        {'_nczarr_superblock': {'version': '2.0.0'}}
        """
        try:
            doc = require_object(zgroup, "the document")
            if type(doc.get("zarr_format")) is not int or doc["zarr_format"] != 2:
                raise MetadataError(f"field 'zarr_format' must be 2, got {doc.get('zarr_format')!r}")
            extra = sorted(k for k in doc if k != "zarr_format" and not _is_nczarr_key(k))
            if extra:
                raise MetadataError(
                    f"unexpected key(s) {extra}; a v2 group document holds only 'zarr_format' "
                    "(attributes belong in .zattrs)"
                )
        except ZarrDaskError as e:
            raise prefixed(e, "invalid .zgroup") from e
        nczarr = {k: v for k, v in doc.items() if _is_nczarr_key(k)}
        return cls(attributes=parse_attributes(zattrs, ".zattrs"), nczarr=nczarr)

    def to_json(self) -> dict[str, Any]:
        """The ``.zgroup`` content (NCZarr keys, if any, after ``zarr_format``)."""
        return {"zarr_format": 2, **self.nczarr}

    def to_documents(self) -> dict[str, bytes]:
        """``{".zgroup": bytes, ".zattrs": bytes}`` exactly as zarr-python writes them."""
        return {".zgroup": dumps(self.to_json()), ".zattrs": dumps(self.attributes, where="attributes")}

    def _json_key(self) -> Any:
        return [self.attributes, self.nczarr] if self.nczarr else self.attributes
