"""from_zarr: default blocks, values on every store, lazy graphs, slice fusion, batched requests, pickling."""

from __future__ import annotations

import math
import pickle
import time
import warnings
from typing import Any

import dask
import dask.array as da
import numpy as np
import pytest
from dask.array.core import PerformanceWarning
from dask.callbacks import Callback

import zarr_dask
from tests.dask_modes import DA, DASK_ARRAY, LEGACY, expr_gap
from tests.graph._helpers import SHARDS_SUPPORTED, CallCounter, create, reference_data
from zarr_dask.graph import gateway
from zarr_dask.graph.handle import ArrayHandle
from zarr_dask.store import MemoryStore, open_store


class TaskLog(Callback):
    """Records the tasks a local scheduler runs (Alias placeholders excluded)."""

    def __init__(self) -> None:
        super().__init__()
        self.keys: list[Any] = []

    def _pretask(self, key: Any, dsk: Any, state: Any) -> None:
        if type(dsk[key]).__name__ != "Alias":
            self.keys.append(key)


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_values_on_every_store(any_store_url: tuple[Any, Any], zarr_format: int) -> None:
    url, options = any_store_url
    data = reference_data((23, 17))
    a = create(
        open_store(url, storage_options=options), data.shape, (5, 4), dtype="f8", zarr_format=zarr_format
    )
    a[:] = data
    x = zarr_dask.from_zarr(url, storage_options=options)
    assert x.dtype == data.dtype and x.shape == data.shape
    np.testing.assert_array_equal(x.compute(), data)
    y = zarr_dask.from_zarr(url, storage_options=options, chunks=(5, 4))
    np.testing.assert_array_equal(y[3:19:3, ::-2].compute(), data[3:19:3, ::-2])


def test_default_chunks_merge_units_up_to_the_dask_target() -> None:
    a = create(MemoryStore(), (400, 300), (10, 30), dtype="f4")
    with dask.config.set({"array.chunk-size": "100kB"}):
        x = zarr_dask.from_zarr(a)
    assert all(c % 10 == 0 for c in x.chunks[0][:-1]) and all(c % 30 == 0 for c in x.chunks[1][:-1])
    assert max(x.chunks[0]) * max(x.chunks[1]) * 4 <= 100_000
    assert x.numblocks[0] * x.numblocks[1] > 1
    with dask.config.set({"array.chunk-size": "128MiB"}):
        assert zarr_dask.from_zarr(a).chunks == ((400,), (300,))


@pytest.mark.skipif(not SHARDS_SUPPORTED, reason="create_array(shards=) is not available yet")
def test_sharded_default_chunks_are_shards() -> None:
    a = create(MemoryStore(), (64, 64), (4, 4), shards=(16, 32), dtype="f8")
    data = reference_data(a.shape)
    a[:] = data
    with dask.config.set({"array.chunk-size": "4KiB"}):  # exactly one shard per block
        x = zarr_dask.from_zarr(a)
    assert x.chunks == ((16,) * 4, (32,) * 2)
    np.testing.assert_array_equal(x.compute(), data)
    with pytest.warns(
        PerformanceWarning, match=r"split the storage shards \(16, 32\).*fetched and decoded 4\.00"
    ):
        y = zarr_dask.from_zarr(a, chunks=(8, 16))
    np.testing.assert_array_equal(y.compute(), data)


def test_rectilinear_grid_gives_irregular_blocks() -> None:
    a = create(MemoryStore(), (10, 6), ((3, 1, 6), 6), dtype="i4")
    data = np.arange(60, dtype="i4").reshape(10, 6)
    a[:] = data
    with dask.config.set({"array.chunk-size": "40B"}):
        x = zarr_dask.from_zarr(a)
    assert x.chunks[0] in {(3, 1, 6), (4, 6)}
    np.testing.assert_array_equal(x.compute(), data)


