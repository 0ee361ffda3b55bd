"""Groups, attributes and consolidated metadata: interop with zarr-python 3 both ways."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import zarr_dask

zarr = pytest.importorskip("zarr")
pytestmark = [
    pytest.mark.oracle,
    pytest.mark.filterwarnings("ignore:Consolidated metadata is currently not part:UserWarning"),
]

ATTRS = {"title": "t", "n": 3, "nested": {"a": [1, 2.5, None]}, "flag": True, "nan": float("nan"), "inf": float("inf")}


def _check_attrs(got):
    got = dict(got)
    assert math.isnan(got.pop("nan")) and got.pop("inf") == float("inf")
    expected = {k: v for k, v in ATTRS.items() if k not in ("nan", "inf")}
    assert got == expected


@pytest.mark.parametrize("fmt", [2, 3])
def test_zarr_python_hierarchy_we_read(tmp_path, fmt):
    url = str(tmp_path / "h.zarr")
    root = zarr.open_group(url, mode="w", zarr_format=fmt, attributes=ATTRS)
    a = root.create_array("a", shape=(4,), dtype="i4", chunks=(2,), attributes={"units": "K"})
    a[:] = [1, 2, 3, 4]
    sub = root.create_group("sub/deeper")
    sub.create_array("b", shape=(2, 2), dtype="f8")
    g = zarr_dask.open_group(url, mode="r")
    _check_attrs(g.attrs)
    assert g.array_keys() == ["a"] and g.group_keys() == ["sub"]
    assert sorted(dict(g.members(max_depth=None))) == ["a", "sub", "sub/deeper", "sub/deeper/b"]
    assert dict(g["a"].attrs) == {"units": "K"}
    np.testing.assert_array_equal(g["a"][:], [1, 2, 3, 4])
    zarr.consolidate_metadata(url)
    c = zarr_dask.open_group(url, mode="r", use_consolidated=True)
    assert sorted(c.consolidated_metadata.nodes) == ["a", "sub", "sub/deeper", "sub/deeper/b"]
    np.testing.assert_array_equal(c["a"][:], [1, 2, 3, 4])


@pytest.mark.parametrize("fmt", [2, 3])
def test_we_write_zarr_python_reads_hierarchy(tmp_path, fmt):
    url = str(tmp_path / "h.zarr")
    root = zarr_dask.create_group(url, zarr_format=fmt, attributes=ATTRS)
    a = root.create_array("a", shape=(4,), dtype="i4", chunks=(2,), attributes={"units": "K"})
    a[:] = [1, 2, 3, 4]
    root.create_array("sub/deeper/b", shape=(2, 2), dtype="f8")
    g = zarr.open_group(url, mode="r", zarr_format=fmt)
    _check_attrs(g.attrs.asdict())
    assert sorted(k for k, _ in g.members(max_depth=None)) == ["a", "sub", "sub/deeper", "sub/deeper/b"]
    np.testing.assert_array_equal(g["a"][:], [1, 2, 3, 4])
    zarr_dask.consolidate_metadata(url)
    c = zarr.open_consolidated(url, zarr_format=fmt)
    assert sorted(k for k, _ in c.members(max_depth=None)) == ["a", "sub", "sub/deeper", "sub/deeper/b"]
    assert c["a"].attrs["units"] == "K"


@pytest.mark.parametrize("fmt", [2, 3])
def test_consolidated_documents_match(tmp_path, fmt):
    for name, lib in (("zp", zarr), ("ours", zarr_dask)):
        url = str(tmp_path / f"{name}.zarr")
        if lib is zarr:
            root = zarr.open_group(url, mode="w", zarr_format=fmt, attributes={"x": 1})
        else:
            root = zarr_dask.create_group(url, zarr_format=fmt, attributes={"x": 1})
        root.create_array("a", shape=(4,), dtype="<i4", chunks=(2,))
        root.create_group("g").create_array("b", shape=(3,), dtype="<f8", chunks=(3,))
        lib.consolidate_metadata(url)
    key = ".zmetadata" if fmt == 2 else "zarr.json"
    zp_doc = json.loads((tmp_path / "zp.zarr" / key).read_text())
    ours_doc = json.loads((tmp_path / "ours.zarr" / key).read_text())
    assert ours_doc == zp_doc
