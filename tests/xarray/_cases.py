"""Datasets that exercise xarray's Zarr conventions, shared by the xarray backend tests."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import xarray as xr


def times() -> xr.Dataset:
    t = np.array(["2000-01-01", "NaT", "2000-01-03T12:00", "2001-05-06"], dtype="M8[ns]")
    dt = pd.to_timedelta(["1h", "NaT", "90min", "2D"])
    return xr.Dataset({"dt": ("t", dt), "v": ("t", np.arange(4.0))}, coords={"t": t})


def packed() -> xr.Dataset:
    ds = xr.Dataset(
        {"temp": (("t", "x"), np.array([[1.5, np.nan, 2.5], [0.0, -3.0, 7.0]]), {"units": "K"})},
        coords={"t": [0, 1], "x": [10, 20, 30]},
    )
    ds.temp.encoding = {"dtype": "i2", "scale_factor": 0.5, "add_offset": 1.0, "_FillValue": -999}
    return ds


def fill_values() -> xr.Dataset:
    ds = xr.Dataset(
        {
            "i": ("x", np.array([1, 2, 3], dtype="i4")),
            "f": ("x", np.array([1.5, np.nan, 2.0], dtype="f4")),  # NaN is stored as the _FillValue -7
            "zeros": ("x", np.zeros(3, dtype="i8")),  # must never be masked
        }
    )
    ds.i.encoding = {"_FillValue": -9}
    ds.f.encoding = {"_FillValue": -7.0}
    return ds


def strings() -> xr.Dataset:
    return xr.Dataset(
        {
            "fixed": ("x", np.array(["a", "bb", "ccc"])),
            "vlen": ("x", np.array(["α", "", "long text"], dtype=object)),
            "raw": ("x", np.array([b"x", b"yy", b"zzz"])),
        },
        coords={"x": ["p", "q", "r"]},
    )


def multidim_coords() -> xr.Dataset:
    lat = np.array([[10.0, 10.5], [11.0, 11.5], [12.0, 12.5]])
    return xr.Dataset(
        {"v": (("y", "x"), np.arange(6.0).reshape(3, 2))},
        coords={"lat": (("y", "x"), lat), "lon": (("y", "x"), lat + 100), "label": ("y", ["a", "b", "c"])},
    )


def nan_attrs() -> xr.Dataset:
    return xr.Dataset(
        {"v": ("x", np.arange(3), {"valid_max": np.nan, "flags": [1, 2], "scale": np.float32(0.5)})},
        attrs={"nan": np.nan, "inf": np.inf, "ninf": -np.inf, "title": "t", "nested": "x"},
    )


def scalars() -> xr.Dataset:
    return xr.Dataset({"s": ((), 3.5), "n": ((), np.int16(7)), "name": ((), "hello")}, coords={"c": 1})


def empty() -> xr.Dataset:
    return xr.Dataset(
        {"e": (("t", "x"), np.zeros((0, 3))), "f": ("t", np.array([], dtype="i4"))},
        coords={"x": [1, 2, 3], "t": np.array([], dtype="M8[ns]")},
    )


CASES: dict[str, Callable[[], xr.Dataset]] = {
    "times": times,
    "packed": packed,
    "fill_values": fill_values,
    "strings": strings,
    "multidim_coords": multidim_coords,
    "nan_attrs": nan_attrs,
    "scalars": scalars,
    "empty": empty,
}


def tree() -> xr.DataTree:
    return xr.DataTree.from_dict(
        {
            "/": xr.Dataset(coords={"x": [1, 2, 3]}, attrs={"title": "root"}),
            "/obs": xr.Dataset({"a": ("x", np.arange(3.0))}, attrs={"kind": "obs"}),
            "/obs/deep/er": xr.Dataset({"b": (("x", "y"), np.ones((3, 2), "i2"))}),
            "/model": xr.Dataset({"t": ("x", pd.date_range("2000-01-01", periods=3))}),
        }
    )