def test_split_warning_names_cost_and_fix() -> None:
    a = create(MemoryStore(), (100,), (10,), dtype="i1")
    with pytest.warns(PerformanceWarning) as rec:
        zarr_dask.from_zarr(a, chunks=5)
    message = str(rec[0].message)
    assert "chunks (10,)" in message and "2.00 times" in message and "chunks=None" in message
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        zarr_dask.from_zarr(a, chunks=20)  # multiples of the unit: no warning
        zarr_dask.from_zarr(a, chunks="auto")


def test_huge_grid_builds_lazily_and_a_small_selection_runs_one_task() -> None:
    store = MemoryStore()
    a = create(store, (1000, 1_000_000), (1, 1000), dtype="f4")  # 10^6 chunks
    a[0, :2000] = np.arange(2000, dtype="f4")
    t0 = time.perf_counter()
    x = zarr_dask.from_zarr(a, chunks=(1, 1000))  # one dask block per chunk: 10^6 blocks
    build = time.perf_counter() - t0
    assert x.numblocks == (1000, 1000)
    assert build < 1.0, f"building the dask array took {build:.2f} s"
    y = x[0, :10]
    if LEGACY:
        assert (
            len(dict(y.__dask_optimize__(y.__dask_graph__(), y.__dask_keys__()))) <= 2
        )  # one task + an alias
    else:  # the optimizer narrows the read to the blocks the selection touches
        assert len(dict(y.optimize().__dask_graph__())) <= 3  # one task, the handle, the selection
    store.counters.reset()
    with TaskLog() as log:
        out = y.compute(scheduler="sync")
    np.testing.assert_array_equal(out, np.arange(10, dtype="f4"))
    # legacy: compute() of a basic selection reads it directly (no task); dask's expression graphs keep the
    # selection a task of its own; the dask-array package adds a finalize
    tasks = 0 if LEGACY and not DASK_ARRAY else 3 if DASK_ARRAY else 2
    assert len(log.keys) == tasks
    assert store.counters.snapshot()["get"] == 1
    # the default (merged) blocks: the selection is still fused into the read, fetching one key
    store.counters.reset()
    with TaskLog() as log:
        np.testing.assert_array_equal(zarr_dask.from_zarr(a)[0, :10].compute(scheduler="sync"), out)
    assert len(log.keys) == tasks and store.counters.snapshot()["get"] == 1


@pytest.mark.parametrize("inline_array", [False, True])
@expr_gap("blocks")
def test_one_batched_store_call_per_block(memory_url: str, inline_array: bool) -> None:
    store = open_store(memory_url)
    assert store.batched_io
    a = create(store, (40, 40), (5, 5), dtype="i2")
    a[:] = np.arange(1600, dtype="i2").reshape(40, 40)
    x = zarr_dask.from_zarr(a, chunks=(20, 40), inline_array=inline_array)
    counter = CallCounter()
    original = type(store).get_many_into  # what decoders read through
    try:
        type(store).get_many_into = counter.wrap(original)  # type: ignore[method-assign]
        store.counters.reset()
        block = x.blocks[1, 0].compute(scheduler="sync")
    finally:
        type(store).get_many_into = original  # type: ignore[method-assign]
    np.testing.assert_array_equal(block, np.arange(1600, dtype="i2").reshape(40, 40)[20:])
    assert counter.calls == 1  # the block's 32 chunks in one batched call
    assert store.counters.snapshot()["get"] == 32


def test_names_are_deterministic_and_tokens_small() -> None:
    a = create(MemoryStore(name="det"), (30, 30), (10, 10), dtype="f8")
    x, y = zarr_dask.from_zarr(a), zarr_dask.from_zarr(a)
    assert x.name == y.name
    assert zarr_dask.from_zarr(a, chunks=(10, 30)).name != x.name
    assert zarr_dask.from_zarr(a, name="mine").name == "mine"
    assert zarr_dask.from_zarr(a, name=False).name != zarr_dask.from_zarr(a, name=False).name
    b = create(MemoryStore(name="det"), (30, 30), (10, 10), dtype="f4")
    assert zarr_dask.from_zarr(b).name != x.name  # the metadata is part of the token


