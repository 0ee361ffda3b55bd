"""Consolidated metadata after to_zarr / append / region writes: refreshed by one final task after the data
(threads and distributed), never created where there was none; check_consolidated finds stale entries."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import dask
import dask.array as da
import numpy as np
import pytest

import zarr_dask
from tests.conftest import CLOUD_KINDS, store_of_kind
from tests.graph._helpers import CallCounter, reference_data
from tests.unconditional_store import UnconditionalStore
from zarr_dask.core import consolidated as core_consolidated
from zarr_dask.core import nodes
from zarr_dask.core.create import build_array_metadata
from zarr_dask.errors import GroupNotFoundError, MetadataError, WriteConflictError
from zarr_dask.graph import layers
from zarr_dask.store import LocalStore, MemoryStore, open_store

FORMATS = [2, 3]


def _dims(fmt: int, names: Sequence[str]) -> dict[str, Any]:
    return {"dimension_names": tuple(names)} if fmt == 3 else {"attributes": {"_ARRAY_DIMENSIONS": list(names)}}


def consolidated_store(url: Any, fmt: int, data: np.ndarray | None = None) -> np.ndarray:
    """A root group with ``x`` (t, c) at the root and ``a/y`` below, consolidated; returns x's data."""
    data = reference_data((5, 3)) if data is None else data
    zarr_dask.create_group(url, zarr_format=fmt, attributes={"title": "t"})
    zarr_dask.to_zarr(da.from_array(data, chunks=2), url, component="x", chunks=(2, 3), zarr_format=fmt, **_dims(fmt, "tc"))
    zarr_dask.to_zarr(da.arange(4, chunks=2), url, component="a/y", chunks=3, zarr_format=fmt)
    zarr_dask.consolidate_metadata(url)
    assert zarr_dask.check_consolidated(url) == []
    return data


def other_tool_creates(store: Any, path: str, **kwargs: Any) -> None:
    """Create an array as a tool that does not maintain consolidated metadata would (zarr_dask's own creation
    refreshes it)."""
    nodes.write_node(store, path, build_array_metadata(**kwargs))


def listed(url: Any) -> dict[str, Any]:
    cm = zarr_dask.open_group(url, mode="r").consolidated_metadata
    assert cm is not None
    return cm.nodes


# ------------------------------------------------------------------------------------- to_zarr / append
@pytest.mark.parametrize("fmt", FORMATS)
def test_new_array_and_the_groups_created_for_it_are_listed(any_store_url: tuple[Any, Any], fmt: int) -> None:
    url, options = any_store_url
    store = open_store(url, storage_options=options)
    consolidated_store(store, fmt)
    data = reference_data((7, 4), seed=1)
    zarr_dask.to_zarr(da.from_array(data, chunks=3), store, component="b/c/z", chunks=(4, 4), zarr_format=fmt)
    entries = listed(store)
    assert {"b", "b/c", "b/c/z", "a", "a/y", "x"} == set(entries)
    assert entries["b/c/z"].shape == (7, 4) and nodes.is_group(entries["b/c"])
    assert zarr_dask.check_consolidated(store) == []
    np.testing.assert_array_equal(zarr_dask.open_group(store, mode="r")["b/c/z"][:], data)


@pytest.mark.parametrize("fmt", FORMATS)
def test_append_is_seen_through_consolidated_metadata(tmp_path: Path, fmt: int) -> None:
    xr = pytest.importorskip("xarray")
    url = str(tmp_path / "c.zarr")
    old = consolidated_store(url, fmt)
    new = reference_data((4, 3), seed=2)
    assert zarr_dask.append(da.from_array(new, chunks=3), url, component="x") == (9, 3)
    zarr_dask.append(da.arange(4, 10, chunks=4), url, component="a/y")
    expected = np.concatenate([old, new])
    group = zarr_dask.open_group(url, mode="r", use_consolidated=True)
    assert group["x"].shape == (9, 3) and group["a/y"].shape == (10,)
    np.testing.assert_array_equal(zarr_dask.from_zarr(group["x"]).compute(), expected)
    np.testing.assert_array_equal(zarr_dask.from_zarr(url, component="a/y").compute(), np.arange(10))
    with xr.open_dataset(url, engine="zarr_dask", consolidated=True) as ds:
        assert ds["x"].shape == (9, 3)
        np.testing.assert_array_equal(ds["x"].values, expected)
    assert zarr_dask.check_consolidated(url) == []


