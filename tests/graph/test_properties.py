"""Property tests: whatever the shapes, Zarr chunks/shards, dask chunkings and region offsets, the stored array
equals the NumPy reference, untouched parts included (threaded scheduler with many threads)."""

from __future__ import annotations

from typing import Any

import dask.array as da
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import zarr_dask
from tests.graph._helpers import SHARDS_SUPPORTED, random_partition
from zarr_dask.store import MemoryStore


@st.composite
def write_cases(draw: st.DrawFn) -> dict[str, Any]:
    ndim = draw(st.integers(1, 3))
    shape = tuple(draw(st.integers(1, 14)) for _ in range(ndim))
    sharded = SHARDS_SUPPORTED and draw(st.booleans())
    zarr_format = 3 if sharded else draw(st.sampled_from([2, 3]))
    if sharded:
        inner = tuple(draw(st.integers(1, 4)) for _ in shape)
        chunks, shards = inner, tuple(c * draw(st.integers(1, 3)) for c in inner)
    else:
        chunks, shards = tuple(draw(st.integers(1, n + 2)) for n in shape), None
    region = []
    for n in shape:
        start = draw(st.integers(0, n - 1))
        region.append(slice(start, draw(st.integers(start + 1, n))))
    dask_chunks = tuple(random_partition(draw, st, s.stop - s.start) for s in region)
    return {
        "shape": shape,
        "chunks": chunks,
        "shards": shards,
        "zarr_format": zarr_format,
        "region": tuple(region),
        "dask_chunks": dask_chunks,
        "seed": draw(st.integers(0, 2**16)),
    }


def _run(case: dict[str, Any], scheduler: dict[str, Any]) -> None:
    rng = np.random.default_rng(case["seed"])
    old = rng.integers(0, 100, size=case["shape"]).astype("i4")
    store = MemoryStore()
    extra = {"shards": case["shards"]} if case["shards"] else {}
    a = zarr_dask.create_array(
        store, shape=case["shape"], chunks=case["chunks"], dtype="i4", zarr_format=case["zarr_format"],
        fill_value=-1, **extra,
    )  # fmt: skip
    a[:] = old
    region = case["region"]
    new = rng.integers(100, 200, size=old[region].shape).astype("i4")
    x = da.from_array(new, chunks=case["dask_chunks"])
    zarr_dask.to_zarr(x, store, region=region, compute=False).compute(**scheduler)
    expected = old.copy()
    expected[region] = new
    np.testing.assert_array_equal(zarr_dask.open_array(store)[:], expected)
    # and a fresh array written from the same blocks (no region), read back through from_zarr
    fresh = MemoryStore()
    zarr_dask.to_zarr(x, fresh, chunks=case["chunks"], zarr_format=case["zarr_format"], **extra)
    np.testing.assert_array_equal(zarr_dask.from_zarr(fresh).compute(**scheduler), new)


@settings(deadline=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(write_cases())
def test_region_writes_equal_numpy_threaded(case: dict[str, Any]) -> None:
    _run(case, {"scheduler": "threads", "num_workers": 16})


@settings(deadline=None, max_examples=25, suppress_health_check=[HealthCheck.too_slow])
@given(write_cases(), st.integers(0, 3), st.data())
def test_appends_equal_numpy(case: dict[str, Any], axis_pick: int, data: st.DataObject) -> None:
    rng = np.random.default_rng(case["seed"])
    shape = case["shape"]
    axis = axis_pick % len(shape)
    old = rng.integers(0, 100, size=shape).astype("i4")
    store = MemoryStore()
    extra = {"shards": case["shards"]} if case["shards"] else {}
    a = zarr_dask.create_array(store, shape=shape, chunks=case["chunks"], dtype="i4", zarr_format=case["zarr_format"], **extra)
    a[:] = old
    add = tuple(data.draw(st.integers(1, 9)) if d == axis else n for d, n in enumerate(shape))
    new = rng.integers(100, 200, size=add).astype("i4")
    x = da.from_array(new, chunks=tuple(random_partition(data.draw, st, n) for n in add))
    zarr_dask.append(x, store, axis=axis, compute=False).compute(scheduler="threads", num_workers=16)
    np.testing.assert_array_equal(zarr_dask.open_array(store)[:], np.concatenate([old, new], axis=axis))
