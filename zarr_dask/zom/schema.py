"""JSON Schemas (draft 2020-12) of the ZEP 6 JSON, for Zarr v2 and v3.

They follow the schemas printed in ZEP 6 with its slips fixed and with what real hierarchies hold: v2 uses
``zarr_format`` (not ``zarr_version``) and ``attributes`` (not ``attributess``); ``filters`` and
``compressor`` may be ``null``; v3 codecs may be short-hand strings and ``configuration`` is optional (zarr-python
writes ``{"name": "crc32c"}``); extension objects may carry ``must_understand``; ``dimension_names`` items may
be ``null``; ``storage_transformers`` is a list, or ``null`` as in ZEP 6's own v3 example (read as none); member names follow the node-name rules; ``members`` may be
``null`` (unknown); and ``implicit`` marks an implicit group.  Every JSON that :meth:`GroupSpec.to_json`
writes validates, and so does pydantic-zarr 0.10's ``model_dump(mode="json")``.
"""

from __future__ import annotations

import copy
from typing import Any, Literal

from zarr_dask.errors import MetadataError

__all__ = ["json_schema"]

_NAMED_CONFIG = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1},
        "configuration": {"type": ["object", "null"]},
        "must_understand": {"type": "boolean"},
    },
    "required": ["name"],
    "additionalProperties": False,
}
_EXTENSION = {"anyOf": [{"type": "string", "minLength": 1}, {"$ref": "#/$defs/NamedConfig"}]}
_FLOAT = {"anyOf": [{"type": "number"}, {"enum": ["NaN", "Infinity", "-Infinity"]}, {"type": "string"}]}
_EXTRA_FIELD = {
    "type": "object",
    "properties": {"must_understand": {"const": False}},
    "required": ["must_understand"],
}
_SHAPE = {"type": "array", "items": {"type": "integer", "minimum": 0}}
_ATTRIBUTES = {"type": "object"}


def _members(zarr_format: int) -> dict[str, Any]:
    names = r"^(?!__)(?!\.+$)[^/\\]+$" if zarr_format == 3 else r"^(?!\.+$)[^/\\]+$"
    return {
        "anyOf": [
            {
                "type": "object",
                "propertyNames": {"pattern": names},
                "additionalProperties": {"anyOf": [{"$ref": "#/$defs/GroupSpec"}, {"$ref": "#/$defs/ArraySpec"}]},
            },
            {"type": "null"},
        ]
    }


def _v3_defs() -> dict[str, Any]:
    array = {
        "type": "object",
        "description": "A Zarr v3 array (ZEP 6): the zarr.json fields of the array",
        "properties": {
            "zarr_format": {"const": 3},
            "node_type": {"const": "array"},
            "attributes": _ATTRIBUTES,
            "shape": _SHAPE,
            "data_type": _EXTENSION,
            "chunk_grid": _EXTENSION,
            "chunk_key_encoding": _EXTENSION,
            "fill_value": {},
            "codecs": {"type": "array", "minItems": 1, "items": _EXTENSION},
            "storage_transformers": {"anyOf": [{"type": "array", "items": _EXTENSION}, {"type": "null"}]},
            "dimension_names": {"anyOf": [{"type": "array", "items": {"type": ["string", "null"]}}, {"type": "null"}]},
        },
        "required": ["zarr_format", "node_type", "shape", "data_type", "chunk_grid", "chunk_key_encoding",
                     "fill_value", "codecs"],  # fmt: skip
        "additionalProperties": _EXTRA_FIELD,
    }
    group = {
        "type": "object",
        "description": "A Zarr v3 group (ZEP 6): attributes and members",
        "properties": {
            "zarr_format": {"const": 3},
            "node_type": {"const": "group"},
            "attributes": _ATTRIBUTES,
            "members": _members(3),
            "implicit": {"type": "boolean"},
            "consolidated_metadata": {},
        },
        "required": ["zarr_format", "node_type"],
        "additionalProperties": _EXTRA_FIELD,
    }
    return {"ArraySpec": array, "GroupSpec": group, "NamedConfig": _NAMED_CONFIG}


def _v2_defs() -> dict[str, Any]:
    codec = {"type": "object", "properties": {"id": {"type": "string", "minLength": 1}}, "required": ["id"]}
    dtype = {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "array", "minItems": 2, "maxItems": 3}}]}
    array = {
        "type": "object",
        "description": "A Zarr v2 array (ZEP 6): the .zarray fields plus the .zattrs content as attributes",
        "properties": {
            "zarr_format": {"const": 2},
            "node_type": {"const": "array"},
            "attributes": _ATTRIBUTES,
            "shape": _SHAPE,
            "chunks": {"type": "array", "items": {"type": "integer", "minimum": 1}},
            "dtype": dtype,
            "compressor": {"anyOf": [codec, {"type": "null"}]},
            "fill_value": {"anyOf": [{"type": ["boolean", "integer", "null"]}, _FLOAT, {"type": "array"}]},
            "order": {"enum": ["C", "F"]},
            "filters": {"anyOf": [{"type": "array", "items": codec}, {"type": "null"}]},
            "dimension_separator": {"enum": [".", "/", None]},
        },
        "required": ["zarr_format", "shape", "chunks", "dtype", "fill_value", "order"],
        "additionalProperties": False,
    }
    group = {
        "type": "object",
        "description": "A Zarr v2 group (ZEP 6): attributes and members",
        "properties": {
            "zarr_format": {"const": 2},
            "attributes": _ATTRIBUTES,
            "members": _members(2),
            "implicit": {"type": "boolean"},
        },
        "required": ["zarr_format"],
        "not": {"required": ["shape"]},
        "additionalProperties": False,
    }
    return {"ArraySpec": array, "GroupSpec": group}


def json_schema(zarr_format: Literal[2, 3] = 3, node: Literal["group", "array"] = "group") -> dict[str, Any]:
    """The JSON Schema of a ZEP 6 node of ``zarr_format`` (a group with nested members, or an array).

    Examples
    --------
    >>> schema = json_schema(3)
    >>> schema["$ref"], sorted(schema["$defs"])
    ('#/$defs/GroupSpec', ['ArraySpec', 'GroupSpec', 'NamedConfig'])
    """
    if zarr_format not in (2, 3):
        raise MetadataError(f"zarr_format must be 2 or 3, got {zarr_format!r}")
    if node not in ("group", "array"):
        raise MetadataError(f"node must be 'group' or 'array', got {node!r}")
    defs = _v3_defs() if zarr_format == 3 else _v2_defs()
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"Zarr v{zarr_format} {'hierarchy' if node == 'group' else 'array'} (ZEP 6)",
        "$ref": "#/$defs/GroupSpec" if node == "group" else "#/$defs/ArraySpec",
        "$defs": copy.deepcopy(defs),
    }
