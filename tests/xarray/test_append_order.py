"""An ``append_dim`` write that makes the appended index coordinate non-monotonic says so (a
``NonMonotonicCoordinateWarning`` naming the store, the variable, the last stored and first appended
values), reading only the stored coordinate's last values; ``zarr-dask validate`` reports such coordinates."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import zarr_dask
from zarr_dask.cli.validate import validate
from zarr_dask.errors import NonMonotonicCoordinateWarning
from zarr_dask.xarray_backend.monotonic import is_monotonic


def _day(day: int, **extra: Any) -> xr.Dataset:
    time = pd.date_range("2024-01-01", periods=4, freq="6h") + pd.Timedelta(days=day)
    return xr.Dataset(
        {"v": (("time", "x"), np.full((4, 3), day, "f4"))}, coords={"time": time, "x": [1, 2, 3], **extra}
    )


def test_an_out_of_order_append_warns_with_the_store_variable_and_values(tmp_path: Path) -> None:
    url = str(tmp_path / "d.zarr")
    zarr_dask.to_zarr_dataset(_day(1), url, mode="w")
    zarr_dask.to_zarr_dataset(_day(2), url, append_dim="time")  # in order: no warning (warnings are errors)
    with pytest.warns(NonMonotonicCoordinateWarning) as record:
        zarr_dask.to_zarr_dataset(_day(0), url, append_dim="time")
    (w,) = record
    message = str(w.message)
    assert url in message and "'time'" in message
    assert "2024-01-03T18:00" in message and "2024-01-01T00:00" in message  # last stored, first appended: as dates
    assert w.filename == __file__  # points at the caller
    got = xr.open_dataset(url, engine="zarr_dask", chunks=None)
    assert got.sizes["time"] == 12  # the append itself went ahead


def test_decreasing_coordinates_and_appends_inside_a_group(tmp_path: Path) -> None:
    url = str(tmp_path / "d.zarr")
    ds = xr.Dataset({"v": ("t", [1.0, 2.0])}, coords={"t": [10, 9]})
    zarr_dask.to_zarr_dataset(ds, url, group="g", mode="w")
    zarr_dask.to_zarr_dataset(ds.assign_coords(t=[8, 7]), url, group="g", append_dim="t")  # still decreasing
    with pytest.warns(NonMonotonicCoordinateWarning, match=r"'g/t' non-monotonic: the last stored value is 7, the first appended is 11"):
        zarr_dask.to_zarr_dataset(ds.assign_coords(t=[11, 12]), url, group="g", append_dim="t")


def test_out_of_order_values_within_the_append_warn(tmp_path: Path) -> None:
    url = str(tmp_path / "d.zarr")
    ds = xr.Dataset({"v": ("t", [1.0, 2.0])}, coords={"t": [1, 2]})
    zarr_dask.to_zarr_dataset(ds, url, mode="w")
    with pytest.warns(NonMonotonicCoordinateWarning, match="the first appended is 4"):
        zarr_dask.to_zarr_dataset(ds.assign_coords(t=[4, 3]), url, append_dim="t")


def test_other_coordinates_along_the_appended_dimension_are_not_checked(tmp_path: Path) -> None:
    url = str(tmp_path / "d.zarr")
    zarr_dask.to_zarr_dataset(_day(1, label=("time", [4, 3, 2, 1])), url, mode="w")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        zarr_dask.to_zarr_dataset(_day(2, label=("time", [9, 0, 9, 0])), url, append_dim="time")
    assert validate(url)[0] == []


def test_validate_reports_non_monotonic_index_coordinates(tmp_path: Path) -> None:
    url = str(tmp_path / "d.zarr")
    zarr_dask.to_zarr_dataset(_day(1), url, mode="w")
    assert validate(url)[0] == []
    with pytest.warns(NonMonotonicCoordinateWarning):
        zarr_dask.to_zarr_dataset(_day(0), url, append_dim="time")
    findings, _ = validate(url)
    assert [(f.path, f.severity) for f in findings] == [("/time", "warning")]
    assert "not monotonic" in findings[0].message and "'time'" in findings[0].message
    ordered = xr.open_dataset(url, engine="zarr_dask", chunks=None).sortby("time")
    zarr_dask.to_zarr_dataset(ordered, url, mode="w")
    assert validate(url)[0] == []


@pytest.mark.parametrize(
    ("values", "expected"),
    [([], True), ([3], True), ([1, 1, 2], True), ([3, 2, 2], True), ([1, 3, 2], False), ([1.0, np.nan, 2.0], False),
     (["a", "b"], True), (["b", "a", "c"], False)],
)  # fmt: skip
def test_is_monotonic(values: list[Any], expected: bool) -> None:
    assert is_monotonic(np.array(values)) is expected
