"""The Store contract, run against every store: MemoryStore, LocalStore, FsspecStore on memory:// and S3."""

from __future__ import annotations

import pickle
import threading
from typing import Any

import pytest
from dask.base import tokenize

from zarr_dask.errors import InvalidPathError, ReadOnlyError
from zarr_dask.store import MemoryStore, Store, open_store
from zarr_dask.store.arena import read_arena

DATA = bytes(range(256)) * 4  # 1024 bytes


@pytest.fixture
def store(any_store_url: tuple[Any, dict[str, Any] | None]) -> Store:
    url_or_store, options = any_store_url
    return open_store(url_or_store, storage_options=options)


@pytest.fixture
def filled(store: Store) -> Store:
    store.set_many(
        {
            "zarr.json": b"{}",
            "a/zarr.json": b"{}",
            "a/c/0/0": DATA,
            "a/c/0/1": b"01",
            "a/c/1/0": b"10",
            "ab/zarr.json": b"{}",
            "b/.zattrs": b"{}",
        }
    )
    return store


# --------------------------------------------------------------------------------------------- get/set
def test_set_get_roundtrip(store: Store) -> None:
    store.set("a/b/c", b"value")
    assert store.get("a/b/c") == b"value"
    store.set("a/b/c", b"new")
    assert store.get("a/b/c") == b"new"


@pytest.mark.parametrize("value", [b"", b"\x00\xff" * 10, bytearray(b"ba"), memoryview(b"mv")])
def test_set_accepts_bytes_like_and_returns_bytes(store: Store, value: Any) -> None:
    store.set("k", value)
    got = store.get("k")
    assert type(got) is bytes
    assert got == bytes(value)


def test_get_missing_is_none(store: Store) -> None:
    assert store.get("missing") is None
    assert store.get("missing/deeper/key") is None


def test_get_of_a_directory_is_none(filled: Store) -> None:
    assert filled.get("a/c") is None
    assert not filled.exists("a/c")


def test_keys_are_case_sensitive_and_unicode(store: Store) -> None:
    store.set("Ä/ü.json", b"u")
    store.set("k", b"lower")
    store.set("K", b"upper")
    assert store.get("Ä/ü.json") == b"u"
    assert (store.get("k"), store.get("K")) == (b"lower", b"upper")
    assert store.list_dir("Ä") == (["ü.json"], [])


def test_keys_with_glob_characters_are_literal(store: Store) -> None:
    keys = {"g[1]/x*": b"1", "g[1]/y?": b"2", "g[1]/z": b"3"}
    store.set_many(keys)
    assert store.get_many([*keys, "g[1]/*"]) == keys
    assert store.get_ranges([("g[1]/x*", 0, None)]) == [b"1"]
    assert store.list_prefix("g[1]") == sorted(keys)
    store.delete_many(["g[1]/x*", "g[1]/y?"])
    assert store.list_prefix("") == ["g[1]/z"]


# -------------------------------------------------------------------------------------------- get_many
def test_get_many(filled: Store) -> None:
    got = filled.get_many(["a/c/0/0", "missing", "a/c/0/1", "a/c/0/1", "a/nope/x"])
    assert got == {"a/c/0/0": DATA, "a/c/0/1": b"01"}
    assert filled.get_many([]) == {}
    assert filled.get_many(["missing"]) == {}


# ------------------------------------------------------------------------------------------ get_ranges
RANGES = [
    (0, 10),
    (10, 20),
    (-10, None),  # suffix
    (-5000, None),  # suffix longer than the value
    (None, None),
    (None, 5),
    (1000, None),
    (1000, 5000),  # end past the value
    (1024, None),  # start at the end
    (5000, None),  # start past the end
    (3000, 4000),
    (5, 5),  # empty
    (10, 2),  # end before start
    (-10, -2),  # negative end
    (100, -900),
    (-30, 1010),  # negative start with an end
]


@pytest.mark.parametrize(("start", "end"), RANGES)
def test_get_ranges_matches_python_slicing(filled: Store, start: int | None, end: int | None) -> None:
    assert filled.get_ranges([("a/c/0/0", start, end)]) == [DATA[start:end]]


