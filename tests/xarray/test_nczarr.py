"""NCZarr (netCDF-C) v2 stores: tolerated by the format core, dimension names found, bookkeeping hidden.

The stores are written by hand in the layouts netCDF-C produces:

* ``"4.8"``: upper-case keys in the documents themselves -- ``_NCZARR_SUPERBLOCK`` / ``_NCZARR_GROUP`` in
  ``.zgroup``, ``_NCZARR_ARRAY`` (``dimrefs``, ``storage``) in ``.zarray``, ``_NCZARR_ATTR`` in ``.zattrs``;
  no ``_ARRAY_DIMENSIONS``;
* ``"4.9"``: the same keys in lower case (``_nczarr_superblock``, ``_nczarr_group``, ``_nczarr_array``,
  ``_nczarr_attr``), with or without the ``_ARRAY_DIMENSIONS`` netCDF-C adds for xarray by default;
* ``"attrs"``: the newest layout, where every NCZarr key is an attribute in ``.zattrs`` and arrays name
  their dimensions with ``_nczarr_array.dimension_references``.

Where xarray's own zarr engine can read a store (it only knows ``.zarray["_NCZARR_ARRAY"]["dimrefs"]`` and
``_ARRAY_DIMENSIONS``), the datasets must be identical (``oracle`` tests).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xarray as xr

import zarr_dask
from zarr_dask.errors import MetadataError
from zarr_dask.spec import ArrayMetadataV2, GroupMetadataV2

TIME = np.array([0.0, 1.0, 2.0, 3.0])
X = np.array([10, 20, 30], dtype="<i4")
T = np.arange(12.0).reshape(4, 3)
T[1, 1] = 9.969209968386869e36  # netCDF's default double fill value: masked on read
LAT = np.array([-45.0, 45.0])

#: (path, dimension FQNs, values, attributes) of every array; "g1" is a sub-group
ARRAYS: list[tuple[str, list[str], np.ndarray, dict[str, Any]]] = [
    ("time", ["/time"], TIME, {"units": "days since 2000-01-01", "calendar": "standard"}),
    ("x", ["/x"], X, {"long_name": "x position"}),
    ("t", ["/time", "/x"], T, {"units": "K", "valid_max": 100.0}),
    ("g1/lat", ["/g1/lat"], LAT, {"units": "degrees_north"}),
    ("g1/v", ["/g1/lat", "/x"], np.ones((2, 3)), {"note": "in a sub-group"}),
]
GROUPS = {"": {"title": "NCZarr test", "history": "hand written"}, "g1": {"group_note": "nested"}}


def _types(attrs: dict[str, Any]) -> dict[str, Any]:
    return {k: "<f8" if isinstance(v, float) else ">S1" for k, v in attrs.items()}


def _keys(layout: str) -> dict[str, str]:
    names = ("superblock", "group", "array", "attr")
    if layout == "4.8":
        return {n: f"_NCZARR_{n.upper()}" for n in names}
    return {n: f"_nczarr_{n}" for n in names}


def _put(root: Path, key: str, doc: dict[str, Any]) -> None:
    path = root / key
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=4))


def _group_docs(layout: str, group: str, attrs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    k = _keys(layout)
    members = [p for p, *_ in ARRAYS if p.rpartition("/")[0] == group]
    dims = {refs[0].rsplit("/", 1)[-1]: len(v) for p, refs, v, _ in ARRAYS if len(refs) == 1 and p in members}
    info = {"dims": dims, "vars": [m.rsplit("/", 1)[-1] for m in members], "groups": ["g1"] if not group else []}
    zgroup: dict[str, Any] = {"zarr_format": 2}
    zattrs = dict(attrs, **{k["attr"]: {"types": _types(attrs)}})
    nc = {k["group"]: info} | ({k["superblock"]: {"version": "2.0.0"}} if not group else {})
    if layout == "attrs":
        zattrs.update(nc)
    else:
        zgroup.update(nc)
    return zgroup, zattrs


def _array_docs(
    layout: str, dimrefs: list[str], values: np.ndarray, attrs: dict[str, Any], xarray_dims: bool
) -> tuple[dict[str, Any], dict[str, Any]]:
    k = _keys(layout)
    zarray = {
        "zarr_format": 2,
        "shape": list(values.shape),
        "chunks": list(values.shape),
        "dtype": values.dtype.str,
        "fill_value": 9.969209968386869e36 if values.dtype.kind == "f" else -2147483647,
        "order": "C",
        "compressor": None,
        "filters": None,
    }
    zattrs = dict(attrs, **{k["attr"]: {"types": _types(attrs)}})
    if layout == "attrs":
        zattrs[k["array"]] = {"dimension_references": dimrefs, "storage": "chunked"}
    else:
        zarray[k["array"]] = {"dimrefs": dimrefs, "storage": "chunked"}
    if xarray_dims:
        zattrs["_ARRAY_DIMENSIONS"] = [d.rsplit("/", 1)[-1] for d in dimrefs]
    return zarray, zattrs


def write_nczarr(root: Path, layout: str, *, xarray_dims: bool = False) -> Path:
    """An NCZarr dataset (root group + sub-group ``g1``) in ``layout``, as netCDF-C writes it."""
    for group, attrs in GROUPS.items():
        zgroup, zattrs = _group_docs(layout, group, attrs)
        prefix = f"{group}/" if group else ""
        _put(root, prefix + ".zgroup", zgroup)
        _put(root, prefix + ".zattrs", zattrs)
    for path, dimrefs, values, attrs in ARRAYS:
        zarray, zattrs = _array_docs(layout, dimrefs, values, attrs, xarray_dims)
        _put(root, f"{path}/.zarray", zarray)
        _put(root, f"{path}/.zattrs", zattrs)
        (root / path / ".".join("0" * values.ndim)).write_bytes(values.tobytes())
    return root


LAYOUTS = [("4.8", False), ("4.9", False), ("4.9", True), ("attrs", False), ("attrs", True)]


def _ours(path: Path, **kw: Any) -> xr.Dataset:
    return xr.open_dataset(path, engine="zarr_dask", consolidated=False, **kw)


@pytest.mark.parametrize(("layout", "xarray_dims"), LAYOUTS)
def test_dimension_names_and_hidden_bookkeeping(tmp_path, layout, xarray_dims):
    ds = _ours(write_nczarr(tmp_path / "d.zarr", layout, xarray_dims=xarray_dims)).load()
    assert ds.t.dims == ("time", "x") and ds.x.dims == ("x",)
    assert ds.attrs == GROUPS[""]  # _nczarr_* / _NCZARR_* hidden, the rest kept
    assert ds.t.attrs == {"units": "K", "valid_max": 100.0}
    assert ds.x.attrs == {"long_name": "x position"}
    assert ds.time.values[0] == np.datetime64("2000-01-01")
    assert np.isnan(ds.t.values[1, 1]) and ds.t.values[0, 1] == 1.0  # fill_value masks as _FillValue
    np.testing.assert_array_equal(ds.x.values, X)


@pytest.mark.parametrize(("layout", "xarray_dims"), LAYOUTS)
def test_datatree_uses_fully_qualified_dimrefs(tmp_path, layout, xarray_dims):
    tree = xr.open_datatree(
        write_nczarr(tmp_path / "d.zarr", layout, xarray_dims=xarray_dims), engine="zarr_dask", consolidated=False
    )
    sub = tree["g1"].to_dataset(inherit=False)
    assert sub.v.dims == ("lat", "x") and sub.lat.dims == ("lat",)
    assert sub.attrs == GROUPS["g1"] and sub.v.attrs == {"note": "in a sub-group"}
    np.testing.assert_array_equal(sub.lat.values, LAT)


@pytest.mark.parametrize("layout", ["4.8", "4.9"])
def test_core_opens_and_keeps_nczarr_keys(tmp_path, layout):
    root = write_nczarr(tmp_path / "d.zarr", layout)
    keys = _keys(layout)
    group = zarr_dask.open_group(root, mode="r+")
    assert isinstance(group.metadata, GroupMetadataV2)
    assert set(group.metadata.nczarr) == {keys["superblock"], keys["group"]}
    assert keys["attr"] in group.attrs  # in .zattrs it is an ordinary attribute
    t = group["t"]
    assert isinstance(t.metadata, ArrayMetadataV2)
    assert t.metadata.nczarr == {keys["array"]: {"dimrefs": ["/time", "/x"], "storage": "chunked"}}
    np.testing.assert_array_equal(t[:2, 0], T[:2, 0])
    # rewriting the metadata keeps netCDF-C's bookkeeping
    group.attrs["edited"] = 1
    t.attrs["edited"] = 1
    assert json.loads((root / ".zgroup").read_text())[keys["superblock"]] == {"version": "2.0.0"}
    assert keys["array"] in json.loads((root / "t" / ".zarray").read_text())
    assert _ours(root).t.dims == ("time", "x")


def test_consolidated_metadata_without_the_nczarr_keys_falls_back_to_the_documents(tmp_path):
    """zarr-python's consolidate_metadata drops unknown .zarray keys: the dimrefs are then read from the
    .zarray documents themselves (one batched read for the arrays that need it)."""
    root = write_nczarr(tmp_path / "d.zarr", "4.8")
    zarr_dask.consolidate_metadata(root)
    zmeta = json.loads((root / ".zmetadata").read_text())
    for key, doc in zmeta["metadata"].items():
        if key.endswith(".zarray"):
            doc.pop("_NCZARR_ARRAY")
    (root / ".zmetadata").write_text(json.dumps(zmeta))
    ds = xr.open_dataset(root, engine="zarr_dask", consolidated=True)
    assert ds.t.dims == ("time", "x") and set(ds.variables) == {"t", "time", "x"}


def test_other_unknown_keys_keep_todays_behaviour():
    with pytest.raises(MetadataError, match=r"unexpected key\(s\) \['extra'\]"):
        GroupMetadataV2.from_json({"zarr_format": 2, "_nczarr_group": {}, "extra": 1})
    meta = ArrayMetadataV2.from_json(
        {"zarr_format": 2, "shape": [1], "chunks": [1], "dtype": "<i4", "fill_value": 0, "order": "C",
         "something_else": 1, "_NCZARR_ARRAY": {"dimrefs": ["/x"]}}
    )  # fmt: skip
    assert meta.nczarr == {"_NCZARR_ARRAY": {"dimrefs": ["/x"]}}  # unknown non-NCZarr keys are ignored
    assert "something_else" not in meta.to_json()


# ------------------------------------------------------------------------------- xarray's engine as oracle
zarr_skip = pytest.mark.skipif(
    not __import__("importlib").util.find_spec("zarr"), reason="zarr-python (xarray's engine) not installed"
)
ORACLE_LAYOUTS = [
    ("4.8", False),  # xarray reads .zarray["_NCZARR_ARRAY"]["dimrefs"]
    ("4.9", True),  # ... and _ARRAY_DIMENSIONS wherever it is present
    ("attrs", True),
]


@pytest.mark.oracle
@zarr_skip
@pytest.mark.parametrize(("layout", "xarray_dims"), ORACLE_LAYOUTS)
def test_same_dataset_as_xarrays_engine(tmp_path, layout, xarray_dims):
    root = write_nczarr(tmp_path / "d.zarr", layout, xarray_dims=xarray_dims)
    theirs = xr.open_dataset(root, engine="zarr", consolidated=False).load()
    ours = _ours(root).load()
    xr.testing.assert_identical(ours, theirs)
    for name in ours.variables:
        assert ours[name].encoding["dtype"] == theirs[name].encoding["dtype"]
    lazy = _ours(root, chunks={}).compute()
    xr.testing.assert_identical(lazy, theirs)


@pytest.mark.oracle
@zarr_skip
@pytest.mark.parametrize(("layout", "xarray_dims"), ORACLE_LAYOUTS)
def test_same_datatree_as_xarrays_engine(tmp_path, layout, xarray_dims):
    root = write_nczarr(tmp_path / "d.zarr", layout, xarray_dims=xarray_dims)
    theirs = xr.open_datatree(root, engine="zarr", consolidated=False).load()
    ours = xr.open_datatree(root, engine="zarr_dask", consolidated=False).load()
    xr.testing.assert_identical(ours, theirs)


@pytest.mark.parametrize("layout", ["4.8", "4.9"])
def test_appending_a_variable_keeps_the_groups_nczarr_keys(tmp_path, layout):
    root = write_nczarr(tmp_path / "d.zarr", layout)
    keys = _keys(layout)
    extra = xr.Dataset({"w": (("x",), np.array([1.0, 2.0, 3.0]))})
    zarr_dask.to_zarr_dataset(extra, root, mode="a", zarr_format=2, consolidated=False)
    zgroup = json.loads((root / ".zgroup").read_text())
    assert zgroup[keys["superblock"]] == {"version": "2.0.0"} and keys["group"] in zgroup
    np.testing.assert_array_equal(_ours(root).w.values, [1.0, 2.0, 3.0])
