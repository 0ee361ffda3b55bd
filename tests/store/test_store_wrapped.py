"""zarr-python's ZipStore and ObjectStore (obstore) as stores: the Store contract over them, and their limits."""

from __future__ import annotations

import pickle
import zipfile
from pathlib import Path
from typing import Any

import pytest

from tests.store import test_store_contract as contract
from zarr_dask.errors import UnsupportedFeatureError
from zarr_dask.store import Store, open_store
from zarr_dask.store.wrapped import ObjectStoreStore, ZipArchiveStore

zarr = pytest.importorskip("zarr")


def _object_store(tmp_path: Path, kind: str) -> Any:
    pytest.importorskip("obstore", reason="obstore (zarr-python's ObjectStore backend) is not installed")
    from obstore.store import LocalStore, MemoryStore

    inner = MemoryStore() if kind == "memory" else LocalStore(str(tmp_path / "objects"), mkdir=True)
    return zarr.storage.ObjectStore(inner)


@pytest.fixture(params=["objectstore-memory", "objectstore-local"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    if request.param.endswith("memory") and ("pickle" in request.node.name or "tokens" in request.node.name):
        pytest.skip("obstore's MemoryStore does not pickle")
    s = open_store(_object_store(tmp_path, request.param.rpartition("-")[2]))
    assert isinstance(s, ObjectStoreStore)
    return s


@pytest.fixture
def filled(store: Store) -> Store:
    return contract.filled.__wrapped__(store)  # type: ignore[attr-defined]


# the whole contract over obstore's stores
for _name in dir(contract):
    if _name.startswith("test_"):
        globals()[_name] = getattr(contract, _name)


def test_object_store_pickles_as_the_zarr_python_object(tmp_path: Path) -> None:
    s = open_store(_object_store(tmp_path, "local"))
    s.set("a/zarr.json", b"{}")
    back = pickle.loads(pickle.dumps(s))
    assert back.get("a/zarr.json") == b"{}" and back == s


def test_object_store_read_only_is_kept(tmp_path: Path) -> None:
    obj = _object_store(tmp_path, "memory")
    assert open_store(obj.with_read_only(True)).read_only
    assert open_store(obj, read_only=True).read_only


# ------------------------------------------------------------------------------------------------ zip
def test_zip_store_reads_and_writes_through_the_users_archive(tmp_path: Path) -> None:
    zs = zarr.storage.ZipStore(tmp_path / "a.zip", mode="w")
    s = open_store(zs)
    assert isinstance(s, ZipArchiveStore) and s.url == f"zip://{tmp_path / 'a.zip'}"
    s.set_many({"zarr.json": b"{}", "a/c/0": b"0123456789"})
    s.set("zarr.json", b"{}")  # the same bytes again: no second entry
    assert s.get("a/c/0") == b"0123456789" and s.get("missing") is None
    assert s.get_ranges([("a/c/0", 2, 5), ("a/c/0", -3, None), ("a/c/0", None, -8), ("nope", 0, 1)]) == [
        b"234", b"789", b"01", None,
    ]
    assert s.list_prefix("") == ["a/c/0", "zarr.json"] and s.list_dir("") == (["zarr.json"], ["a"])
    assert s.list_prefix_sizes("a") == {"a/c/0": 10} and s.exists("a/c/0") and not s.exists("a")
    assert s.set_if_not_exists("zarr.json", b"x") is False and s.set_if_not_exists("b", b"x") is True
    s.delete_many(["not/there"])  # absent keys: nothing to delete
    with pytest.raises(UnsupportedFeatureError, match="cannot delete entries") as err:
        s.delete("a/c/0")
    assert "zip://" in str(err.value) and "'a/c/0'" in str(err.value)
    with pytest.raises(UnsupportedFeatureError, match="cannot be sent to other processes"):
        pickle.dumps(s)
    zs.close()
    with zipfile.ZipFile(tmp_path / "a.zip") as zf:
        assert sorted(zf.namelist()) == ["a/c/0", "b", "zarr.json"]
    reader = open_store(zarr.storage.ZipStore(tmp_path / "a.zip", mode="r"))
    assert reader.read_only and reader.get("b") == b"x"
    again = pickle.loads(pickle.dumps(reader))  # read-only: reopened by path
    assert again.get("a/c/0") == b"0123456789" and again.read_only


def test_zip_store_rewrite_appends_an_entry_read_back_last(tmp_path: Path) -> None:
    zs = zarr.storage.ZipStore(tmp_path / "a.zip", mode="w")
    s = open_store(zs)
    s.set("k", b"old")
    with pytest.warns(UserWarning, match="Duplicate name"):
        s.set("k", b"new")
    assert s.get("k") == b"new"
