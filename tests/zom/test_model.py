"""ArraySpec / GroupSpec: construction rules, ZEP 6 JSON, the flat form, builders, equality and pickling."""

from __future__ import annotations

import copy
import json
import math
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.zom._trees import RECTILINEAR_JSON, SHARDING_JSON, tree, v3_tree
from zarr_dask.errors import InvalidPathError, MetadataError, UnknownExtensionError
from zarr_dask.zom import ArraySpec, GroupSpec, from_json


# ------------------------------------------------------------------------------------------------ JSON
@pytest.mark.parametrize("fmt", [2, 3])
def test_json_round_trip_of_whole_trees(fmt):
    spec = tree(fmt)
    doc = spec.to_json()
    assert GroupSpec.from_json(doc) == spec
    assert GroupSpec.from_json(json.dumps(doc)) == spec  # JSON text too
    assert GroupSpec.from_json(json.loads(json.dumps(doc))).to_json() == json.loads(json.dumps(doc))


def test_zep6_json_shapes_match_pydantic_zarr():
    spec = v3_tree()
    doc = spec.to_json()
    assert list(doc) == ["zarr_format", "node_type", "attributes", "members"]
    array = doc["members"]["obs"]["members"]["temp"]
    assert list(array) == [
        "zarr_format", "node_type", "attributes", "shape", "data_type", "chunk_grid", "chunk_key_encoding",
        "fill_value", "codecs", "storage_transformers", "dimension_names",
    ]  # fmt: skip
    assert "dimension_names" not in doc["members"]["built_shards"]  # dropped when None, as pydantic-zarr does
    v2 = tree(2).to_json()
    assert list(v2) == ["zarr_format", "attributes", "members"]
    assert sorted(v2["members"]["temp"]) == sorted(
        ["zarr_format", "attributes", "shape", "chunks", "dtype", "fill_value", "order", "filters",
         "dimension_separator", "compressor"]  # fmt: skip
    )


def test_sharding_and_rectilinear_are_expressible():
    sharded = ArraySpec.from_json(SHARDING_JSON)
    assert sharded.to_json() == SHARDING_JSON
    rect = ArraySpec.from_json(RECTILINEAR_JSON)
    assert rect.to_json() == RECTILINEAR_JSON
    assert rect.chunk_grid.grid_shape(rect.shape) == (3, 2)


def test_pydantic_zarr_quirk_bytes_without_endian_is_read_as_little():
    doc = copy.deepcopy(RECTILINEAR_JSON)
    doc["codecs"] = [{"name": "bytes"}]
    assert ArraySpec.from_json(doc).to_json()["codecs"] == [{"name": "bytes", "configuration": {"endian": "little"}}]
    one_byte = {**doc, "data_type": "uint8", "fill_value": 0}
    assert ArraySpec.from_json(one_byte).to_json()["codecs"] == [{"name": "bytes"}]
    nested = copy.deepcopy(SHARDING_JSON)
    nested["codecs"][0]["configuration"]["codecs"] = [{"name": "bytes"}]
    nested["codecs"][0]["configuration"]["index_codecs"] = [{"name": "bytes"}, {"name": "crc32c"}]
    config = ArraySpec.from_json(nested).to_json()["codecs"][0]["configuration"]
    assert config["codecs"][0] == config["index_codecs"][0] == {"name": "bytes", "configuration": {"endian": "little"}}


def test_python_mode_dumps_with_tuples_are_accepted():
    doc = {
        "zarr_format": 3, "node_type": "group", "attributes": {}, "members": {
            "a": {**RECTILINEAR_JSON, "shape": (10, 12), "codecs": ({"name": "bytes"},), "storage_transformers": ()}
        },
    }  # fmt: skip
    assert GroupSpec.from_json(doc)["a"].shape == (10, 12)


def test_members_null_and_missing_attributes():
    spec = GroupSpec.from_json({"zarr_format": 3, "node_type": "group", "members": None})
    assert spec.members is None and spec.attributes == {}
    assert spec.to_json()["members"] is None
    assert GroupSpec.from_json({"zarr_format": 2}).members == {}


def test_implicit_groups_are_marked_in_json_and_can_be_made_explicit():
    spec = GroupSpec(members={"a": GroupSpec(implicit=True, members={"b": GroupSpec()})})
    doc = spec.to_json()
    assert doc["members"]["a"]["implicit"] is True and "implicit" not in doc
    assert GroupSpec.from_json(doc) == spec
    explicit = spec.with_explicit_groups()
    assert "implicit" not in json.dumps(explicit.to_json())
    with pytest.raises(MetadataError, match="implicit group has no document"):
        GroupSpec(implicit=True, attributes={"a": 1})


