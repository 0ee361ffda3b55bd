"""Fill values and masking against xarray's own zarr engine: the same store reads the same through both
engines, and what zarr_dask writes reads back as what xarray's engine writes (v2 and v3, with and without
``_FillValue``, in attributes or in ``encoding``, decoded with and without ``mask_and_scale``)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import xarray as xr

import zarr_dask

pytest.importorskip("zarr")

CASES = {
    "float-none": ({}, {}),
    "float-attr": ({"_FillValue": -1.0}, {}),
    "float-enc": ({}, {"_FillValue": -1.0}),
    "float-enc-none": ({}, {"_FillValue": None}),
    "int-attr": ({"_FillValue": -1}, {}),
    "int-enc": ({}, {"_FillValue": 7}),
    "int-enc-none": ({}, {"_FillValue": None}),
    "int-scaled": ({}, {"dtype": "int16", "scale_factor": 0.5, "_FillValue": -9}),
}


def _dataset(case: str) -> tuple[xr.Dataset, dict]:
    attrs, enc = CASES[case]
    values = np.array([0.0, 1.5, -1.0, np.nan, 7.0]) if case.startswith("float") or "scaled" in case else np.array([0, 1, -1, 7, 3])
    return xr.Dataset({"v": ("x", values, attrs)}), {"v": enc}


def _write(engine: str, ds: xr.Dataset, encoding: dict, zarr_format: int) -> dict:
    store: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zarr-python's v3 consolidated-metadata notice
        if engine == "zarr":
            ds.to_zarr(store, encoding=encoding, zarr_format=zarr_format, consolidated=False)
        else:
            zarr_dask.to_zarr_dataset(ds, store, encoding=encoding, zarr_format=zarr_format, consolidated=False)
    return store


def _read(engine: str, store: dict, **kw) -> xr.Dataset:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return xr.open_dataset(store, engine=engine, consolidated=False, **kw).load()


@pytest.mark.parametrize("mask_and_scale", [True, False])
@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize("case", sorted(CASES))
def test_fill_values_as_xarrays_engine(case, zarr_format, mask_and_scale):
    ds, encoding = _dataset(case)
    results = {}
    for writer in ("zarr", "zarr_dask"):
        store = _write(writer, ds, encoding, zarr_format)
        theirs = _read("zarr", store, mask_and_scale=mask_and_scale)
        ours = _read("zarr_dask", store, mask_and_scale=mask_and_scale)
        xr.testing.assert_identical(ours, theirs)  # one store: both engines read the same
        assert ours.v.encoding.get("_FillValue") == theirs.v.encoding.get("_FillValue") or (
            np.isnan(ours.v.encoding.get("_FillValue")) and np.isnan(theirs.v.encoding.get("_FillValue"))
        )
        results[writer] = ours
    xr.testing.assert_identical(results["zarr_dask"], results["zarr"])  # what we write reads as theirs
