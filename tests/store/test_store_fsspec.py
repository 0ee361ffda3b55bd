"""FsspecStore specifics: one batched fsspec call per batch, S3 semantics, pickling, URL handling."""

from __future__ import annotations

import pickle
import zipfile
from pathlib import Path
from typing import Any

import fsspec
import pytest
from dask.base import tokenize

from tests.store._s3_calls import record_s3_calls
from zarr_dask.errors import StoreError
from zarr_dask.store import FsspecStore, MemoryStore, Store, fsspec_conditional, open_store, s3put
from zarr_dask.store import fsspec_store as fsspec_store_module


class _Spy:
    """Wrap one method of a filesystem instance and count its calls."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, fs: Any, name: str) -> None:
        self.calls: list[tuple[Any, ...]] = []
        real = getattr(fs, name)

        def spy(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(args)
            return real(*args, **kwargs)

        monkeypatch.setattr(fs, name, spy)


@pytest.fixture(params=["fsspec-memory", pytest.param("s3", marks=pytest.mark.s3)])
def fsspec_store(request: pytest.FixtureRequest) -> FsspecStore:
    if request.param == "s3":
        url = request.getfixturevalue("s3_bucket_url")
        options = request.getfixturevalue("s3_storage_options")
    else:
        url, options = request.getfixturevalue("memory_url"), None
    store = open_store(url, storage_options=options)
    assert isinstance(store, FsspecStore)
    return store


# ---------------------------------------------------------------------------------------- batching
def test_batches_are_one_fsspec_call(fsspec_store: FsspecStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZARR_DASK_REMOTE_TRANSPORT", "fsspec")  # obstore's reads: tests/store/test_obstore_reads.py
    fs = fsspec_store.fs
    pipe, cat = _Spy(monkeypatch, fs, "pipe"), _Spy(monkeypatch, fs, "cat")
    ranges, rm = _Spy(monkeypatch, fs, "cat_ranges"), _Spy(monkeypatch, fs, "rm")
    keys = [f"c/{i}" for i in range(12)]
    if fs.async_impl:  # one concurrent batch of puts on fsspec's loop (an error names its own key)
        puts, direct = _Spy(monkeypatch, fs, "_pipe_file"), s3put.stats()["direct"]
        batches = _Spy(monkeypatch, fsspec_store_module, "sync"), _Spy(monkeypatch, fsspec_conditional, "sync")
        fsspec_store.set_many({key: key.encode() for key in keys})
        sent = len(puts.calls) + s3put.stats()["direct"] - direct  # S3: direct PutObject requests (s3put)
        assert sent == 12 and sum(len(b.calls) for b in batches) == 1 and not pipe.calls
    else:
        fsspec_store.set_many({key: key.encode() for key in keys})
        assert len(pipe.calls) == 1
    got = fsspec_store.get_many([*keys, "missing"])
    assert got == {key: key.encode() for key in keys}
    assert len(cat.calls) == 1 and len(cat.calls[0][0]) == 13
    assert fsspec_store.get_ranges([(key, 0, 1) for key in keys]) == [b"c"] * 12
    assert len(ranges.calls) == 1
    fsspec_store.delete_many(keys)
    assert len(rm.calls) == 1
    assert fsspec_store.list_prefix("") == []


def test_glob_characters_do_not_glob(fsspec_store: FsspecStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZARR_DASK_REMOTE_TRANSPORT", "fsspec")
    fsspec_store.set_many({"a/x1": b"1", "a/x2": b"2", "a/x*": b"star"})
    ranges = _Spy(monkeypatch, fsspec_store.fs, "cat_ranges")
    assert fsspec_store.get_many(["a/x*", "a/x?"]) == {"a/x*": b"star"}
    assert len(ranges.calls) == 1  # literal whole-value ranges instead of fs.cat's glob expansion
    fsspec_store.delete("a/x*")
    assert fsspec_store.list_prefix("a") == ["a/x1", "a/x2"]


def test_set_if_not_exists_relies_on_create_mode(
    fsspec_store: FsspecStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If another writer creates the key between our exists check and our write, create mode refuses."""
    fsspec_store.set("zarr.json", b"theirs")
    monkeypatch.setattr(fsspec_store, "exists", lambda key: False)
    assert fsspec_store.set_if_not_exists("zarr.json", b"ours") is False
    assert fsspec_store.get("zarr.json") == b"theirs"


# --------------------------------------------------------------------------------------------- S3
@pytest.mark.s3
def test_s3_root_prefix_is_isolated_from_siblings(
    s3_bucket_url: str, s3_storage_options: dict[str, Any]
) -> None:
    store = open_store(s3_bucket_url, storage_options=s3_storage_options)
    sibling = open_store(s3_bucket_url + "2", storage_options=s3_storage_options)
    parent = open_store(s3_bucket_url.rsplit("/", 1)[0], storage_options=s3_storage_options)
    sibling.set("k", b"sibling")
    parent.set("root.zarr", b"a key named like the root")
    store.set_many({"k": b"mine", "g/k": b"mine"})
    assert store.list_prefix("") == ["g/k", "k"]
    assert store.list_dir("") == (["k"], ["g"])
    store.delete_prefix("")
    assert store.list_prefix("") == []
    assert sibling.get("k") == b"sibling"
    assert parent.get("root.zarr") == b"a key named like the root"
    assert parent.list_dir("") == (["root.zarr"], ["root.zarr2"])  # the bucket is still there


