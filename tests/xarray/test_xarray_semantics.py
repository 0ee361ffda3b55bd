"""xarray's own write semantics (issue 16): compute=False, the template + region="auto" idiom, one computation
per dask array, every store kind xarray accepts."""

from __future__ import annotations

import importlib.util
import warnings

import dask.array as da
import numpy as np
import pytest
import xarray as xr

import zarr_dask

#: xarray's own engine="zarr" (zarr-python), the other side of the comparisons; absent in `make test-min`
needs_zarr = pytest.mark.skipif(importlib.util.find_spec("zarr") is None, reason="xarray's zarr engine needs zarr-python")


def _open(store, **kw):
    return xr.open_dataset(store, engine="zarr_dask", **kw)


def _template(n=30):
    return xr.Dataset(
        {"foo": ("x", da.zeros(n, chunks=10)), "bar": (("x", "y"), da.zeros((n, 2), chunks=(10, 2)))},
        coords={"x": np.arange(n), "y": ["a", "b"], "label": ("x", np.arange(n) * 10)},
    )


# ---------------------------------------------------------------------------------- compute=False
@pytest.mark.parametrize("zarr_format", [2, 3])
def test_compute_false_writes_data_in_memory_at_once(tmp_path, zarr_format):
    url = str(tmp_path / "t.zarr")
    delayed = zarr_dask.to_zarr_dataset(_template(), url, compute=False, zarr_format=zarr_format)
    now = _open(url)
    assert now.x.values.tolist() == list(range(30))  # xarray's engine: [0 0 0 0] was the bug
    assert now.label.values.tolist() == [10 * i for i in range(30)] and now.y.values.tolist() == ["a", "b"]
    assert not [p for p in (tmp_path / "t.zarr" / "foo").rglob("*") if p.is_file() and "." not in p.name[:1] and p.name != "zarr.json"]
    delayed.compute()
    xr.testing.assert_identical(_open(url).load(), _template().compute())


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_template_then_region_auto(tmp_path, zarr_format):
    """xarray's documented idiom: write a template lazily, then fill it region by region (coordinates
    dropped, or located with region="auto")."""
    url = str(tmp_path / "t.zarr")
    full = _template().copy()
    full["foo"] = ("x", da.arange(30.0, chunks=7))
    full["bar"] = (("x", "y"), da.ones((30, 2), chunks=(4, 2)))
    zarr_dask.to_zarr_dataset(_template(), url, compute=False, zarr_format=zarr_format)
    for start in range(0, 30, 12):  # region="auto" from the stored x, regions cutting chunks
        part = full.isel(x=slice(start, start + 12))
        zarr_dask.to_zarr_dataset(part.drop_vars(["y", "label"]), url, region="auto")
    zarr_dask.to_zarr_dataset(full[["bar"]].isel(x=slice(0, 5)).drop_vars(["x", "y", "label"]) * 2, url,
                              region={"x": slice(0, 5), "y": slice(None)})  # fmt: skip
    expected = full.compute()
    expected["bar"][:5] = 2.0
    xr.testing.assert_identical(_open(url).load(), expected)


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_datatree_template_then_region_auto(tmp_path, zarr_format):
    url = str(tmp_path / "tree.zarr")
    template = xr.DataTree.from_dict({"/": xr.Dataset(coords={"x": np.arange(30)}), "/a": _template().drop_vars("x")})
    zarr_dask.to_zarr_datatree(template, url, compute=False, zarr_format=zarr_format)
    tree = xr.open_datatree(url, engine="zarr_dask")
    assert tree.x.values.tolist() == list(range(30)) and tree["a"].label.values[-1] == 290
    for start in (0, 15):
        sub = xr.Dataset({"foo": ("x", np.full(15, float(start)))}, coords={"x": np.arange(start, start + 15)})
        zarr_dask.to_zarr_datatree(xr.DataTree.from_dict({"/a": sub}), url, region="auto")
    got = xr.open_datatree(url, engine="zarr_dask")["a"].foo.values
    assert got.tolist() == [0.0] * 15 + [15.0] * 15


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_datatree_compute_false_writes_data_in_memory_at_once(tmp_path, zarr_format):
    url = str(tmp_path / "tree.zarr")
    tree = xr.DataTree.from_dict({
        "/": xr.Dataset({"n": ("x", np.arange(4))}),
        "/g": xr.Dataset({"d": ("x", da.arange(4, chunks=2) + 1), "s": ((), 5)}),
    })  # fmt: skip
    delayed = zarr_dask.to_zarr_datatree(tree, url, compute=False, zarr_format=zarr_format)
    now = xr.open_datatree(url, engine="zarr_dask")
    assert now.n.values.tolist() == [0, 1, 2, 3] and int(now["g"].s) == 5
    assert not (now["g"].d.values == [1, 2, 3, 4]).all()
    delayed.compute()
    assert xr.open_datatree(url, engine="zarr_dask")["g"].d.values.tolist() == [1, 2, 3, 4]


