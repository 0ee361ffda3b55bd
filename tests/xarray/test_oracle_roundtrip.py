"""Round trips both ways with xarray's own zarr engine (zarr-python is the oracle), Zarr v2 and v3."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

import zarr_dask
from tests.dask_modes import QUERY_PLANNING, expr_gap
from tests.xarray._cases import CASES, tree

zarr = pytest.importorskip("zarr")
ZARR_VERSION = tuple(int(p) for p in zarr.__version__.split(".")[:2])

pytestmark = [
    pytest.mark.oracle,
    pytest.mark.filterwarnings("ignore:Consolidated metadata is currently not part:UserWarning"),
    # zarr-python warns about data types whose v3 spelling is not final; that is its own output
    pytest.mark.filterwarnings("ignore:The data type .* does not have a Zarr V3 specification"),
]


def _skip_known(case: str, fmt: int, writer: str) -> None:
    if case == "strings" and fmt == 3 and writer == "zarr" and ZARR_VERSION < (3, 2):
        pytest.skip("zarr-python 3.1 writes null_terminated_bytes fills it cannot read back consistently")


def _ours(path, **kw):
    return xr.open_dataset(path, engine="zarr_dask", **kw)


def _theirs(path, **kw):
    return xr.open_dataset(path, engine="zarr", **kw)


@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize("case", sorted(CASES))
def test_xarray_writes_we_read(tmp_path, case, fmt):
    ds = CASES[case]()
    path = tmp_path / f"{case}.zarr"
    ds.to_zarr(path, zarr_format=fmt, consolidated=True)
    ours = _ours(path).load()
    theirs = _theirs(path).load()
    xr.testing.assert_identical(ours, theirs)
    xr.testing.assert_identical(ours, ds)
    # same again lazily through dask, and without consolidated metadata
    xr.testing.assert_identical(_ours(path, chunks={}, consolidated=False).compute(), ds)


@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize("case", sorted(CASES))
def test_we_write_xarray_reads(tmp_path, case, fmt):
    ds = CASES[case]()
    path = tmp_path / f"{case}.zarr"
    zarr_dask.to_zarr_dataset(ds, path, zarr_format=fmt)
    theirs = _theirs(path).load()
    xr.testing.assert_identical(theirs, ds)
    xr.testing.assert_identical(_ours(path).load(), theirs)


@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize("case", ["times", "packed", "fill_values", "strings"])
@pytest.mark.filterwarnings("ignore:variable .* has data in the form of a dask array with dtype=object")
def test_dask_backed_write_matches_xarray_engine(request, tmp_path, case, fmt):
    """Dask-backed data through the planner, read back by xarray's engine: the same as xarray's own write."""
    if case in ("packed", "fill_values"):  # xarray's CF encoding of dask data, before any zarr_dask code
        request.applymarker(expr_gap("result_type"))
    ds = CASES[case]().chunk(2)
    ref, out = tmp_path / "ref.zarr", tmp_path / "ours.zarr"
    # xarray writes the same values from memory; with dask's expression arrays it cannot write dask data (no
    # da.store in dask's array-expr), so its reference is written from memory in that mode
    (ds.compute() if QUERY_PLANNING else ds).to_zarr(ref, zarr_format=fmt, consolidated=False)
    zarr_dask.to_zarr_dataset(ds, out, zarr_format=fmt)
    xr.testing.assert_identical(_theirs(out).load(), _theirs(ref, consolidated=False).load())


@pytest.mark.parametrize("fmt", [2, 3])
def test_datatree_round_trips(tmp_path, fmt):
    dt = tree()
    theirs_path, ours_path = tmp_path / "theirs.zarr", tmp_path / "ours.zarr"
    dt.to_zarr(theirs_path, zarr_format=fmt, consolidated=True)
    ours = xr.open_datatree(theirs_path, engine="zarr_dask").load()
    xr.testing.assert_identical(ours, xr.open_datatree(theirs_path, engine="zarr").load())
    xr.testing.assert_identical(ours, dt)
    zarr_dask.to_zarr_datatree(dt, ours_path, zarr_format=fmt)
    xr.testing.assert_identical(xr.open_datatree(ours_path, engine="zarr").load(), dt)
    groups = xr.open_groups(ours_path, engine="zarr_dask")
    assert sorted(groups) == ["/", "/model", "/obs", "/obs/deep", "/obs/deep/er"]


@pytest.mark.parametrize("fmt", [2, 3])
def test_encoding_read_by_us_writes_with_xarray_engine(tmp_path, fmt):
    """Encodings we report (codec JSON dicts, chunks, fill_value) are accepted by xarray's engine on write."""
    ds = CASES["packed"]()
    src, dst = tmp_path / "src.zarr", tmp_path / "dst.zarr"
    zarr_dask.to_zarr_dataset(ds, src, zarr_format=fmt, encoding={"temp": {**ds.temp.encoding, "chunks": (1, 2)}})
    opened = _ours(src)
    assert opened.temp.encoding["chunks"] == (1, 2)
    opened.to_zarr(dst, zarr_format=fmt, consolidated=False)
    back = _theirs(dst, consolidated=False)
    assert back.temp.encoding["chunks"] == (1, 2)
    assert back.temp.encoding["scale_factor"] == 0.5
    xr.testing.assert_identical(back.load(), ds)


