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
    with pytest.raises(MetadataError, match="checks an ArraySpec or a GroupSpec"):
        conventions.xarray(np.zeros(2))  # type: ignore[arg-type]
    assert str(conventions.xarray(_v3((2,)))[0]).startswith("/: the array has no dimension_names")
