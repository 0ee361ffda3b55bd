"""The xarray convention checker flags each kind of problem with a message a user can act on."""

from __future__ import annotations

import numpy as np
import pytest

from zarr_dask.errors import MetadataError
from zarr_dask.zom import ArraySpec, GroupSpec, conventions


def _v2(shape, attrs=None, dtype="f4"):
    return ArraySpec.build(zarr_format=2, shape=shape, dtype=dtype, attributes=attrs or {})


def _v3(shape, dims=None, attrs=None, dtype="f4"):
    return ArraySpec.build(shape=shape, dtype=dtype, dimension_names=dims, attributes=attrs or {})


def _kinds(spec):
    return [(p.path, p.kind) for p in conventions.xarray(spec)]


def test_a_valid_dataset_and_datatree_have_no_problems():
    spec = GroupSpec(
        members={
            "time": _v3((4,), ["time"]),
            "temp": _v3((4, 3), ["time", "x"], {"_FillValue": "AAAAAAAA+H8="}),
            "scalar": _v3(()),
            "child": GroupSpec(members={"t2": _v3((4, 2), ["time", "y"])}),
        }
    )
    assert conventions.xarray(spec) == []
    v2 = GroupSpec(zarr_format=2, members={"t": _v2((2,), {"_ARRAY_DIMENSIONS": ["x"]}), "s": _v2((), {"_ARRAY_DIMENSIONS": []})})
    assert conventions.xarray(v2) == []


def test_missing_dimensions_v2_and_v3():
    problems = conventions.xarray(GroupSpec(zarr_format=2, members={"t": _v2((2, 3))}))
    assert [(p.path, p.kind) for p in problems] == [("/t", "missing_dimensions")]
    assert "_ARRAY_DIMENSIONS" in problems[0].message and "['dim_0', 'dim_1']" in problems[0].message
    problems = conventions.xarray(GroupSpec(members={"t": _v3((2, 3))}))
    assert problems[0].kind == "missing_dimensions" and "dimension_names=['dim_0', 'dim_1']" in problems[0].message
    problems = conventions.xarray(GroupSpec(members={"t": _v3((2, 3), ["y", None])}))
    assert problems[0].kind == "missing_dimensions" and "unnamed dimensions" in problems[0].message
    assert _kinds(GroupSpec(zarr_format=2, members={"s": _v2(())})) == [("/s", "missing_dimensions")]


def test_invalid_and_miscounted_dimensions():
    problems = conventions.xarray(GroupSpec(zarr_format=2, members={"t": _v2((2,), {"_ARRAY_DIMENSIONS": "x"})}))
    assert problems[0].kind == "invalid_dimensions" and "list of 1 strings" in problems[0].message
    problems = conventions.xarray(GroupSpec(zarr_format=2, members={"t": _v2((2, 3), {"_ARRAY_DIMENSIONS": ["x"]})}))
    assert problems[0].kind == "dimension_count"
    assert "names 1 dimension(s) but the array has 2 (shape [2, 3])" in problems[0].message


def test_a_dimension_with_two_lengths():
    spec = GroupSpec(members={"a": _v3((4,), ["x"]), "b": _v3((2, 5), ["y", "x"])})
    (problem,) = conventions.xarray(spec)
    assert (problem.path, problem.kind) == ("/b", "dimension_size_conflict")
    assert "dimension 'x' has length 5 here but 4 in /a" in problem.message
    # different groups are different datasets: no conflict without a coordinate to inherit
    assert conventions.xarray(GroupSpec(members={"a": _v3((4,), ["y"]), "g": GroupSpec(members={"b": _v3((5,), ["y"])})})) == []


def test_coordinate_named_like_a_dimension_and_tree_alignment():
    spec = GroupSpec(members={"x": _v3((2, 3), ["y", "x"])})
    (problem,) = conventions.xarray(spec)
    assert problem.kind == "coordinate_dimensions" and "MissingDimensionsError" in problem.message
    tree = GroupSpec(members={"x": _v3((4,), ["x"]), "child": GroupSpec(members={"v": _v3((5,), ["x"])})})
    (problem,) = conventions.xarray(tree)
    assert (problem.path, problem.kind) == ("/child/v", "tree_alignment")
    assert "coordinate /x of an ancestor group has length 4" in problem.message


