"""The latency filesystem: every request waits, batched requests overlap (like S3)."""

from __future__ import annotations

import pickle
import time

import fsspec
import pytest

from zarr_dask.errors import StoreError
from zarr_dask.store import open_store
from zarr_dask.testing.latency import LatencyFileSystem, latency_store

DELAY = 0.05


def _timed(func, tries=1):
    """``func()`` and the shortest of ``tries`` timings of it (a noisy machine only ever adds time)."""
    best = float("inf")
    for _ in range(tries):
        start = time.perf_counter()
        result = func()
        best = min(best, time.perf_counter() - start)
    return result, best


def test_a_batch_of_50_gets_costs_about_one_latency(memory_url):
    store = open_store(f"latency::{memory_url}", storage_options={"latency": {"seconds": DELAY}})
    keys = [f"k/{i}" for i in range(50)]
    _, put = _timed(lambda: store.set_many({k: b"%d" % i for i, k in enumerate(keys)}), tries=3)
    found, batched = _timed(lambda: store.get_many([*keys, "missing"]), tries=3)
    assert len(found) == 50 and found["k/7"] == b"7"
    _, one_by_one = _timed(lambda: [store.get(k) for k in keys[:5]])
    ranges, ranged = _timed(lambda: store.get_ranges([(k, 0, 1) for k in keys]), tries=3)
    assert ranges[3] == b"3"
    assert DELAY <= batched < 10 * DELAY and DELAY <= put < 10 * DELAY and DELAY <= ranged < 10 * DELAY
    assert one_by_one >= 5 * DELAY  # five round trips


def test_store_contract_on_memory_and_local(memory_url, tmp_path):
    for url in (memory_url, f"file://{tmp_path}/x"):
        store = latency_store(url, seconds=0.001)
        store.set_many({"a/b/c": b"1", "a/d": b"22", "e": b"333"})
        assert store.get("a/d") == b"22" and store.get("nope") is None and store.exists("e")
        assert store.list_prefix("") == ["a/b/c", "a/d", "e"]
        assert store.list_dir("") == (["e"], ["a"]) and store.list_dir("a") == (["d"], ["b"])
        assert store.get_ranges([("e", -2, None), ("a/d", 0, 1), ("zz", 0, 1)]) == [b"33", b"2", None]
        assert store.set_if_not_exists("e", b"x") is False and store.set_if_not_exists("f", b"x") is True
        store.delete("a/b/c")
        assert store.list_dir("a") == (["d"], [])  # no empty directory left, as on an object store
        store.delete_prefix("")
        assert store.list_prefix("") == []


def test_options_pickling_and_errors(memory_url, tmp_path):
    store = open_store(f"latency::file://{tmp_path}/deep", storage_options={"latency": {"seconds": 0}, "file": {"auto_mkdir": True}})
    store.set("x/y", b"1")
    assert (tmp_path / "deep" / "x" / "y").read_bytes() == b"1"
    again = pickle.loads(pickle.dumps(store))
    assert again == store and again.get("x/y") == b"1" and again.fs.seconds == 0
    fs = LatencyFileSystem(fsspec.filesystem("memory"), seconds=0.0)
    assert pickle.loads(pickle.dumps(fs)).seconds == 0.0
    with pytest.raises(StoreError, match="seconds must be a number >= 0"):
        LatencyFileSystem(fsspec.filesystem("memory"), seconds=-1)
    with pytest.raises(StoreError, match="needs an inner filesystem"):
        LatencyFileSystem()
    assert latency_store(memory_url, seconds=0.01).url == f"latency::{memory_url}"