def test_graph_pickles_small(tmp_path: Any) -> None:
    url = str(tmp_path / "p.zarr")
    create(url, (500, 500), (10, 10), dtype="f4")
    x = zarr_dask.from_zarr(url, chunks=(10, 10))  # 2500 blocks
    graph = dict(x.__dask_optimize__(x.__dask_graph__(), x.__dask_keys__()))
    size = len(pickle.dumps(graph))
    assert size / len(graph) < 300, f"{size / len(graph):.0f} bytes per task"
    tasks = [v for v in graph.values() if hasattr(v, "args")]  # (the dask-array package: tuple tasks)
    handle = tasks[0].args[0] if tasks else next(v for v in graph.values() if isinstance(v, ArrayHandle))
    handle = getattr(handle, "value", handle)
    assert len(pickle.dumps(handle)) < 3000


def test_handle_pickles_by_configuration_and_reuses_its_pipeline(tmp_path: Any) -> None:
    a = create(str(tmp_path / "h.zarr"), (8, 8), (4, 4), dtype="i4")
    h = ArrayHandle(a.store, a.path, a.metadata)
    h.io.pipeline  # noqa: B018
    assert len(pickle.dumps(h)) < 2000  # configuration only, not the built pipeline
    h2, h3 = pickle.loads(pickle.dumps(h)), pickle.loads(pickle.dumps(h))
    assert h2 == h and h2 is h3  # rebuilt once per process
    assert dask.base.tokenize(h) == dask.base.tokenize(h2)


def test_zero_size_0d_and_object_arrays() -> None:
    a = create(MemoryStore(), (0, 5), (3, 3), dtype="f8")
    assert zarr_dask.from_zarr(a).compute().shape == (0, 5)
    b = create(MemoryStore(), (), (), dtype="i8")
    b[...] = 7
    x = zarr_dask.from_zarr(b)
    assert x.shape == () and int(x.compute()) == 7
    c = create(MemoryStore(), (5,), (2,), dtype=str)
    c[:] = np.array(["a", "bb", "", "dddd", "e"], dtype=object)
    assert zarr_dask.from_zarr(c).compute().tolist() == ["a", "bb", "", "dddd", "e"]


@expr_gap("fancy")
def test_fancy_selections_fused_into_the_read_follow_numpy() -> None:
    a = create(MemoryStore(), (20, 30), (4, 7), dtype="i4")
    data = np.arange(600, dtype="i4").reshape(20, 30)
    a[:] = data
    x = zarr_dask.from_zarr(a, chunks=(8, 14))
    np.testing.assert_array_equal(x[[1, 5, 17], 3:9].compute(), data[[1, 5, 17], 3:9])
    np.testing.assert_array_equal(x[2, [0, -1, 4]].compute(), data[2, [0, -1, 4]])
    np.testing.assert_array_equal(x[data[:, 0] % 3 == 0].compute(), data[data[:, 0] % 3 == 0])
    np.testing.assert_array_equal(x[None, 3, ::4].compute(), data[None, 3, ::4])
    h = ArrayHandle(a.store, a.path, a.metadata)
    np.testing.assert_array_equal(h[[1, 2], [3, 4]], data[[1, 2], [3, 4]])  # NumPy (pointwise) semantics


def test_from_zarr_accepts_urls_components_arrays_and_rejects_others(tmp_path: Any) -> None:
    root = str(tmp_path / "g.zarr")
    zarr_dask.create_group(root)
    a = zarr_dask.create_array(root, path="sub/x", shape=(6,), chunks=(2,), dtype="i1")
    a[:] = np.arange(6)
    np.testing.assert_array_equal(zarr_dask.from_zarr(root, component="sub/x").compute(), np.arange(6))
    np.testing.assert_array_equal(zarr_dask.from_zarr(a).compute(), np.arange(6))
    with pytest.raises(zarr_dask.errors.ArrayNotFoundError):
        zarr_dask.from_zarr(root, component="nothing")
    with pytest.raises(TypeError, match="cannot read from ndarray.*zarr-python store or Array"):
        zarr_dask.from_zarr(np.arange(3))
    with pytest.raises(TypeError, match="component"):
        zarr_dask.from_zarr(a, component="x")