def test_v3_fill_value_encoding_and_ignored_attribute():
    (problem,) = conventions.xarray(GroupSpec(members={"t": _v3((2,), ["x"], {"_FillValue": -999.0})}))
    assert problem.kind == "fill_value_encoding" and "'AAAAAAA4j8A='" in problem.message
    assert conventions.xarray(GroupSpec(members={"t": _v3((2,), ["x"], {"_FillValue": -999}, dtype="i4")})) == []
    problems = conventions.xarray(GroupSpec(members={"t": _v3((2,), attrs={"_ARRAY_DIMENSIONS": ["x"]})}))
    assert [p.kind for p in problems] == ["ignored_attribute", "missing_dimensions"]
    assert "dimension_names=['x']" in problems[1].message  # the hint reuses the legacy names


def test_array_spec_and_require():
    assert [p.path for p in conventions.xarray(_v3((2,)))] == ["/"]
    conventions.require(GroupSpec(members={"t": _v3((2,), ["x"])}), conventions.xarray)
    with pytest.raises(MetadataError, match=r"breaks 2 convention rule\(s\):\n  /a: .*\n  /b: "):
        conventions.require(GroupSpec(members={"a": _v3((2,)), "b": _v3((3,))}), conventions.xarray)
    with pytest.raises(MetadataError, match="checks an ArraySpec, a GroupSpec, ZEP 6 JSON .* or a stored hierarchy"):
        conventions.xarray(np.zeros(2))  # type: ignore[arg-type]
    assert str(conventions.xarray(_v3((2,)))[0]).startswith("/: the array has no dimension_names")


def _doc_with_bad(mutate):
    """The ZEP 6 JSON of a dataset whose array ``t`` is mutated, with a good neighbour ``u`` without names."""
    doc = GroupSpec(members={"t": _v3((4, 3), ["time", "x"]), "u": _v3((4,))}).to_json()
    mutate(doc["members"]["t"])
    return doc


@pytest.mark.parametrize(
    ("mutate", "words"),
    [
        (lambda d: d.__setitem__("fill_value", "abc"), "fill_value 'abc'"),
        (lambda d: d.__setitem__("fill_value", None), "fill_value None"),
        (lambda d: d.__setitem__("data_type", "float99"), "'float99'"),
        (lambda d: d.__setitem__("chunk_grid", {"name": "weird", "configuration": {}}), "chunk_grid 'weird'"),
        (lambda d: d.__setitem__("chunk_grid", {"name": "regular", "configuration": {"chunk_shape": [2]}}), "chunk grid has 1"),
        (lambda d: d.__setitem__("chunk_grid", {"name": "regular", "configuration": {"chunk_shape": [0, 2]}}), "chunk_shape[0]"),
        (lambda d: d.__setitem__("chunk_key_encoding", {"name": "default", "configuration": {"separator": "-"}}), "separator"),
        (lambda d: d.__setitem__("codecs", []), "'codecs' is empty"),
        (lambda d: d.__setitem__("shape", [-1, 3]), "'shape'[0]"),
        (lambda d: d.__setitem__("dimension_names", "tx"), "dimension_names must be"),
        (lambda d: d.__setitem__("storage_transformers", [{"name": "x"}]), "storage transformers"),
        (lambda d: d.__setitem__("surprise", 1), "'surprise'"),
        (lambda d: d.pop("data_type"), "missing required field(s) ['data_type']"),
        (lambda d: d.__setitem__("zarr_format", 4), "'zarr_format'"),
    ],
)
def test_an_invalid_document_is_a_problem_of_its_node(mutate, words):
    """A checker reports what it finds: a document the model refuses is one problem of that node (with the
    model's words: the field, the value, the fix), and the other nodes are still checked."""
    problems = conventions.xarray(_doc_with_bad(mutate))
    assert [(p.path, p.kind) for p in problems] == [("/t", "invalid_metadata"), ("/u", "missing_dimensions")]
    assert words in problems[0].message and not problems[0].message.count("node '/'")