@pytest.mark.s3
def test_s3_errors_name_the_store_and_key(s3_server: str, s3_storage_options: dict[str, Any]) -> None:
    store = open_store("s3://no-such-bucket-zd/x.zarr", storage_options=s3_storage_options)
    assert store.get("k") is None  # reading from a missing bucket: missing keys
    with pytest.raises(StoreError, match="cannot write key 'k'") as info:
        store.set("k", b"1")
    assert "s3://no-such-bucket-zd/x.zarr" in str(info.value)
    assert info.value.__cause__ is not None


@pytest.mark.s3
def test_s3_pickle_carries_configuration_only(s3_bucket_url: str, s3_storage_options: dict[str, Any]) -> None:
    store = open_store(s3_bucket_url, storage_options=s3_storage_options)
    store.set("k", b"v")
    payload = pickle.dumps(store)
    assert b"S3FileSystem" not in payload and b"aiobotocore" not in payload
    clone = pickle.loads(payload)
    assert clone == store and clone.get("k") == b"v"
    assert store.url == s3_bucket_url


# --------------------------------------------------------------------------- construction and URLs
def test_store_from_a_filesystem_object(memory_url: str) -> None:
    fs = fsspec.filesystem("memory")
    path = memory_url.removeprefix("memory://")
    store = FsspecStore(fs, path)
    store.set("a/b", b"1")
    assert open_store(memory_url).get("a/b") == b"1"
    assert store.url == f"memory:///{path}"
    clone = pickle.loads(pickle.dumps(store))
    assert clone == store and clone.get("a/b") == b"1"
    assert tokenize(clone) == tokenize(store) != tokenize(FsspecStore(fs, path + "x"))
    assert FsspecStore(fs, f"memory://{path}/") == store  # protocol and trailing slash are stripped


def test_open_store_dispatch(memory_url: str) -> None:
    store = open_store(memory_url + "/")
    assert isinstance(store, FsspecStore) and store.url == memory_url
    assert open_store(store) is store
    mem = MemoryStore()
    assert open_store(mem) is mem and open_store(mem, read_only=True).read_only
    with pytest.raises(TypeError, match="storage_options"):
        open_store(mem, storage_options={"anon": True})
    with pytest.raises(TypeError, match="cannot open a store from int"):
        open_store(3)  # type: ignore[arg-type]
    with pytest.raises(StoreError, match="cannot open 'nosuchproto://x'"):
        open_store("nosuchproto://x")


def test_zip_chained_url_reads(tmp_path: Path) -> None:
    archive = tmp_path / "data.zarr.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("zarr.json", b"{}")
        zf.writestr("a/c/0", b"0123456789")
    store: Store = open_store(f"zip::file://{archive}", read_only=True)
    assert isinstance(store, FsspecStore)
    assert store.list_prefix("") == ["a/c/0", "zarr.json"]
    assert store.list_dir("") == (["zarr.json"], ["a"])
    assert store.get_many(["zarr.json", "nope"]) == {"zarr.json": b"{}"}
    assert store.get_ranges([("a/c/0", -3, None), ("a/c/0", 2, 4)]) == [b"789", b"23"]
    assert pickle.loads(pickle.dumps(store)).get("a/c/0") == b"0123456789"


def test_reference_url_reads(memory_url: str) -> None:
    open_store(memory_url).set("blob", b"0123456789")
    refs = {"version": 1, "refs": {"zarr.json": "{}", "a/c/0": [memory_url + "/blob", 2, 4]}}
    store = open_store(
        "reference://", storage_options={"fo": refs, "remote_protocol": "memory"}, read_only=True
    )
    assert store.get("zarr.json") == b"{}"
    assert store.get("a/c/0") == b"2345"
    assert store.get_many(["a/c/0", "zarr.json", "nope"]) == {"a/c/0": b"2345", "zarr.json": b"{}"}
    assert store.list_prefix("") == ["a/c/0", "zarr.json"]


@pytest.mark.s3
def test_s3_one_request_per_key(
    s3_bucket_url: str, s3_storage_options: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """No HEAD before each GET (s3fs does one by default for whole objects): one GET per key."""
    monkeypatch.setenv("ZARR_DASK_REMOTE_TRANSPORT", "fsspec")
    store = open_store(s3_bucket_url, storage_options=s3_storage_options)
    assert isinstance(store, FsspecStore)
    store.set_many({f"k{i}": b"v" * 10 for i in range(3)})
    methods = record_s3_calls(store, monkeypatch)
    assert len(store.get_many(["k0", "k1", "k2", "missing"])) == 3
    assert store.get("k0") == b"v" * 10
    assert store.get_ranges([("k1", -2, None), ("k2", 0, 3)]) == [b"vv", b"vvv"]
    assert methods == ["get_object"] * 7


def test_s3_connection_pool_follows_the_request_budget() -> None:
    """botocore keeps 10 connections by default, which would cap requests in flight at 10 (issue 17)."""
    pytest.importorskip("s3fs")
    import dask

    opts = {"anon": True, "skip_instance_cache": True}
    store = FsspecStore.from_url("s3://bucket/pool.zarr", storage_options=opts)
    assert store.fs.config_kwargs["max_pool_connections"] == 64
    with dask.config.set({"zarr_dask.max-requests": 200}):
        assert FsspecStore.from_url("s3://bucket/pool.zarr", storage_options=opts).fs.config_kwargs["max_pool_connections"] == 200
    mine = {**opts, "config_kwargs": {"max_pool_connections": 7}}
    assert FsspecStore.from_url("s3://bucket/pool.zarr", storage_options=mine).fs.config_kwargs["max_pool_connections"] == 7
    chained = FsspecStore.from_url("latency::s3://bucket/pool.zarr", storage_options={"latency": {"seconds": 0}, "s3": opts})
    assert chained.fs.fs.config_kwargs["max_pool_connections"] == 64
    assert store._url_config[1] == opts  # the store pickles with the caller's options