@pytest.mark.parametrize("fmt", FORMATS)
def test_consolidated_false_leaves_it_stale_and_the_check_says_so(tmp_path: Path, fmt: int) -> None:
    """The control: readers above really read the consolidated metadata (here they see the old shape)."""
    url = str(tmp_path / "c.zarr")
    consolidated_store(url, fmt)
    zarr_dask.append(da.ones((4, 3), chunks=2), url, component="x", consolidated=False)
    assert zarr_dask.open_group(url, mode="r")["x"].shape == (5, 3)
    [m] = zarr_dask.check_consolidated(url)
    assert (m.group, m.path, m.kind) == ("", "x", "stale")
    assert m.detail == "shape [5, 3] in the consolidated metadata, [9, 3] in its own documents"
    assert repr(m) == f"<stale consolidated entry /x (held by /): {m.detail}>"
    zarr_dask.consolidate_metadata(url)
    assert zarr_dask.check_consolidated(url) == []


@pytest.mark.parametrize("fmt", FORMATS)
def test_overwrite_replaces_the_entry_and_drops_what_was_below(fmt: int) -> None:
    store = MemoryStore()
    consolidated_store(store, fmt)
    zarr_dask.to_zarr(da.zeros((2, 2), chunks=1, dtype="i2"), store, component="a", overwrite=True, zarr_format=fmt)
    entries = listed(store)
    assert set(entries) == {"a", "x"} and entries["a"].shape == (2, 2)
    zarr_dask.to_zarr(da.zeros(3, chunks=1), store, component="x", overwrite=True, zarr_format=fmt)
    assert listed(store)["x"].shape == (3,) and zarr_dask.check_consolidated(store) == []


@pytest.mark.parametrize("fmt", FORMATS)
def test_region_write_changes_no_metadata_but_repairs_a_stale_entry(fmt: int) -> None:
    store = MemoryStore()
    consolidated_store(store, fmt)
    x = da.ones((2, 3), chunks=1)
    plan = zarr_dask.explain_write(x, store, component="x", region=(slice(1, 3),))
    delayed = zarr_dask.to_zarr(x, store, component="x", region=(slice(1, 3),), compute=False)
    with store.counters.counting() as delta:
        delayed.compute()
    refresh = len(core_consolidated.refresh_keys("x", fmt, own=True))
    assert delta["set"] == plan.keys and delta["get"] == plan.read_modify_writes + refresh and delta["list"] == 0
    meta = zarr_dask.open_array(store, path="x").metadata  # someone else changes x's attributes behind our back
    store.set_many(nodes.documents("x", dataclasses.replace(meta, attributes={**meta.attributes, "units": "K"})))
    [stale] = zarr_dask.check_consolidated(store)
    assert stale.kind == "stale" and stale.detail.startswith("attributes ")
    zarr_dask.to_zarr(x, store, component="x", region=(slice(1, 3),))
    assert zarr_dask.check_consolidated(store) == [] and listed(store)["x"].attributes["units"] == "K"


@pytest.mark.parametrize("fmt", FORMATS)
def test_append_costs_one_batched_read_and_one_write_of_the_root(fmt: int) -> None:
    store = MemoryStore()
    consolidated_store(store, fmt)
    x = da.arange(4, 10, chunks=2)
    plan = zarr_dask.explain_write(x, store, component="a/y", append_axis=0)
    delayed = zarr_dask.append(x, store, component="a/y", compute=False)
    get_many = CallCounter()
    store.get_many = get_many.wrap(store.get_many)  # type: ignore[method-assign]
    store.get_versioned = get_many.wrap(store.get_versioned)  # type: ignore[method-assign]
    with store.counters.counting() as delta:
        assert delayed.compute() == (10,)
    docs = len(nodes.documents("a/y", listed(store)["a/y"]))
    # the append lease: read by the task merging the edge key before it replaces it (the fence), when the commit
    # is recorded in it, and when it is given back (and deleted)
    lease = plan.read_modify_writes + 1 + 1
    docs = len(nodes.candidate_keys("a/y", fmt))  # the commit reads every document the node may have
    assert delta["get"] == plan.read_modify_writes + docs + len(core_consolidated.refresh_keys("a/y", fmt, own=False)) + lease
    # the data, the lease recording the commit, the array's document with the shape, the holder's document
    assert delta["set"] == plan.keys + 1 + 1 + 1
    assert delta["list"] == 0 and get_many.calls == plan.read_modify_writes + 1 + lease  # the commit: one batched read
    assert listed(store)["a/y"].shape == (10,)


