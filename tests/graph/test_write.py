"""to_zarr and explain_write: one writer per storage key, regions, creation options, errors, idempotence."""

from __future__ import annotations

import inspect
import math
from pathlib import Path
from typing import Any

import dask
import dask.array as da
import numpy as np
import pytest
from dask.delayed import Delayed

import zarr_dask
from tests.dask_modes import DA, expr_gap
from tests.graph._helpers import SHARDS_SUPPORTED, FlakyLocalStore, create, reference_data
from tests.unconditional_store import UnconditionalStore
from zarr_dask.errors import (
    ArrayNotFoundError,
    ContainsArrayError,
    IndexingError,
    UnsupportedFeatureError,
    WritePlanError,
)
from zarr_dask.graph import layers, target
from zarr_dask.graph.write import to_zarr_delayed
from zarr_dask.store import MemoryStore, open_store


def _writer_tasks(delayed: Any) -> list[Any]:
    graph = dict(delayed.__dask_graph__())
    return [v for v in graph.values() if getattr(v, "func", None) is layers.write_group]


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_misaligned_blocks_on_every_store(any_store_url: tuple[Any, Any], zarr_format: int) -> None:
    url, options = any_store_url
    data = reference_data((29, 31))
    x = da.from_array(data, chunks=((7, 10, 12), (5, 26)))
    zarr_dask.to_zarr(x, url, storage_options=options, chunks=(6, 8), zarr_format=zarr_format)
    a = zarr_dask.open_array(url, storage_options=options)
    assert a.zarr_format == zarr_format and a.chunks == (6, 8)
    np.testing.assert_array_equal(a[:], data)


def test_aligned_blocks_one_task_per_block_no_gathering() -> None:
    x = da.from_array(reference_data((40, 60)), chunks=(20, 30))
    store = MemoryStore()
    plan = zarr_dask.explain_write(x, store, chunks=(10, 10))
    assert plan.aligned and plan.tasks == math.prod(x.numblocks) == 4 and plan.keys == 24
    assert plan.read_modify_writes == 0 and plan.expected_requests == {"get": 0, "set": 24, "metadata": 1}
    delayed = zarr_dask.to_zarr(x, store, chunks=(10, 10), compute=False)
    tasks = _writer_tasks(delayed)
    assert len(tasks) == 4 and all(len(t.dependencies) == 2 for t in tasks)  # the handle + one block
    store.counters.reset()
    delayed.compute()
    counts = store.counters.snapshot()
    assert counts["set"] == 24 and counts["get"] == 0
    np.testing.assert_array_equal(zarr_dask.open_array(store)[:], x.compute())


def test_blocks_smaller_than_keys_are_gathered_once_per_key() -> None:
    data = reference_data((64, 64))
    x = da.from_array(data, chunks=(8, 8))  # 64 blocks
    store = MemoryStore()
    plan = zarr_dask.explain_write(x, store, chunks=(32, 32))
    assert plan.tasks == plan.keys == 4 and plan.max_task_bytes == 32 * 32 * 8
    delayed = zarr_dask.to_zarr(x, store, chunks=(32, 32), compute=False)
    assert sorted(len(t.dependencies) for t in _writer_tasks(delayed)) == [17] * 4  # 16 blocks + the handle
    store.counters.reset()
    delayed.compute(scheduler="threads", num_workers=8)
    assert store.counters.snapshot()["set"] == 4  # each key written exactly once
    np.testing.assert_array_equal(zarr_dask.open_array(store)[:], data)


def test_region_write_merges_edges_once_and_keeps_the_rest() -> None:
    store = MemoryStore()
    old = reference_data((50, 40), seed=1)
    a = create(store, old.shape, (10, 10), dtype="f8")
    a[:] = old
    new = reference_data((23, 17), seed=2)
    region = (slice(12, 35), slice(9, 26))
    plan = zarr_dask.explain_write(da.from_array(new, chunks=(5, 9)), store, region=region)
    # rows [12, 35) touch keys 1-3, columns [9, 26) keys 0-2: 9 keys, all but c/2/1 cut by the region
    assert plan.action == "region" and plan.keys == 9 and plan.read_modify_writes == 8
    assert "read-modify-writes        8 e.g. c/1/0, c/1/1" in repr(plan)
    delayed = zarr_dask.to_zarr(da.from_array(new, chunks=(5, 9)), store, region=region, compute=False)
    store.counters.reset()
    delayed.compute(scheduler="threads", num_workers=8)
    counts = store.counters.snapshot()
    assert counts["get"] == 8 and counts["set"] == 9  # one read of each edge key, one write of every key
    expected = old.copy()
    expected[region] = new
    np.testing.assert_array_equal(zarr_dask.open_array(store)[:], expected)


