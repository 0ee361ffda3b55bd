"""Interop of ``convert`` with the peers (test-only oracles): hierarchies written by zarr-python and xarray's
own zarr engine are converted by the real command, and the results read back by zarr-python and by xarray's
zarr engine equal the sources."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import zarr_dask
from tests.cli._helpers import run

zarr = pytest.importorskip("zarr", reason="zarr-python is the oracle of these tests")

pytestmark = pytest.mark.oracle

ZARR_VERSION = tuple(int(p) for p in zarr.__version__.split(".")[:2])


def _dataset() -> xr.Dataset:
    rng = np.random.default_rng(0)
    t2m = rng.normal(280, 5, (24, 12, 20)).astype("f4")
    t2m[0, 0, :3] = np.nan
    return xr.Dataset(
        {
            "t2m": (("time", "lat", "lon"), t2m, {"units": "K"}),
            "flag": (("time", "lat", "lon"), rng.integers(0, 3, (24, 12, 20)).astype("i2"), {"long_name": "flag"}),
        },
        coords={"time": np.arange(24), "lat": np.linspace(-55, 55, 12), "lon": np.linspace(0, 342, 20)},
        attrs={"title": "oracle"},
    )


@pytest.mark.skipif(ZARR_VERSION < (3, 0), reason="zarr-python >= 3 writes and reads Zarr v3 with sharding")
def test_xarray_v2_archive_to_sharded_v3_read_by_the_peers(tmp_path: Path) -> None:
    src, dst = str(tmp_path / "xr-v2.zarr"), str(tmp_path / "v3.zarr")
    ds = _dataset()
    encoding = {"t2m": {"chunks": (1, 12, 20)}, "flag": {"chunks": (1, 12, 20), "_FillValue": -1}}
    ds.to_zarr(src, zarr_format=2, encoding=encoding, consolidated=True)  # xarray's own engine, zarr-python
    run("convert", src, dst, "--zarr-format", "3", "--chunks", "time=24,lat=6,lon=10", "--shards", "lat=12,lon=20")
    # zarr-python reads every array of the result
    group = zarr.open_group(dst, mode="r")
    assert group["t2m"].shards == (24, 12, 20) and group["t2m"].chunks == (24, 6, 10)
    source = zarr.open_group(src, mode="r")
    for name in ("t2m", "flag", "time", "lat", "lon"):
        np.testing.assert_array_equal(group[name][...], source[name][...], err_msg=name)
    # xarray's own engine sees the same dataset, masked the same way
    before = xr.open_zarr(src, consolidated=True).load()
    after = xr.open_zarr(dst, consolidated=True).load()
    xr.testing.assert_identical(before, after)
    assert int(after.flag.isnull().sum()) == int(before.flag.isnull().sum())


def test_zarr_python_v3_to_v2_read_by_zarr_python(tmp_path: Path) -> None:
    src, dst = str(tmp_path / "zp.zarr"), str(tmp_path / "v2.zarr")
    root = zarr.open_group(src, mode="w", zarr_format=3 if ZARR_VERSION >= (3, 0) else 2)
    values = np.arange(600, dtype="u2").reshape(20, 30)
    arr = root.create_array("sub/a", shape=(20, 30), dtype="u2", chunks=(7, 7), fill_value=5)
    arr[:] = values
    root["sub"].attrs["note"] = "kept"
    run("convert", src, dst, "--zarr-format", "2", "--chunks", "0=20,1=10", "--compressor", "zstd:1")
    out = zarr.open_group(dst, mode="r", zarr_format=2)
    np.testing.assert_array_equal(out["sub/a"][...], values)
    assert out["sub"].attrs["note"] == "kept" and out["sub/a"].chunks == (20, 10) and out["sub/a"].fill_value == 5
    assert zarr_dask.open_array(dst, path="sub/a").metadata.compressor["id"] == "zstd"  # type: ignore[union-attr]