def test_zep6_members_renaming_of_a_group_field_called_members():
    extra = {"members": {"must_understand": False, "x": 1}, "_members": {"must_understand": False}}
    spec = GroupSpec(extra_fields=extra)
    doc = spec.to_json()
    assert doc["_members"] == extra["members"] and doc["__members"] == extra["_members"]
    assert doc["members"] == {}
    assert GroupSpec.from_json(doc) == spec


def test_v3_extra_fields_follow_must_understand():
    doc = {"zarr_format": 3, "node_type": "group", "attributes": {}, "members": {}, "ext": {"must_understand": False}}
    assert GroupSpec.from_json(doc).extra_fields == {"ext": {"must_understand": False}}
    with pytest.raises(UnknownExtensionError, match="unknown field 'ext'"):
        GroupSpec.from_json({**doc, "ext": {"must_understand": True}})
    with pytest.raises(MetadataError, match="v2 group"):
        GroupSpec.from_json({"zarr_format": 2, "attributes": {}, "members": {}, "ext": 1})
    # consolidated metadata is a cache, not structure: accepted and dropped
    assert GroupSpec.from_json({**doc, "consolidated_metadata": {"kind": "inline"}}).to_json() == doc | {"ext": {"must_understand": False}}


def test_errors_name_the_node_path():
    doc = v3_tree().to_json()
    doc["members"]["obs"]["members"]["temp"]["shape"] = [5]
    with pytest.raises(MetadataError, match=r"node ./obs/temp.: invalid array zarr.json: .*dimensions"):
        GroupSpec.from_json(doc)
    doc = v3_tree().to_json()
    doc["members"]["obs"]["members"]["temp"]["data_type"] = "int99"
    with pytest.raises(MetadataError, match="node '/obs/temp'"):
        GroupSpec.from_json(doc)
    with pytest.raises(MetadataError, match="must be a JSON object"):
        GroupSpec.from_json("[1, 2]")
    with pytest.raises(MetadataError, match="describes an array"):
        GroupSpec.from_json(RECTILINEAR_JSON)
    with pytest.raises(MetadataError, match="describes a group"):
        ArraySpec.from_json({"zarr_format": 3, "node_type": "group"})


# ------------------------------------------------------------------------------------------------ rules
@pytest.mark.parametrize(
    ("name", "fmt", "match"),
    [
        ("", 3, "empty"),
        ("a/b", 3, "path separator"),
        ("..", 2, "only of '.'"),
        ("__meta", 3, "reserves"),
        ("zarr.json", 3, "metadata document"),
        (".zarray", 2, "metadata document"),
        ("a\x00", 3, "control character"),
    ],
)
def test_member_names_follow_the_spec(name, fmt, match):
    with pytest.raises(InvalidPathError, match=match):
        GroupSpec(zarr_format=fmt, members={name: GroupSpec(zarr_format=fmt)})


def test_one_format_per_hierarchy_and_typed_members():
    with pytest.raises(MetadataError, match=r"Zarr v2 node inside a Zarr v3 group.*to_format\(3\)"):
        GroupSpec(members={"a": GroupSpec(zarr_format=2)})
    with pytest.raises(MetadataError, match="must be an ArraySpec or a GroupSpec"):
        GroupSpec(members={"a": {"zarr_format": 3}})  # type: ignore[dict-item]
    with pytest.raises(MetadataError, match="zarr_format must be 2 or 3"):
        GroupSpec(zarr_format=4)  # type: ignore[arg-type]
    with pytest.raises(MetadataError, match=r"attributes\['when'\]"):
        GroupSpec(attributes={"when": object()})
    with pytest.raises(MetadataError, match="v2 .zgroup holds nothing"):
        GroupSpec(zarr_format=2, extra_fields={"x": {"must_understand": False}})


def test_dimension_names_length_must_match_ndim():
    with pytest.raises(MetadataError, match="one entry per dimension"):
        ArraySpec.from_array(np.zeros((2, 3)), dimension_names=["x"])
    doc = copy.deepcopy(RECTILINEAR_JSON)
    doc["dimension_names"] = ["a", "b", "c"]
    with pytest.raises(MetadataError, match="3 entries but the array has 2 dimensions"):
        ArraySpec.from_json(doc)


def test_specs_are_frozen_and_members_are_copied():
    members = {"a": GroupSpec()}
    attributes = {"x": [1]}
    spec = GroupSpec(attributes=attributes, members=members)
    members["b"] = GroupSpec()
    attributes["x"].append(2)
    assert list(spec.members or {}) == ["a"] and spec.attributes == {"x": [1]}
    with pytest.raises(AttributeError):
        spec.zarr_format = 2  # type: ignore[misc]


