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
from tests.conftest import CLOUD_KINDS, store_of_kind  # noqa: E402
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


def test_auto_sends_http_range_calls_through_obstore_and_whole_objects_through_fsspec(
    served: tuple[Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, endpoint = served
    monkeypatch.setenv("ZARR_DASK_REMOTE_TRANSPORT", "auto")
    sent = _count_obstore_gets(monkeypatch)
    store = FsspecStore.from_url(f"{endpoint}/data", storage_options={"skip_instance_cache": True})
    bench_remote.take_stats(endpoint)
    got, ranges = _reads(store)
    assert got == {f"k{i}": bytes(range(i, i + 10)) for i in range(3)}
    assert ranges == [bytes([9, 10]), bytes([2, 3, 4]), bytes(range(4, 10)), bytes([8, 9]), None]
    assert sorted(read[0].rsplit("/", 1)[-1] for read in sent) == ["k0", "k0", "k1", "k2", "missing"]  # the ranges
    assert bench_remote.take_stats(endpoint)["requests"] == 9
    sent.clear()  # a whole key asked of get_ranges (a whole shard) goes through obstore too
    assert store.get_ranges([("k1", None, None)]) == [bytes(range(1, 11))] and len(sent) == 1


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_reads_for_decoders_are_not_copied_into_bytes(
    served: tuple[Path, str], monkeypatch: pytest.MonkeyPatch, transport: str
) -> None:
    """``get_many_into`` / ``get_ranges_into`` (what decoders read) take obstore's buffers as they are; the
    same values and requests as ``get_many`` / ``get_ranges``, which still return ``bytes``."""
    _, endpoint = served
    monkeypatch.setenv("ZARR_DASK_REMOTE_TRANSPORT", transport)
    store = FsspecStore.from_url(f"{endpoint}/data", storage_options={"skip_instance_cache": True})
    keys, requests = ["k0", "k1", "missing"], [("k1", -2, None), ("k2", None, None), ("missing", 0, 2)]
    bench_remote.take_stats(endpoint)
    many, ranges = store.get_many_into(keys, None), store.get_ranges_into(requests, None)
    sent = bench_remote.take_stats(endpoint)["requests"]
    assert {k: bytes(v) for k, v in many.items()} == store.get_many(keys)
    assert [None if v is None else bytes(v) for v in ranges] == store.get_ranges(requests)
    assert bench_remote.take_stats(endpoint)["requests"] == sent
    kinds = {type(v).__name__ for v in [*many.values(), *ranges] if v is not None}
    assert kinds == ({"Bytes"} if transport == "obstore" else {"bytes"})


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


# ------------------------------------------------------------------------------------------- GCS, Azure
def _spy_fsspec_reads(fs: Any, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of fsspec's read coroutines ``fs`` runs (the reads obstore did not take)."""
    calls: list[str] = []
    for name in ("_cat_file", "_cat_ranges", "_cat"):
        real = getattr(fs, name)

        async def spy(*args: Any, _real: Any = real, _name: str = name, **kwargs: Any) -> Any:
            calls.append(_name)
            return await _real(*args, **kwargs)

        monkeypatch.setattr(fs, name, spy)
    return calls


def _count_obstore_gets(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    from zarr_dask.store.obstore_reads import ObstoreReads

    sent: list[tuple[Any, ...]] = []
    real = ObstoreReads.get

    def get(self: ObstoreReads, *read: Any, **options: Any) -> Any:
        sent.append(read)
        return real(self, *read, **options)

    monkeypatch.setattr(ObstoreReads, "get", get)
    return sent


@pytest.mark.parametrize("kind", CLOUD_KINDS)
def test_cloud_reads_go_through_obstore_one_get_each(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """gcsfs (anonymous, on its endpoint) and adlfs (a connection string): ``auto`` reads through obstore, one
    GET per value or range, as fsspec sends them; Azure has no ``bytes=-n`` ranges, so fsspec sends those."""
    url, options = store_of_kind(request, kind)
    store = open_store(url, storage_options={**options, "skip_instance_cache": True})
    assert isinstance(store, FsspecStore)
    store.set_many({f"k{i}": bytes(range(i, i + 10)) for i in range(3)})
    assert obstore_reads(store.fs) is not None
    fsspec_calls, sent = _spy_fsspec_reads(store.fs, monkeypatch), _count_obstore_gets(monkeypatch)
    assert store.get_many(["k0", "k1", "k2", "missing"]) == {f"k{i}": bytes(range(i, i + 10)) for i in range(3)}
    ranges = [("k2", 0, 3), ("k0", 4, None), ("k0", 8, 30), ("missing", 0, 2)]
    assert store.get_ranges(ranges) == [bytes([2, 3, 4]), bytes(range(4, 10)), bytes([8, 9]), None]
    assert (len(sent), fsspec_calls) == (8, [])  # 4 values + 4 ranges: one obstore GET each, none through fsspec
    if kind == "gcs":
        assert store.get_ranges([("k1", -2, None)]) == [bytes([9, 10])]
        assert (len(sent), fsspec_calls) == (9, [])
    else:
        assert (obstore_reads(store.fs).suffix_ranges, fsspec_calls) == (False, [])  # type: ignore[union-attr]


@pytest.mark.parametrize("kind", CLOUD_KINDS)
def test_cloud_array_reads_are_the_same_with_either_transport(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    url, options = store_of_kind(request, kind)
    data = np.arange(40 * 30, dtype="i4").reshape(40, 30)
    arr = zarr_dask.create_array(url, shape=data.shape, dtype="i4", chunks=(8, 8), shards=(16, 16), storage_options=options)
    arr[:] = data
    sent = _count_obstore_gets(monkeypatch)
    for transport in TRANSPORTS:
        monkeypatch.setenv("ZARR_DASK_REMOTE_TRANSPORT", transport)
        fresh = {**options, "skip_instance_cache": True}
        assert np.array_equal(zarr_dask.from_zarr(url, storage_options=fresh).compute(), data)
        assert np.array_equal(zarr_dask.open_array(url, storage_options=fresh)[3:30, 5:20], data[3:30, 5:20])
        assert bool(sent) == (transport == "obstore")


@pytest.mark.parametrize("kind", CLOUD_KINDS)
def test_cloud_options_obstore_cannot_map_stay_on_fsspec_or_fail_when_forced(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    url, options = store_of_kind(request, kind)
    unmapped = {"requester_pays": True} if kind == "gcs" else {"location_mode": "secondary"}
    store = open_store(url, storage_options={**options, **unmapped, "skip_instance_cache": True})
    assert isinstance(store, FsspecStore)
    assert obstore_reads(store.fs) is None  # auto: fsspec
    monkeypatch.setenv("ZARR_DASK_REMOTE_TRANSPORT", "obstore")
    with pytest.raises(UnsupportedFeatureError, match="requester_pays" if kind == "gcs" else "location_mode"):
        store.get_many(["k0"])


def test_azure_options_map_to_obstore_config() -> None:
    """adlfs's options as obstore's ``AzureConfig`` (built offline: no request is sent)."""
    adlfs = pytest.importorskip("adlfs")
    from zarr_dask.store.obstore_clouds import _azure_config

    def config(**options: Any) -> Any:
        return _azure_config(adlfs.AzureBlobFileSystem(**options, skip_instance_cache=True))

    sas = "DefaultEndpointsProtocol=https;AccountName=acc;SharedAccessSignature=sv=1&sig=a%3D;EndpointSuffix=core.windows.net"
    assert config(connection_string=sas) == {"account_name": "acc", "endpoint": "https://acc.blob.core.windows.net",
                                             "sas_key": "sv=1&sig=a%3D"}  # fmt: skip
    assert config(account_name="acc", anon=True) == {"account_name": "acc", "skip_signature": True}
    assert config(account_name="acc", account_key="a2V5") == {"account_name": "acc", "account_key": "a2V5"}


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("sharded", [False, True], ids=["chunks", "shards"])
def test_a_dask_task_decodes_remote_groups_as_they_arrive(
    served: tuple[Path, str], monkeypatch: pytest.MonkeyPatch, transport: str, sharded: bool
) -> None:
    """A dask task reading many remote storage units fetches them in groups at once and decodes each group as
    it arrives (``fetch_ahead``): the same data and requests as one batched call; a missing unit is the fill
    value, a corrupt one fails the read naming its key; the task's thread decodes, the fetch threads wait."""
    import dask

    from zarr_dask.core import batches
    from zarr_dask.errors import ChunkDecodeError

    root, endpoint = served
    monkeypatch.setenv("ZARR_DASK_REMOTE_TRANSPORT", transport)
    name = f"ahead-{transport}-{sharded}.zarr"
    data = np.arange(96 * 40, dtype="f4").reshape(96, 40)
    extra = {"shards": (16, 20)} if sharded else {}
    local = zarr_dask.create_array(str(root / name), shape=data.shape, dtype="f4", chunks=(8, 10), fill_value=-1, **extra)
    local[:] = data
    unit = (16, 20) if sharded else (8, 10)
    first = "c/0/0"
    (root / name / first).unlink()  # a missing unit: the fill value
    want = data.copy()
    want[: unit[0], : unit[1]] = -1
    groups: list[int] = []
    real = batches.fetch_ahead

    def counting(fetch: Any, items: Any) -> Any:
        for group, got in real(fetch, items):
            groups.append(len(group))
            yield group, got

    monkeypatch.setattr("zarr_dask.core.chunk_io.fetch_ahead", counting)
    with dask.config.set(scheduler="threads", num_workers=1):
        x = zarr_dask.from_zarr(f"{endpoint}/{name}", chunks=data.shape)  # one task reads every unit
        bench_remote.take_stats(endpoint)
        assert np.array_equal((x + 0).compute(), want)
        requests = bench_remote.take_stats(endpoint)["requests"]
    units = (96 // unit[0]) * (40 // unit[1])
    size = -(-units // batches.AHEAD_GROUPS)
    assert sum(groups) == units and len(groups) == -(-units // size) > 1
    assert requests == units  # one GET per unit (a whole shard, as one batched call would send)
    (root / name / "c/1/1").write_bytes(b"not zstd")
    with dask.config.set(scheduler="threads", num_workers=1), pytest.raises(ChunkDecodeError, match="c/1/1"):
        (zarr_dask.from_zarr(f"{endpoint}/{name}", chunks=data.shape) + 0).compute()
