"""The JSON Schemas validate everything we write (and pydantic-zarr writes), and reject malformed hierarchies."""

from __future__ import annotations

import copy
import json

import pytest

from tests.zom._trees import RECTILINEAR_JSON, SHARDING_JSON, tree
from zarr_dask.errors import MetadataError
from zarr_dask.zom import ArraySpec, GroupSpec, json_schema

jsonschema = pytest.importorskip("jsonschema")


def _validator(fmt: int, node: str = "group"):
    schema = json_schema(fmt, node)  # type: ignore[arg-type]
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


@pytest.mark.parametrize("fmt", [2, 3])
def test_our_json_validates(fmt):
    doc = json.loads(json.dumps(tree(fmt).to_json()))
    assert list(_validator(fmt).iter_errors(doc)) == []
    implicit = GroupSpec(zarr_format=fmt, members={"a": GroupSpec(zarr_format=fmt, implicit=True)}, attributes={})  # type: ignore[arg-type]
    assert list(_validator(fmt).iter_errors(implicit.to_json())) == []
    assert list(_validator(fmt).iter_errors(GroupSpec(zarr_format=fmt, members=None).to_json())) == []  # type: ignore[arg-type]


def test_array_schemas_and_class_methods():
    validator = _validator(3, "array")
    assert validator.is_valid(SHARDING_JSON) and validator.is_valid(RECTILINEAR_JSON)
    assert ArraySpec.json_schema(2)["$ref"] == "#/$defs/ArraySpec"
    assert GroupSpec.json_schema()["$ref"] == "#/$defs/GroupSpec"
    assert _validator(2, "array").is_valid(tree(2)["temp"].to_json())


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: d["members"].__setitem__("a/b", copy.deepcopy(d["members"]["rect"])),  # a path, not a name
        lambda d: d["members"].__setitem__("__x", {"zarr_format": 3, "node_type": "group"}),  # reserved name
        lambda d: d["members"]["rect"].pop("codecs"),
        lambda d: d["members"]["rect"].__setitem__("codecs", []),
        lambda d: d["members"]["rect"].__setitem__("shape", [-1, 2]),
        lambda d: d["members"]["rect"].__setitem__("surprise", 1),  # extra key, not must_understand: false
        lambda d: d.__setitem__("zarr_format", 2),
        lambda d: d["members"]["obs"].__setitem__("members", []),
    ],
)
def test_malformed_v3_is_rejected(mutate):
    doc = json.loads(json.dumps(tree(3).to_json()))
    mutate(doc)
    assert not _validator(3).is_valid(doc)


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: d["members"]["temp"].__setitem__("order", "K"),
        lambda d: d["members"]["temp"].__setitem__("chunks", [0, 2]),
        lambda d: d["members"]["temp"].__setitem__("compressor", {"level": 1}),  # no id
        lambda d: d["members"]["temp"].__setitem__("node_type", "group"),
        lambda d: d.__setitem__("zarr_version", 2),  # ZEP 6's typo is not accepted
        lambda d: d["members"]["temp"].pop("dtype"),
    ],
)
def test_malformed_v2_is_rejected(mutate):
    doc = json.loads(json.dumps(tree(2).to_json()))
    mutate(doc)
    assert not _validator(2).is_valid(doc)


def test_bad_arguments():
    with pytest.raises(MetadataError, match="zarr_format must be 2 or 3"):
        json_schema(4)  # type: ignore[arg-type]
    with pytest.raises(MetadataError, match="node must be"):
        json_schema(3, "chunk")  # type: ignore[arg-type]