# ------------------------------------------------------------------------------------------------ flat form
def test_flat_form_round_trip_and_keys():
    spec = v3_tree()
    flat = spec.to_flat()
    assert set(flat) == {"", "/sharded", "/rect", "/obs", "/obs/temp", "/obs/names", "/obs/deep", "/obs/deep/leaf",
                         "/built_shards"}  # fmt: skip
    assert all(n.members is None for n in flat.values() if isinstance(n, GroupSpec))
    assert GroupSpec.from_flat(flat) == spec
    as_json = {k: v.to_json() for k, v in flat.items()}
    assert GroupSpec.from_flat(as_json) == spec
    assert GroupSpec.from_flat({k.lstrip("/"): v for k, v in flat.items()}) == spec


def test_from_flat_creates_implicit_groups_and_refuses_bad_input():
    array = ArraySpec.from_array(np.zeros(2))
    spec = GroupSpec.from_flat({"/a/b/c": array})
    assert spec.implicit and spec["a"].implicit and spec["a/b"].implicit and spec["a/b/c"] == array
    with pytest.raises(MetadataError, match="two entries for node '/a'"):
        GroupSpec.from_flat({"/a": array, "a/": array})
    with pytest.raises(MetadataError, match="lies below '/a', which is an array"):
        GroupSpec.from_flat({"/a": array, "/a/b": array})
    with pytest.raises(MetadataError, match="root .* is an array"):
        GroupSpec.from_flat({"": array})
    with pytest.raises(MetadataError, match="group with members"):
        GroupSpec.from_flat({"/g": GroupSpec(members={"x": array})})
    with pytest.raises(MetadataError, match="mixes Zarr formats"):
        GroupSpec.from_flat({"/a": array, "/b": GroupSpec(zarr_format=2)})
    with pytest.raises(InvalidPathError):
        GroupSpec.from_flat({"/a/../b": array})


def test_getitem_and_contains():
    spec = v3_tree()
    assert spec["obs/deep/leaf"] == GroupSpec()
    assert spec[""] is spec
    assert "obs/temp" in spec and "obs/nope" not in spec and "obs/temp/x" not in spec and 3 not in spec
    with pytest.raises(KeyError):
        spec["missing"]


# ------------------------------------------------------------------------------------------------ builders
def test_from_numpy_array():
    spec = ArraySpec.from_array(np.zeros((1000, 2000), "f8"))
    assert spec.shape == (1000, 2000) and spec.dtype == np.dtype("f8") and spec.zarr_format == 3
    assert math.prod(spec.chunk_grid.chunk_shape) * 8 <= 4 * 2**20  # "auto" chunks of <= 4 MiB
    v2 = ArraySpec.from_array(np.zeros(5, ">i2"), zarr_format=2, chunks=(2,), fill_value=-1)
    assert v2.to_json()["dtype"] == ">i2" and v2.to_json()["fill_value"] == -1


def test_from_dask_array_regular_and_irregular():
    da = pytest.importorskip("dask.array")
    regular = ArraySpec.from_array(da.zeros((10, 7), chunks=(4, 3)))
    assert regular.chunk_grid.to_json() == {"name": "regular", "configuration": {"chunk_shape": [4, 3]}}
    irregular = ArraySpec.from_array(da.zeros((10, 6), chunks=((3, 3, 4), 6)))
    assert irregular.chunk_grid.to_json()["configuration"]["chunk_shapes"] == [[[3, 2], 4], 6]
    with pytest.raises(MetadataError, match=r"irregular along dimension\(s\) \[0\].*rechunk"):
        ArraySpec.from_array(da.zeros((10, 6), chunks=((3, 3, 4), 6)), zarr_format=2)
    sharded = ArraySpec.from_array(da.zeros((40, 40), chunks=(10, 10)), shards=(20, 40))
    codec = sharded.to_json()["codecs"][0]
    assert codec["name"] == "sharding_indexed" and codec["configuration"]["chunk_shape"] == [10, 10]
    assert ArraySpec.from_array(da.zeros((0, 3), chunks=(5, 3))).chunk_grid.to_json()["configuration"]["chunk_shape"] == [1, 3]


def test_from_xarray_like_and_zarr_dask_array(memory_url):
    class Labelled:  # what from_array reads from an xarray DataArray
        shape = (2, 3)
        dtype = np.dtype("i4")
        dims = ("y", "x")
        attrs = {"units": "m"}
        chunks = None

    spec = ArraySpec.from_array(Labelled())
    assert spec.dimension_names == ("y", "x") and spec.attributes == {"units": "m"}
    assert ArraySpec.from_array(Labelled(), zarr_format=2).attributes == {"units": "m", "_ARRAY_DIMENSIONS": ["y", "x"]}
    import zarr_dask

    array = zarr_dask.create_array(memory_url, shape=(6,), dtype="u1", chunks=(4,), attributes={"a": 1})
    exact = ArraySpec.from_array(array)
    assert exact.metadata == array.metadata
    rechunked = ArraySpec.from_array(array, chunks=(2,))
    assert rechunked.chunk_grid.chunk_shape == (2,) and rechunked.attributes == {"a": 1}