def test_region_into_an_opened_array_and_partial_region_spec() -> None:
    a = create(MemoryStore(), (10, 8), (3, 3), dtype="i4")
    a[:] = 1
    zarr_dask.to_zarr(da.zeros((4, 8), dtype="i4", chunks=2), a, region=(slice(6, None),))
    expected = np.ones((10, 8), "i4")
    expected[6:] = 0
    np.testing.assert_array_equal(a[:], expected)
    zarr_dask.to_zarr(da.full((10, 8), 5, dtype="i4", chunks=4), a)  # no region: the whole array
    np.testing.assert_array_equal(a[:], np.full((10, 8), 5))


def test_overwrite_replaces_the_node_and_its_old_chunks(tmp_path: Path) -> None:
    url = str(tmp_path / "o.zarr")
    zarr_dask.to_zarr(da.ones((20,), chunks=5), url, chunks=5)
    with pytest.raises(ContainsArrayError, match="overwrite=True"):
        zarr_dask.to_zarr(da.ones((20,), chunks=5), url)
    zarr_dask.to_zarr(da.zeros((10,), chunks=5), url, chunks=4, overwrite=True, fill_value=0)
    a = zarr_dask.open_array(url)
    assert a.shape == (10,) and a.chunks == (4,)
    assert a.nchunks_initialized == 0  # all fill: nothing stored, and the old chunks are gone
    np.testing.assert_array_equal(a[:], np.zeros(10))


@expr_gap("reshape")
def test_creation_options_are_passed_through() -> None:
    store = MemoryStore()
    x = da.arange(24, dtype="i8", chunks=5).reshape(4, 6)
    zarr_dask.to_zarr(
        x,
        store,
        component="grp/v",
        zarr_format=2,
        chunks=(2, 3),
        compressors={"id": "zlib", "level": 1},
        fill_value=-1,
        dimension_names=["y", "x"],
        attributes={"units": "m"},
        dtype="i4",
    )
    a = zarr_dask.open_array(store, path="grp/v")
    assert (a.zarr_format, a.chunks, a.dtype, a.fill_value) == (2, (2, 3), np.dtype("i4"), -1)
    assert a.dimension_names == ("y", "x") and a.attrs["units"] == "m"
    assert a.metadata.compressor == {"id": "zlib", "level": 1}
    np.testing.assert_array_equal(a[:], np.arange(24).reshape(4, 6))


def test_default_chunks_follow_dask_blocks_and_rectilinear_on_request() -> None:
    x = da.ones((10, 7), chunks=((3, 3, 4), 4))
    store = MemoryStore()
    zarr_dask.to_zarr(x, store)
    assert zarr_dask.open_array(store).chunks == (4, 4)  # irregular: the largest block, like dask
    zarr_dask.to_zarr(x, store, rectilinear=True, overwrite=True)
    a = zarr_dask.open_array(store)
    assert a.metadata.chunk_grid.to_json()["name"] == "rectilinear"
    assert a.metadata.chunk_grid.chunk_shapes == ((3, 3, 4), 4)
    plan = zarr_dask.explain_write(x, MemoryStore(), rectilinear=True)
    assert plan.aligned and plan.tasks == 6
    np.testing.assert_array_equal(a[:], np.ones((10, 7)))
    with pytest.raises(zarr_dask.errors.MetadataError, match="zarr_format=3"):
        zarr_dask.to_zarr(x, MemoryStore(), rectilinear=True, zarr_format=2)