def test_get_ranges_batch_keeps_order_and_reports_missing(filled: Store) -> None:
    requests = [(key, start, end) for start, end in RANGES for key in ("a/c/0/0", "missing")]
    got = filled.get_ranges(requests)
    expected = [DATA[s:e] if key == "a/c/0/0" else None for key, s, e in requests]
    assert got == expected
    assert filled.get_ranges([]) == []


def test_get_ranges_into_arena_memory_match_get_ranges(filled: Store) -> None:
    requests = [(key, start, end) for start, end in RANGES for key in ("a/c/0/0", "missing")]
    with read_arena() as arena:
        got = filled.get_ranges_into(requests, arena)
        assert [None if g is None else bytes(g) for g in got] == filled.get_ranges(requests)
        many = filled.get_many_into(["a/c/0/0", "missing", "a/c/0/1", "a/c/0/1"], arena)
        assert {k: bytes(v) for k, v in many.items()} == {"a/c/0/0": DATA, "a/c/0/1": b"01"}
        assert bytes(got[0] or b"") == DATA[0:10]  # still valid after later reads into the same arena
    with read_arena() as arena:
        assert filled.get_ranges_into([], arena) == [] and filled.get_many_into([], arena) == {}


def test_get_ranges_of_an_empty_value(store: Store) -> None:
    store.set("empty", b"")
    assert (
        store.get_ranges([("empty", 0, None), ("empty", -4, None), ("empty", 0, 10), ("empty", 3, 3)])
        == [b""] * 4
    )


def test_get_ranges_refuses_non_int_bounds(filled: Store) -> None:
    with pytest.raises(TypeError, match="start must be an int"):
        filled.get_ranges([("a/c/0/0", 1.5, None)])  # type: ignore[list-item]


# -------------------------------------------------------------------------------------------- setting
def test_set_many_then_get_many(store: Store) -> None:
    items = {f"arr/c/{i}": bytes([i]) * i for i in range(20)}
    store.set_many(items)
    assert store.get_many(list(items)) == items
    store.set_many({})


def test_set_if_not_exists(store: Store) -> None:
    assert store.set_if_not_exists("g/zarr.json", b"first") is True
    assert store.set_if_not_exists("g/zarr.json", b"second") is False
    assert store.get("g/zarr.json") == b"first"


def test_exists(filled: Store) -> None:
    assert filled.exists("a/zarr.json")
    assert filled.exists("b/.zattrs")
    assert not filled.exists("missing")
    assert not filled.exists("a")  # a prefix is not a key


# ---------------------------------------------------------------------------------------------- delete
def test_delete_and_delete_many(filled: Store) -> None:
    filled.delete("a/c/0/0")
    filled.delete("missing")
    filled.delete("a/c")  # a "directory": nothing happens
    assert filled.get("a/c/0/0") is None
    assert filled.get("a/c/0/1") == b"01"
    filled.delete_many(["a/c/0/1", "missing", "a/c/1/0"])
    filled.delete_many([])
    assert filled.list_prefix("a") == ["a/zarr.json"]
    assert filled.list_dir("a") == (["zarr.json"], [])  # emptied directories are not reported


def test_delete_prefix_leaves_siblings(filled: Store) -> None:
    filled.delete_prefix("a")
    assert filled.list_prefix("") == ["ab/zarr.json", "b/.zattrs", "zarr.json"]
    assert filled.list_dir("") == (["zarr.json"], ["ab", "b"])
    filled.delete_prefix("missing/prefix/")
    filled.delete_prefix("zarr.json")  # a key, not a prefix: nothing under it
    assert filled.get("zarr.json") == b"{}"


def test_delete_prefix_nested_and_trailing_slash(filled: Store) -> None:
    filled.delete_prefix("a/c/0/")
    assert filled.list_prefix("a") == ["a/c/1/0", "a/zarr.json"]
    assert filled.list_dir("a/c") == ([], ["1"])


def test_delete_prefix_root_empties_the_store(filled: Store) -> None:
    filled.delete_prefix("")
    assert filled.list_prefix("") == []
    assert filled.list_dir("") == ([], [])
    filled.set("again", b"1")  # the store is still usable
    assert filled.list_prefix("") == ["again"]