def test_builder_errors_are_actionable():
    with pytest.raises(MetadataError, match="unknown argument"):
        ArraySpec.from_array(np.zeros(3), compression="zstd")
    with pytest.raises(MetadataError, match="shape= and dtype="):
        ArraySpec.from_array(None)
    with pytest.raises(MetadataError, match="not a multiple of the inner chunk"):
        ArraySpec.build(shape=(10,), dtype="i1", chunks=(3,), shards=(10,))
    with pytest.raises(MetadataError, match="cannot describe"):
        ArraySpec.from_array(object())


def test_replace_and_repr():
    spec = ArraySpec.from_json(SHARDING_JSON)
    changed = spec.replace(attributes={"b": 2}, dimension_names=("r", "c"))
    assert changed.attributes == {"b": 2} and changed.dimension_names == ("r", "c") and spec.attributes == {"kind": "sharded"}
    with pytest.raises(MetadataError, match="not fields of Zarr v3 array metadata"):
        spec.replace(dtype="f4")
    assert repr(spec).startswith("ArraySpec(zarr_format=3, shape=(64, 48), data_type='uint16'")


# ------------------------------------------------------------------------------------------------ equality, pickling
def test_equality_is_nan_safe_and_order_insensitive():
    a = GroupSpec(attributes={"x": float("nan"), "y": 1}, members={"p": GroupSpec(), "q": GroupSpec()})
    b = GroupSpec(attributes={"y": 1, "x": float("nan")}, members={"q": GroupSpec(), "p": GroupSpec()})
    assert a == b and hash(a) == hash(b)
    assert a != GroupSpec(attributes={"x": 1.0, "y": 1})
    assert len({a, b}) == 1


@pytest.mark.parametrize("fmt", [2, 3])
def test_specs_pickle(fmt):
    spec = tree(fmt)
    assert pickle.loads(pickle.dumps(spec)) == spec


def test_dask_tokens_are_deterministic():
    dask_base = pytest.importorskip("dask.base")
    assert dask_base.tokenize(v3_tree()) == dask_base.tokenize(v3_tree())
    assert dask_base.tokenize(v3_tree()) != dask_base.tokenize(GroupSpec())


# ------------------------------------------------------------------------------------------------ hypothesis
_names = st.text(alphabet="abcxyz_-.0123", min_size=1, max_size=6).filter(lambda s: s.strip(".") and not s.startswith("__"))
_json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**53), 2**53), st.floats(allow_nan=True), st.text(max_size=5))
_attrs = st.dictionaries(st.text(max_size=4), st.recursive(_json_scalars, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=3), c, max_size=3), max_leaves=5), max_size=3)
_dtypes = st.sampled_from(["i1", "u2", "<i4", "f4", "f8", "c8", "bool", "U3", "M8[s]"])


@st.composite
def _arrays(draw: st.DrawFn, fmt: int) -> ArraySpec:
    shape = tuple(draw(st.lists(st.integers(0, 20), min_size=0, max_size=3)))
    chunks = tuple(draw(st.integers(1, 8)) for _ in shape)
    dims = draw(st.none() | st.just([f"d{i}" for i in range(len(shape))]))
    return ArraySpec.build(shape=shape, dtype=draw(_dtypes), chunks=chunks, zarr_format=fmt,  # type: ignore[arg-type]
                           attributes=draw(_attrs), dimension_names=dims)  # fmt: skip


def _groups(fmt: int) -> st.SearchStrategy[GroupSpec]:
    return st.recursive(
        st.builds(lambda a: GroupSpec(zarr_format=fmt, attributes=a), _attrs),  # type: ignore[arg-type]
        lambda children: st.builds(
            lambda a, m: GroupSpec(zarr_format=fmt, attributes=a, members=m),  # type: ignore[arg-type]
            _attrs,
            st.dictionaries(_names, children | _arrays(fmt), max_size=3),
        ),
        max_leaves=6,
    )


@settings(deadline=None, max_examples=40)
@given(st.sampled_from([2, 3]).flatmap(_groups))
def test_hypothesis_json_and_flat_round_trips(spec):
    text = json.dumps(spec.to_json())
    assert GroupSpec.from_json(text) == spec
    assert GroupSpec.from_flat(spec.to_flat()) == spec
    assert from_json(spec.to_json()) == spec
