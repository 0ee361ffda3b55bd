"""``Store.list_prefix_versions`` (issue 37): one listing with each key's size and version, which changes when
the key is written again -- what the witness of a resumable write's sources is made of."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from zarr_dask.store import MemoryStore, Store, open_store


@pytest.fixture(params=["local", "memory", pytest.param("s3", marks=pytest.mark.s3)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    if request.param == "local":
        return open_store(str(tmp_path / "s"))
    if request.param == "memory":
        return MemoryStore()
    url, options = request.getfixturevalue("s3_bucket_url"), request.getfixturevalue("s3_storage_options")
    return open_store(url, storage_options=options)


def test_versions_change_when_a_key_is_written_again(store: Store) -> None:
    store.set("a/c/0", b"abc")
    store.set("a/zarr.json", b"{}")
    store.set("b/c/0", b"zz")
    first = store.list_prefix_versions("a")
    assert sorted(first) == ["a/c/0", "a/zarr.json"]
    assert first["a/c/0"][0] == 3 and list(store.list_prefix_sizes("a")) == list(first)
    time.sleep(0.01)
    store.set("a/c/0", b"xyz")  # same size, other bytes
    second = store.list_prefix_versions("a")
    assert second["a/c/0"][0] == 3 and second["a/c/0"][1] != first["a/c/0"][1]
    assert second["a/zarr.json"] == first["a/zarr.json"]


def test_default_gives_sizes_without_versions() -> None:
    class Sizes(MemoryStore):
        list_prefix_versions = Store.list_prefix_versions  # the base class's: sizes only

    s: Any = Sizes()
    s.set("k/x", b"1234")
    assert s.list_prefix_versions("k") == {"k/x": (4, "")}
