"""to_store: one write per document in one batch, idempotent, refusing conflicts before writing anything."""

from __future__ import annotations

import json
import multiprocessing
import pickle
from pathlib import Path

import numpy as np
import pytest

import zarr_dask
from tests.zom._trees import tree, v3_tree, wide_tree
from tests.zom.test_io import CallCounter, metadata_documents
from zarr_dask.errors import ContainsArrayError, MetadataError, NodeExistsError, ReadOnlyError
from zarr_dask.store import MemoryStore, Store, open_store
from zarr_dask.zom import ArraySpec, GroupSpec, HierarchyConflictError, from_store
from zarr_dask.zom.write import write_spec


def snapshot(store: Store) -> dict[str, bytes]:
    return {key: store.get(key) or b"" for key in store.list_prefix("")}


def test_every_document_is_written_once_in_one_batch(any_store_url):
    url, options = any_store_url
    store = open_store(url, storage_options=options)
    spec = v3_tree()
    calls = CallCounter(store)
    report = spec.to_store(store)
    # one batch of creates (conditional where the store can: a node another writer makes meanwhile is kept)
    assert calls.calls["set_many"] + calls.calls["set_if_unchanged"] == 1 and calls.calls["get_many"] == 1
    assert store.counters.snapshot()["set"] == len(report.written) == len(spec.to_flat())
    assert set(report.created) == {p.lstrip("/") for p in spec.to_flat()}
    assert from_store(store) == spec


@pytest.mark.parametrize("fmt", [2, 3])
def test_rerun_is_a_no_op(fmt):
    store = MemoryStore()
    tree(fmt).to_store(store)
    store.counters.reset()
    report = tree(fmt).to_store(store)
    counts = store.counters.snapshot()
    assert counts["set"] == 0 and counts["delete"] == 0 and not report.changed
    assert set(report.unchanged) == {p.lstrip("/") for p in tree(fmt).to_flat()}


def test_equal_metadata_with_other_bytes_is_not_rewritten():
    store = MemoryStore()
    spec = v3_tree()
    spec.to_store(store)
    compact = json.dumps(json.loads(store.get("obs/zarr.json") or b"")).encode()  # another writer's formatting
    store.set("obs/zarr.json", compact)
    store.counters.reset()
    assert not spec.to_store(store).changed and store.get("obs/zarr.json") == compact


def test_conflicts_are_refused_listing_each_one_and_nothing_is_written():
    store = MemoryStore()
    v3_tree().to_store(store)
    zarr_dask.open_array(store, path="obs/temp")[...] = 1.0
    before = snapshot(store)
    changed = GroupSpec(
        attributes={"title": "other"},
        members={
            "obs": GroupSpec(attributes={"site": "x"}, members={
                "temp": ArraySpec.from_array(np.zeros((5, 4), "f4"), chunks=(2, 4)),
                "names": GroupSpec(),
                "new": GroupSpec(),
            }),
            "rect": GroupSpec(zarr_format=3),
        },
    )  # fmt: skip
    with pytest.raises(HierarchyConflictError) as info:
        changed.to_store(store)
    err = info.value
    assert isinstance(err, NodeExistsError) and isinstance(err, FileExistsError)
    rows = {(d.path, d.field) for d in err.conflicts}
    assert rows == {
        ("/", "attributes.title"),
        ("/", "attributes.nested"),
        ("/obs/temp", "data_type"),
        ("/obs/temp", "dimension_names"),
        ("/obs/names", "node"),
        ("/rect", "node"),
    }
    message = str(err)
    assert "4 existing node(s) differ from the spec, so nothing was written" in message
    assert "overwrite=True" in message and "existing" in message.splitlines()[1]
    assert '/obs/temp   data_type          "float64"' in message
    assert snapshot(store) == before  # not even the new group "obs/new"
    again = pickle.loads(pickle.dumps(err))
    assert isinstance(again, HierarchyConflictError) and again.conflicts == err.conflicts