def test_works_with_dask_operations_and_assert_eq() -> None:
    a = create(MemoryStore(), (50, 40), (7, 9), dtype="f8")
    data = reference_data(a.shape)
    a[:] = data
    x = zarr_dask.from_zarr(a, chunks=(14, 18))
    da.utils.assert_eq(x, data)
    da.utils.assert_eq((x + 1).sum(axis=0), (data + 1).sum(axis=0))
    da.utils.assert_eq(x.T[::3, 5:], data.T[::3, 5:])


@pytest.mark.skipif(not SHARDS_SUPPORTED, reason="create_array(shards=) is not available yet")
@expr_gap("blocks")
def test_sharded_block_reads_each_index_once_and_coalesces(memory_url: str) -> None:
    store = open_store(memory_url)
    # 2 MiB shards of 8 KiB inner chunks: a block of two adjacent inner chunks needs a small part of its shard
    a = create(store, (512, 1024), (32, 32), shards=(512, 512), dtype="f8", compressors=None)
    data = reference_data(a.shape)
    a[:] = data
    with pytest.warns(PerformanceWarning):
        x = zarr_dask.from_zarr(a, chunks=(32, 64))
    counter = CallCounter()
    original = type(store).get_ranges_into  # what decoders read through
    try:
        type(store).get_ranges_into = counter.wrap(original)  # type: ignore[method-assign]
        with store.counters.counting() as one_shard:
            np.testing.assert_array_equal(x.blocks[2, 1].compute(scheduler="sync"), data[64:96, 64:128])
        assert one_shard["get"] == 0 and one_shard["get_range"] == 2  # the index, then one coalesced range
        assert counter.calls == 2
        with pytest.warns(PerformanceWarning):
            y = zarr_dask.from_zarr(a, chunks=(32, (448, 128, 448)))
        counter.calls = 0
        with store.counters.counting() as two_shards:  # block (0, 1) spans columns 448..576: both shards
            np.testing.assert_array_equal(y.blocks[0, 1].compute(scheduler="sync"), data[:32, 448:576])
        assert two_shards["get"] == 0 and two_shards["get_range"] == 2 + 2  # an index and a range per shard
        assert counter.calls == 2  # one batched call for the indexes, one for the data
    finally:
        type(store).get_ranges_into = original  # type: ignore[method-assign]


def test_block_memory_is_recycled_and_views_keep_it() -> None:
    import gc

    from zarr_dask.graph.buffers import POOL

    a = create(MemoryStore(), (1024, 512), (256, 512), dtype="f8")  # 4 MiB, in 1 MiB chunks
    a[:] = 1.5
    POOL.clear()
    x = zarr_dask.from_zarr(a, chunks=(512, 512))  # two 2 MiB blocks
    held = x.persist(scheduler="sync")  # the blocks stay in memory
    assert POOL.idle_bytes == 0
    del held
    gc.collect()
    assert POOL.idle_bytes == 4 << 20  # both buffers back in the pool
    h = ArrayHandle(a.store, a.path, a.metadata)
    block = h[:512]  # the same memory, reused
    assert POOL.idle_bytes == 2 << 20
    view = block[::7]
    del block
    assert POOL.idle_bytes == 2 << 20  # the view still uses it
    np.testing.assert_array_equal(view, 1.5)
    del view
    assert POOL.idle_bytes == 4 << 20