def test_v3_float_fill_value_attribute_is_base64(tmp_path):
    ds = CASES["fill_values"]()
    zarr_dask.to_zarr_dataset(ds, tmp_path / "d.zarr", zarr_format=3)
    g = zarr.open_group(tmp_path / "d.zarr", mode="r")
    assert g["f"].attrs["_FillValue"] == "AAAAAAAAHMA="  # -7.0 as little-endian float64, base64
    assert g["i"].attrs["_FillValue"] == -9
    assert np.isnan(g["f"].fill_value)


@pytest.mark.parametrize("fmt", [2, 3])
def test_sharded_write_read_by_xarray_engine(tmp_path, fmt):
    if fmt == 2:
        pytest.skip("Zarr v2 has no sharding")
    ds = xr.Dataset({"v": (("y", "x"), np.arange(64.0).reshape(8, 8))}).chunk({"y": 3, "x": 5})
    path = tmp_path / "s.zarr"
    zarr_dask.to_zarr_dataset(ds, path, encoding={"v": {"chunks": (2, 2), "shards": (4, 8)}})
    theirs = _theirs(path)
    assert theirs.v.encoding["shards"] == (4, 8)
    xr.testing.assert_identical(theirs.load(), ds.compute())
    ours = _ours(path, chunks={})
    assert ours.v.encoding["preferred_chunks"] == {"y": 4, "x": 8}
    assert ours.v.chunks == ((4, 4), (8,))  # shard-aligned dask blocks


def test_xarray_engine_refuses_the_chunkings_we_write_safely(tmp_path):
    """The appends and region writes of test_write / test_distributed: xarray's engine raises safe_chunks
    errors for them (so the comparison with the in-memory reference is the interesting one)."""
    import dask.array as da

    ds = xr.Dataset({"v": ("t", da.arange(10.0, chunks=3))})
    ds.v.encoding["chunks"] = (4,)
    with pytest.raises(ValueError, match="Specified Zarr chunks|would overlap multiple Dask chunks"):
        ds.to_zarr(tmp_path / "x.zarr", zarr_format=3)
    zarr_dask.to_zarr_dataset(ds, tmp_path / "ours.zarr")
    part = xr.Dataset({"v": ("t", da.arange(3.0, chunks=1))})
    with pytest.raises(ValueError, match="Specified Zarr chunks|would overlap multiple Dask chunks"):
        part.to_zarr(tmp_path / "ours.zarr", region={"t": slice(3, 6)}, mode="r+")
    zarr_dask.to_zarr_dataset(part, tmp_path / "ours.zarr", region={"t": slice(3, 6)})
    np.testing.assert_array_equal(_ours(tmp_path / "ours.zarr").v.values, [0, 1, 2, 0, 1, 2, 6, 7, 8, 9])


def test_rectilinear_write_read_by_xarray_engine(tmp_path):
    """Irregular dask chunks written as a rectilinear grid (xarray's engine refuses to write it)."""
    import dask.array as da

    if ZARR_VERSION < (3, 2):
        pytest.skip(f"zarr-python {zarr.__version__} cannot read rectilinear chunk grids (3.2+ can)")
    data = da.from_array(np.arange(60).reshape(30, 2), chunks=((5, 12, 13), (2,)))
    ds = xr.Dataset({"a": (("x", "y"), data)})
    path = tmp_path / "rect.zarr"
    zarr_dask.to_zarr_dataset(ds, path, encoding={"a": {"chunks": ((5, 12, 13), (2,))}})
    with zarr.config.set({"array.rectilinear_chunks": True}):
        theirs = _theirs(path, chunks={})
        assert theirs.a.chunks == ((5, 12, 13), (2,))
        xr.testing.assert_identical(theirs.compute(), ds.compute())


def test_zarr_python_store_objects_and_fsspec_mappers_are_accepted(tmp_path):
    import fsspec

    ds = CASES["multidim_coords"]()
    path = tmp_path / "s.zarr"
    zarr_dask.to_zarr_dataset(ds, path)
    for store in (
        zarr.storage.LocalStore(path, read_only=True),
        zarr.storage.FsspecStore.from_url(f"file://{path}", read_only=True),
        fsspec.get_mapper(f"file://{path}"),
    ):
        xr.testing.assert_identical(_ours(store).load(), ds)