# --------------------------------------------------------------------------------------------- listing
def test_list_prefix(filled: Store) -> None:
    everything = ["a/c/0/0", "a/c/0/1", "a/c/1/0", "a/zarr.json", "ab/zarr.json", "b/.zattrs", "zarr.json"]
    assert filled.list_prefix("") == everything
    assert filled.list_prefix("a") == ["a/c/0/0", "a/c/0/1", "a/c/1/0", "a/zarr.json"]
    assert filled.list_prefix("a/") == filled.list_prefix("a")
    assert filled.list_prefix("a/c/0") == ["a/c/0/0", "a/c/0/1"]
    assert filled.list_prefix("missing") == []
    assert filled.list_prefix("zarr.json") == []


def test_list_prefix_sizes(filled: Store) -> None:
    assert filled.list_prefix_sizes("a/c") == {"a/c/0/0": 1024, "a/c/0/1": 2, "a/c/1/0": 2}
    assert filled.list_prefix_sizes("missing") == {}


def test_list_dir(filled: Store) -> None:
    assert filled.list_dir("") == (["zarr.json"], ["a", "ab", "b"])
    assert filled.list_dir("a") == (["zarr.json"], ["c"])
    assert filled.list_dir("a/") == (["zarr.json"], ["c"])
    assert filled.list_dir("a/c") == ([], ["0", "1"])
    assert filled.list_dir("a/c/0") == (["0", "1"], [])
    assert filled.list_dir("b") == ([".zattrs"], [])
    assert filled.list_dir("missing") == ([], [])
    assert filled.list_dir("zarr.json") == ([], [])


def test_empty_store_lists_nothing(store: Store) -> None:
    assert store.list_prefix("") == []
    assert store.list_dir("") == ([], [])


# ------------------------------------------------------------------------------------------- read-only
def test_read_only_refuses_every_write(filled: Store) -> None:
    ro = filled.with_read_only()
    assert ro.read_only and not filled.read_only
    writes = [
        lambda: ro.set("x", b"1"),
        lambda: ro.set_many({"x": b"1"}),
        lambda: ro.set_if_not_exists("x", b"1"),
        lambda: ro.delete("zarr.json"),
        lambda: ro.delete_many(["zarr.json"]),
        lambda: ro.delete_prefix(""),
        lambda: ro.delete_prefix("a"),
    ]
    for write in writes:
        with pytest.raises(ReadOnlyError, match="read-only.*read_only=False") as info:
            write()
        assert filled.url in str(info.value)
    assert ro.get("a/c/0/1") == b"01"  # reads still work, the data is untouched
    assert ro.list_prefix("") == filled.list_prefix("")
    assert ro.with_read_only(False).set("x", b"1") is None
    assert filled.get("x") == b"1"


def test_open_store_read_only(any_store_url: tuple[Any, dict[str, Any] | None]) -> None:
    url_or_store, options = any_store_url
    ro = open_store(url_or_store, storage_options=options, read_only=True)
    assert ro.read_only
    with pytest.raises(ReadOnlyError):
        ro.set("x", b"1")
    assert open_store(ro).read_only  # a read-only store is never made writable again


# --------------------------------------------------------------------------------- pickling and tokens
def test_pickle_roundtrip_reads_the_same_data(filled: Store) -> None:
    filled.get("zarr.json")
    clone = pickle.loads(pickle.dumps(filled))
    assert type(clone) is type(filled)
    assert clone == filled and hash(clone) == hash(filled)
    assert clone.url == filled.url and clone.read_only == filled.read_only
    assert clone.counters.snapshot()["get"] == 0  # counters are not pickled
    assert clone.get_many(filled.list_prefix("")) == filled.get_many(filled.list_prefix(""))
    ro_clone = pickle.loads(pickle.dumps(filled.with_read_only()))
    assert ro_clone.read_only


def test_memory_store_pickles_its_contents() -> None:
    store = MemoryStore(data={"k": b"v"})
    clone = pickle.loads(pickle.dumps(store))
    store.set("later", b"x")
    assert clone.get("k") == b"v" and clone.get("later") is None


def test_equality_hash_and_tokens_follow_configuration(store: Store) -> None:
    again = pickle.loads(pickle.dumps(store))
    assert store == again and hash(store) == hash(again)
    assert tokenize(store) == tokenize(again) == tokenize(store)
    ro = store.with_read_only()
    assert ro != store
    assert tokenize(ro) != tokenize(store)
    assert tokenize(ro) == tokenize(store.with_read_only())
    assert store != MemoryStore() and tokenize(store) != tokenize(MemoryStore())


