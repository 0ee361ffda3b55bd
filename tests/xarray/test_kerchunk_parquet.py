"""kerchunk *parquet* references open with ``engine="zarr_dask"`` and the default ``consolidated=None``, as
with xarray's own engine (issue 24: their ``.zmetadata`` has no ``zarr_consolidated_format``)."""

from __future__ import annotations

import os

import numpy as np
import pytest
import xarray as xr

import zarr_dask

pytest.importorskip("kerchunk")  # fsspec writes parquet references through kerchunk.df
pytest.importorskip("fastparquet")  # fsspec's parquet references read (and write) with it

# pandas 3 deprecates the fastparquet engine, which fsspec's reference filesystem uses by default
pytestmark = [pytest.mark.oracle, pytest.mark.filterwarnings("ignore:The 'fastparquet' engine is deprecated")]


def _parquet_references(src: str, out: str) -> None:
    from fsspec.implementations.reference import LazyReferenceMapper

    refs = LazyReferenceMapper.create(out, record_size=5)
    files = sorted((not f.startswith(".z"), os.path.join(r, f)) for r, _, fs in os.walk(src) for f in fs)
    for _, full in files:  # the metadata documents first: chunks need their array's .zarray
        key = os.path.relpath(full, src)
        if os.path.basename(full).startswith(".z"):
            with open(full, "rb") as f:
                refs[key] = f.read()
        else:
            refs[key] = [f"file://{full}", 0, os.path.getsize(full)]
    refs.flush()


def test_parquet_references_open_with_the_default_consolidated(tmp_path):
    ds = xr.Dataset({"v": (("t", "x"), np.arange(60.0).reshape(10, 6))}, coords={"t": np.arange(10)}, attrs={"a": 1})
    ds.v.encoding["chunks"] = (4, 3)
    zarr_dask.to_zarr_dataset(ds, str(tmp_path / "src.zarr"), zarr_format=2, consolidated=False)
    _parquet_references(str(tmp_path / "src.zarr"), str(tmp_path / "refs.parq"))
    options = {"storage_options": {"fo": str(tmp_path / "refs.parq"), "remote_protocol": "file"}}
    ours = xr.open_dataset("reference://", engine="zarr_dask", backend_kwargs=options).load()
    xr.testing.assert_identical(ours, ds)
    theirs = xr.open_dataset("reference://", engine="zarr", backend_kwargs=options).load()
    xr.testing.assert_identical(ours, theirs)
