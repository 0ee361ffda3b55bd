"""Reading hierarchies: consolidated in one read, else level by level; implicit groups; round trips."""

from __future__ import annotations

import json
import threading
from collections import Counter
from typing import Any

import numpy as np
import pytest

import zarr_dask
from tests.zom._trees import tree, v3_tree, wide_tree
from zarr_dask.errors import (
    ArrayNotFoundError,
    GroupNotFoundError,
    InvalidPathError,
    MetadataError,
    NodeNotFoundError,
)
from zarr_dask.spec.json import canonical_json, loads
from zarr_dask.store import MemoryStore, Store, open_store
from zarr_dask.zom import ArraySpec, GroupSpec, from_store

DOCS = ("zarr.json", ".zarray", ".zgroup", ".zattrs")


def metadata_documents(store: Store) -> dict[str, str]:
    """Every node document of a store, as canonical JSON (consolidated metadata removed: it is a cache)."""
    out = {}
    for key in store.list_prefix(""):
        if key.rpartition("/")[2] in DOCS:
            doc = loads(store.get(key) or b"")
            if isinstance(doc, dict):
                doc.pop("consolidated_metadata", None)
            out[key] = canonical_json(doc)
    return out


class CallCounter:
    """Counts calls of a store's batched methods (not keys) and the largest number of listings in flight."""

    def __init__(self, store: Store) -> None:
        self.calls: Counter[str] = Counter()
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        for name in ("get_many", "list_dir", "list_prefix", "set_many", "set_if_not_exists", "delete_prefix",
                     "set_if_unchanged"):  # fmt: skip
            if hasattr(store, name):
                setattr(store, name, self._wrap(name, getattr(store, name)))

    def _wrap(self, name: str, method: Any) -> Any:
        def counted(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                self.calls[name] += 1
                self.in_flight += 1
                self.max_in_flight = max(self.max_in_flight, self.in_flight)
            try:
                return method(*args, **kwargs)
            finally:
                with self._lock:
                    self.in_flight -= 1

        return counted


@pytest.mark.parametrize("fmt", [2, 3])
def test_round_trip_store_spec_json_spec_store(any_store_url, tmp_path, fmt):
    """store -> spec -> JSON -> spec -> new store: identical metadata (v3 with sharding and rectilinear)."""
    url, options = any_store_url
    source = open_store(url, storage_options=options)
    tree(fmt).to_store(source)
    if fmt == 3:  # data in the sharded array: chunks do not disturb the hierarchy
        zarr_dask.open_array(source, path="sharded")[:8, :8] = np.arange(64, dtype="u2").reshape(8, 8)
    spec = GroupSpec.from_store(source)
    assert spec == tree(fmt)
    text = json.dumps(spec.to_json())
    again = GroupSpec.from_json(text)
    target = MemoryStore()
    again.to_store(target)
    assert metadata_documents(target) == metadata_documents(source)
    assert GroupSpec.from_store(target) == spec


@pytest.mark.parametrize("fmt", [2, 3])
def test_consolidated_metadata_is_one_read(fmt):
    store = MemoryStore()
    tree(fmt).to_store(store, consolidated=True)
    calls = CallCounter(store)
    spec = from_store(store)
    assert spec == tree(fmt)
    assert calls.calls == Counter({"get_many": 1})
    limited = from_store(store, depth=1)
    assert isinstance(limited, GroupSpec) and limited["obs" if fmt == 3 else "sub"].members is None


def test_unconsolidated_walk_is_one_listing_per_group_and_one_read_per_level():
    store = MemoryStore()
    v3_tree().to_store(store)
    store.counters.reset()
    calls = CallCounter(store)
    assert from_store(store) == v3_tree()
    # levels: root doc | root's children | obs's children | deep's children | leaf (empty listing)
    assert calls.calls == Counter({"get_many": 4, "list_dir": 4})
    assert store.counters.snapshot()["get"] == 5 + 4 + 3 + 1  # root candidates, then one zarr.json per child


def test_listings_of_one_level_run_concurrently(memory_url):
    from zarr_dask.testing.latency import latency_store

    store = latency_store(memory_url, seconds=0.05)
    wide_tree(12, 1).to_store(store)
    calls = CallCounter(store)
    assert from_store(store) == wide_tree(12, 1)
    assert calls.calls["list_dir"] == 13 and calls.calls["get_many"] == 3
    assert calls.max_in_flight > 1


def test_depth_limits_and_unknown_members():
    store = MemoryStore()
    v3_tree().to_store(store)
    root = from_store(store, depth=0)
    assert isinstance(root, GroupSpec) and root.members is None and root.attributes == v3_tree().attributes
    one = from_store(store, depth=1)
    assert isinstance(one, GroupSpec) and one["obs"].members is None and one["rect"] == v3_tree()["rect"]
    two = from_store(store, depth=2)
    assert two["obs/deep"].members is None and two["obs/temp"] == v3_tree()["obs/temp"]
    assert from_store(store, depth=-1) == v3_tree()
    with pytest.raises(MetadataError, match="depth must be"):
        from_store(store, depth=-2)


def _write_docs(store: Store, paths: dict[str, ArraySpec | GroupSpec]) -> None:
    for path, node in paths.items():
        prefix = path + "/" if path else ""
        store.set_many({prefix + k: v for k, v in node.metadata.to_documents().items()})


def test_implicit_groups_are_included_and_marked():
    array = ArraySpec.from_array(np.zeros(3, "i2"))
    store = MemoryStore()
    _write_docs(store, {"a/b/c": array, "a/x": GroupSpec(attributes={"k": 1}), "d": array})
    store.set("a/stray/chunk", b"not a node")  # a directory without any node below: not a group
    spec = from_store(store)
    assert isinstance(spec, GroupSpec) and spec.implicit
    assert spec["a"].implicit and spec["a/b"].implicit and spec["a/b/c"] == array
    assert spec["a/x"].attributes == {"k": 1} and "a/stray" not in spec
    assert from_store(store, path="a/b")["c"] == array
    shallow = from_store(store, depth=1)
    assert shallow["a"].implicit and shallow["a"].members is None
    assert from_store(store, depth=0).implicit


def test_implicit_v2_groups_and_other_formats_are_invisible():
    store = MemoryStore()
    v2_array = ArraySpec.build(zarr_format=2, shape=(2,), dtype="i1")
    _write_docs(store, {"p/q": v2_array, "": GroupSpec(zarr_format=2)})
    _write_docs(store, {"v3node": GroupSpec()})  # a v3 node inside a v2 hierarchy
    spec = from_store(store)
    assert spec.zarr_format == 2 and spec["p"].implicit and spec["p/q"] == v2_array and "v3node" not in spec


def test_errors():
    store = MemoryStore()
    with pytest.raises(GroupNotFoundError, match="no array or group here"):
        from_store(store)
    v3_tree().to_store(store)
    with pytest.raises(NodeNotFoundError, match="use_consolidated=True"):
        from_store(store, use_consolidated=True)
    with pytest.raises(GroupNotFoundError, match="holds an array"):
        GroupSpec.from_store(store, path="rect")
    with pytest.raises(ArrayNotFoundError, match="a group found"):
        ArraySpec.from_store(store, path="obs")
    with pytest.raises(InvalidPathError):
        from_store(store, path="../x")
    assert ArraySpec.from_store(store, path="obs/temp") == v3_tree()["obs/temp"]
    assert from_store(store, path="rect") == v3_tree()["rect"]


def test_use_consolidated_false_lists_the_store():
    store = MemoryStore()
    v3_tree().to_store(store, consolidated=True)
    GroupSpec().to_store(store, path="late")  # not in the (stale) consolidated metadata of the root
    assert "late" in from_store(store, use_consolidated=False)
    assert from_store(store, use_consolidated=True)["late"] == GroupSpec()  # to_store refreshed the cache