@pytest.mark.parametrize("shape", [(), (6,)])
def test_datatree_write_computes_each_dask_array_once(tmp_path, shape):
    """xarray's test_to_zarr_no_redundant_computation: a shared dask ancestor is computed once."""
    calls = []

    def expensive(x):
        calls.append(1)
        return x + 1

    base = da.random.random(shape, chunks=shape)
    d1 = da.map_blocks(expensive, base, meta=np.array((), np.float64))
    tree = xr.DataTree.from_dict({"g1": xr.Dataset({"d": (("x",)[: len(shape)], d1)}),
                                  "g2": xr.Dataset({"d": (("x",)[: len(shape)], d1 + 1)})})  # fmt: skip
    zarr_dask.to_zarr_datatree(tree, str(tmp_path / "t.zarr"))
    assert len(calls) == 1


# ------------------------------------------------------------------------------------------ stores
def test_a_dict_is_a_store():
    store: dict = {}
    ds = xr.Dataset({"v": ("x", np.arange(3.0))}, coords={"x": [1, 2, 3]})
    zarr_dask.to_zarr_dataset(ds, store)
    assert "v/zarr.json" in store
    xr.testing.assert_identical(_open(store).load(), ds)
    if importlib.util.find_spec("zarr") is not None:
        xr.testing.assert_identical(xr.open_dataset(store, engine="zarr").load(), ds)  # values: zarr-python's buffers
    zarr_dask.to_zarr_dataset(ds.isel(x=[0]) * 0, store, region="auto")
    assert _open(store).v.values.tolist() == [0.0, 1.0, 2.0]


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize("writer", ["zarr", "zarr_dask"])
def test_zarr_python_memory_store_either_engine(writer, zarr_format):
    zarr = pytest.importorskip("zarr")
    store = zarr.storage.MemoryStore({}, read_only=False)
    ds = xr.Dataset({"v": ("x", np.arange(3.0))}, coords={"x": [1, 2, 3]})
    if writer == "zarr":
        ds.to_zarr(store, zarr_format=zarr_format, consolidated=False)
    else:
        zarr_dask.to_zarr_dataset(ds, store, zarr_format=zarr_format)
    for engine in ("zarr", "zarr_dask"):
        xr.testing.assert_identical(xr.open_dataset(store, engine=engine, consolidated=False).load(), ds)


# ---------------------------------------------------------------------------------------- encodings
@pytest.mark.parametrize("zarr_format", [2, 3])
def test_empty_chunks_encoding_means_none_given(zarr_format):
    store: dict = {}
    ds = xr.Dataset({"v": ("x", np.arange(5)), "s": ((), 1.5)})
    zarr_dask.to_zarr_dataset(ds, store, encoding={"v": {"chunks": ()}, "s": {"chunks": ()}}, zarr_format=zarr_format)
    back = _open(store)
    assert back.v.encoding["chunks"] == (5,) and back.s.encoding["chunks"] == ()


def test_v2_codecs_read_back_as_numcodecs_objects_and_write_back():
    from numcodecs import Blosc, Delta

    store: dict = {}
    ds = xr.Dataset({"v": ("x", np.arange(50))})
    compressor, delta = Blosc(cname="zstd", clevel=3, shuffle=2), Delta(dtype="<i8")
    zarr_dask.to_zarr_dataset(ds, store, zarr_format=2, encoding={"v": {"compressors": (compressor,), "filters": [delta]}})
    back = _open(store)
    assert back.v.encoding["compressors"] == (compressor,) and back.v.encoding["filters"] == (delta,)
    again: dict = {}
    zarr_dask.to_zarr_dataset(back, again, zarr_format=2)  # objects read back are taken back
    as_dicts: dict = {}
    zarr_dask.to_zarr_dataset(ds, as_dicts, zarr_format=2, encoding={"v": {"compressors": (compressor.get_config(),)}})
    assert _open(again).v.encoding["compressors"] == _open(as_dicts).v.encoding["compressors"] == (compressor,)


