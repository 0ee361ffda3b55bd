"""Conditional writes on GCS (gcsfs, generations) and Azure Blob (adlfs, ETags), against fake-gcs-server and
Azurite on 127.0.0.1: compare-and-swap, create-only, conditional delete, one winner under races, the users'
URLs and storage_options kept, and the request shapes an emulator does not check (GCS conditional DELETE)."""

from __future__ import annotations

import pickle
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from tests.conftest import CLOUD_KINDS, store_of_kind
from zarr_dask.store import FsspecStore, open_store
from zarr_dask.store.cloud_conditional import AzureBlobConditionalStore, GCSConditionalStore
from zarr_dask.store.fsspec_conditional import conditional_class
from zarr_dask.store.versioned import ConditionalStore, Versioned, conditional

CLASSES = {"gcs": GCSConditionalStore, "azure": AzureBlobConditionalStore}


@pytest.fixture(params=CLOUD_KINDS)
def cloud(request: pytest.FixtureRequest) -> tuple[str, FsspecStore, str, dict[str, Any]]:
    url, options = store_of_kind(request, request.param)
    assert isinstance(url, str) and options is not None
    store = open_store(url, storage_options=options)
    assert isinstance(store, FsspecStore)
    return request.param, store, url, options


def _cas(store: Any) -> ConditionalStore:
    cas = conditional(store)
    assert cas is not None
    return cas


def test_the_filesystems_get_the_conditional_class(cloud: tuple[str, FsspecStore, str, dict[str, Any]]) -> None:
    kind, store, url, options = cloud
    assert type(store) is CLASSES[kind] and conditional_class(store.fs) is CLASSES[kind]
    assert isinstance(store, ConditionalStore)
    again = pickle.loads(pickle.dumps(store))  # a worker process rebuilds it from the URL and the options
    assert type(again) is CLASSES[kind] and again.url == store.url
    if kind == "azure":  # abfs:// is the same filesystem (adlfs) and the same store class
        other = open_store(url.replace("az://", "abfs://"), storage_options=options)
        assert type(other) is AzureBlobConditionalStore


def test_compare_and_swap_create_and_delete(cloud: tuple[str, FsspecStore, str, dict[str, Any]]) -> None:
    kind, store, _, _ = cloud
    cas = _cas(store)
    assert cas.get_versioned(["k", "missing"]) == {"k": Versioned(None, None), "missing": Versioned(None, None)}
    assert cas.set_if_unchanged({"k": (b"1", None)}) == {"k": True}
    assert cas.set_if_unchanged({"k": (b"2", None)}) == {"k": False}  # create-only: it exists now
    first = cas.get_versioned(["k"])["k"]
    assert first.value == b"1" and first.version is not None
    assert cas.set_if_unchanged({"k": (b"3", first.version)}) == {"k": True}
    assert cas.set_if_unchanged({"k": (b"4", first.version)}) == {"k": False}  # stale version
    assert store.get("k") == b"3"
    second = cas.get_versioned(["k"])["k"]
    assert second.version != first.version
    if kind == "azure":  # fake-gcs-server ignores ifGenerationMatch on DELETE: its shape is tested below
        assert cas.set_if_unchanged({"k": (None, first.version)}) == {"k": False}
        assert store.get("k") == b"3"
    assert cas.set_if_unchanged({"k": (None, second.version)}) == {"k": True}
    assert store.get("k") is None
    assert cas.set_if_unchanged({"gone": (None, None)}) == {"gone": True}  # "delete if absent": absent
    assert cas.set_if_unchanged({"k": (b"5", second.version)}) == {"k": False}  # a version of a deleted key
    assert store.set_if_not_exists("n", b"x") and not store.set_if_not_exists("n", b"y")
    assert store.get("n") == b"x"


def test_one_winner_among_racing_writers(cloud: tuple[str, FsspecStore, str, dict[str, Any]]) -> None:
    _, store, _, _ = cloud
    cas = _cas(store)
    n = 8
    start = threading.Barrier(n)

    def create(i: int) -> bool:
        start.wait(timeout=30)
        return cas.set_if_unchanged({"race": (str(i).encode(), None)})["race"]

    with ThreadPoolExecutor(n) as ex:
        won = list(ex.map(create, range(n)))
    assert won.count(True) == 1 and store.get("race") == str(won.index(True)).encode()
    seen = cas.get_versioned(["race"])["race"]
    start = threading.Barrier(n)

    def swap(i: int) -> bool:
        start.wait(timeout=30)
        return cas.set_if_unchanged({"race": (b"swapped %d" % i, seen.version)})["race"]

    with ThreadPoolExecutor(n) as ex:
        won = list(ex.map(swap, range(n)))
    assert won.count(True) == 1 and store.get("race") == b"swapped %d" % won.index(True)


def test_large_values_keep_their_condition(cloud: tuple[str, FsspecStore, str, dict[str, Any]]) -> None:
    """Values past the SDKs' single-request sizes (Azure uploads blocks then commits the list conditionally)."""
    _, store, _, _ = cloud
    cas = _cas(store)
    big = bytes(range(256)) * (80 * 1024 + 7)  # ~20 MiB
    assert cas.set_if_unchanged({"big": (big, None)}) == {"big": True}
    got = cas.get_versioned(["big"])["big"]
    assert got.value == big
    assert cas.set_if_unchanged({"big": (big[:10], None)}) == {"big": False}
    assert cas.set_if_unchanged({"big": (big[::-1], got.version)}) == {"big": True}
    assert store.get("big") == big[::-1]


class _Requests:
    """gcsfs's ``_call`` of one filesystem instance, recorded, every request still sent to the emulator."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, fs: Any) -> None:
        self.calls: list[tuple[str, str, dict[str, Any]]] = []
        real = fs._call

        async def call(method: str, path: str, *args: Any, **kwargs: Any) -> Any:
            self.calls.append((method, path.format(*args) if args else path, dict(kwargs)))
            return await real(method, path, *args, **kwargs)

        monkeypatch.setattr(fs, "_call", call)


@pytest.mark.gcs
def test_gcs_request_shapes(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """What fake-gcs-server does not check, checked on the request: a conditional DELETE carries
    ``ifGenerationMatch=<the generation read>``; every write is one multipart upload with ``ifGenerationMatch``
    (``0`` to create) -- the upload kind fake-gcs-server and GCS both check."""
    url, options = store_of_kind(request, "gcs")
    store = open_store(url, storage_options=options)
    assert isinstance(store, GCSConditionalStore)
    cas = _cas(store)
    seen = _Requests(monkeypatch, store.fs)
    assert cas.set_if_unchanged({"k": (b"1", None)}) == {"k": True}
    got = cas.get_versioned(["k"])["k"]
    assert isinstance(got.version, int) and got.version > 0
    assert cas.set_if_unchanged({"k": (b"2", got.version)}) == {"k": True}
    now = cas.get_versioned(["k"])["k"]
    assert cas.set_if_unchanged({"k": (None, now.version)}) == {"k": True}
    methods = [(method, kwargs.get("uploadType"), kwargs.get("ifGenerationMatch")) for method, _, kwargs in seen.calls]
    assert methods == [
        ("POST", "multipart", "0"), ("GET", None, None), ("POST", "multipart", str(got.version)), ("GET", None, None),
        ("DELETE", None, str(now.version)),
    ]  # fmt: skip
    bucket, key = store._path("k").split("/", 1)
    assert seen.calls[-1][1] == f"b/{bucket}/o/{key}"  # the object itself (gcsfs quotes the name)