def test_v3_dimension_names_of_the_wrong_length_are_a_dimension_count_problem():
    doc = _doc_with_bad(lambda d: d.__setitem__("dimension_names", ["time"]))
    problems = conventions.xarray(doc)
    assert [(p.path, p.kind) for p in problems] == [("/t", "dimension_count"), ("/u", "missing_dimensions")]
    assert "['time'] names 1 dimension(s) but the array has 2 (shape [4, 3])" in problems[0].message
    assert "dimension_names=['dim_0', 'dim_1']" in problems[0].message
    # as JSON text, as a lone array, nested in a group, and with another error in the same document
    import json

    assert conventions.xarray(json.dumps(doc)) == problems
    assert [p.kind for p in conventions.xarray(doc["members"]["t"])] == ["dimension_count"]
    nested = GroupSpec(members={"g": GroupSpec()}).to_json()
    nested["members"]["g"]["members"] = {"t": doc["members"]["t"]}
    assert [(p.path, p.kind) for p in conventions.xarray(nested)] == [("/g/t", "dimension_count")]
    doc["members"]["t"]["fill_value"] = "abc"
    assert [p.kind for p in conventions.xarray(doc)][:2] == ["dimension_count", "invalid_metadata"]
    with pytest.raises(MetadataError, match=r"breaks 2 convention rule\(s\):\n  /t: dimension_names"):
        conventions.require(_doc_with_bad(lambda d: d.__setitem__("dimension_names", ["time"])), conventions.xarray)


def test_invalid_groups_names_and_formats_in_the_json():
    doc = GroupSpec(members={"t": _v3((2,), ["x"])}).to_json()
    doc["members"]["a/b"] = doc["members"]["t"]
    doc["members"]["old"] = {"zarr_format": 2, "attributes": {}, "members": {}}
    doc["members"]["bad"] = {"zarr_format": 3, "node_type": "group", "surprise": 1, "members": {"t": doc["members"]["t"]}}
    doc["members"]["text"] = "not json"
    got = {(p.path, p.kind): p.message for p in conventions.xarray(doc)}
    assert set(got) == {("/a/b", "invalid_metadata"), ("/old", "invalid_metadata"), ("/bad", "invalid_metadata"),
                        ("/text", "invalid_metadata")}  # fmt: skip
    assert "path separator" in got[("/a/b", "invalid_metadata")]
    assert "Zarr v2 node inside a Zarr v3 group" in got[("/old", "invalid_metadata")]
    assert "'surprise'" in got[("/bad", "invalid_metadata")]
    assert "not valid JSON" in got[("/text", "invalid_metadata")]
    assert conventions.xarray("{")[0].kind == "invalid_metadata"


def test_a_stored_hierarchy_is_checked_document_by_document(tmp_path):
    """``from_store`` refuses a hierarchy with an invalid document; the checker, given the store, reports it
    as a problem of its node and checks the rest (v3 and v2; a URL, a path or a Store)."""
    import json
    from pathlib import Path

    import zarr_dask
    from zarr_dask.zom import from_store

    url = str(tmp_path / "h.zarr")
    zarr_dask.create_group(url)
    zarr_dask.create_array(url, path="t", shape=(4, 3), dtype="f4", dimension_names=["time", "x"])
    zarr_dask.create_array(url, path="u", shape=(4,), dtype="f4")
    zarr_dask.create_array(url, path="sub/v", shape=(4,), dtype="f4", dimension_names=["time"])
    (tmp_path / "h.zarr" / "sub" / "zarr.json").unlink()  # an implicit group
    doc = json.loads((tmp_path / "h.zarr" / "t" / "zarr.json").read_text())
    (tmp_path / "h.zarr" / "t" / "zarr.json").write_text(json.dumps({**doc, "dimension_names": ["time"]}))
    (tmp_path / "h.zarr" / "u" / "inner").mkdir()
    (tmp_path / "h.zarr" / "u" / "inner" / "zarr.json").write_text('{"zarr_format": 3, "node_type": "group"}')
    with pytest.raises(MetadataError, match="dimension_names"):
        from_store(url)
    expected = [("/u/inner", "invalid_metadata"), ("/t", "dimension_count"), ("/u", "missing_dimensions")]
    for source in (url, Path(url), zarr_dask.open_store(url)):
        assert [(p.path, p.kind) for p in conventions.xarray(source)] == expected
    v2 = str(tmp_path / "v2.zarr")
    zarr_dask.create_array(v2, path="a", shape=(2, 2), dtype="f4", zarr_format=2, attributes={"_ARRAY_DIMENSIONS": ["y"]})
    zarr_dask.create_array(v2, path="b", shape=(2,), dtype="f4", zarr_format=2, attributes={"_ARRAY_DIMENSIONS": ["y"]})
    (tmp_path / "v2.zarr" / "b" / ".zarray").write_text("{broken")
    got = [(p.path, p.kind) for p in conventions.xarray(v2)]
    assert got == [("/b", "invalid_metadata"), ("/a", "dimension_count")]
    assert "not valid JSON" in conventions.xarray(v2)[0].message
