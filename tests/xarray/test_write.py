"""``to_zarr_dataset``: modes, appends and region writes with any dask chunking, encodings, metadata
written once, consolidated metadata kept fresh. Threaded scheduler (the distributed runs are elsewhere)."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pandas as pd
import pytest
import xarray as xr
from dask.delayed import Delayed

import zarr_dask
from tests.dask_modes import expr_gap
from tests.xarray._helpers import RecordingStore
from zarr_dask.errors import ContainsGroupError, GroupNotFoundError
from zarr_dask.store import MemoryStore
from zarr_dask.xarray_backend.variables import StaleEncodingWarning


@pytest.fixture(autouse=True)
def threads():
    with dask.config.set(scheduler="threads", num_workers=4):
        yield


def _open(store, **kw):
    return xr.open_dataset(store, engine="zarr_dask", **kw)


def _series(start: int, stop: int, chunks) -> xr.Dataset:
    n = stop - start
    values = da.from_array(np.arange(start, stop, dtype="f8")[:, None] * np.ones((1, 3)), chunks=(chunks, 3))
    time = pd.date_range("2000-01-01", periods=stop)[start:]
    return xr.Dataset(
        {"v": (("time", "x"), values), "label": ("time", np.array([f"t{i}" for i in range(start, stop)], dtype=object))},
        coords={"time": time, "x": [1, 2, 3]},
    ).assign_attrs(n=n)


# ------------------------------------------------------------------------------------------ appends
@pytest.mark.parametrize("fmt", [2, 3])
def test_appends_onto_partial_chunks_equal_the_reference(fmt):
    store = RecordingStore()
    first = _series(0, 10, 3)
    first.v.encoding["chunks"] = (4, 3)  # dask blocks of 3 over Zarr chunks of 4: xarray raises here
    zarr_dask.to_zarr_dataset(first, store, zarr_format=fmt)
    parts = [first]
    for start, stop, chunks in [(10, 17, 2), (17, 18, 1), (18, 31, 5)]:
        part = _series(start, stop, chunks)
        zarr_dask.to_zarr_dataset(part, store, append_dim="time")
        parts.append(part)
    expected = xr.concat([p.compute() for p in parts], dim="time", data_vars="minimal", coords="minimal")
    expected.attrs = parts[-1].attrs
    got = _open(store).load()
    xr.testing.assert_identical(got, expected)
    assert got.time.encoding["units"] == "days since 2000-01-01 00:00:00"  # stable across appends
    assert got.v.encoding["chunks"] == (4, 3)
    xr.testing.assert_identical(_open(store, consolidated=True).load(), expected)  # consolidated is fresh


def test_append_times_keep_their_units():
    store = RecordingStore()
    t0 = xr.Dataset({"v": ("t", [1.0, 2.0])}, coords={"t": pd.to_datetime(["2020-01-01", "2020-01-02"])})
    zarr_dask.to_zarr_dataset(t0, store)
    t1 = xr.Dataset({"v": ("t", [3.0])}, coords={"t": pd.to_datetime(["2020-01-05"])})
    zarr_dask.to_zarr_dataset(t1, store, append_dim="t")
    got = _open(store)
    assert got.t.encoding["units"] == "days since 2020-01-01 00:00:00"
    np.testing.assert_array_equal(got.t.values, pd.to_datetime(["2020-01-01", "2020-01-02", "2020-01-05"]))


def test_append_metadata_documents_written_once_each():
    store = RecordingStore()
    zarr_dask.to_zarr_dataset(_series(0, 10, 3), store)
    assert set(store.metadata_writes().values()) == {1}
    store.writes.clear()
    zarr_dask.to_zarr_dataset(_series(10, 13, 2), store, append_dim="time")
    writes = store.metadata_writes()
    assert set(writes.values()) == {1}
    assert set(writes) == {"zarr.json", "v/zarr.json", "label/zarr.json", "time/zarr.json"}  # x is untouched


def test_append_strings_longer_than_stored_raise_shorter_pass():
    store = RecordingStore()
    base = xr.Dataset({"s": ("t", np.array(["abc", "de"]))})
    zarr_dask.to_zarr_dataset(base, store, zarr_format=2)
    zarr_dask.to_zarr_dataset(xr.Dataset({"s": ("t", np.array(["x"]))}), store, append_dim="t")
    assert list(_open(store).s.values) == ["abc", "de", "x"]
    with pytest.raises(ValueError, match="Mismatched dtypes for variable s.*would be truncated"):
        zarr_dask.to_zarr_dataset(xr.Dataset({"s": ("t", np.array(["toolong"]))}), store, append_dim="t")


def test_append_dim_must_exist():
    store = RecordingStore()
    zarr_dask.to_zarr_dataset(_series(0, 4, 2), store)
    with pytest.raises(ValueError, match="append_dim='nope' does not match any existing dataset dimensions"):
        zarr_dask.to_zarr_dataset(_series(4, 6, 2).rename(time="nope"), store, append_dim="nope")


def test_mode_a_minus_writes_only_the_appended_variables():
    store = RecordingStore()
    zarr_dask.to_zarr_dataset(_series(0, 4, 2), store)
    new = _series(4, 6, 2).assign_coords(x=[7, 8, 9])
    zarr_dask.to_zarr_dataset(new, store, append_dim="time", mode="a-")
    got = _open(store)
    assert list(got.x.values) == [1, 2, 3] and got.sizes["time"] == 6


# ------------------------------------------------------------------------------------------- regions
@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize("dask_chunks", [4, 3, 7])
def test_region_writes_with_unaligned_chunks_equal_the_reference(fmt, dask_chunks):
    store = RecordingStore()
    full = _series(0, 20, 5)
    full.v.encoding["chunks"] = (5, 3)
    zarr_dask.to_zarr_dataset(full, store, zarr_format=fmt)
    region = slice(3, 17)
    update = full.isel(time=region).copy()
    update["v"] = (("time", "x"), (update.v.data * -1).rechunk((dask_chunks, 3)))
    update = update.drop_vars(["x"])
    store.writes.clear()
    zarr_dask.to_zarr_dataset(update.drop_vars("time"), store, region={"time": region})
    expected = full.compute()
    expected["v"][3:17] = -expected.v[3:17]
    xr.testing.assert_identical(_open(store).load(), expected)
    assert not store.metadata_writes()  # mode r+: no metadata changes


def test_region_auto_locates_the_coordinates():
    store = RecordingStore()
    full = _series(0, 12, 4)
    zarr_dask.to_zarr_dataset(full, store)
    part = full.isel(time=slice(5, 9)).copy()
    part["v"] = part.v * 0 + 100
    zarr_dask.to_zarr_dataset(part.drop_vars("x"), store, region="auto")
    got = _open(store).load()
    assert (got.v.values[5:9] == 100).all() and (got.v.values[:5] != 100).all()


def test_region_errors_are_xarrays():
    store = RecordingStore()
    full = _series(0, 6, 3)
    zarr_dask.to_zarr_dataset(full, store)
    with pytest.raises(ValueError, match="all keys in ``region`` are not in Dataset dimensions"):
        zarr_dask.to_zarr_dataset(full, store, region={"nope": slice(0, 1)})
    with pytest.raises(ValueError, match="step on all slices"):
        zarr_dask.to_zarr_dataset(full.drop_vars("x"), store, region={"time": slice(0, 6, 2)})
    with pytest.raises(ValueError, match="must have at least one dimension in common"):
        zarr_dask.to_zarr_dataset(full, store, region={"time": slice(0, 6)})
    with pytest.raises(ValueError, match="cannot set region unless mode='a', mode='a-', mode='r\\+'"):
        zarr_dask.to_zarr_dataset(full, store, region={"time": slice(0, 6)}, mode="w")
    with pytest.raises(ValueError, match="dataset contains non-pre-existing variables \\['new'\\]"):
        zarr_dask.to_zarr_dataset(xr.Dataset({"new": ("time", np.arange(6))}), store, mode="r+")


# ---------------------------------------------------------------------------------------------- modes
def test_modes():
    store = RecordingStore()
    ds = _series(0, 4, 2)
    zarr_dask.to_zarr_dataset(ds, store)
    with pytest.raises(ContainsGroupError, match="mode='w-' refuses"):
        zarr_dask.to_zarr_dataset(ds, store)
    assert isinstance(ContainsGroupError("x"), FileExistsError)
    other = xr.Dataset({"w": ("y", np.arange(3))})
    zarr_dask.to_zarr_dataset(other, store, mode="w")
    assert set(_open(store).variables) == {"w"}
    zarr_dask.to_zarr_dataset(ds, store, mode="a")
    assert set(_open(store).variables) == {"w", "v", "label", "time", "x"}
    with pytest.raises(GroupNotFoundError):
        zarr_dask.to_zarr_dataset(ds, RecordingStore(), mode="r+")
    with pytest.raises(ValueError, match="The only supported options for mode"):
        zarr_dask.to_zarr_dataset(ds, store, mode="x")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="cannot set append_dim unless mode='a' or mode=None"):
        zarr_dask.to_zarr_dataset(ds, store, mode="w", append_dim="time")


def test_group_and_v2_v3_mismatch():
    store = RecordingStore()
    ds = _series(0, 4, 2)
    zarr_dask.to_zarr_dataset(ds, store, group="a/b", zarr_format=2)
    assert _open(store, group="a/b").sizes["time"] == 4
    with pytest.raises(ValueError, match="holds Zarr v2 but zarr_format=3"):
        zarr_dask.to_zarr_dataset(ds, store, group="a/b", mode="a", zarr_format=3)


# ------------------------------------------------------------------------------------------ encodings
def test_unexpected_encoding_raises_xarrays_error():
    ds = _series(0, 4, 2)
    with pytest.raises(ValueError, match=r"unexpected encoding parameters for zarr backend:  \['foo'\]"):
        zarr_dask.to_zarr_dataset(ds, RecordingStore(), encoding={"v": {"foo": 1}})
    with pytest.raises(ValueError, match="Use `_FillValue` to set the Zarr array `fill_value`"):
        zarr_dask.to_zarr_dataset(ds, RecordingStore(), zarr_format=2, encoding={"v": {"fill_value": 1}})
    store = RecordingStore()
    zarr_dask.to_zarr_dataset(ds, store)
    with pytest.raises(ValueError, match="variable 'v' already exists, but encoding was provided"):
        zarr_dask.to_zarr_dataset(ds, store, mode="a", encoding={"v": {"chunks": (1, 1)}})


@expr_gap("fancy")
def test_stale_encoding_is_dropped_with_a_warning():
    src = RecordingStore()
    zarr_dask.to_zarr_dataset(_series(0, 12, 4), src, encoding={"v": {"chunks": ((5, 7), (3,))}})
    opened = _open(src, chunks={})
    assert opened.v.encoding["chunks"] == ((5, 7), 3)
    subset = opened.isel(time=slice(0, 4), x=[0, 1]).expand_dims("member")  # edges and rank no longer fit
    with pytest.warns(StaleEncodingWarning, match="dropped the encoding chunks"):
        zarr_dask.to_zarr_dataset(subset, RecordingStore())


def test_codecs_accept_numcodecs_v3_dicts_and_to_dict_objects():
    numcodecs = pytest.importorskip("numcodecs")

    class ToDict:
        def to_dict(self):
            return {"name": "gzip", "configuration": {"level": 3}}

    ds = xr.Dataset({"a": ("x", np.arange(10)), "b": ("x", np.arange(10)), "c": ("x", np.arange(10))})
    store = RecordingStore()
    zarr_dask.to_zarr_dataset(
        ds,
        store,
        encoding={
            "a": {"compressors": numcodecs.Zstd(level=5)},
            "b": {"compressors": [{"name": "blosc", "configuration": {"cname": "zstd", "clevel": 2, "shuffle": "shuffle"}}]},
            "c": {"compressors": ToDict(), "write_empty_chunks": True},
        },
    )
    enc = {k: _open(store)[k].encoding["compressors"][0]["name"] for k in "abc"}
    assert enc == {"a": "zstd", "b": "blosc", "c": "gzip"}
    xr.testing.assert_identical(_open(store).load(), ds)


def test_write_empty_chunks_conflict():
    ds = xr.Dataset({"a": ("x", np.zeros(4))})
    with pytest.raises(ValueError, match='Differing "write_empty_chunks"'):
        zarr_dask.to_zarr_dataset(
            ds, RecordingStore(), encoding={"a": {"write_empty_chunks": True}}, write_empty_chunks=False
        )


def test_irregular_dask_chunks_and_rectilinear_grid():
    ds = xr.Dataset({"a": ("x", da.arange(30, chunks=((5, 12, 13),)))})
    store = RecordingStore()
    zarr_dask.to_zarr_dataset(ds, store)  # xarray: "Zarr requires uniform chunk sizes"
    assert _open(store).a.encoding["chunks"] == (13,)
    xr.testing.assert_identical(_open(store).load(), ds.compute())
    rect = RecordingStore()
    zarr_dask.to_zarr_dataset(ds, rect, encoding={"a": {"chunks": ((5, 12, 13),)}})
    opened = _open(rect, chunks={})
    assert opened.a.chunks == ((5, 12, 13),)
    xr.testing.assert_identical(opened.compute(), ds.compute())


def test_sharded_write_with_any_dask_chunks():
    data = np.arange(24 * 10, dtype="i4").reshape(24, 10)
    ds = xr.Dataset({"a": (("y", "x"), da.from_array(data, chunks=(5, 3)))})
    store = RecordingStore()
    zarr_dask.to_zarr_dataset(ds, store, encoding={"a": {"chunks": (4, 5), "shards": (8, 10)}})
    opened = _open(store, chunks={})
    assert opened.a.encoding["shards"] == (8, 10) and opened.a.chunks == ((8, 8, 8), (10,))
    np.testing.assert_array_equal(opened.a.compute().values, data)


# --------------------------------------------------------------------------------------- consolidated
@pytest.mark.parametrize("fmt", [2, 3])
def test_consolidated_false_refreshes_existing_consolidated_metadata(fmt):
    store = RecordingStore()
    zarr_dask.to_zarr_dataset(_series(0, 4, 2), store, zarr_format=fmt)
    zarr_dask.to_zarr_dataset(_series(4, 6, 2), store, append_dim="time", consolidated=False)
    assert _open(store, consolidated=True).sizes["time"] == 6


def test_consolidated_false_on_a_new_store_writes_none():
    store = RecordingStore()
    zarr_dask.to_zarr_dataset(_series(0, 4, 2), store, consolidated=False, zarr_format=2)
    assert ".zmetadata" not in store.writes
    with pytest.warns(RuntimeWarning, match="Failed to open Zarr store with consolidated metadata"):
        assert _open(store).sizes["time"] == 4


# ------------------------------------------------------------------------------------------ compute
def test_compute_false_returns_a_delayed():
    store = RecordingStore()
    ds = _series(0, 8, 3)
    delayed = zarr_dask.to_zarr_dataset(ds, store, compute=False)
    assert isinstance(delayed, Delayed)
    assert "v/zarr.json" in store.writes and not any(k.startswith("v/c/") for k in store.writes)
    result = delayed.compute()
    assert result.variables["v"] == "create"
    xr.testing.assert_identical(_open(store).load(), ds.compute())


def test_accessor():
    store = RecordingStore()
    ds = _series(0, 3, 2)
    ds.zarr_dask.to_zarr(store)
    xr.testing.assert_identical(_open(store).load(), ds.compute())


def test_invalid_attribute_is_a_type_error():
    ds = xr.Dataset({"a": ("x", [1])}, attrs={"bad": object()})
    with pytest.raises(TypeError, match="Invalid attribute in Dataset.attrs"):
        zarr_dask.to_zarr_dataset(ds, RecordingStore())
    with pytest.raises(ValueError, match="Invalid name ''"):
        zarr_dask.to_zarr_dataset(xr.Dataset({"": ("x", [1])}), RecordingStore())


def test_write_append_open_on_every_store(any_store_url):
    url, options = any_store_url
    first = _series(0, 5, 2)
    first.v.encoding["chunks"] = (3, 3)
    zarr_dask.to_zarr_dataset(first, url, storage_options=options)
    zarr_dask.to_zarr_dataset(_series(5, 9, 3), url, append_dim="time", storage_options=options)
    expected = xr.concat([first.compute(), _series(5, 9, 3).compute()], dim="time", data_vars="minimal", coords="minimal")
    expected.attrs = {"n": 4}
    got = xr.open_dataset(url, engine="zarr_dask", storage_options=options, chunks={})
    xr.testing.assert_identical(got.compute(), expected)


def test_mode_a_overwrites_existing_variables_in_place_and_replaces_group_attrs():
    store = RecordingStore()
    zarr_dask.to_zarr_dataset(_series(0, 6, 4), store)
    changed = _series(0, 6, 4)
    changed["v"] = changed.v * 10
    changed.attrs = {"new": 1}
    store.writes.clear()
    zarr_dask.to_zarr_dataset(changed, store, mode="a")
    got = _open(store).load()
    xr.testing.assert_identical(got, changed.compute())
    assert "v/zarr.json" not in store.writes  # existing arrays keep their metadata


@pytest.mark.parametrize(
    ("name", "fmt", "says"),
    [
        ("a/b", 3, "contains '/'"),
        ("a/b", 2, "contains '/'"),
        ("zarr.json", 3, "Zarr v3 metadata document"),
        (".zarray", 2, "Zarr v2 metadata document"),
        (".zmetadata", 2, "Zarr v2 metadata document"),
        ("..", 3, "only of '.'"),
        ("x\x01", 2, "control character"),
    ],
)
def test_a_variable_name_no_array_can_have_is_refused_before_anything_is_written(tmp_path, name, fmt, says):
    """A name that would nest the variable (and lose it on reading back) or that collides with a metadata
    document: a clear error naming the variable, and an untouched store."""
    from zarr_dask.errors import InvalidPathError

    ds = xr.Dataset({"fine": ("x", np.arange(3)), name: ("x", np.arange(3.0))})
    url = tmp_path / "o.zarr"
    with pytest.raises(InvalidPathError, match="variable") as info:
        zarr_dask.to_zarr_dataset(ds, str(url), zarr_format=fmt)
    assert says in str(info.value) and repr(name) in str(info.value)
    assert not url.exists() or not any(url.iterdir())


@pytest.mark.parametrize("fmt", [2, 3])
def test_names_xarray_itself_writes_are_accepted(tmp_path, fmt):
    """``__xarray_dataarray_variable__`` starts with '__' (reserved in v3), but xarray writes and reads it."""
    arr = xr.DataArray(np.arange(4.0), dims="x")
    zarr_dask.to_zarr_dataset(arr, str(tmp_path / "o.zarr"), zarr_format=fmt)
    back = xr.open_dataarray(tmp_path / "o.zarr", engine="zarr_dask")
    np.testing.assert_array_equal(back.values, arr.values)
    # and names that are only odd in the other format
    other = ".zarray" if fmt == 3 else "zarr.json"
    ds = xr.Dataset({other: ("x", np.arange(2))})
    zarr_dask.to_zarr_dataset(ds, str(tmp_path / "p.zarr"), zarr_format=fmt)
    assert list(xr.open_dataset(tmp_path / "p.zarr", engine="zarr_dask").data_vars) == [other]


def test_encoding_typo_is_a_keyerror_that_names_the_variables():
    ds = xr.Dataset({"t2m": (("time", "lat"), np.zeros((4, 3)))}, coords={"time": np.arange(4)})
    store = MemoryStore()
    with pytest.raises(KeyError, match="encoding names variable\\(s\\) 't2mm' .* did you mean 't2m'"):
        zarr_dask.to_zarr_dataset(ds, store, encoding={"t2mm": {"chunks": (2, 3)}})
    assert not store.list_prefix("")  # nothing written


def test_empty_chunks_encoding_means_not_given():
    """``encoding={"v": {"chunks": {}}}`` is "no chunks given", as xarray's own engine takes it."""
    ds = xr.Dataset({"v": (("x", "y"), np.zeros((4, 3)))}).chunk({"x": 2})
    store = MemoryStore()
    zarr_dask.to_zarr_dataset(ds, store, encoding={"v": {"chunks": {}}})
    assert zarr_dask.open_array(store, path="v").chunks == (2, 3)


