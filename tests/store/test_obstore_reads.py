"""Reads of FsspecStore through obstore (``zarr_dask.store.obstore_reads``): the same values, missing keys and
request counts as fsspec's path, on a real HTTP server and on moto S3; what cannot be mapped stays on fsspec,
or is an error where the ``remote_transport`` knob forces obstore."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fsspec
import numpy as np
import pytest

pytest.importorskip("obstore")
pytest.importorskip("aiohttp")
sys.path.insert(0, str(Path(__file__).parent.parent.parent / "benchmarks"))
import bench_remote  # noqa: E402

import zarr_dask  # noqa: E402
from tests.store._s3_calls import record_s3_calls  # noqa: E402  (its HTTP object server counts requests)
from zarr_dask.errors import UnsupportedFeatureError  # noqa: E402
from zarr_dask.store import FsspecStore, open_store  # noqa: E402
from zarr_dask.store.obstore_reads import obstore_reads  # noqa: E402

TRANSPORTS = ["fsspec", "obstore"]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """(directory, endpoint) of one counting HTTP object server for the module."""
    root = tmp_path_factory.mktemp("served")
    (root / "data").mkdir()
    for i in range(3):
        (root / "data" / f"k{i}").write_bytes(bytes(range(i, i + 10)))
    with bench_remote.served_in_thread(str(root), 0.0) as endpoint:
        yield root, endpoint


def _reads(store: FsspecStore) -> tuple[Any, ...]:
    got = store.get_many(["k0", "k1", "k2", "missing"])
    ranges = store.get_ranges([("k1", -2, None), ("k2", 0, 3), ("k0", 4, None), ("k0", 8, 30), ("missing", 0, 2)])
    return got, ranges


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_http_reads_and_request_counts_match_fsspec(
    served: tuple[Path, str], monkeypatch: pytest.MonkeyPatch, transport: str
) -> None:
    _, endpoint = served
    monkeypatch.setenv("ZARR_DASK_REMOTE_TRANSPORT", transport)
    store = FsspecStore.from_url(f"{endpoint}/data", storage_options={"skip_instance_cache": True})
    assert (obstore_reads(store.fs) is not None) == (transport == "obstore")
    bench_remote.take_stats(endpoint)
    got, ranges = _reads(store)
    stats = bench_remote.take_stats(endpoint)
    assert got == {f"k{i}": bytes(range(i, i + 10)) for i in range(3)}
    assert ranges == [bytes([9, 10]), bytes([2, 3, 4]), bytes(range(4, 10)), bytes([8, 9]), None]
    assert stats["requests"] == 9  # one GET per key and per range, with either transport


def test_http_array_reads_through_obstore(served: tuple[Path, str], monkeypatch: pytest.MonkeyPatch) -> None:
    root, endpoint = served
    data = np.arange(64 * 48, dtype="f4").reshape(64, 48)
    local = zarr_dask.create_array(str(root / "a.zarr"), shape=data.shape, dtype="f4", chunks=(8, 8), shards=(16, 24))
    local[:] = data
    counts = {}
    for transport in TRANSPORTS:
        monkeypatch.setenv("ZARR_DASK_REMOTE_TRANSPORT", transport)
        bench_remote.take_stats(endpoint)
        assert np.array_equal(zarr_dask.from_zarr(f"{endpoint}/a.zarr").compute(), data)
        assert np.array_equal(zarr_dask.open_array(f"{endpoint}/a.zarr")[3:50, 5:40], data[3:50, 5:40])
        counts[transport] = bench_remote.take_stats(endpoint)["requests"]
    assert counts["obstore"] == counts["fsspec"]


def test_http_options_obstore_cannot_map_stay_on_fsspec_or_fail_when_forced(
    served: tuple[Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, endpoint = served
    options = {"client_kwargs": {"trust_env": True}, "skip_instance_cache": True}
    store = FsspecStore.from_url(f"{endpoint}/data", storage_options=options)
    assert obstore_reads(store.fs) is None  # auto: fsspec
    assert store.get("k0") == bytes(range(10))
    monkeypatch.setenv("ZARR_DASK_REMOTE_TRANSPORT", "obstore")
    with pytest.raises(UnsupportedFeatureError, match="client_kwargs are set"):
        store.get_many(["k0"])
    memory = FsspecStore(fsspec.filesystem("memory"), "/obstore-reads")  # not a remote protocol: fsspec, quietly
    memory.set("k", b"v")
    assert memory.get_many(["k"]) == {"k": b"v"}


def test_http_headers_are_sent_by_obstore(served: tuple[Path, str], monkeypatch: pytest.MonkeyPatch) -> None:
    _, endpoint = served
    monkeypatch.setenv("ZARR_DASK_REMOTE_TRANSPORT", "obstore")
    store = FsspecStore.from_url(
        f"{endpoint}/data", storage_options={"headers": {"X-Test": "1"}, "skip_instance_cache": True}
    )
    assert obstore_reads(store.fs) is not None
    assert store.get_many(["k1"]) == {"k1": bytes(range(1, 11))}


@pytest.mark.s3
def test_s3_reads_go_through_obstore_with_the_same_values(
    s3_bucket_url: str, s3_storage_options: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_store(s3_bucket_url, storage_options=s3_storage_options)
    assert isinstance(store, FsspecStore)
    store.set_many({f"k{i}": bytes(range(i, i + 10)) for i in range(3)})
    assert obstore_reads(store.fs) is not None  # auto reads S3 through obstore
    calls = record_s3_calls(store, monkeypatch)
    got, ranges = _reads(store)
    assert got == {f"k{i}": bytes(range(i, i + 10)) for i in range(3)}
    assert ranges == [bytes([9, 10]), bytes([2, 3, 4]), bytes(range(4, 10)), bytes([8, 9]), None]
    assert calls == []  # every GET went through obstore


@pytest.mark.s3
def test_s3_array_round_trip_with_obstore_reads(
    s3_bucket_url: str, s3_storage_options: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ZARR_DASK_REMOTE_TRANSPORT", "obstore")
    data = np.arange(40 * 30, dtype="i4").reshape(40, 30)
    arr = zarr_dask.create_array(s3_bucket_url, shape=data.shape, dtype="i4", chunks=(8, 8), shards=(16, 16),
                                 storage_options=s3_storage_options)  # fmt: skip
    arr[:] = data
    back = zarr_dask.from_zarr(s3_bucket_url, storage_options=s3_storage_options).compute()
    assert np.array_equal(back, data)


def test_a_bad_transport_value_warns_and_auto_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    from zarr_dask import config

    monkeypatch.setenv("ZARR_DASK_REMOTE_TRANSPORT", "rust")
    with pytest.warns(RuntimeWarning, match="expected auto, fsspec or obstore"):
        assert config.get("remote_transport") == "auto"


def _read_in_child(url: str, out: Any) -> None:
    store = FsspecStore.from_url(url, storage_options={"skip_instance_cache": True})
    out.put((obstore_reads(store.fs) is None, store.get_many(["k0"])))


@pytest.mark.skipif(sys.platform != "linux", reason="fork")
def test_a_forked_child_reads_through_fsspec(served: tuple[Path, str]) -> None:
    """obstore's runtime does not survive a fork: a child that used it after its parent did would hang."""
    import multiprocessing
    import warnings

    _, endpoint = served
    url = f"{endpoint}/data"
    assert FsspecStore.from_url(url).get_many(["k0"]) == {"k0": bytes(range(10))}  # the parent uses obstore
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork of a multi-threaded process (Python >= 3.12)
        child = ctx.Process(target=_read_in_child, args=(url, out))
        child.start()
    try:
        assert out.get(timeout=60) == (True, {"k0": bytes(range(10))})
    finally:
        child.join(60)
    assert child.exitcode == 0