def test_v2_node_where_v3_is_written_and_unreadable_documents_are_conflicts():
    store = MemoryStore()
    GroupSpec(zarr_format=2).to_store(store, path="g")
    store.set("bad/zarr.json", b"{not json")
    spec = GroupSpec(members={"g": GroupSpec(), "bad": GroupSpec()})
    with pytest.raises(HierarchyConflictError) as info:
        spec.to_store(store)
    rows = {(d.path, d.field): (d.left, d.right) for d in info.value.conflicts}
    assert rows[("/g", "zarr_format")] == (2, 3)
    assert rows[("/bad", "document")][0].startswith("unreadable: ")
    spec.to_store(store, overwrite=True)
    assert from_store(store) == spec
    assert not store.exists("g/.zgroup") and not store.exists("g/.zattrs")


def test_overwrite_keeps_chunks_for_attribute_changes_only():
    store = MemoryStore()
    spec = v3_tree()
    spec.to_store(store)
    temp = zarr_dask.open_array(store, path="obs/temp")
    temp[...] = np.arange(20.0).reshape(5, 4)
    chunk_keys = [k for k in store.list_prefix("obs/temp") if "/c/" in k]
    assert chunk_keys
    renamed = spec["obs/temp"].replace(attributes={"units": "K"}, dimension_names=("a", "b"))
    report = renamed.to_store(store, path="obs/temp", overwrite=True)
    assert report.replaced == ("obs/temp",)
    np.testing.assert_array_equal(zarr_dask.open_array(store, path="obs/temp")[...], np.arange(20.0).reshape(5, 4))
    reshaped = renamed.replace(shape=(6, 4))
    reshaped.to_store(store, path="obs/temp", overwrite=True)
    assert [k for k in store.list_prefix("obs/temp") if "/c/" in k] == []
    GroupSpec(members={"x": GroupSpec()}).to_store(store, path="obs", overwrite=True)  # group attributes only
    assert store.exists("obs/temp/zarr.json") and from_store(store, path="obs")["x"] == GroupSpec()
    spec["rect"].to_store(store, path="obs", overwrite=True)  # a group replaced by an array: subtree gone
    assert [k for k in store.list_prefix("obs")] == ["obs/zarr.json"]


def test_groups_with_unknown_members_are_written_alone():
    store = MemoryStore()
    v3_tree().to_store(store)
    before = {k: v for k, v in snapshot(store).items() if k.startswith("obs/")}
    GroupSpec(attributes={"site": "x"}, members=None).to_store(store, path="obs")
    assert {k: v for k, v in snapshot(store).items() if k.startswith("obs/")} == before
    with pytest.raises(HierarchyConflictError):
        GroupSpec(attributes={"site": "y"}, members=None).to_store(store, path="obs")


def test_parents_are_created_without_touching_existing_ones():
    store = MemoryStore()
    GroupSpec(attributes={"keep": 1}).to_store(store)
    report = GroupSpec(members={"x": GroupSpec()}).to_store(store, path="a/b")
    assert report.written == ("a/b/x/zarr.json", "a/b/zarr.json", "a/zarr.json")
    assert from_store(store).attributes == {"keep": 1}
    assert from_store(store)["a/b/x"] == GroupSpec()
    v3_tree()["rect"].to_store(store, path="arr")
    before = snapshot(store)
    with pytest.raises(ContainsArrayError, match="ancestor '/arr' is an array"):
        GroupSpec().to_store(store, path="arr/sub/x")
    assert snapshot(store) == before