def test_different_roots_differ(any_store_url: tuple[Any, dict[str, Any] | None]) -> None:
    url_or_store, options = any_store_url
    if isinstance(url_or_store, Store):
        other: Store = MemoryStore()
        store = url_or_store
    else:
        store = open_store(url_or_store, storage_options=options)
        other = open_store(url_or_store + "-other", storage_options=options)
    assert store != other
    assert tokenize(store) != tokenize(other)
    store.set("k", b"1")
    assert other.get("k") is None


# -------------------------------------------------------------------------------------------- counters
def test_request_counters(filled: Store) -> None:
    filled.counters.reset()
    with filled.counters.counting() as delta:
        filled.get_many(["a/c/0/1", "a/c/1/0", "missing"])
    assert delta["get"] == 3
    assert delta["bytes_read"] == 4
    with filled.counters.counting() as delta:
        filled.get_ranges([("a/c/0/0", 0, 10), ("a/c/0/0", -4, None), ("missing", 0, 1)])
        filled.set_many({"n/1": b"abc", "n/2": b"de"})
        filled.exists("zarr.json")
        filled.list_dir("")
        filled.delete_many(["n/1", "n/2"])
    assert delta["get_range"] == 3
    assert delta["bytes_read"] == 14
    assert delta["set"] == 2 and delta["bytes_written"] == 5
    assert delta["exists"] == 1 and delta["list"] == 1 and delta["delete"] == 2
    assert filled.counters.snapshot()["get"] == 3
    filled.counters.reset()
    assert set(filled.counters.snapshot().values()) == {0}


# ------------------------------------------------------------------------------------ path traversal
BAD_KEYS = [
    "../x",
    "a/../../x",
    "/abs",
    "a\\b",
    "C:/x",
    "a/c:x",
    "a\x00b",
    "a\nb",
    "",
    "a//b",
    "a/",
    "./a",
    "a/.",
]


@pytest.mark.parametrize("key", BAD_KEYS)
def test_bad_keys_are_refused_everywhere(store: Store, key: str) -> None:
    calls = [
        lambda: store.get(key),
        lambda: store.get_many(["ok", key]),
        lambda: store.get_ranges([(key, 0, None)]),
        lambda: store.set(key, b"1"),
        lambda: store.set_many({"ok": b"1", key: b"1"}),
        lambda: store.set_if_not_exists(key, b"1"),
        lambda: store.delete(key),
        lambda: store.delete_many([key]),
        lambda: store.exists(key),
    ]
    for call in calls:
        with pytest.raises(InvalidPathError, match="invalid key") as info:
            call()
        assert store.url in str(info.value)
    assert store.list_prefix("") == []  # nothing was written, not even "ok" by set_many


@pytest.mark.parametrize("prefix", ["../x", "a/../..", "/abs", "a\\b", "C:", "a\x00", "a//b", "..", "/"])
def test_bad_prefixes_are_refused(store: Store, prefix: str) -> None:
    for call in (store.list_prefix, store.list_dir, store.delete_prefix, store.list_prefix_sizes):
        with pytest.raises(InvalidPathError, match="invalid prefix"):
            call(prefix)


# ------------------------------------------------------------------------------------------- threading
def test_threads_set_and_get_distinct_keys(store: Store) -> None:
    errors: list[BaseException] = []

    def work(worker: int) -> None:
        try:
            for i in range(10):
                key = f"t/{worker}/{i}"
                store.set(key, f"{worker}-{i}".encode())
                assert store.get(key) == f"{worker}-{i}".encode()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert len(store.list_prefix("t")) == 80
    assert store.counters.snapshot()["set"] == 80


def test_threads_delete_and_write_in_the_same_directory(store: Store) -> None:
    """A delete that removes an emptied directory must not break a concurrent write into it."""
    errors: list[BaseException] = []

    def churn(worker: int) -> None:
        try:
            for i in range(15):
                store.set(f"d/x/{worker}", b"1")
                store.delete(f"d/x/{worker}")
                store.set(f"d/x/{worker}-{i}", b"2")
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=churn, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert len(store.list_prefix("d")) == 60