def test_a_new_dataset_does_not_ask_why_its_group_is_missing(monkeypatch):
    """The answer costs requests (a bucket check, the other format's documents) and only serves an error."""
    from zarr_dask.core import nodes

    def explained(*args):
        raise AssertionError("a missing group was explained to a writer about to create it")

    monkeypatch.setattr(nodes, "not_found_hint", explained)
    ds = xr.Dataset({"a": ("t", np.arange(4.0))})
    store = MemoryStore()
    zarr_dask.to_zarr_dataset(ds, store)
    xr.testing.assert_identical(xr.open_dataset(store, engine="zarr_dask").load(), ds)


def test_progress_shows_what_is_written_and_a_bar_on_stderr(tmp_path, capsys):
    """``progress=True`` as ``zarr_dask.to_zarr``'s (issue 40): a line saying what is written, then dask's bar,
    on stderr; refused with ``compute=False`` (the caller computes and shows the bar)."""
    url = str(tmp_path / "p.zarr")
    zarr_dask.to_zarr_dataset(_series(0, 10, 3), url, progress=True)
    shown = capsys.readouterr()
    assert "p.zarr /: writing 4 variable(s) (4 created)" in shown.err and "100% Completed" in shown.err
    assert not shown.out
    zarr_dask.to_zarr_dataset(_series(10, 14, 2), url, append_dim="time", progress=True, resume=True)
    shown = capsys.readouterr()
    assert "(3 appended, 1 written in place) along 'time', rows 10 to 14" in shown.err
    assert "100% Completed" in shown.err
    zarr_dask.to_zarr_dataset(_series(14, 15, 1), url, append_dim="time")  # no bar unless asked
    assert not capsys.readouterr().err
    with pytest.raises(TypeError, match="compute=False returns it uncomputed"):
        zarr_dask.to_zarr_dataset(_series(15, 16, 1), url, append_dim="time", compute=False, progress=True)
    assert _open(url).sizes["time"] == 15
    zarr_dask.to_zarr_datatree(xr.DataTree(_series(0, 4, 2)), str(tmp_path / "t.zarr"), progress=True)
    assert "t.zarr /: writing 4 variable(s) (4 created)" in capsys.readouterr().err