def test_consolidated_metadata_written_refreshed_and_idempotent():
    store = MemoryStore()
    spec = v3_tree()
    spec.to_store(store)
    GroupSpec(attributes={"pre": True}).to_store(store, path="existing")  # a node the spec does not mention
    spec.to_store(store, consolidated=True)
    group = zarr_dask.open_group(store)
    assert group.consolidated_metadata is not None
    assert set(group.consolidated_metadata.nodes) == {p.lstrip("/") for p in spec.to_flat() if p} | {"existing"}
    store.counters.reset()
    assert not spec.to_store(store, consolidated=True).changed and store.counters.snapshot()["set"] == 0
    assert not spec.to_store(store).changed  # an up-to-date consolidated root is left as it is
    GroupSpec().to_store(store, path="obs/late")
    assert "obs/late" in zarr_dask.open_group(store).consolidated_metadata.nodes  # type: ignore[union-attr]


def test_v2_consolidated_metadata():
    store = MemoryStore()
    spec = tree(2)
    report = spec.to_store(store, consolidated=True)
    assert ".zmetadata" in report.written
    assert from_store(store, use_consolidated=True) == spec
    GroupSpec(zarr_format=2, attributes={"n": 1}).to_store(store, path="sub/more")
    assert from_store(store, use_consolidated=True)["sub/more"].attributes == {"n": 1}


def test_refusals_before_writing():
    store = MemoryStore()
    with pytest.raises(ReadOnlyError):
        v3_tree().to_store(store.with_read_only())
    with pytest.raises(MetadataError, match="belongs to a group"):
        write_spec(v3_tree()["rect"], store, consolidated=True)
    with pytest.raises(MetadataError, match="writes an ArraySpec or a GroupSpec"):
        write_spec({"zarr_format": 3}, store)  # type: ignore[arg-type]
    assert snapshot(store) == {}


def test_implicit_groups_are_written_as_groups():
    store = MemoryStore()
    spec = GroupSpec.from_flat({"/a/b": ArraySpec.from_array(np.zeros(2))})
    spec.to_store(store)
    assert from_store(store) == spec.with_explicit_groups()


def test_thousand_nodes_on_a_latency_store_one_write_per_document(memory_url):
    from zarr_dask.testing.latency import latency_store

    store = latency_store(memory_url, seconds=0.005)
    spec = wide_tree(40, 24)  # 1 + 40 * 25 = 1001 nodes
    assert len(spec.to_flat()) == 1001
    calls = CallCounter(store)
    report = spec.to_store(store)
    counts = store.counters.snapshot()
    assert counts["set"] == len(report.written) == 1001
    assert calls.calls["set_many"] + calls.calls["set_if_unchanged"] == 1
    assert counts["get"] == 3 * 1001 and calls.calls["get_many"] == 1
    assert counts["list"] == counts["delete"] == counts["exists"] == 0


# ------------------------------------------------------------------------------------------------ concurrency
def _write_in_process(args: tuple[str, str, object]) -> tuple[str, ...]:
    path, text, barrier = args
    spec = GroupSpec.from_json(text)
    barrier.wait(timeout=60)  # type: ignore[attr-defined]
    return spec.to_store(path).created


@pytest.mark.parametrize("fmt", [3, 2])
def test_two_processes_writing_the_same_hierarchy_both_succeed(tmp_path: Path, fmt: int):
    """Writing the same spec twice at once is idempotent, also in v2, where a node is two documents that the
    other writer may find half written (``.zarray`` there, ``.zattrs`` not yet): five rounds."""
    spec = wide_tree(10, 19, zarr_format=fmt)  # 201 nodes
    text = json.dumps(spec.to_json())
    context = multiprocessing.get_context("spawn")
    with context.Manager() as manager, context.Pool(2) as pool:
        for round_ in range(5):
            barrier = manager.Barrier(2)
            created = pool.map(_write_in_process, [(str(tmp_path / f"h{round_}.zarr"), text, barrier)] * 2)
            assert len(created) == 2
    store = open_store(str(tmp_path / "h4.zarr"))
    assert from_store(store) == spec
    assert not any(key.endswith(".zd-tmp") for key in store.list_prefix(""))
    reference = MemoryStore()
    spec.to_store(reference)
    assert metadata_documents(store) == metadata_documents(reference)
