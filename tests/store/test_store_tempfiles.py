"""Temporary files of killed writers are removed later (age-based), never those of live writers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import zarr_dask
from zarr_dask.cli import main
from zarr_dask.store import tempfiles

pytestmark = pytest.mark.skipif(os.name == "nt", reason="SIGKILL")

WRITER = """
import sys, zarr_dask
store = zarr_dask.LocalStore(sys.argv[1])
value = b"x" * (64 << 20)
while True:
    store.set("a/c/0", value)
"""


def _kill_mid_write(root: Path) -> list[Path]:
    """Run a writer of a 64 MiB key in a loop and SIGKILL it while its temporary file exists."""
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(root)])
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            temps = list((root / "a" / "c").glob(f".*{tempfiles.TEMP_SUFFIX}"))
            if temps and (root / "a" / "c" / "0").exists():
                break
            time.sleep(0.001)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    return list((root / "a" / "c").glob(f".*{tempfiles.TEMP_SUFFIX}"))


def _kill_until_left_behind(root: Path) -> list[Path]:
    for _ in range(20):
        left = _kill_mid_write(root)
        if left:
            return left
    pytest.fail("no temporary file left behind in 20 kills")


def _age(paths: list[Path], seconds: float) -> None:
    past = time.time() - seconds
    for p in paths:
        os.utime(p, (past, past))


def test_killed_writers_temp_file_is_removed_by_a_later_write_to_the_key(tmp_path):
    root = tmp_path / "s.zarr"
    left = _kill_until_left_behind(root)
    store = zarr_dask.LocalStore(str(root))
    assert store.list_prefix("") == ["a/c/0"]  # never listed, never a torn value
    assert store.get("a/c/0") == b"x" * (64 << 20)
    tempfiles._swept.clear()  # a new process: this one has not swept the directory yet
    store.set("a/c/0", b"new")
    assert all(p.exists() for p in left)  # younger than an hour: could be a live writer's
    _age(left, 2 * 3600)
    tempfiles._swept.clear()
    store.set("a/c/0", b"newer")
    assert not any(p.exists() for p in left)
    assert store.get("a/c/0") == b"newer"


def test_maintenance_call_and_command_remove_only_stale_files(tmp_path, capsys):
    root = tmp_path / "s.zarr"
    left = _kill_until_left_behind(root)
    store = zarr_dask.LocalStore(str(root))
    live = root / "a" / f".0.feedfacecafebeef{tempfiles.TEMP_SUFFIX}"
    live.write_bytes(b"a live writer's partial value")
    assert store.remove_stale_temp_files() == []
    _age(left, 2 * 3600)
    assert store.remove_stale_temp_files() == sorted(str(p) for p in left)
    assert live.exists()
    _age([live], 120)
    assert main(["cleanup", str(root), "--max-age", "300"]) == 0
    assert live.exists()
    assert main(["cleanup", str(root), "--max-age", "60"]) == 0
    assert not live.exists()
    out = capsys.readouterr().out
    assert f"removed {live}" in out and "1 stale temporary file(s) removed" in out


def test_cleanup_command_refuses_non_local_stores(capsys):
    assert main(["cleanup", "memory://cleanup-x"]) == 1
    assert "only local stores hold temporary files" in capsys.readouterr().err


def test_read_only_store_does_not_remove(tmp_path):
    store = zarr_dask.LocalStore(str(tmp_path), read_only=True)
    with pytest.raises(zarr_dask.errors.ReadOnlyError):
        store.remove_stale_temp_files()
