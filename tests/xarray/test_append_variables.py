"""An append along ``append_dim`` with another variable set than the stored one (issue 40, point 2).

xarray's own engine accepts a month appended without ``tp`` (or with a new ``u10``): ``tp`` keeps its rows
while the others grow (``u10`` is created with only the new rows), and every open fails afterwards with
"conflicting sizes for dimension 'time'". Here it is refused before anything is written, naming the variables
and the fix; a new variable without ``append_dim`` is added, as xarray adds it (it has no length to keep)."""

from __future__ import annotations

from typing import Any

import dask
import fsspec
import numpy as np
import pandas as pd
import pytest
import xarray as xr

import zarr_dask
from zarr_dask.errors import WritePlanError


@pytest.fixture(autouse=True)
def threads():
    with dask.config.set(scheduler="threads", num_workers=2):
        yield


@pytest.fixture(params=["local", "s3"])
def target(request: pytest.FixtureRequest, tmp_path: Any) -> tuple[str, dict[str, Any] | None]:
    """(URL, storage_options) of a fresh store: a local directory, or a moto S3 bucket."""
    if request.param == "local":
        return str(tmp_path / "era5.zarr"), None
    return request.getfixturevalue("s3_bucket_url"), request.getfixturevalue("s3_storage_options")


def _month(start: int, names: list[str]) -> xr.Dataset:
    time = pd.date_range("2020-01-01", periods=10)[start : start + 5]
    rng = np.random.default_rng(start)
    data = {n: (("time", "x"), rng.random((5, 3))) for n in names}
    return xr.Dataset(data, coords={"time": time, "x": [10, 20, 30]}).chunk({"time": 2})


def _snapshot(url: str, storage_options: dict[str, Any] | None) -> dict[str, bytes]:
    fs, root = fsspec.core.url_to_fs(url, **(storage_options or {}))
    if hasattr(fs, "invalidate_cache"):
        fs.invalidate_cache()
    return {p: fs.cat_file(p) for p in fs.find(root)}


def _open(url: str, storage_options: dict[str, Any] | None) -> xr.Dataset:
    return xr.open_dataset(url, engine="zarr_dask", storage_options=storage_options).load()


@pytest.mark.parametrize("resume", [False, True])
def test_an_append_without_a_stored_variable_is_refused_and_writes_nothing(target, resume) -> None:
    url, so = target
    zarr_dask.to_zarr_dataset(_month(0, ["t2m", "tp"]), url, storage_options=so)
    before = _snapshot(url, so)
    with pytest.raises(WritePlanError) as e:
        zarr_dask.to_zarr_dataset(_month(5, ["t2m"]), url, append_dim="time", storage_options=so, resume=resume)
    msg = str(e.value)
    assert url.split("://")[-1] in msg  # the store
    assert "'tp'" in msg and "missing from the appended dataset" in msg and "5 row(s)" in msg  # the value
    assert "conflicting sizes for dimension 'time'" in msg and "Nothing was written" in msg
    assert "pass fill_missing=True" in msg and "ds['tp'] = xr.full_like(ds['t2m'], np.nan)" in msg  # the fixes
    assert _snapshot(url, so) == before  # no data, no metadata, no lease left behind
    assert _open(url, so).sizes == {"time": 5, "x": 3}


def test_an_append_with_a_new_variable_along_the_dimension_is_refused_and_writes_nothing(target) -> None:
    url, so = target
    zarr_dask.to_zarr_dataset(_month(0, ["t2m", "tp"]), url, storage_options=so)
    before = _snapshot(url, so)
    with pytest.raises(WritePlanError) as e:
        zarr_dask.to_zarr_dataset(_month(5, ["t2m", "tp", "u10"]), url, append_dim="time", storage_options=so)
    msg = str(e.value)
    assert url.split("://")[-1] in msg
    assert "new variable(s) 'u10' hold 'time' but are not stored" in msg and "not the 5 stored ones" in msg
    assert "ds.drop_vars(['u10'])" in msg and "mode='a'" in msg  # the fixes
    assert "'tp'" not in msg  # only what is wrong is named
    assert _snapshot(url, so) == before
    assert set(_open(url, so).data_vars) == {"t2m", "tp"}


def test_both_at_once_name_both(tmp_path) -> None:
    url = str(tmp_path / "era5.zarr")
    zarr_dask.to_zarr_dataset(_month(0, ["t2m", "tp"]), url)
    with pytest.raises(WritePlanError, match=r"(?s)'tp' hold 'time' but are missing.*'u10' hold 'time'"):
        zarr_dask.to_zarr_dataset(_month(5, ["t2m", "u10"]), url, append_dim="time", mode="a-")


