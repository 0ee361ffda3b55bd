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


# ZEP 6's own Zarr v3 example, verbatim: zarr-developers/zeps, draft/ZEP0006.md, section "Zarr Object Models in
# JSON" (commit 20c9cc03394a5a7bf495facce65ce030e98245ec, 2023-10-29; unchanged since e1b8755c, which added it).
ZEP6_V3_EXAMPLE = """
{
  "zarr_format": 3,
  "node_type": "group",
  "attributes": {
    "foo": 42,
    "bar": false
  },
  "members": {
    "array": {
      "zarr_format": 3,
      "node_type": "array",
      "attributes": {
        "baz": [
          1,
          2,
          3
        ]
      },
      "shape": [
        1000,
        1000
      ],
      "data_type": "|u1",
      "chunk_grid": {
        "name": "regular",
        "configuration": {
          "chunk_shape": [
            1000,
            100
          ]
        }
      },
      "chunk_key_encoding": {
        "name": "default",
        "configuration": {
          "separator": "/"
        }
      },
      "fill_value": 0,
      "codecs": [
        {
          "name": "GZip",
          "configuration": {
            "level": 1
          }
        }
      ],
      "storage_transformers": null,
      "dimension_names": [
        "rows",
        "columns"
      ]
    }
  }
}
"""


def test_zep6_v3_example_validates_verbatim():
    """Lenient where the example is (``storage_transformers: null``, a data type and codec named as their
    authors spelled them), strict on structure."""
    doc = json.loads(ZEP6_V3_EXAMPLE)
    assert list(_validator(3).iter_errors(doc)) == []
    assert list(_validator(3, "array").iter_errors(doc["members"]["array"])) == []
    for mutate in (
        lambda d: d["members"]["array"].__setitem__("storage_transformers", "none"),
        lambda d: d["members"]["array"].__setitem__("storage_transformers", [{"configuration": {}}]),  # no name
        lambda d: d["members"]["array"].__setitem__("surprise", 1),
        lambda d: d["members"]["array"].pop("chunk_grid"),
        lambda d: d["members"]["array"].__setitem__("dimension_names", "rows"),
        lambda d: d.__setitem__("members", [d["members"]["array"]]),
        lambda d: d.__setitem__("node_type", "array"),
    ):
        bad = json.loads(ZEP6_V3_EXAMPLE)
        mutate(bad)
        assert not _validator(3).is_valid(bad)


def test_zep6_v3_example_is_checked_not_refused():
    """The model reads Zarr v3 names only ('|u1' is a v2 typestr, 'GZip' no registered codec): the convention
    check reports the example's array as a problem of that node instead of failing, and checks the rest."""
    from zarr_dask.zom import conventions

    (problem,) = conventions.xarray(ZEP6_V3_EXAMPLE)
    assert (problem.path, problem.kind) == ("/array", "invalid_metadata")
    assert "'|u1'" in problem.message and "data_type" in problem.message
    fixed = json.loads(ZEP6_V3_EXAMPLE)
    fixed["members"]["array"].update(data_type="uint8", codecs=[{"name": "bytes"}, {"name": "gzip", "configuration": {"level": 1}}])
    assert conventions.xarray(fixed) == []
    assert GroupSpec.from_json(fixed)["array"].dimension_names == ("rows", "columns")