@pytest.mark.parametrize("write_empty_chunks", [False, True])
def test_write_empty_chunks(write_empty_chunks: bool) -> None:
    store = MemoryStore()
    x = da.concatenate([da.zeros(8, chunks=4), da.ones(4, chunks=4)])
    zarr_dask.to_zarr(x, store, chunks=4, fill_value=0, write_empty_chunks=write_empty_chunks)
    assert zarr_dask.open_array(store).nchunks_initialized == (3 if write_empty_chunks else 1)


@pytest.mark.skipif(not SHARDS_SUPPORTED, reason="create_array(shards=) is not available yet")
def test_shards_are_the_unit_of_ownership() -> None:
    data = reference_data((40, 40))
    store = MemoryStore()
    x = da.from_array(data, chunks=(7, 9))  # blocks straddle shards and inner chunks
    plan = zarr_dask.explain_write(x, store, chunks=(5, 5), shards=(20, 20))
    assert plan.unit == "shard" and plan.keys == plan.tasks == 4 and "storage keys (shards)" in repr(plan)
    store.counters.reset()
    zarr_dask.to_zarr(x, store, chunks=(5, 5), shards=(20, 20))
    assert store.counters.snapshot()["set"] == 4 + 1  # every shard written once, plus zarr.json
    np.testing.assert_array_equal(zarr_dask.open_array(store)[:], data)
    new = reference_data((13, 27), seed=3)  # a region inside the shards: each touched shard merged once
    zarr_dask.to_zarr(da.from_array(new, chunks=4), store, region=(slice(3, 16), slice(10, 37)))
    data[3:16, 10:37] = new
    np.testing.assert_array_equal(zarr_dask.open_array(store)[:], data)


def test_shards_unsupported_raise_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    original = target.build_array_metadata

    def no_shards(*, shape: Any, dtype: Any, **kwargs: Any) -> Any:
        return original(shape=shape, dtype=dtype, **kwargs)

    monkeypatch.setattr(target, "build_array_metadata", no_shards)
    assert "shards" not in inspect.signature(target.build_array_metadata).parameters
    with pytest.raises(UnsupportedFeatureError, match="shards= is not supported"):
        zarr_dask.to_zarr(da.ones(4, chunks=2), MemoryStore(), shards=(4,))


def test_compute_false_returns_a_dask_array_and_writes_tokens_not_data() -> None:
    store = MemoryStore()
    x = da.ones((30, 30), chunks=10)
    delayed = zarr_dask.to_zarr(x, store, chunks=(15, 15), compute=False)
    assert isinstance(delayed, DA.Array) and delayed.chunks == x.chunks  # what dask's to_zarr returns
    assert zarr_dask.open_array(store).nchunks_initialized == 0  # metadata only, up front
    dask.compute(delayed)
    lazy = to_zarr_delayed(x, MemoryStore(), chunks=(15, 15))
    assert isinstance(lazy, Delayed) and lazy.compute() == 4  # the number of keys written: a token, never data
    np.testing.assert_array_equal(zarr_dask.open_array(store)[:], np.ones((30, 30)))
    graph = dict(delayed.__dask_graph__())
    task = _writer_tasks(delayed)[0]
    assert task.func is layers.write_group and len(graph) > 4


@pytest.mark.parametrize("compute", [False, True])
def test_return_stored(compute: bool) -> None:
    data = reference_data((20, 20))
    x = da.from_array(data, chunks=(6, 7))
    stored = zarr_dask.to_zarr(x, MemoryStore(), chunks=(4, 4), return_stored=True, compute=compute)
    assert isinstance(stored, DA.Array) and stored.chunks == x.chunks
    np.testing.assert_array_equal(stored.compute(), data)