@pytest.mark.parametrize("fmt", FORMATS)
def test_no_consolidated_metadata_is_never_started(fmt: int) -> None:
    store = MemoryStore()
    zarr_dask.create_group(store, zarr_format=fmt)
    root_docs = {k: store.get(k) for k in (".zgroup", ".zattrs", "zarr.json") if store.get(k) is not None}
    zarr_dask.to_zarr(da.ones((4, 4), chunks=2), store, component="g/x", chunks=2, zarr_format=fmt)
    zarr_dask.append(da.ones((2, 4), chunks=2), store, component="g/x")
    zarr_dask.to_zarr(da.zeros((2, 2), chunks=1), store, component="g/x", region=(slice(0, 2), slice(0, 2)))
    assert {k: store.get(k) for k in root_docs} == root_docs
    assert not any(k.endswith(".zmetadata") for k in store.list_prefix(""))
    assert zarr_dask.open_group(store, mode="r").consolidated_metadata is None
    zarr_dask.to_zarr(da.ones(3, chunks=2), store, component="g/y", zarr_format=fmt, consolidated=True)
    assert set(listed(store)) == {"g", "g/x", "g/y"} and zarr_dask.check_consolidated(store) == []


def test_consolidated_must_be_a_bool_or_none() -> None:
    with pytest.raises(TypeError, match="consolidated must be None, True or False"):
        zarr_dask.to_zarr(da.ones(3, chunks=2), MemoryStore(), consolidated="yes")


# ------------------------------------------------------------------------------------- when it happens
@pytest.mark.parametrize("fmt", FORMATS)
def test_compute_false_refreshes_when_computed_after_the_data(fmt: int) -> None:
    store = MemoryStore()
    consolidated_store(store, fmt)
    created = zarr_dask.to_zarr(da.ones((6,), chunks=2), store, component="a/new", chunks=3, zarr_format=fmt,
                                compute=False)  # fmt: skip
    assert [m.kind for m in zarr_dask.check_consolidated(store)] == ["missing"]  # metadata up front, entry after
    created.compute()
    assert listed(store)["a/new"].shape == (6,)

    def boom(block: np.ndarray, block_info: dict | None = None) -> np.ndarray:
        if block_info and block_info[None]["chunk-location"][0] == 1:
            raise RuntimeError("source failed")
        return block

    with pytest.raises(RuntimeError, match="source failed"):
        zarr_dask.append(da.ones((4, 3), chunks=2).map_blocks(boom, dtype="f8"), store, component="x")
    assert listed(store)["x"].shape == (5, 3) and zarr_dask.check_consolidated(store) == []
    appended = zarr_dask.append(da.ones((4, 3), chunks=2), store, component="x", compute=False)
    assert listed(store)["x"].shape == (5, 3)
    graph = dict(appended.__dask_graph__())
    assert graph[appended.key].func is layers.commit_metadata  # the shape commit and the refresh: one final task
    assert appended.compute(scheduler="threads", num_workers=4) == (9, 3)
    assert listed(store)["x"].shape == (9, 3)


def test_return_stored_reads_back_after_the_refresh() -> None:
    store = MemoryStore()
    consolidated_store(store, 3)
    data = reference_data((9, 5), seed=4)
    stored = zarr_dask.to_zarr(da.from_array(data, chunks=4), store, component="a/s", chunks=3, return_stored=True,
                               compute=False)  # fmt: skip
    np.testing.assert_array_equal(stored[:4].compute(), data[:4])  # any part of it completes the write
    assert listed(store)["a/s"].shape == (9, 5) and zarr_dask.check_consolidated(store) == []


class SlowDocsStore(LocalStore):
    """A LocalStore whose batched reads of group documents are slow: final tasks computed at the same time
    overlap, so an unguarded read-modify-write of the root document would lose entries."""

    def __reduce__(self) -> Any:
        return (SlowDocsStore, (self.root,))

    def with_read_only(self, read_only: bool = True) -> SlowDocsStore:
        return self

    def _config(self) -> Any:
        return (*super()._config(), "slow-docs")

    def get_many(self, keys: Sequence[str]) -> dict[str, bytes]:
        if "zarr.json" in keys or ".zmetadata" in keys:
            time.sleep(0.05)
        return super().get_many(keys)


