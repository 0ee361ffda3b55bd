"""Array.resize / append / attribute updates keep the consolidated metadata of enclosing groups fresh."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Literal

import numpy as np
import pytest

import zarr_dask


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize("change", ["resize", "append", "attrs"])
def test_metadata_changes_refresh_consolidated_metadata(
    memory_url: str, zarr_format: Literal[2, 3], change: str
) -> None:
    root = zarr_dask.create_group(memory_url, zarr_format=zarr_format)
    g = root.create_group("g")
    a = g.create_array("x", shape=(4, 3), dtype="i4", chunks=(2, 3))
    a[:] = np.arange(12).reshape(4, 3)
    zarr_dask.consolidate_metadata(memory_url)
    if change == "resize":
        a.resize((6, 3))
    elif change == "append":
        a.append(np.full((2, 3), 7, dtype="i4"))
    else:
        a.update_attributes({"units": "m"})
    seen = zarr_dask.open_group(memory_url, use_consolidated=True)["g/x"]
    assert seen.shape == a.shape
    assert dict(seen.attrs) == dict(a.attrs)
    assert zarr_dask.check_consolidated(memory_url) == []


def test_no_consolidated_metadata_is_started(memory_url: str) -> None:
    root = zarr_dask.create_group(memory_url)
    a = root.create_array("x", shape=(4,), dtype="i1")
    a.resize((8,))
    assert zarr_dask.open_group(memory_url).consolidated_metadata is None


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_members_created_through_a_consolidated_group_are_found_at_once_and_by_the_next_reader(
    memory_url: str, zarr_format: Literal[2, 3]
) -> None:
    root = zarr_dask.create_group(memory_url, zarr_format=zarr_format)
    root.create_array("old", shape=(2,), dtype="i1")
    zarr_dask.consolidate_metadata(memory_url)
    g = zarr_dask.open_group(memory_url)
    assert g.consolidated_metadata is not None
    g.create_array("a/b/new", shape=(3,), dtype="f4")
    g.create_group("sub", attributes={"k": 1})
    assert g["a/b/new"].shape == (3,) and dict(g["sub"].attrs) == {"k": 1}
    assert isinstance(g["a"], zarr_dask.Group)
    fresh = zarr_dask.open_group(memory_url, use_consolidated=True)
    assert fresh["a/b/new"].shape == (3,) and "sub" in fresh and "old" in fresh
    assert zarr_dask.check_consolidated(memory_url) == []


def test_creating_members_of_an_unconsolidated_group_costs_no_extra_request(memory_url: str) -> None:
    g = zarr_dask.create_group(memory_url)
    with g.store.counters.counting() as delta:
        g.create_array("x", shape=(2,), dtype="i1")
    before = dict(delta)
    g2 = zarr_dask.create_group(memory_url.rstrip("/") + "-b")
    with g2.store.counters.counting() as delta2:
        zarr_dask.create_array(g2.store, name="x", shape=(2,), dtype="i1")
    assert before == dict(delta2)


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_top_level_creation_refreshes_consolidated_metadata(memory_url: str, zarr_format: Literal[2, 3]) -> None:
    """create_array / create_group by URL and path keep an enclosing group's consolidated metadata fresh, groups
    created on the way included, reading the ancestors' documents in the batch that checks the parents."""

    def creation_requests(url: str, consolidate: bool) -> dict[str, int]:
        root = zarr_dask.create_group(url, zarr_format=zarr_format)
        root.create_array("old", shape=(2,), dtype="i1")
        if consolidate:
            zarr_dask.consolidate_metadata(url)
        with root.store.counters.counting() as delta:
            zarr_dask.create_array(root.store, name="a/b/new", shape=(3,), dtype="f4", zarr_format=zarr_format)
        return dict(delta)

    plain = creation_requests(memory_url.rstrip("/") + "-plain", consolidate=False)
    refreshed = creation_requests(memory_url, consolidate=True)
    assert refreshed["get"] == plain["get"]  # the ancestors' documents come with the parents' check
    assert refreshed["set"] == plain["set"] + 1  # the holder's consolidated document
    zarr_dask.create_group(memory_url, path="sub", zarr_format=zarr_format, attributes={"k": 1})
    fresh = zarr_dask.open_group(memory_url, use_consolidated=True)
    assert fresh["a/b/new"].shape == (3,) and dict(fresh["sub"].attrs) == {"k": 1} and "old" in fresh
    assert isinstance(fresh["a/b"], zarr_dask.Group)
    assert zarr_dask.check_consolidated(memory_url) == []
    zarr_dask.create_array(memory_url, name="old", shape=(7,), dtype="i1", overwrite=True, zarr_format=zarr_format)
    assert zarr_dask.open_group(memory_url, use_consolidated=True)["old"].shape == (7,)


def test_concurrent_creations_lose_no_consolidated_entry(memory_url: str) -> None:
    root = zarr_dask.create_group(memory_url)
    zarr_dask.consolidate_metadata(memory_url)

    def create(i: int) -> None:
        zarr_dask.create_array(root.store, name=f"g{i % 3}/a{i}", shape=(i + 1,), dtype="i1")

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(create, range(24)))
    fresh = zarr_dask.open_group(memory_url, use_consolidated=True)
    assert all(fresh[f"g{i % 3}/a{i}"].shape == (i + 1,) for i in range(24))
    assert zarr_dask.check_consolidated(memory_url) == []


_CREATE_MANY = """
import sys, zarr_dask
url, tag = sys.argv[1], sys.argv[2]
sys.stdin.readline()  # start together
for i in range(25):
    zarr_dask.create_array(url, name=f"{tag}/a{i}", shape=(i + 1,), dtype="i1")
"""


@pytest.mark.skipif(sys.platform == "win32", reason="flock")
def test_processes_creating_in_one_local_hierarchy_lose_no_consolidated_entry(tmp_path: Path) -> None:
    """Two processes on this machine refresh the same consolidated document: the store's process lock
    (flock on a file outside the store) serialises their read-modify-writes."""
    url = str(tmp_path / "shared.zarr")
    zarr_dask.create_group(url)
    zarr_dask.consolidate_metadata(url)
    procs = [
        subprocess.Popen([sys.executable, "-c", _CREATE_MANY, url, tag], stdin=subprocess.PIPE, text=True)
        for tag in ("p", "q")
    ]
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    for p in procs:
        p.stdin.close()  # type: ignore[union-attr]
        assert p.wait(timeout=120) == 0
    fresh = zarr_dask.open_group(url, use_consolidated=True)
    assert all(fresh[f"{tag}/a{i}"].shape == (i + 1,) for tag in "pq" for i in range(25))
    assert zarr_dask.check_consolidated(url) == []
    assert not [p for p in tmp_path.rglob("*.lock")]  # nothing written into (or next to) the store


def test_no_usable_lock_directory_still_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               caplog: pytest.LogCaptureFixture) -> None:  # fmt: skip
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    monkeypatch.setattr("tempfile.gettempdir", lambda: str(blocker))  # the lock directory cannot be made
    url = str(tmp_path / "h.zarr")
    zarr_dask.create_group(url)
    zarr_dask.consolidate_metadata(url)
    with caplog.at_level("WARNING", logger="zarr_dask.store"):
        zarr_dask.create_array(url, name="x", shape=(2,), dtype="i1")
    assert "other processes are not locked out" in caplog.text
    assert zarr_dask.open_group(url, use_consolidated=True)["x"].shape == (2,)
