"""Zarr v3 metadata: the ``zarr.json`` document of arrays and groups.

Unknown top-level keys follow the spec's ``must_understand`` rule: an object with ``"must_understand":
false`` is preserved in ``extra_fields`` (and written back); anything else makes the node unreadable
(:class:`~zarr_dask.errors.UnknownExtensionError`).  Codecs are kept as normalised JSON objects
(``{"name": ..., "configuration": ...}``); the codec layer builds pipelines from them.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import numpy as np

from zarr_dask.errors import FillValueError, MetadataError, UnknownExtensionError, ZarrDaskError
from zarr_dask.spec.chunk_grid import ChunkGrid, RectilinearChunkGrid, RegularChunkGrid, parse_chunk_grid
from zarr_dask.spec.chunk_keys import (
    ChunkKeyEncoding,
    DefaultChunkKeyEncoding,
    V2ChunkKeyEncoding,
    parse_chunk_key_encoding,
)
from zarr_dask.spec.dtypes import DataType, parse_data_type
from zarr_dask.spec.json import (
    JsonEquality,
    coerce_int_tuple,
    dumps,
    parse_attributes,
    parse_int_tuple,
    parse_named_config,
    prefixed,
    require_object,
)
from zarr_dask.spec.limits import check_geometry

if TYPE_CHECKING:
    from zarr_dask.spec.consolidated import ConsolidatedMetadata

__all__ = ["ArrayMetadataV3", "GroupMetadataV3", "normalize_codec"]

_ARRAY_KEYS = frozenset(
    {
        "zarr_format", "node_type", "shape", "data_type", "chunk_grid", "chunk_key_encoding", "fill_value",
        "codecs", "attributes", "storage_transformers", "dimension_names",
    }
)  # fmt: skip
_ARRAY_REQUIRED = ("shape", "data_type", "chunk_grid", "chunk_key_encoding", "fill_value", "codecs")
_GROUP_KEYS = frozenset({"zarr_format", "node_type", "attributes", "consolidated_metadata"})


def _check_header(doc: dict[str, Any], node_type: str) -> None:
    if "zarr_format" not in doc:
        raise MetadataError("missing required field 'zarr_format' (must be 3)")
    if type(doc["zarr_format"]) is not int or doc["zarr_format"] != 3:
        raise MetadataError(f"field 'zarr_format' must be 3, got {doc['zarr_format']!r}")
    if doc.get("node_type") != node_type:
        raise MetadataError(
            f"field 'node_type' must be {node_type!r}, got {doc.get('node_type')!r}"
            + ("" if "node_type" in doc else " (the field is missing)")
        )


def _extra_fields(doc: Mapping[str, Any], known: frozenset[str], kind: str) -> dict[str, Any]:
    """Unknown top-level keys: kept if ``{"must_understand": false, ...}``, else UnknownExtensionError."""
    extra: dict[str, Any] = {}
    for key in doc:
        if key in known:
            continue
        value = doc[key]
        if isinstance(value, Mapping) and value.get("must_understand") is False:
            extra[key] = copy.deepcopy(dict(value))
            continue
        raise UnknownExtensionError(
            f"unknown field {key!r}: the {kind} uses an extension zarr_dask does not support (only objects "
            'with "must_understand": false may be ignored); open it with software that supports it'
        )
    return extra


def normalize_codec(obj: Any, what: str = "codec") -> dict[str, Any]:
    """A ``codecs`` entry in object form: ``{"name", ["configuration"], ["must_understand"]}``.

    Short-hand strings become ``{"name": <str>}``; an absent ``configuration`` stays absent (zarr-python
    writes ``{"name": "crc32c"}``).  The configuration is deep-copied, not interpreted.

    Examples
    --------
    >>> normalize_codec("bytes")
    {'name': 'bytes'}
    """
    name, config = parse_named_config(obj, what, allow_must_understand_false=True)
    out: dict[str, Any] = {"name": name}
    if isinstance(obj, Mapping) and "configuration" in obj:
        out["configuration"] = copy.deepcopy(config) if config is not None else {}
    if isinstance(obj, Mapping) and "must_understand" in obj:
        out["must_understand"] = obj["must_understand"]
    return out


def _normalize_codecs(obj: Any, what: str) -> tuple[dict[str, Any], ...]:
    if isinstance(obj, Mapping) or not isinstance(obj, list | tuple):
        raise MetadataError(f"{what} must be a non-empty list of codec objects, got {obj!r}")
    if not obj:
        raise MetadataError(f"{what} is empty; an array needs at least an array->bytes codec such as 'bytes'")
    return tuple(normalize_codec(c, f"{what}[{i}]") for i, c in enumerate(obj))


def _check_dimension_names(names: Any, ndim: int) -> tuple[str | None, ...] | None:
    if names is None:
        return None
    if isinstance(names, str | Mapping) or not isinstance(names, Sequence):
        raise MetadataError(f"dimension_names must be null or a list of strings/nulls, got {names!r}")
    out = tuple(names)
    for i, n in enumerate(out):
        if n is not None and not isinstance(n, str):
            raise MetadataError(f"dimension_names[{i}] must be a string or null, got {n!r}")
    if len(out) != ndim:
        raise MetadataError(
            f"dimension_names {list(out)!r} has {len(out)} entries but the array has {ndim} dimensions; "
            "give one name (or null) per dimension"
        )
    return out


def _check_storage_transformers(value: Any) -> tuple[Any, ...]:
    if value is None:
        return ()
    if isinstance(value, Mapping) or not isinstance(value, list | tuple):
        raise MetadataError(f"storage_transformers must be a list, got {value!r}")
    if value:
        names = [v.get("name") if isinstance(v, Mapping) else v for v in value]
        raise UnknownExtensionError(
            f"the array uses storage transformers {names!r}, which change how chunks are stored; zarr_dask "
            "does not support storage transformers, so the array cannot be opened"
        )
    return ()


def _check_extra(extra: Any, known: frozenset[str]) -> None:
    if not isinstance(extra, dict):
        raise MetadataError(f"extra_fields must be a dict, got {type(extra).__name__}")
    for key, value in extra.items():
        if key in known:
            raise MetadataError(f"extra_fields key {key!r} collides with a standard metadata field")
        if not isinstance(value, Mapping) or value.get("must_understand") is not False:
            raise MetadataError(f'extra_fields[{key!r}] must be an object with "must_understand": false')


def _check_attributes(attributes: Any) -> None:
    if not isinstance(attributes, dict) or not all(isinstance(k, str) for k in attributes):
        raise MetadataError(f"attributes must be a dict with string keys, got {type(attributes).__name__}")


def _check_fill(fill_value: Any, data_type: DataType) -> None:
    if not isinstance(fill_value, np.ndarray) or fill_value.shape != ():
        raise FillValueError(
            f"fill_value must be a 0-d NumPy array (v3 arrays always have a fill value), got {fill_value!r}"
        )
    if fill_value.dtype != data_type.numpy_dtype:
        raise FillValueError(
            f"fill_value has dtype {fill_value.dtype}, the array's data type is {data_type.numpy_dtype}; "
            "build it with data_type.cast_fill_value(...)"
        )


def _largest_chunk(grid: ChunkGrid) -> tuple[int, ...]:
    """The largest stored chunk size along each dimension (what a reader may have to decode whole)."""
    if isinstance(grid, RectilinearChunkGrid):
        return tuple(s if isinstance(s, int) else max(s, default=0) for s in grid.chunk_shapes)
    if isinstance(grid, RegularChunkGrid):
        return grid.chunk_shape
    return ()


@dataclass(frozen=True, kw_only=True, eq=False)
class ArrayMetadataV3(JsonEquality):
    """The metadata of a Zarr v3 array (``zarr.json`` with ``node_type: "array"``).

    Equality, hashing and dask tokens compare the JSON document (NaN fill values compare equal).
    """

    zarr_format: ClassVar[Literal[3]] = 3
    node_type: ClassVar[Literal["array"]] = "array"
    _memoize: ClassVar[bool] = True  # never changed in place; reused by the parse cache

    shape: tuple[int, ...]
    data_type: DataType
    chunk_grid: RegularChunkGrid | RectilinearChunkGrid
    chunk_key_encoding: DefaultChunkKeyEncoding | V2ChunkKeyEncoding
    fill_value: np.ndarray[Any, Any]
    codecs: tuple[dict[str, Any], ...]
    attributes: dict[str, Any] = field(default_factory=dict)
    dimension_names: tuple[str | None, ...] | None = None
    storage_transformers: tuple[Any, ...] = ()
    extra_fields: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", coerce_int_tuple(self.shape, "shape"))
        if not isinstance(self.data_type, DataType) or self.data_type.zarr_format != 3:
            raise MetadataError(f"data_type must be a Zarr v3 DataType, got {self.data_type!r}")
        _check_fill(self.fill_value, self.data_type)
        if not isinstance(self.chunk_grid, ChunkGrid):
            raise MetadataError(f"chunk_grid must be a ChunkGrid, got {self.chunk_grid!r}")
        self.chunk_grid.validate_shape(self.shape)
        if not isinstance(self.chunk_key_encoding, ChunkKeyEncoding):
            raise MetadataError(
                f"chunk_key_encoding must be a ChunkKeyEncoding, got {self.chunk_key_encoding!r}"
            )
        object.__setattr__(self, "codecs", _normalize_codecs(self.codecs, "codecs"))
        _check_attributes(self.attributes)
        object.__setattr__(
            self, "dimension_names", _check_dimension_names(self.dimension_names, len(self.shape))
        )
        object.__setattr__(
            self, "storage_transformers", _check_storage_transformers(self.storage_transformers)
        )
        _check_extra(self.extra_fields, _ARRAY_KEYS)
        check_geometry(self.shape, _largest_chunk(self.chunk_grid), self.data_type.numpy_dtype.itemsize, self.codecs)

    # ------------------------------------------------------------------ common read-only properties
    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return len(self.shape)

    @property
    def order(self) -> Literal["C"]:
        """Always ``"C"``: v3 chunks are C-ordered (a ``transpose`` codec stores other layouts)."""
        return "C"

    @property
    def chunk_shape(self) -> tuple[int, ...]:
        """The chunk shape of a regular grid (MetadataError for a rectilinear grid)."""
        if isinstance(self.chunk_grid, RegularChunkGrid):
            return self.chunk_grid.chunk_shape
        raise MetadataError(
            "the array has a rectilinear chunk grid, so chunks differ in shape; "
            "use chunk_grid.chunk_shape_at(coords) or chunk_grid.dim_grids(shape)"
        )

    # ------------------------------------------------------------------ JSON
    @classmethod
    def from_json(cls, doc: Any) -> ArrayMetadataV3:
        """Parse an array ``zarr.json`` document decoded from JSON.

        Raises
        ------
        MetadataError
            For a missing/mistyped field, a wrong ``node_type``, ``dimension_names`` of the wrong length...
        UnknownExtensionError
            For an unknown top-level key without ``"must_understand": false``, an unsupported chunk grid or
            key encoding, or storage transformers.
        DataTypeError, FillValueError
            For an invalid ``data_type`` / ``fill_value``.
        """
        try:
            return cls._from_json(require_object(doc, "the document"))
        except ZarrDaskError as e:
            raise prefixed(e, "invalid array zarr.json") from e

    @classmethod
    def _from_json(cls, doc: dict[str, Any]) -> ArrayMetadataV3:
        _check_header(doc, "array")
        extra = _extra_fields(doc, _ARRAY_KEYS, "array")
        missing = [k for k in _ARRAY_REQUIRED if k not in doc]
        if missing:
            raise MetadataError(
                f"missing required field(s) {missing}; a v3 array needs {list(_ARRAY_REQUIRED)}"
            )
        data_type = parse_data_type(doc["data_type"], zarr_format=3)
        fill_value = data_type.parse_fill_value(doc["fill_value"])
        if fill_value is None:
            raise FillValueError(
                "field 'fill_value' must not be null in Zarr v3; give the fill value explicitly"
            )
        return cls(
            shape=parse_int_tuple(doc["shape"], "field 'shape'"),
            data_type=data_type,
            chunk_grid=parse_chunk_grid(doc["chunk_grid"]),
            chunk_key_encoding=parse_chunk_key_encoding(doc["chunk_key_encoding"]),
            fill_value=fill_value,
            codecs=_normalize_codecs(doc["codecs"], "field 'codecs'"),
            attributes=parse_attributes(doc.get("attributes"), "field 'attributes'"),
            dimension_names=doc.get("dimension_names"),
            storage_transformers=_check_storage_transformers(doc.get("storage_transformers")),
            extra_fields=extra,
        )

    def to_json(self) -> dict[str, Any]:
        """The ``zarr.json`` content, in zarr-python's key order."""
        out: dict[str, Any] = {
            "shape": list(self.shape),
            "data_type": self.data_type.to_json(),
            "chunk_grid": self.chunk_grid.to_json(),
            "chunk_key_encoding": self.chunk_key_encoding.to_json(),
            "fill_value": self.data_type.fill_value_to_json(self.fill_value),
            "codecs": copy.deepcopy(list(self.codecs)),
            "attributes": self.attributes,
        }
        if self.dimension_names is not None:
            out["dimension_names"] = list(self.dimension_names)
        out.update(zarr_format=3, node_type="array", storage_transformers=[])
        out.update(copy.deepcopy(self.extra_fields))
        return out

    def to_documents(self) -> dict[str, bytes]:
        """``{"zarr.json": bytes}`` exactly as zarr-python writes it."""
        return {"zarr.json": dumps(self.to_json(), where="zarr.json")}

    def _json_key(self) -> Any:
        return self.to_json()