def many_lazy_writes(store: Any, n: int, fmt: int) -> list[Any]:
    writes = [zarr_dask.to_zarr(da.ones(4, chunks=2) * i, store, component=f"v/{i}", chunks=2, zarr_format=fmt,
                                compute=False) for i in range(n)]  # fmt: skip
    writes.append(zarr_dask.append(da.ones((2, 3), chunks=1), store, component="x", compute=False))
    return writes


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.filterwarnings("ignore:Computing mixed collections:UserWarning")  # dask array-expr: an Array and a Delayed computed together
def test_lazy_writes_computed_together_lose_no_entry(tmp_path: Path, fmt: int) -> None:
    store = SlowDocsStore(tmp_path / "s.zarr")
    consolidated_store(store, fmt)
    dask.compute(*many_lazy_writes(store, 6, fmt), scheduler="threads", num_workers=8)
    assert {f"v/{i}" for i in range(6)} <= set(listed(store)) and listed(store)["x"].shape == (7, 3)
    assert zarr_dask.check_consolidated(store) == []


def test_the_cluster_lock_is_only_taken_on_a_distributed_worker() -> None:
    lock = layers._cluster_lock(MemoryStore())
    assert type(lock).__name__ == "nullcontext"


# ------------------------------------------------------------------------------------- group attributes
@pytest.mark.parametrize("fmt", FORMATS)
def test_group_attributes_keep_consolidated_metadata_fresh(fmt: int) -> None:
    store = MemoryStore()
    consolidated_store(store, fmt)
    root = zarr_dask.open_group(store)  # holds the consolidated metadata as it is now
    zarr_dask.append(da.ones((1, 3), chunks=1), store, component="x")  # refreshes it in the store
    root.attrs["title"] = "new"  # must not write back the copy it opened with
    assert listed(store)["x"].shape == (6, 3) and root["x"].shape == (6, 3)
    zarr_dask.open_group(store, path="a").attrs["k"] = 1
    assert listed(store)["a"].attributes == {"k": 1}
    assert zarr_dask.open_group(store, mode="r").attrs["title"] == "new"
    assert zarr_dask.check_consolidated(store) == []


# ------------------------------------------------------------------------------------- check_consolidated
@pytest.mark.parametrize("fmt", FORMATS)
def test_check_finds_stale_missing_and_extra_entries_with_one_listing(fmt: int) -> None:
    store = MemoryStore()
    consolidated_store(store, fmt)
    other_tool_creates(store, "a/later", shape=(2,), dtype="i1", zarr_format=fmt)
    store.delete_prefix("a/y/")
    meta = zarr_dask.open_array(store, path="x").metadata
    store.set_many(nodes.documents("x", dataclasses.replace(meta, shape=(8, 3))))
    get_many = CallCounter()
    store.get_many = get_many.wrap(store.get_many)  # type: ignore[method-assign]
    with store.counters.counting() as delta:
        found = zarr_dask.check_consolidated(store)
    assert delta["list"] == 1 and get_many.calls == 1 and delta["set"] == 0
    assert [(m.path, m.kind) for m in found] == [("a/later", "missing"), ("a/y", "extra"), ("x", "stale")]
    assert found[0].detail == "an array of shape (2,), not listed"
    assert found[1].detail == "listed as an array of shape (4,), but there is no such node (deleted?)"
    assert found[2].detail.startswith("shape [5, 3] in the consolidated metadata, [8, 3] in its own documents")


def test_check_nested_holders_other_formats_and_nothing_consolidated() -> None:
    store = MemoryStore()
    zarr_dask.create_group(store)
    zarr_dask.create_array(store, name="g/x", shape=(3,), dtype="i1")
    assert zarr_dask.check_consolidated(store) == []  # nothing consolidated: nothing stale
    zarr_dask.consolidate_metadata(store, path="g")
    other_tool_creates(store, "g/v2", shape=(3,), dtype="i1", zarr_format=2)  # readers of v3 ignore it
    other_tool_creates(store, "g/y", shape=(3,), dtype="i1")
    assert [(m.group, m.path, m.kind) for m in zarr_dask.check_consolidated(store)] == [("g", "g/y", "missing")]
    assert [m.path for m in zarr_dask.check_consolidated(store, "g")] == ["g/y"]
    zarr_dask.to_zarr(da.ones(5, chunks=2), store, component="g/y", overwrite=True)  # refreshes the holder g
    assert zarr_dask.check_consolidated(store) == []
    with pytest.raises(GroupNotFoundError, match="no group or array here"):
        zarr_dask.check_consolidated(store, "nothing")


def test_a_node_turned_into_the_other_kind_is_named() -> None:
    store = MemoryStore()
    consolidated_store(store, 3)
    store.delete_prefix("a/")
    other_tool_creates(store, "a", shape=(1,), dtype="i1")
    [m] = [m for m in zarr_dask.check_consolidated(store) if m.path == "a"]
    assert m.detail == "a group in the consolidated metadata, an array in its own documents"


