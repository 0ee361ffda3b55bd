"""The BackendArray against NumPy: basic, outer and vectorized indexers (hypothesis), on regular, sharded and
rectilinear arrays, and through xarray (``isel`` with arrays, pointwise selection)."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from hypothesis import given, settings
from hypothesis import strategies as st
from xarray.core.indexing import BasicIndexer, NumpyIndexingAdapter, OuterIndexer, VectorizedIndexer

import zarr_dask
from zarr_dask.graph.handle import ArrayHandle
from zarr_dask.store import MemoryStore
from zarr_dask.xarray_backend.backend_array import ZarrDaskBackendArray

SHAPE = (23, 17)
DATA = np.arange(np.prod(SHAPE), dtype="i4").reshape(SHAPE)
LAYOUTS = {
    "regular": {"chunks": (5, 4)},
    "sharded": {"chunks": (2, 3), "shards": (6, 9)},
    "rectilinear": {"chunks": ((3, 7, 13), (10, 7))},
}


def _array(layout: str) -> ZarrDaskBackendArray:
    a = zarr_dask.create_array(MemoryStore(), shape=SHAPE, dtype="i4", **LAYOUTS[layout])
    a[:] = DATA
    return ZarrDaskBackendArray(ArrayHandle(a.store, a.path, a.metadata))


ARRAYS = {name: _array(name) for name in LAYOUTS}


def slices(n: int) -> st.SearchStrategy[slice]:
    bound = st.one_of(st.none(), st.integers(-n - 2, n + 2))
    return st.builds(slice, bound, bound, st.one_of(st.none(), st.integers(-4, 4).filter(bool)))


def int_arrays(n: int, unique_sorted: bool = False) -> st.SearchStrategy[np.ndarray]:
    items = st.lists(st.integers(-n, n - 1), min_size=0, max_size=8)
    if unique_sorted:
        return items.map(lambda v: np.unique(np.array(v, dtype=int) % n))
    return items.map(lambda v: np.array(v, dtype=int))


@st.composite
def outer_keys(draw):
    key = []
    for n in SHAPE:
        kind = draw(st.sampled_from(["int", "slice", "array"]))
        key.append(
            draw(st.integers(-n, n - 1)) if kind == "int" else draw(slices(n)) if kind == "slice" else draw(int_arrays(n))
        )
    return tuple(key)


@st.composite
def vectorized_keys(draw):
    npts = draw(st.integers(0, 6))
    point_shape = draw(st.sampled_from([(npts,), (1, npts), (npts, 1)]))
    kinds = draw(st.sampled_from([("a", "a"), ("a", "s"), ("s", "a")]))
    key = []
    for n, kind in zip(SHAPE, kinds):
        if kind == "s":
            key.append(draw(slices(n)))
        else:
            key.append(np.array(draw(st.lists(st.integers(-n, n - 1), min_size=npts, max_size=npts)), dtype=int).reshape(point_shape))
    return tuple(key)


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@settings(deadline=None, max_examples=40)
@given(key=outer_keys())
def test_outer_indexing_matches_numpy(layout, key):
    expected = NumpyIndexingAdapter(DATA).oindex[OuterIndexer(key)]
    np.testing.assert_array_equal(ARRAYS[layout][OuterIndexer(key)], expected)


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@settings(deadline=None, max_examples=40)
@given(key=vectorized_keys())
def test_vectorized_indexing_matches_numpy(layout, key):
    expected = NumpyIndexingAdapter(DATA).vindex[VectorizedIndexer(key)]
    np.testing.assert_array_equal(ARRAYS[layout][VectorizedIndexer(key)], expected)


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@settings(deadline=None, max_examples=30)
@given(key=st.tuples(slices(SHAPE[0]), st.one_of(slices(SHAPE[1]), st.integers(0, SHAPE[1] - 1))))
def test_basic_indexing_matches_numpy(layout, key):
    np.testing.assert_array_equal(ARRAYS[layout][BasicIndexer(key)], DATA[key])


def test_sparse_selections_read_only_the_chunks_they_touch():
    store = MemoryStore()
    a = zarr_dask.create_array(store, shape=(1000, 1000), dtype="i2", chunks=(10, 10))
    a[:] = 1
    arr = ZarrDaskBackendArray(ArrayHandle(store, a.path, a.metadata))
    with store.counters.counting() as d:
        arr[OuterIndexer((np.array([0, 999]), np.array([5, 995])))]
    assert d["get"] == 4  # not the 10^4 chunks of the bounding box
    with store.counters.counting() as d:
        arr[VectorizedIndexer((np.arange(0, 1000, 10), np.arange(0, 1000, 10)))]
    assert d["get"] == 100  # the diagonal chunks, not the 100 x 100 of an orthogonal read


def test_xarray_fancy_selections_through_the_engine():
    store = MemoryStore()
    ds = xr.Dataset({"v": (("y", "x"), DATA)}, coords={"y": np.arange(SHAPE[0]), "x": np.arange(SHAPE[1])})
    zarr_dask.to_zarr_dataset(ds, store, encoding={"v": {"chunks": (4, 5)}})
    got = xr.open_dataset(store, engine="zarr_dask")
    sel = {"y": xr.DataArray([3, 0, 22], dims="p"), "x": xr.DataArray([16, 1, 1], dims="p")}
    xr.testing.assert_identical(got.v.isel(sel).load(), ds.v.isel(sel))
    xr.testing.assert_identical(got.v.isel(y=[5, 1, 5], x=slice(None, None, -3)).load(), ds.v.isel(y=[5, 1, 5], x=slice(None, None, -3)))
