"""Pure Zarr format layer: JSON documents <-> frozen metadata objects (no I/O).

Modules: :mod:`~zarr_dask.spec.json` (encoding), :mod:`~zarr_dask.spec.paths`,
:mod:`~zarr_dask.spec.dtypes`, :mod:`~zarr_dask.spec.chunk_grid`, :mod:`~zarr_dask.spec.chunk_keys`,
:mod:`~zarr_dask.spec.v2`, :mod:`~zarr_dask.spec.v3`, :mod:`~zarr_dask.spec.consolidated`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, TypeAlias

from zarr_dask.errors import MetadataError
from zarr_dask.spec.chunk_grid import (
    ChunkGrid,
    DimGrid,
    RectilinearChunkGrid,
    RegularChunkGrid,
    RegularDimGrid,
    VaryingDimGrid,
    parse_chunk_grid,
)
from zarr_dask.spec.chunk_keys import (
    ChunkKeyEncoding,
    DefaultChunkKeyEncoding,
    V2ChunkKeyEncoding,
    parse_chunk_key_encoding,
)
from zarr_dask.spec.consolidated import ConsolidatedMetadata, parse_consolidated_v2, parse_consolidated_v3
from zarr_dask.spec.dtypes import DataType, data_type_from_numpy, parse_data_type
from zarr_dask.spec.json import loads_object
from zarr_dask.spec.paths import (
    join_path,
    key_prefix,
    name_of,
    normalize_path,
    parent_paths,
    validate_node_name,
    validate_node_path,
)
from zarr_dask.spec.v2 import ArrayMetadataV2, GroupMetadataV2
from zarr_dask.spec.v3 import ArrayMetadataV3, GroupMetadataV3

__all__ = [
    "ArrayMetadata",
    "ArrayMetadataV2",
    "ArrayMetadataV3",
    "ChunkGrid",
    "ChunkKeyEncoding",
    "ConsolidatedMetadata",
    "DataType",
    "DefaultChunkKeyEncoding",
    "DimGrid",
    "GroupMetadata",
    "GroupMetadataV2",
    "GroupMetadataV3",
    "NodeMetadata",
    "RectilinearChunkGrid",
    "RegularChunkGrid",
    "RegularDimGrid",
    "V2ChunkKeyEncoding",
    "VaryingDimGrid",
    "data_type_from_numpy",
    "join_path",
    "key_prefix",
    "name_of",
    "normalize_path",
    "parent_paths",
    "parse_array_metadata",
    "parse_chunk_grid",
    "parse_chunk_key_encoding",
    "parse_consolidated_v2",
    "parse_consolidated_v3",
    "parse_data_type",
    "parse_group_metadata",
    "parse_node_metadata",
    "validate_node_name",
    "validate_node_path",
]

ArrayMetadata: TypeAlias = ArrayMetadataV2 | ArrayMetadataV3
GroupMetadata: TypeAlias = GroupMetadataV2 | GroupMetadataV3
NodeMetadata: TypeAlias = ArrayMetadata | GroupMetadata

Documents = Mapping[str, bytes | str | None]


def _doc(docs: Documents, name: str) -> bytes | str:
    data = docs.get(name)
    if data is None:
        raise MetadataError(f"the {name!r} document is missing")
    return data


def _attrs(docs: Documents) -> object:
    data = docs.get(".zattrs")
    return None if data is None else loads_object(data, ".zattrs")


def parse_node_metadata(zarr_format: Literal[2, 3], docs: Documents) -> NodeMetadata:
    """Parse a node's encoded documents (``{"zarr.json": b"..."}`` or ``{".zarray"|".zgroup": ..., ".zattrs": ...}``).

    Raises
    ------
    MetadataError
        If the documents are missing, not JSON, or invalid (subclasses say more).
    """
    if zarr_format == 3:
        doc = loads_object(_doc(docs, "zarr.json"), "zarr.json")
        if doc.get("node_type") == "array":
            return ArrayMetadataV3.from_json(doc)
        if doc.get("node_type") == "group":
            return GroupMetadataV3.from_json(doc)
        raise MetadataError(
            f"zarr.json field 'node_type' must be 'array' or 'group', got {doc.get('node_type')!r}"
        )
    if zarr_format == 2:
        zarray = docs.get(".zarray")
        if zarray is not None:
            return ArrayMetadataV2.from_json(loads_object(zarray, ".zarray"), _attrs(docs))
        return GroupMetadataV2.from_json(loads_object(_doc(docs, ".zgroup"), ".zgroup"), _attrs(docs))
    raise MetadataError(f"zarr_format must be 2 or 3, got {zarr_format!r}")


def parse_array_metadata(zarr_format: Literal[2, 3], docs: Documents) -> ArrayMetadata:
    """Parse an array's documents: v3 ``{"zarr.json": ...}``; v2 ``{".zarray": ..., ".zattrs": ...}``
    (``.zattrs`` optional).

    Examples
    --------
    >>> meta = parse_array_metadata(2, {".zarray": b'{"zarr_format": 2, "shape": [4], "chunks": [2], '
    ...     b'"dtype": "<f8", "fill_value": "NaN", "order": "C", "filters": null, "compressor": null}'})
    >>> meta.shape, meta.chunk_shape
    ((4,), (2,))
    """
    if zarr_format == 2:
        _doc(docs, ".zarray")
    node = parse_node_metadata(zarr_format, docs)
    if not isinstance(node, ArrayMetadataV2 | ArrayMetadataV3):
        raise MetadataError("the documents describe a group, not an array")
    return node


def parse_group_metadata(zarr_format: Literal[2, 3], docs: Documents) -> GroupMetadata:
    """Parse a group's documents: v3 ``{"zarr.json": ...}``; v2 ``{".zgroup": ..., ".zattrs": ...}``."""
    if zarr_format == 2:
        _doc(docs, ".zgroup")
        if docs.get(".zarray") is not None:
            raise MetadataError("the documents describe an array, not a group")
    node = parse_node_metadata(zarr_format, docs)
    if not isinstance(node, GroupMetadataV2 | GroupMetadataV3):
        raise MetadataError("the documents describe an array, not a group")
    return node