@expr_gap("boolean")
def test_errors_name_the_problem_and_the_fix() -> None:
    store = MemoryStore()
    a = create(store, (10, 10), (5, 5), dtype="f8")
    x = da.ones((10, 10), chunks=5)
    unknown = x[x[:, 0] > 0]
    with pytest.raises(WritePlanError, match=r"unknown chunk sizes.*compute_chunk_sizes\(\)") as e:
        zarr_dask.to_zarr(unknown, MemoryStore())
    assert "store 'memory-store://" in str(e.value)
    with pytest.raises(IndexingError, match="must have the dask array's shape"):
        zarr_dask.to_zarr(x[:4], store, region=(slice(0, 5),))
    with pytest.raises(IndexingError, match="step 1"):
        zarr_dask.to_zarr(x[:5], store, region=(slice(0, 10, 2),))
    with pytest.raises(ArrayNotFoundError, match="region= writes into an existing array"):
        zarr_dask.to_zarr(x, MemoryStore(), region=(slice(0, 10),))
    with pytest.raises(TypeError, match="describe a new array"):
        zarr_dask.to_zarr(x, store, region=(slice(0, 10),), chunks=3)
    with pytest.raises(TypeError, match="unexpected keyword"):
        zarr_dask.to_zarr(x, MemoryStore(), chunk=3)
    with pytest.raises(IndexingError, match="has shape"):
        zarr_dask.to_zarr(x[:3], a)
    assert a.nchunks_initialized == 0  # nothing was written by any of these


def test_failed_writes_rerun_to_a_correct_array(tmp_path: Path) -> None:
    old = reference_data((30, 30), seed=5)
    create(str(tmp_path / "f.zarr"), old.shape, (7, 7), dtype="f8")[:] = old
    store = FlakyLocalStore(tmp_path / "f.zarr", marker_dir=str(tmp_path))
    new = reference_data((20, 21), seed=6)
    region = (slice(4, 24), slice(3, 24))
    delayed = zarr_dask.to_zarr(da.from_array(new, chunks=(6, 5)), store, region=region, compute=False)
    with pytest.raises(OSError, match="injected failure"):
        delayed.compute(scheduler="sync")  # a task dies half-way through its writes
    for _ in range(20):  # rerun (a retry of every task, including those that had written already)
        try:
            delayed.compute(scheduler="threads", num_workers=4)
            break
        except OSError:
            continue
    expected = old.copy()
    expected[region] = new
    np.testing.assert_array_equal(zarr_dask.open_array(str(tmp_path / "f.zarr"))[:], expected)


def test_writer_tasks_rerun_are_idempotent() -> None:
    store = MemoryStore()
    old = reference_data((25, 25), seed=7)
    create(store, old.shape, (6, 6), dtype="f8")[:] = old
    new = reference_data((14, 15), seed=8)
    region = (slice(5, 19), slice(4, 19))
    delayed = zarr_dask.to_zarr(da.from_array(new, chunks=(4, 6)), store, region=region, compute=False)
    with dask.config.set(scheduler="sync"):
        delayed.compute()
        delayed.compute()  # every task again, partial keys included
    expected = old.copy()
    expected[region] = new
    np.testing.assert_array_equal(zarr_dask.open_array(store)[:], expected)


def test_zero_size_0d_and_string_writes() -> None:
    s1 = MemoryStore()
    zarr_dask.to_zarr(da.ones((0, 4), chunks=2), s1)
    assert zarr_dask.open_array(s1).shape == (0, 4)
    s2 = MemoryStore()
    zarr_dask.to_zarr(da.from_array(np.array(3.5)), s2)
    assert zarr_dask.open_array(s2)[()] == 3.5
    s3 = MemoryStore()
    words = np.array(["a", "bb", "ccc", "", "eeeee"], dtype=object)
    zarr_dask.to_zarr(da.from_array(words, chunks=2), s3, chunks=3, dtype=str)
    assert zarr_dask.open_array(s3)[:].tolist() == words.tolist()


def test_numpy_input_is_wrapped_and_url_paths_work(tmp_path: Path) -> None:
    url = tmp_path / "n.zarr"
    zarr_dask.to_zarr(np.arange(10), url, chunks=4)
    np.testing.assert_array_equal(zarr_dask.open_array(str(url))[:], np.arange(10))
    np.testing.assert_array_equal(zarr_dask.from_zarr(url).compute(), np.arange(10))