@needs_zarr
def test_a_variable_named_none():
    store: dict = {}
    ds = xr.Dataset({None: ("x", [1, 2])})
    zarr_dask.to_zarr_dataset(ds, store, consolidated=False)
    assert "__values__/zarr.json" in store  # as xarray names it
    for engine in ("zarr", "zarr_dask"):
        xr.testing.assert_identical(xr.open_dataset(store, engine=engine, consolidated=False).load(), ds)


def test_invalid_variable_attribute_names_it_with_xarrays_message():
    ds = xr.Dataset({"foo": ("x", [1])})
    ds.foo.attrs["bad"] = xr.DataArray()
    with pytest.raises(TypeError, match=r"^Invalid attribute in Dataset.attrs. In the attributes of variable 'foo'.*bad"):
        zarr_dask.to_zarr_dataset(ds, {})


def test_the_callers_variables_keep_their_encoding():
    ds = xr.Dataset({"x": ("y", [np.pi, -np.pi])}, coords={"y": [0.0, 1.0]})
    zarr_dask.to_zarr_dataset(ds, {}, encoding={"y": {"_FillValue": None}, "x": {"dtype": "f4"}})
    assert ds.y.encoding == {} and ds.x.encoding == {}


# -------------------------------------------------------------------------------------- truncation
@pytest.mark.parametrize(
    ("zarr_format", "kind"), [(2, "U"), (2, "S"), (3, "S")]
)  # v3 text is variable-length: longer strings fit
def test_appending_longer_fixed_length_strings_raises(zarr_format, kind):
    store: dict = {}
    ds = xr.Dataset({"t": ("time", np.array(["ab", "cd"], dtype=kind))}, coords={"time": [0, 1]})
    zarr_dask.to_zarr_dataset(ds, store, zarr_format=zarr_format)
    longer = xr.Dataset({"t": ("time", np.array(["abcde"], dtype=kind))}, coords={"time": [2]})
    with pytest.raises(ValueError, match=r"Mismatched dtypes for variable t .*encoding=\{'t': \{'dtype': str\}\}"):
        zarr_dask.to_zarr_dataset(longer, store, append_dim="time")
    with pytest.raises(ValueError, match="Mismatched dtypes for variable t"):
        zarr_dask.to_zarr_dataset(longer.isel(time=[0, 0]).assign_coords(time=[0, 1]), store, region="auto")
    text = lambda: [v.decode() if isinstance(v, bytes) else v for v in _open(store).t.values.tolist()]  # noqa: E731
    assert text() == ["ab", "cd"]  # nothing written
    shorter = xr.Dataset({"t": ("time", np.array(["e"], dtype=kind))}, coords={"time": [2]})
    zarr_dask.to_zarr_dataset(shorter, store, append_dim="time")
    assert text() == ["ab", "cd", "e"]


def test_v3_text_appends_longer_strings_whole():
    store: dict = {}
    ds = xr.Dataset({"t": ("time", np.array(["ab", "cd"]))}, coords={"time": [0, 1]})
    zarr_dask.to_zarr_dataset(ds, store, zarr_format=3)
    zarr_dask.to_zarr_dataset(xr.Dataset({"t": ("time", ["abcdefgh"])}, coords={"time": [2]}), store, append_dim="time")
    assert _open(store).t.values.tolist() == ["ab", "cd", "abcdefgh"]


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_appending_another_kind_raises(zarr_format):
    store: dict = {}
    zarr_dask.to_zarr_dataset(xr.Dataset({"t": ("time", [1.5, 2.5])}), store, zarr_format=zarr_format)
    with pytest.raises(ValueError, match="Mismatched dtypes for variable t"):
        zarr_dask.to_zarr_dataset(xr.Dataset({"t": ("time", np.array(["a"], dtype="S1"))}), store, append_dim="time")


# -------------------------------------------------------------------------------------- DataArrays
@needs_zarr
@pytest.mark.parametrize("name", [None, "temp", "x"])  # no name, a name, a name clashing with a coordinate
def test_a_dataarray_round_trips_with_either_engine(name):
    arr = xr.DataArray(np.arange(3.0), dims="x", coords={"x": [10, 20, 30]}, name=name)
    ours: dict = {}
    zarr_dask.to_zarr_dataset(arr, ours, consolidated=False)
    theirs: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zarr-python's notices about its own v3 choices
        arr.to_zarr(theirs, consolidated=False)
        for store in (ours, theirs):
            for engine in ("zarr", "zarr_dask"):
                back = xr.open_dataarray(store, engine=engine, consolidated=False).load()
                xr.testing.assert_identical(back, arr)
    accessor: dict = {}
    arr.zarr_dask.to_zarr(accessor)
    xr.testing.assert_identical(xr.open_dataarray(accessor, engine="zarr_dask").load(), arr)
