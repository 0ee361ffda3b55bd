"""Shards handed to stores in pieces (``Store.takes_parts``): local files and S3 get a shard's index and inner
chunks as a ``Parts`` value and write them one after the other, never joined; every other store gets bytes.
The stored bytes are the same either way."""

from __future__ import annotations

from typing import Any

import dask
import dask.array as da
import numpy as np
import pytest

import zarr_dask
from zarr_dask.store import MemoryStore, open_store
from zarr_dask.store.base import Parts, joined, value_nbytes


def _never_joined(self: Any) -> bytes:
    raise AssertionError("a shard was joined on its way to a store that takes parts")


def _data() -> np.ndarray[Any, Any]:
    rng = np.random.default_rng(11)
    data = rng.normal(size=(64, 48)).astype("f4")
    data[:16, :24] = 0  # an all-fill inner chunk in the first shard (left out of it)
    return data


def _write(target: Any, options: dict[str, Any] | None, index_location: str) -> None:
    x = da.from_array(_data(), chunks=(32, 24))
    zarr_dask.to_zarr(x, target, storage_options=options, chunks=(8, 8),
                      shards={"shape": (32, 24), "index_location": index_location},
                      compressors=[{"name": "zstd", "configuration": {"level": 1}}])  # fmt: skip


def _shards(store: Any) -> dict[str, bytes]:
    return {k: bytes(store.get(k)) for k in sorted(store.list_prefix("c"))}


def _reference(index_location: str) -> dict[str, bytes]:
    ref = MemoryStore()
    assert not ref.takes_parts
    _write(ref, None, index_location)
    return _shards(ref)


@pytest.mark.parametrize("index_location", ["end", "start"])
@pytest.mark.parametrize("scheduler", ["sync", "threads"])
def test_shards_reach_local_files_in_pieces_and_equal_a_joined_write(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, index_location: str, scheduler: str
) -> None:
    want = _reference(index_location)
    monkeypatch.setattr(Parts, "__bytes__", _never_joined)
    with dask.config.set(scheduler=scheduler):
        _write(str(tmp_path / "a.zarr"), None, index_location)
    store = open_store(str(tmp_path / "a.zarr"))
    assert store.takes_parts
    assert _shards(store) == want
    np.testing.assert_array_equal(zarr_dask.open_array(store)[:], _data())


@pytest.mark.parametrize("index_location", ["end", "start"])
def test_shards_reach_s3_in_pieces_and_equal_a_joined_write(
    s3_bucket_url: str, s3_storage_options: dict[str, Any], monkeypatch: pytest.MonkeyPatch, index_location: str
) -> None:
    from zarr_dask.store import s3put

    want = _reference(index_location)
    monkeypatch.setattr(Parts, "__bytes__", _never_joined)
    before = s3put.stats()["direct"]
    with dask.config.set(scheduler="threads"):  # uploads behind the tasks (store/uploads.py) carry the Parts
        _write(s3_bucket_url, s3_storage_options, index_location)
    assert s3put.stats()["direct"] - before >= len(want)  # every shard a direct PutObject (sent in pieces)
    store = open_store(s3_bucket_url, storage_options=s3_storage_options)
    assert store.takes_parts
    assert _shards(store) == want
    np.testing.assert_array_equal(zarr_dask.open_array(store)[:], _data())


def test_without_direct_puts_s3_gets_the_joined_shard(
    s3_bucket_url: str, s3_storage_options: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ZARR_DASK_S3_DIRECT_PUT", "0")  # s3fs sends every request: it takes bytes only
    want = _reference("end")
    with dask.config.set(scheduler="threads"):
        _write(s3_bucket_url, s3_storage_options, "end")
    assert _shards(open_store(s3_bucket_url, storage_options=s3_storage_options)) == want


def test_partial_shard_writes_still_merge_into_what_is_stored(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    url = str(tmp_path / "p.zarr")
    _write(url, None, "end")
    a = zarr_dask.open_array(url, mode="r+")
    monkeypatch.setattr(Parts, "__bytes__", _never_joined)  # a merge is a conditional write: one buffer, no Parts
    a[3:40, 5:30] = 7
    want = _data()
    want[3:40, 5:30] = 7
    np.testing.assert_array_equal(zarr_dask.open_array(url)[:], want)


def test_parts_are_not_a_sequence_of_bytes() -> None:
    value = Parts([b"ab", b"", bytearray(b"c"), np.arange(2, dtype="u2")])
    assert value.nbytes == value_nbytes(value) == 7 and joined(value) == b"abc\x00\x00\x01\x00"
    with pytest.raises(TypeError):
        len(value)  # type: ignore[arg-type]  # a byte count mistaken for a part count would be silent
    assert "4 buffers, 7 bytes" in repr(value)
