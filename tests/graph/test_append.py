"""append: data first (beyond the stored shape), the edge key merged once, the new shape committed last."""

from __future__ import annotations

import dataclasses

import dask.array as da
import numpy as np
import pytest
from dask.delayed import Delayed

import zarr_dask
from tests.graph._helpers import create, reference_data
from zarr_dask.core import nodes
from zarr_dask.errors import FencedWriteError, IndexingError, WritePlanError
from zarr_dask.store import MemoryStore


def test_append_merges_the_partial_last_chunk_once() -> None:
    store = MemoryStore()
    old = reference_data((13, 6), seed=1)
    create(store, old.shape, (5, 4), dtype="f8")[:] = old
    new = reference_data((9, 6), seed=2)
    x = da.from_array(new, chunks=(2, 3))
    plan = zarr_dask.explain_write(x, store, append_axis=0)
    assert plan.action == "append" and plan.shape == (22, 6)
    assert plan.read_modify_writes == 2  # c/2/0 and c/2/1: the chunk row the old data ends in
    assert plan.metadata_documents == 1
    delayed = zarr_dask.append(x, store, compute=False)
    assert isinstance(delayed, Delayed)
    assert zarr_dask.open_array(store).shape == (13, 6)  # nothing committed yet
    store.counters.reset()
    assert delayed.compute(scheduler="threads", num_workers=8) == (22, 6)
    counts = store.counters.snapshot()
    # the edge keys once, the lease by each of their two writer tasks before replacing them (the fence), the
    # lease when the commit is recorded in it, the commit's check, the lease it gives back
    assert counts["get"] == 2 + 2 + 1 + 1 + 1
    assert counts["delete"] == 1 and not store.exists(".zd-append-lease")  # the lease, and nothing else
    np.testing.assert_array_equal(zarr_dask.open_array(store)[:], np.concatenate([old, new]))


@pytest.mark.parametrize("axis", [1, -1])
def test_append_other_axis(axis: int) -> None:
    store = MemoryStore()
    old = reference_data((4, 7), seed=3)
    create(store, old.shape, (3, 3), dtype="f8")[:] = old
    new = reference_data((4, 5), seed=4)
    assert zarr_dask.append(da.from_array(new, chunks=2), store, axis=axis) == (4, 12)
    np.testing.assert_array_equal(zarr_dask.open_array(store)[:], np.concatenate([old, new], axis=1))


def test_failed_data_tasks_leave_the_old_shape_and_data() -> None:
    store = MemoryStore()
    old = reference_data((10, 4), seed=5)
    create(store, old.shape, (4, 4), dtype="f8")[:] = old

    def boom(block: np.ndarray, block_info: dict | None = None) -> np.ndarray:
        if block_info and block_info[None]["chunk-location"][0] == 2:
            raise RuntimeError("source failed")
        return block

    x = da.from_array(reference_data((9, 4), seed=6), chunks=(3, 4)).map_blocks(boom, dtype="f8")
    with pytest.raises(RuntimeError, match="source failed"):
        zarr_dask.append(x, store)
    a = zarr_dask.open_array(store)
    assert a.shape == (10, 4)
    np.testing.assert_array_equal(a[:], old)
    good = reference_data((9, 4), seed=7)
    zarr_dask.append(da.from_array(good, chunks=(3, 4)), store)  # a later append overwrites the leftovers
    np.testing.assert_array_equal(zarr_dask.open_array(store)[:], np.concatenate([old, good]))


def test_concurrent_metadata_change_is_reported_not_overwritten() -> None:
    store = MemoryStore()
    a = create(store, (6,), (4,), dtype="i4")
    a[:] = np.arange(6)
    delayed = zarr_dask.append(da.arange(3, dtype="i4", chunks=2), store, compute=False)
    a.attrs["changed"] = True  # someone else changes the attributes meanwhile: merged, not lost
    assert delayed.compute() == (9,)
    b = zarr_dask.open_array(store)
    assert b.shape == (9,) and b.attrs["changed"] is True
    delayed = zarr_dask.append(da.arange(3, dtype="i4", chunks=2), store, compute=False)
    foreign = dataclasses.replace(b.metadata, shape=(4,))  # another tool shrinks it meanwhile, ignoring the lease
    store.set_many(nodes.documents("", foreign))  # (rewrites the document only; the lease stays)
    with pytest.raises(WritePlanError, match="metadata changed while this append was under way"):
        delayed.compute()
    assert zarr_dask.open_array(store).shape == (4,)


def test_retried_append_commits_once() -> None:
    store = MemoryStore()
    create(store, (5,), (2,), dtype="i4")[:] = np.arange(5)
    delayed = zarr_dask.append(da.arange(5, 8, dtype="i4", chunks=2), store, compute=False)
    assert delayed.compute() == (8,)
    # computing the whole graph again after its commit: its lease is gone, so the store refuses it (fenced)
    # before it changes a committed row, and the error says so
    with pytest.raises(FencedWriteError, match="no longer holds its lease"):
        delayed.compute()
    np.testing.assert_array_equal(zarr_dask.open_array(store)[:], np.arange(8))
    assert zarr_dask.append(da.arange(8, 9, dtype="i4", chunks=2), store) == (9,)


def test_append_creates_a_missing_array() -> None:
    store = MemoryStore()
    assert zarr_dask.append(da.ones((3, 2), chunks=2), store, component="new", chunks=(2, 2)) == (3, 2)
    assert zarr_dask.append(da.zeros((1, 2), chunks=1), store, component="new") == (4, 2)
    np.testing.assert_array_equal(zarr_dask.open_array(store, path="new")[:, 0], [1, 1, 1, 0])


def test_first_append_does_not_ask_why_the_array_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    """The answer costs requests (a bucket check, the other format's documents) and only serves an error."""

    def explained(*args: object) -> str:
        raise AssertionError("a missing array was explained to a writer about to create it")

    monkeypatch.setattr(nodes, "not_found_hint", explained)
    assert zarr_dask.append(da.ones((3, 2), chunks=2), MemoryStore(), component="new", chunks=(2, 2)) == (3, 2)


def test_append_to_rectilinear_extends_the_edges() -> None:
    store = MemoryStore()
    create(store, (7,), ((3, 5),), dtype="i4")[:] = np.arange(7)  # the last edge overhangs by 1
    assert zarr_dask.append(da.arange(7, 13, dtype="i4", chunks=(2, 4)), store) == (13,)
    a = zarr_dask.open_array(store)
    assert a.metadata.chunk_grid.chunk_shapes == ((3, 5, 1, 4),)
    np.testing.assert_array_equal(a[:], np.arange(13))


def test_append_errors() -> None:
    store = MemoryStore()
    create(store, (4, 3), (2, 2), dtype="f8")
    with pytest.raises(IndexingError, match="every other axis must match"):
        zarr_dask.append(da.ones((2, 4), chunks=2), store)
    with pytest.raises(IndexingError, match="out of range"):
        zarr_dask.append(da.ones((4, 3), chunks=2), store, axis=2)
    with pytest.raises(TypeError, match="describe a new array"):
        zarr_dask.append(da.ones((2, 3), chunks=2), store, chunks=3)