def test_a_broken_consolidated_document_names_store_and_group() -> None:
    store = MemoryStore()
    consolidated_store(store, 2)
    store.set(".zmetadata", b'{"metadata": {}, "zarr_consolidated_format": 7}')
    with pytest.raises(MetadataError, match="zarr_consolidated_format") as e:
        zarr_dask.check_consolidated(store)
    assert e.value.store == store.url
    with pytest.raises(WriteConflictError, match="the append landed .*zarr_consolidated_format"):
        zarr_dask.append(da.ones((1, 3), chunks=1), store, component="x")


@pytest.mark.filterwarnings("ignore::zarr_dask.errors.UnprotectedWriteWarning")  # (the unconditional store's)
@pytest.mark.parametrize("kind", ["memory", "unconditional", pytest.param("s3", marks=pytest.mark.s3), *CLOUD_KINDS])
def test_an_append_whose_listing_failed_is_not_appended_twice(kind: str, request: pytest.FixtureRequest) -> None:
    """On memory and the object stores (moto S3, the GCS and Azure emulators), and on a store without
    conditional writes (HTTP, zip...): the record is written there too, and the re-run refused."""
    store: Any = {"memory": MemoryStore, "unconditional": UnconditionalStore}.get(kind, lambda: None)()
    if store is None:
        url, options = store_of_kind(request, kind)
        store = open_store(url, storage_options=options)
    consolidated_store(store, 3)
    before = zarr_dask.open_array(store, path="x").shape
    good = store.get("zarr.json")
    store.set("zarr.json", b'{"zarr_format": 3, "node_type": "group", "consolidated_metadata": {"kind": "x"}}')
    with pytest.raises(WriteConflictError) as e:  # the shape is committed, the listing is not
        zarr_dask.append(da.ones((2, 3), chunks=1), store, component="x")
    msg = str(e.value)
    assert f"rows {before[0]}:{before[0] + 2} along axis 0" in msg and "Do not run this append again" in msg
    assert "consolidate_metadata" in msg
    assert zarr_dask.open_array(store, path="x").shape == (before[0] + 2, 3)
    with pytest.raises(WriteConflictError, match="an earlier append to this array landed"):  # the re-run
        zarr_dask.append(da.ones((2, 3), chunks=1), store, component="x")
    assert zarr_dask.open_array(store, path="x").shape == (before[0] + 2, 3)  # not appended twice
    store.set("zarr.json", good)
    zarr_dask.consolidate_metadata(store)  # the repair the message names
    assert zarr_dask.append(da.ones((1, 3), chunks=1), store, component="x") == (before[0] + 3, 3)
    assert zarr_dask.check_consolidated(store) == [] and not store.exists("x/.zd-append-incomplete")


class _FailingListing(UnconditionalStore):
    """A store without conditional writes whose next write of the root document fails once."""

    fail = False

    def set_many(self, items: Any) -> None:
        if self.fail and "zarr.json" in items:
            self.fail = False
            raise OSError("the connection was reset")
        super().set_many(items)


def test_a_dataset_append_whose_listing_failed_is_not_appended_twice() -> None:
    xr = pytest.importorskip("xarray")
    store = _FailingListing()
    first = xr.Dataset({"v": (("t",), np.arange(3.0))}, coords={"t": np.arange(3)})
    zarr_dask.to_zarr_dataset(first, store, mode="w")
    more = xr.Dataset({"v": (("t",), np.arange(3.0, 5.0))}, coords={"t": np.arange(3, 5)})
    store.fail = True
    with pytest.raises(WriteConflictError, match="Do not run this append again"):
        zarr_dask.to_zarr_dataset(more, store, append_dim="t")
    with pytest.raises(WriteConflictError, match="an earlier append to this array landed"):  # the re-run: refused
        zarr_dask.to_zarr_dataset(more, store, append_dim="t")
    zarr_dask.consolidate_metadata(store)  # the repair the message names
    with xr.open_dataset(store, engine="zarr_dask") as ds:
        np.testing.assert_array_equal(ds["v"].values, np.arange(5.0))  # once, not twice
        np.testing.assert_array_equal(ds["t"].values, np.arange(5))


def test_public_names() -> None:
    assert zarr_dask.check_consolidated is core_consolidated.check_consolidated
    assert {"check_consolidated", "ConsolidatedMismatch"} <= set(zarr_dask.__all__)