def test_idle_block_memory_is_dropped_even_if_the_pool_is_not_used_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import time

    from zarr_dask.graph import buffers

    monkeypatch.setattr(buffers, "_IDLE_SECONDS", 0.1)
    pool = buffers.BlockPool(limit=8 << 20)
    block = pool.empty((1 << 20,), np.uint8)
    del block
    assert pool.idle_bytes == 1 << 20
    deadline = time.monotonic() + 5.0
    while pool.idle_bytes and time.monotonic() < deadline:
        time.sleep(0.02)
    assert pool.idle_bytes == 0


def test_default_block_pool_limit_follows_the_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    from zarr_dask.graph import buffers

    monkeypatch.delenv("ZARR_DASK_BLOCK_POOL", raising=False)
    assert 256 << 20 <= buffers._limit() <= 2 << 30
    monkeypatch.setenv("ZARR_DASK_BLOCK_POOL", "64MiB")
    assert buffers._limit() == 64 << 20


@pytest.mark.parametrize("shape", [(40, 30), (7,), (5, 6, 7)])
@pytest.mark.skipif(
    DASK_ARRAY,
    reason="with the dask-array package dask.compute(x) assembles with its own code (docs/dask.md, 'With the "
    "dask-array package')",
)
def test_dask_compute_of_the_whole_array_assembles_blocks_into_pooled_memory(shape: tuple[int, ...]) -> None:
    import dask

    from zarr_dask.graph.buffers import POOL

    zchunks = tuple(max(1, n // 4) for n in shape)
    a = create(MemoryStore(), shape, zchunks, dtype="f8")
    data = reference_data(a.shape)
    a[:] = data
    x = zarr_dask.from_zarr(a, chunks=tuple(2 * c for c in zchunks))  # several blocks of whole chunks
    assert math.prod(x.numblocks) > 1
    (got,) = dask.compute(x, scheduler="threads")
    np.testing.assert_array_equal(got, data)
    got2, doubled = dask.compute(x, x * 2, scheduler="sync")  # with an ordinary dask array alongside
    np.testing.assert_array_equal(got2, data)
    np.testing.assert_array_equal(doubled, data * 2)
    big = create(MemoryStore(), (512, 1024), (128, 1024), dtype="f8")  # 4 MiB: pooled memory
    big[:] = 1.0
    POOL.clear()
    (whole,) = dask.compute(zarr_dask.from_zarr(big, chunks=(256, 1024)), scheduler="sync")
    assert float(whole.sum()) == 512 * 1024
    idle = POOL.idle_bytes
    del whole
    assert POOL.idle_bytes == idle + (4 << 20)  # the result's memory returns to the pool


def test_assembling_falls_back_to_dask_for_unexpected_blocks() -> None:
    from zarr_dask.graph.gateway.reads import assemble as _assemble

    blocks = [[np.ones((2, 2)), np.ones((2, 1))], [np.zeros((1, 2)), np.zeros((1, 1))]]
    out = _assemble(blocks, ((2, 1), (2, 1)), np.dtype("f8"))
    np.testing.assert_array_equal(out, np.block(blocks))
    odd = [
        [np.ones((2, 2), dtype="f4"), np.ones((2, 1), dtype="f4")]
    ]  # not the array's dtype: dask assembles
    np.testing.assert_array_equal(_assemble(odd, ((2,), (2, 1)), np.dtype("f8")), np.block(odd))
    single = [[np.arange(4.0).reshape(2, 2)]]
    copy = _assemble(single, ((2,), (2,)), np.dtype("f8"))
    assert copy is not single[0][0] and np.array_equal(copy, single[0][0])


def test_whole_compute_on_a_local_scheduler_reads_straight_into_the_result(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    a = create(MemoryStore(), (40, 30), (7, 6), dtype="f8")
    data = reference_data(a.shape)
    a[:] = data
    x = zarr_dask.from_zarr(a, chunks=(14, 12))
    if DASK_ARRAY:
        kind: Any = gateway.reads._dask_array_collection()
    else:
        kind = zarr_dask.graph.read.ZarrArray if LEGACY else gateway.reads.ZarrExprArray
    assert isinstance(x, DA.Array) and isinstance(x, kind)
    assert type(x + 1) is DA.Array and type(x[[1, 2]] if LEGACY else x[1:] + 1) is DA.Array  # plain dask arrays
    if LEGACY and not DASK_ARRAY:  # a basic selection keeps the direct compute() (and only that)
        assert type(x[1:]) is kind and type(x[1:][1:]) is DA.Array
    calls: list[int] = []
    original = ArrayHandle.read_all
    monkeypatch.setattr(
        ArrayHandle, "read_all", lambda self, threads: calls.append(threads) or original(self, threads)
    )
    with TaskLog() as log:
        np.testing.assert_array_equal(x.compute(scheduler="threads", num_workers=3), data)
        np.testing.assert_array_equal(x.compute(scheduler="sync"), data)
        np.testing.assert_array_equal(np.asarray(x), data)
    assert calls[:2] == [3, 1] and len(calls) == 3 and log.keys == []  # no dask task ran
    np.testing.assert_array_equal(dask.compute(x)[0], data)  # through the graph: same values

    def other_scheduler(dsk: Any, keys: Any, **kwargs: Any) -> Any:  # e.g. a distributed client
        return dask.local.get_sync(dsk, keys, **kwargs)

    np.testing.assert_array_equal(x.compute(scheduler=other_scheduler), data)
    assert len(calls) == 3


_SELECTIONS = [
    (slice(0, 10),),
    (3,),
    (-1, slice(2, 30, 3)),
    (Ellipsis, 5),
    (slice(5, None), Ellipsis),
    (np.int64(7), slice(None, None, 2)),
    (slice(40, 100),),  # past the end: clipped, as NumPy does
    (slice(4, 4),),  # empty
]


@pytest.mark.parametrize("sel", _SELECTIONS, ids=str)
def test_compute_of_a_basic_selection_reads_it_directly(sel: tuple[Any, ...]) -> None:
    """compute() of x[basic selection] on a local scheduler reads just that selection, without the scheduler
    (issue 17: the 10^6-chunk [0:10] path), with the values and shape dask gives."""
    data = np.arange(40 * 36, dtype="f8").reshape(40, 36)
    a = zarr_dask.create_array(MemoryStore(), shape=data.shape, dtype="f8", chunks=(6, 8))
    a[:] = data
    x = zarr_dask.from_zarr(a)
    with TaskLog() as log:
        got = x[sel].compute()
    np.testing.assert_array_equal(got, data[sel])
    assert got.shape == data[sel].shape and got.dtype == data.dtype
    assert log.keys == [] if LEGACY and not DASK_ARRAY else True  # no dask task ran
    np.testing.assert_array_equal(dask.compute(x[sel])[0], data[sel])  # dask.compute: the scheduler, same result


def test_direct_selection_reads_fall_back_to_dask_where_they_would_differ() -> None:
    data = np.arange(12 * 10, dtype="i4").reshape(12, 10)
    a = zarr_dask.create_array(MemoryStore(), shape=data.shape, dtype="i4", chunks=(4, 5))
    a[:] = data
    x = zarr_dask.from_zarr(a)
    fancy = [([1, 3],)] if LEGACY else []  # integer-array indexing is a gap of dask's array-expr
    for sel in ((slice(None, None, -1),), *fancy, (None, 2), (slice(1, 9),)):
        np.testing.assert_array_equal(x[sel].compute(), data[sel])
    np.testing.assert_array_equal(x[2:9][1:3].compute(), data[2:9][1:3])  # a selection of a selection
    if LEGACY:  # (dask's expression arrays have no item assignment)
        y = x[0:6]
        y[y > 20] = -1  # changed in place: its graph, not the stored values
        want = data[0:6].copy()
        want[want > 20] = -1
        np.testing.assert_array_equal(y.compute(), want)
    np.testing.assert_array_equal(x[0:6].compute(scheduler="sync"), data[0:6])