def test_errors_are_fsspecs_and_come_quickly(served: tuple[Path, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A read obstore fails is sent again through fsspec: an out-of-bounds range is b"" as on fsspec, an
    unreachable server fails with aiohttp's error after a few retries (not obstore's default 3 minutes)."""
    import socket
    import time

    from zarr_dask.errors import StoreError

    _, endpoint = served
    monkeypatch.setenv("ZARR_DASK_REMOTE_TRANSPORT", "obstore")
    store = FsspecStore.from_url(f"{endpoint}/data", storage_options={"skip_instance_cache": True})
    assert store.get_ranges([("k0", 20, 30), ("k0", 0, 2)]) == [b"", bytes([0, 1])]
    reads = obstore_reads(store.fs)
    assert reads is not None and not reads._off  # a 416 is the request's fault: obstore stays on
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    down = FsspecStore.from_url(f"http://127.0.0.1:{port}/x", storage_options={"skip_instance_cache": True})
    t0 = time.perf_counter()
    with pytest.raises(StoreError, match="cannot read key 'a'.*ClientConnectorError"):
        down.get_many(["a"])
    assert time.perf_counter() - t0 < 60
    down_reads = obstore_reads(down.fs)
    assert down_reads is not None and list(down_reads._off) == [f"http://127.0.0.1:{port}"]  # later: fsspec only
