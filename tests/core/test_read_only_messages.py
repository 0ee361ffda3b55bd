"""Every write refused by a read-only store says how to write there (the store's ``read_only_advice``; an
Icechunk session's is tested in tests/icechunk/test_sessions.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

import zarr_dask
from zarr_dask.errors import ReadOnlyError


def test_read_only_writes_name_the_store_the_node_and_the_fix(tmp_path: Path) -> None:
    url = str(tmp_path / "r.zarr")
    zarr_dask.create_group(url)
    zarr_dask.create_array(url, path="a", shape=(4,), chunks=(2,), dtype="i4")
    store = zarr_dask.open_store(url, read_only=True)
    fix = "open it with read_only=False (mode='a' or 'w') to write"
    assert store.read_only_advice == fix
    writes = {
        "create": lambda: zarr_dask.create_array(store, path="b", shape=(2,), dtype="i4"),
        "setitem": lambda: zarr_dask.open_array(url, path="a", mode="r").__setitem__(slice(None), 1),
        "attrs": lambda: zarr_dask.open_array(url, path="a", mode="r").attrs.__setitem__("x", 1),
        "group attrs": lambda: zarr_dask.open_group(url, mode="r").attrs.__setitem__("x", 1),
        "set": lambda: store.set("a/c/0", b""),
        "zom": lambda: zarr_dask.zom.GroupSpec(members={}).to_store(store, path="z"),
    }
    for name, write in writes.items():
        with pytest.raises(ReadOnlyError) as info:
            write()
        text = str(info.value)
        assert fix in text and f"store {store.url!r}" in text, (name, text)
