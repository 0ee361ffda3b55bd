"""LocalStore specifics: atomic writes, temporary files, symbolic links, directories, errors."""

from __future__ import annotations

import errno
import logging
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from dask.base import tokenize

from zarr_dask.errors import InvalidPathError, StoreError
from zarr_dask.store import LocalStore, open_store
from zarr_dask.store import files as files_module
from zarr_dask.store.local import TEMP_SUFFIX


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "store.zarr"


@pytest.fixture
def store(root: Path) -> LocalStore:
    return LocalStore(root)


def _all_files(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


# --------------------------------------------------------------------------------------------- atomicity
def test_failed_replace_keeps_old_value_and_leaves_no_temp_file(
    store: LocalStore, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.set("a/k", b"old")

    def failing_replace(src: str, dst: str) -> None:
        raise OSError(errno.EIO, "simulated crash in os.replace")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(StoreError, match="simulated crash") as info:
        store.set("a/k", b"new value")
    assert store.url in str(info.value) and "'a/k'" in str(info.value)
    assert isinstance(info.value.__cause__, OSError)
    monkeypatch.undo()
    assert store.get("a/k") == b"old"
    assert store.list_prefix("") == ["a/k"]
    assert _all_files(root) == ["a", "a/k"]  # the temporary file was removed


def test_failure_mid_write_keeps_old_value(
    store: LocalStore, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.set("k", b"old")

    def half_then_fail(fd: int, value: bytes) -> None:
        os.write(fd, bytes(value)[:2])
        raise OSError(errno.ENOSPC, "simulated full disk")

    monkeypatch.setattr(files_module, "write_all", half_then_fail)
    with pytest.raises(StoreError, match="full disk"):
        store.set("k", b"new value")
    with pytest.raises(StoreError, match="full disk"):
        store.set_if_not_exists("fresh", b"new value")
    monkeypatch.undo()
    assert store.get("k") == b"old"
    assert store.get("fresh") is None
    assert _all_files(root) == ["k"]


def test_stray_temporary_files_are_never_listed(store: LocalStore, root: Path) -> None:
    store.set("g/zarr.json", b"{}")
    (root / "g" / f".zarr.json.0123456789abcdef{TEMP_SUFFIX}").write_bytes(b"torn")
    (root / f".x{TEMP_SUFFIX}").write_bytes(b"torn")
    assert store.list_prefix("") == ["g/zarr.json"]
    assert store.list_dir("g") == (["zarr.json"], [])
    assert store.list_dir("") == ([], ["g"])
    with pytest.raises(InvalidPathError, match="reserved for temporary files"):
        store.get(f"g/.zarr.json.0123456789abcdef{TEMP_SUFFIX}")


def test_set_if_not_exists_without_hard_links(store: LocalStore, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_links(src: str, dst: str) -> None:
        raise OSError(errno.EPERM, "hard links not supported")

    monkeypatch.setattr(os, "link", no_links)
    assert store.set_if_not_exists("a/zarr.json", b"1") is True
    assert store.set_if_not_exists("a/zarr.json", b"2") is False
    assert store.get("a/zarr.json") == b"1"
    assert store.list_prefix("") == ["a/zarr.json"]


def test_fsync_mode(root: Path) -> None:
    store = LocalStore(root, fsync=True)
    store.set("a/b", b"durable")
    assert store.set_if_not_exists("a/c", b"x")
    assert store.get("a/b") == b"durable"
    assert store != LocalStore(root) and tokenize(store) != tokenize(LocalStore(root))
    assert pickle.loads(pickle.dumps(store)).fsync


def test_written_files_have_normal_permissions(store: LocalStore, root: Path) -> None:
    store.set("k", b"1")
    umask = os.umask(0)
    os.umask(umask)
    assert (root / "k").stat().st_mode & 0o777 == 0o666 & ~umask


# ------------------------------------------------------------------------------------ symbolic links
@pytest.fixture
def outside(tmp_path: Path) -> Path:
    secret = tmp_path / "outside"
    secret.mkdir()
    (secret / "secret").write_bytes(b"do not leak")
    return secret


def test_symlinked_directory_out_of_the_root_is_refused(store: LocalStore, root: Path, outside: Path) -> None:
    root.mkdir()
    (root / "link").symlink_to(outside, target_is_directory=True)
    calls = [
        lambda: store.get("link/secret"),
        lambda: store.get_many(["link/secret"]),
        lambda: store.get_ranges([("link/secret", 0, 2)]),
        lambda: store.exists("link/secret"),
        lambda: store.set("link/new", b"x"),
        lambda: store.set_if_not_exists("link/new", b"x"),
        lambda: store.delete("link/secret"),
        lambda: store.list_dir("link"),
        lambda: store.list_prefix("link"),
        lambda: store.delete_prefix("link"),
    ]
    for call in calls:
        with pytest.raises(InvalidPathError, match="outside the store root") as info:
            call()
        assert store.url in str(info.value)
    assert sorted(p.name for p in outside.iterdir()) == ["secret"]
    assert store.list_prefix("") == []  # links are not listed


def test_symlinked_file_out_of_the_root_is_refused(store: LocalStore, root: Path, outside: Path) -> None:
    root.mkdir()
    (root / "leak").symlink_to(outside / "secret")
    with pytest.raises(InvalidPathError, match="outside the store root"):
        store.get("leak")
    with pytest.raises(InvalidPathError, match="outside the store root"):
        store.exists("leak")
    store.set("leak", b"replaced")  # replaces the link itself, never writes through it
    assert (outside / "secret").read_bytes() == b"do not leak"
    assert store.get("leak") == b"replaced"


def test_symlinks_inside_the_root_are_followed(store: LocalStore, root: Path) -> None:
    store.set("real/k", b"v")
    (root / "alias").symlink_to(root / "real" / "k")
    assert store.get("alias") == b"v"
    assert store.exists("alias")
    assert store.list_prefix("") == ["real/k"]


def test_root_may_itself_be_a_symlink(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.mkdir()
    (tmp_path / "root-link").symlink_to(target, target_is_directory=True)
    store = LocalStore(tmp_path / "root-link")
    store.set("a/b", b"1")
    assert store.get("a/b") == b"1"
    assert (target / "a" / "b").read_bytes() == b"1"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_is_not_a_key_and_does_not_hang(store: LocalStore, root: Path) -> None:
    root.mkdir()
    os.mkfifo(root / "fifo")
    assert store.get("fifo") is None
    assert store.get_ranges([("fifo", 0, 1)]) == [None]
    assert not store.exists("fifo")
    assert store.list_prefix("") == []


# ------------------------------------------------------------------------------------- directories
def test_set_creates_parents_and_delete_prunes_them(store: LocalStore, root: Path) -> None:
    store.set("a/b/c/d", b"1")
    store.set("a/x", b"2")
    store.delete("a/b/c/d")
    assert _all_files(root) == ["a", "a/x"]
    store.delete_many(["a/x"])
    assert root.is_dir() and _all_files(root) == []


def test_delete_prefix_keeps_the_root(store: LocalStore, root: Path) -> None:
    store.set_many({"a/b": b"1", "c": b"2"})
    store.delete_prefix("")
    assert root.is_dir() and _all_files(root) == []
    store.set_many({"a/b/c": b"1", "a/d": b"2"})
    store.delete_prefix("a/b")
    assert _all_files(root) == ["a", "a/d"]


def test_read_only_store_on_a_missing_root_creates_nothing(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "missing", read_only=True)
    assert store.get("k") is None
    assert store.get_many(["k"]) == {}
    assert store.list_prefix("") == [] and store.list_dir("") == ([], [])
    assert not (tmp_path / "missing").exists()


def test_get_ranges_opens_each_file_once(store: LocalStore, monkeypatch: pytest.MonkeyPatch) -> None:
    store.set("shard", bytes(range(100)))
    opened: list[str] = []
    real_open = store._open

    def spy(path: str, key: str) -> int | None:
        opened.append(key)
        return real_open(path, key)

    monkeypatch.setattr(store, "_open", spy)
    got = store.get_ranges([("shard", 0, 4), ("shard", -4, None), ("shard", 50, 52), ("nope", 0, 1)])
    assert got == [bytes(range(4)), bytes(range(96, 100)), bytes([50, 51]), None]
    assert opened == ["shard", "nope"]


# ------------------------------------------------------------------------------------------ errors
def test_backend_errors_become_store_errors(store: LocalStore) -> None:
    store.set("file", b"1")
    with pytest.raises(StoreError, match="cannot write key 'file/child'") as info:
        store.set("file/child", b"2")
    assert store.url in str(info.value)
    assert isinstance(info.value.__cause__, OSError)
    assert store.get("file/child") is None  # reading below a file is just "missing"


# ------------------------------------------------------------------------------- urls and opening
def test_url_and_open_store_spellings(root: Path) -> None:
    store = LocalStore(root)
    assert store.url == "file://" + str(root)
    for spelling in (root, str(root), f"file://{root}", f"local://{root}", store.url):
        opened = open_store(spelling)
        assert isinstance(opened, LocalStore) and opened == store
    with pytest.raises(TypeError, match="storage_options"):
        open_store(str(root), storage_options={"auto_mkdir": True})


def test_relative_roots_are_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    store = LocalStore("rel.zarr")
    assert store.root == str(tmp_path / "rel.zarr")
    assert pickle.loads(pickle.dumps(store)).root == store.root


# ------------------------------------------------------------------------------------------------ locks
_HOLD_AND_STOP = """
import os, signal, sys
from zarr_dask.store import LocalStore
store = LocalStore(sys.argv[1])
with store.key_lock("a/k"):
    print("holding", flush=True)
    os.kill(os.getpid(), signal.SIGSTOP)  # a frozen writer, inside the lock
"""


@pytest.mark.skipif(not files_module.HAVE_FLOCK or not os.path.exists("/proc/locks"), reason="flock and /proc/locks")
def test_a_wait_for_a_lock_a_stopped_process_holds_is_logged_with_its_pid(
    store: LocalStore, root: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A writer frozen inside a key's lock makes the next writer of that key wait until it resumes (safe: its
    comparison is already made); the wait must not be silent: it is logged naming the process and its state."""
    monkeypatch.setattr(files_module, "LOCK_WAIT_WARNING", 0.3)
    store.set("a/k", b"v0")
    holder = subprocess.Popen([sys.executable, "-c", _HOLD_AND_STOP, str(root)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
        deadline = time.monotonic() + 30
        while Path(f"/proc/{holder.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "T":
            assert time.monotonic() < deadline
            time.sleep(0.01)
        writer = threading.Thread(target=store.set, args=("a/k", b"v1"))
        with caplog.at_level(logging.WARNING, logger="zarr_dask.store"):
            writer.start()
            writer.join(3)
            assert writer.is_alive()  # waits: the lock is held
            message = " ".join(r.getMessage() for r in caplog.records)
            assert f"process {holder.pid} (stopped)" in message and "'a/k'" in message and str(root) in message
            holder.send_signal(signal.SIGCONT)  # resumed: it leaves the lock, the write goes on
            writer.join(30)
        assert not writer.is_alive()
        assert store.get("a/k") == b"v1"
    finally:
        holder.send_signal(signal.SIGCONT)
        holder.kill()
        holder.communicate()


def test_an_uncontended_lock_logs_nothing(store: LocalStore, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="zarr_dask.store"):
        for _ in range(3):
            store.set("a/k", b"v")
            assert store.set_if_unchanged({"a/k": (b"w", store.get_versioned(["a/k"])["a/k"].version)}) == {"a/k": True}
    assert not caplog.records


def test_a_write_whose_temporary_file_a_concurrent_delete_removed_is_made_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another writer's ``delete_prefix`` of the key's directory (a journal closed by another resumer of the same
    run) can remove the temporary file between its creation and its rename: the write is made again, not failed."""
    from zarr_dask.store import files

    store = LocalStore(str(tmp_path))
    real, calls = files.replace, []

    def removed_first(temp: str, path: str) -> bool:
        calls.append(temp)
        if len(calls) == 1:
            files.remove_tree(os.path.dirname(temp))  # what the concurrent delete_prefix did
        return real(temp, path)

    monkeypatch.setattr(files, "replace", removed_first)
    store.set("j/t/0.0", b"receipt")
    assert len(calls) == 2 and store.get("j/t/0.0") == b"receipt"