@dataclass(frozen=True, kw_only=True, eq=False)
class GroupMetadataV3(JsonEquality):
    """The metadata of a Zarr v3 group (``zarr.json`` with ``node_type: "group"``).

    Examples
    --------
    >>> GroupMetadataV3(attributes={}).to_json()
    {'attributes': {}, 'zarr_format': 3, 'node_type': 'group'}
    """

    zarr_format: ClassVar[Literal[3]] = 3
    node_type: ClassVar[Literal["group"]] = "group"

    attributes: dict[str, Any] = field(default_factory=dict)
    consolidated_metadata: ConsolidatedMetadata | None = None
    extra_fields: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        from zarr_dask.spec.consolidated import ConsolidatedMetadata

        _check_attributes(self.attributes)
        cm = self.consolidated_metadata
        if cm is not None and (not isinstance(cm, ConsolidatedMetadata) or cm.zarr_format != 3):
            raise MetadataError(f"consolidated_metadata must be None or v3 ConsolidatedMetadata, got {cm!r}")
        _check_extra(self.extra_fields, _GROUP_KEYS)

    @classmethod
    def from_json(cls, doc: Any) -> GroupMetadataV3:
        """Parse a group ``zarr.json`` document (with its inline ``consolidated_metadata``, if any)."""
        from zarr_dask.spec.consolidated import parse_consolidated_v3

        try:
            d = require_object(doc, "the document")
            _check_header(d, "group")
            extra = _extra_fields(d, _GROUP_KEYS, "group")
            cm = d.get("consolidated_metadata")
            return cls(
                attributes=parse_attributes(d.get("attributes"), "field 'attributes'"),
                consolidated_metadata=None if cm is None else parse_consolidated_v3(cm),
                extra_fields=extra,
            )
        except ZarrDaskError as e:
            raise prefixed(e, "invalid group zarr.json") from e

    def to_json(self) -> dict[str, Any]:
        """The ``zarr.json`` content, in zarr-python's key order."""
        out: dict[str, Any] = {"attributes": self.attributes, "zarr_format": 3}
        if self.consolidated_metadata is not None:
            out["consolidated_metadata"] = self.consolidated_metadata.to_json()
        out["node_type"] = "group"
        out.update(copy.deepcopy(self.extra_fields))
        return out

    def to_documents(self) -> dict[str, bytes]:
        """``{"zarr.json": bytes}`` exactly as zarr-python writes it."""
        return {"zarr.json": dumps(self.to_json(), where="zarr.json")}

    def _json_key(self) -> Any:
        return self.to_json()