def test_handle_in_graph_is_a_single_key(memory_url: str) -> None:
    delayed = zarr_dask.to_zarr(da.ones((10, 10), chunks=2), memory_url, chunks=5, compute=False)
    graph = dict(delayed.__dask_graph__())
    handles = [k for k in graph if isinstance(k, str) and k.startswith("zarr-target-")]
    assert len(handles) == 1
    assert open_store(memory_url).url in repr(graph[handles[0]].value)


@pytest.mark.filterwarnings("ignore::zarr_dask.errors.UnprotectedWriteWarning")
def test_lazy_writes_that_would_race_are_refused_without_conditional_writes() -> None:
    store = UnconditionalStore()
    create(store, (20, 20), (10, 10), dtype="i4")[:] = 0
    top = zarr_dask.to_zarr(da.ones((5, 20), dtype="i4", chunks=5), store, region=(slice(0, 5),), compute=False)
    with pytest.raises(WritePlanError) as e:  # rows 5..10 share the chunk row 0..10 with the pending write
        zarr_dask.to_zarr(da.ones((5, 20), dtype="i4", chunks=5), store, region=(slice(5, 10),), compute=False)
    msg = str(e.value)
    assert "key 'c/0/0'" in msg and "blocks [(0, 0), (0, 1)] of this write (region [5:10, 0:20])" in msg
    assert "blocks [(0, 0), (0, 1)] of a pending write (region [0:5, 0:20])" in msg
    assert "align the region edges with the chunks (10, 10)" in msg
    with pytest.raises(WritePlanError, match="overlaps the region"):
        zarr_dask.to_zarr(da.ones((2, 20), dtype="i4", chunks=5), store, region=(slice(3, 5),), compute=False)
    aligned = zarr_dask.to_zarr(da.full((10, 20), 2, dtype="i4", chunks=5), store, region=(slice(10, 20),), compute=False)
    dask.compute(top, aligned)  # disjoint keys: safe together
    expected = np.zeros((20, 20), "i4")
    expected[:5], expected[10:] = 1, 2
    np.testing.assert_array_equal(zarr_dask.open_array(store)[:], expected)
    # the first write has run (in this process): the adjacent one is no longer a race
    later = zarr_dask.to_zarr(da.full((5, 20), 3, dtype="i4", chunks=5), store, region=(slice(5, 10),), compute=False)
    later.compute()
    expected[5:10] = 3
    np.testing.assert_array_equal(zarr_dask.open_array(store)[:], expected)


def test_lazy_writes_sharing_keys_computed_together_merge_by_conditional_writes() -> None:
    store = MemoryStore()  # conditional writes: the pending-write guard is not needed, nothing is refused
    create(store, (20, 20), (10, 10), dtype="i4")[:] = 0
    writes = [
        zarr_dask.to_zarr(da.full((5, 20), i + 1, dtype="i4", chunks=5), store, region=(slice(5 * i, 5 * i + 5),), compute=False)
        for i in range(4)
    ]
    overlapping = zarr_dask.to_zarr(da.full((2, 20), 9, dtype="i4", chunks=1), store, region=(slice(3, 5),), compute=False)
    dask.compute(*writes, scheduler="threads")
    overlapping.compute()
    expected = np.repeat(np.arange(1, 5, dtype="i4"), 5)[:, None] * np.ones((1, 20), "i4")
    expected[3:5] = 9
    np.testing.assert_array_equal(zarr_dask.open_array(store)[:], expected)


@pytest.mark.filterwarnings("ignore::zarr_dask.errors.UnprotectedWriteWarning")
def test_a_dropped_lazy_write_is_forgotten() -> None:
    import gc

    store = UnconditionalStore()
    create(store, (10,), (4,), dtype="i4")
    first = zarr_dask.to_zarr(da.ones(3, dtype="i4", chunks=3), store, region=(slice(0, 3),), compute=False)
    with pytest.raises(WritePlanError):
        zarr_dask.to_zarr(da.ones(2, dtype="i4", chunks=2), store, region=(slice(3, 5),), compute=False)
    del first
    gc.collect()
    zarr_dask.to_zarr(da.ones(2, dtype="i4", chunks=2), store, region=(slice(3, 5),), compute=False).compute()
    np.testing.assert_array_equal(zarr_dask.open_array(store)[:5], [0, 0, 0, 1, 1])