def test_the_fixes_the_message_gives_work(tmp_path) -> None:
    url = str(tmp_path / "era5.zarr")
    zarr_dask.to_zarr_dataset(_month(0, ["t2m", "tp"]), url)
    month = _month(5, ["t2m", "u10"])
    month["tp"] = xr.full_like(month["t2m"], np.nan)  # the missing one, with missing values
    zarr_dask.to_zarr_dataset(month.drop_vars(["u10"]), url, append_dim="time")
    got = _open(url, None)
    assert got.sizes == {"time": 10, "x": 3}
    assert np.isnan(got.tp.values[5:]).all() and not np.isnan(got.tp.values[:5]).any()


def test_a_new_variable_without_the_dimension_is_added_as_xarray_adds_it(tmp_path) -> None:
    url = str(tmp_path / "era5.zarr")
    zarr_dask.to_zarr_dataset(_month(0, ["t2m"]), url)
    month = _month(5, ["t2m"]).assign(lsm=("x", np.ones(3)))
    zarr_dask.to_zarr_dataset(month, url, append_dim="time")
    got = _open(url, None)
    assert got.sizes == {"time": 10, "x": 3} and got.lsm.dims == ("x",)


def test_a_tree_node_that_lost_its_variables_along_the_dimension_is_refused(tmp_path) -> None:
    url = str(tmp_path / "tree.zarr")

    def tree(start: int, with_t2m: bool) -> xr.DataTree:
        month = _month(start, ["t2m"])
        node = month[["t2m"]].drop_vars("time") if with_t2m else xr.Dataset({"lsm": ("x", np.ones(3))})
        return xr.DataTree.from_dict({"/": month[["time"]].coords.to_dataset(), "/land": node})

    zarr_dask.to_zarr_datatree(tree(0, True), url)
    before = _snapshot(url, None)
    with pytest.raises(WritePlanError, match=r"node '/?land'.*the stored variable\(s\) 't2m' hold 'time'"):
        zarr_dask.to_zarr_datatree(tree(5, False), url, append_dim="time")
    assert _snapshot(url, None) == before
    zarr_dask.to_zarr_datatree(tree(5, True), url, append_dim="time")
    assert xr.open_datatree(url, engine="zarr_dask")["land"].sizes["time"] == 10


@pytest.mark.parametrize("resume", [False, True])
def test_fill_missing_appends_missing_values_to_the_variables_the_dataset_lacks(target, resume) -> None:
    """The user says what to do with them: ``fill_missing=True`` appends NaN / NaT (chunks all missing are not
    stored); the others are appended as usual and the dataset opens with one length along ``time``."""
    url, so = target
    first = _month(0, ["t2m", "tp"])
    first["when"] = first.t2m.time.expand_dims(x=first.x).transpose("time", "x")  # a datetime variable too
    zarr_dask.to_zarr_dataset(first, url, storage_options=so)
    month = _month(5, ["t2m"])
    zarr_dask.to_zarr_dataset(month, url, append_dim="time", storage_options=so, fill_missing=True, resume=resume)
    got, first, month = _open(url, so), first.compute(), month.compute()
    assert got.sizes == {"time": 10, "x": 3}
    np.testing.assert_array_equal(got.tp.values[:5], first.tp.values)
    assert np.isnan(got.tp.values[5:]).all() and np.isnat(got.when.values[5:]).all()
    np.testing.assert_array_equal(got.t2m.values[5:], month.t2m.values)
    stored = [p for p in _snapshot(url, so) if "/tp/c" in p]
    assert len(stored) == 3  # the first month's chunks (time chunks of 2): the missing rows store nothing


def test_fill_missing_refuses_a_variable_without_a_missing_value(tmp_path) -> None:
    url = str(tmp_path / "era5.zarr")
    first = _month(0, ["t2m"]).assign(count=(("time", "x"), np.ones((5, 3), "i4")))
    zarr_dask.to_zarr_dataset(first, url)
    before = _snapshot(url, None)
    with pytest.raises(WritePlanError, match=r"fill_missing=True cannot append missing values to 'count': its type int32"):
        zarr_dask.to_zarr_dataset(_month(5, ["t2m"]), url, append_dim="time", fill_missing=True)
    assert _snapshot(url, None) == before
