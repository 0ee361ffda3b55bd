"""Resumable writes (``resume=True``, issue 25) with local schedulers: a write that dies is run again and
neither recomputes nor rewrites what its journal shows finished; the result equals a clean run byte for byte.
Distributed clusters of processes: test_resume_distributed.py."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import dask
import dask.array as da
import numpy as np
import pytest

import zarr_dask
from tests.graph import _resume_job as job
from tests.graph._resume_job import Dies
from zarr_dask.errors import ContainsArrayError
from zarr_dask.graph.journal import JOURNAL_DIR
from zarr_dask.store import open_store

ROOT = Path(__file__).resolve().parents[2]


def files(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (relative path: bytes), but the hidden temporary file a killed writer leaves
    (never listed as a key; docs/safe-writes.md rule 5)."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.name.endswith(".zd-tmp")
    }


def identities(root: Path) -> dict[str, tuple[int, int]]:
    """Each chunk file's inode and modification time: a file written again (a rename over it) changes both."""
    out = {}
    for p in root.rglob("*"):
        if p.is_file() and "/c/" in f"/{p.relative_to(root)}":
            st = p.stat()
            out[str(p.relative_to(root))] = (st.st_ino, st.st_mtime_ns)
    return out


def receipts(root: Path) -> set[int]:
    """The writer tasks (block rows of the job's array) with a receipt in the journal."""
    return {int(p.name.split(".")[0]) for p in root.glob(f"{JOURNAL_DIR}/*/t/*") if not p.name.startswith(".")}


def settled(read: Any) -> Any:
    """``read()`` once it stopped changing for 0.3 s: a local scheduler raises a task's error at once, while
    its other threads may still finish the tasks they run (and write their receipts)."""
    last, since = read(), time.monotonic()
    while time.monotonic() - since < 0.3:
        time.sleep(0.05)
        now = read()
        if now != last:
            last, since = now, time.monotonic()
    return last


def _failing(name: str, n: int) -> list[int]:
    """Make ``job.flaky(..., name)`` fail on its ``n``-th call; returns the list of blocks it computes."""
    job.STATE[name] = {"fail_at": n, "seen": []}
    return job.STATE[name]["seen"]  # type: ignore[no-any-return]


def _clean(tmp_path: Path, name: str = "clean.zarr", **kwargs: Any) -> Path:
    url = tmp_path / name
    zarr_dask.to_zarr(job.source(str(tmp_path / f"{name}.count")), str(url), chunks=job.CHUNKS, **kwargs)
    return url


@pytest.mark.parametrize("seed", [3])
def test_killed_write_resumes_without_recomputing_or_rewriting(
    tmp_path: Path, seed: int, capsys: pytest.CaptureFixture[str]
) -> None:
    """A task that fails on its N-th call stops the write; the resumed run computes and writes exactly the
    tasks without a receipt (its progress bar says how many it skips), and the store equals a clean run's."""
    rng = random.Random(seed)
    url = tmp_path / "a.zarr"
    base = da.from_array(np.arange(np.prod(job.SHAPE), dtype="f8").reshape(job.SHAPE), chunks=job.CHUNKS)
    seen = _failing(f"killed-{seed}", rng.randint(4, 10))
    src = base.map_blocks(job.flaky, f"killed-{seed}", dtype="f8")
    with dask.config.set(scheduler="threads", num_workers=2):
        with pytest.raises(Dies):
            zarr_dask.to_zarr(src, str(url), chunks=job.CHUNKS, resume=True)
        finished = settled(lambda: receipts(url))
        assert finished and len(finished) < 12
        before = identities(url)
        store = open_store(str(url))
        plan = zarr_dask.explain_write(src, store, chunks=job.CHUNKS, resume=True)
        assert (plan.skipped_tasks, plan.skipped_keys) == (len(finished), len(finished))
        assert "resumed: skips" in repr(plan)
        n = len(seen)
        capsys.readouterr()
        zarr_dask.to_zarr(src, store, chunks=job.CHUNKS, resume=True, progress=True)
    shown = capsys.readouterr()
    k = len(finished)
    assert f": {k} of 12 writer tasks ({k} of 12 keys) finished by an earlier run, skipped" in shown.err
    assert "100% Completed" in shown.err and not shown.out  # dask's bar, on stderr
    recomputed = seen[n:]
    assert sorted(recomputed) == sorted(set(range(12)) - finished)  # finished blocks were not recomputed
    assert store.counters.snapshot()["set"] == 12 - len(finished) + len(recomputed)  # keys + receipts, nothing finished
    after = identities(url)
    for i in finished:  # the finished keys were not written again
        assert after[f"c/{i}/0"] == before[f"c/{i}/0"]
    assert not (url / JOURNAL_DIR).exists()  # the journal is deleted once the write finished
    assert files(url) == files(_clean(tmp_path))


def test_resumed_overwrite_keeps_no_stale_key(tmp_path: Path) -> None:
    """Overwriting an existing array: the first run deletes the old data before its journal begins, so a key
    of the old array is never taken for one of this write (rows whose new data is all fill are absent)."""
    url = tmp_path / "a.zarr"
    old = np.full(job.SHAPE, 7.0)
    zarr_dask.to_zarr(da.from_array(old, chunks=job.CHUNKS), str(url), chunks=job.CHUNKS, fill_value=0.0)
    new = np.zeros(job.SHAPE)
    new[::16] = 5.0  # blocks 0, 2, 4...: data; blocks 1, 3...: all fill (their keys must go)
    _failing("overwrite", 5)
    src = da.from_array(new, chunks=job.CHUNKS).map_blocks(job.flaky, "overwrite", 1.0, dtype="f8")
    with dask.config.set(scheduler="sync"), pytest.raises(Dies):
        zarr_dask.to_zarr(src, str(url), chunks=job.CHUNKS, fill_value=0.0, mode="w", resume=True)
    with dask.config.set(scheduler="sync"):
        zarr_dask.to_zarr(src, str(url), chunks=job.CHUNKS, fill_value=0.0, mode="w", resume=True)
    np.testing.assert_array_equal(zarr_dask.open_array(str(url))[:], new)
    assert sorted(int(p.name) for p in (url / "c").iterdir()) == list(range(0, 12, 2))
    clean = tmp_path / "clean.zarr"
    zarr_dask.to_zarr(da.from_array(new, chunks=job.CHUNKS), str(clean), chunks=job.CHUNKS, fill_value=0.0)
    assert files(url) == files(clean)


def test_progress_of_a_new_write(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``progress=True`` on a write that is not resumed says what it writes; with ``compute=False`` it is refused
    (the caller computes: the bar is theirs to show)."""
    x = da.ones(job.SHAPE, chunks=job.CHUNKS)
    with dask.config.set(scheduler="threads"):
        zarr_dask.to_zarr(x, str(tmp_path / "a.zarr"), chunks=job.CHUNKS, resume=True, progress=True)
    shown = capsys.readouterr()
    assert "a.zarr /: writing 12 writer tasks (12 keys) (resumable run " in shown.err
    assert "100% Completed" in shown.err and not shown.out
    with pytest.raises(TypeError, match="compute=False returns it uncomputed"):
        zarr_dask.to_zarr(x, str(tmp_path / "b.zarr"), compute=False, progress=True)
    assert not (tmp_path / "b.zarr").exists()


def test_resume_needs_this_runs_journal(tmp_path: Path) -> None:
    """An array a *different* write created is not resumed into (ContainsArrayError as without resume); a
    changed computation is another run, which starts over."""
    url = tmp_path / "a.zarr"
    zarr_dask.to_zarr(da.ones(job.SHAPE, chunks=job.CHUNKS), str(url), chunks=job.CHUNKS)
    with pytest.raises(ContainsArrayError, match="holds no journal of a resumable write.*Fix: pass overwrite=True"):
        zarr_dask.to_zarr(da.zeros(job.SHAPE, chunks=job.CHUNKS), str(url), chunks=job.CHUNKS, resume=True)
    # a first run that died leaves its journal; a different computation is told so, with the fix
    seen = _failing("other", 3)
    src = da.from_array(np.ones(job.SHAPE), chunks=job.CHUNKS).map_blocks(job.flaky, "other", dtype="f8")
    with dask.config.set(scheduler="sync"), pytest.raises(Dies):
        zarr_dask.to_zarr(src, str(tmp_path / "b.zarr"), chunks=job.CHUNKS, resume=True)
    assert len(seen) == 3
    with pytest.raises(ContainsArrayError, match=r"journal\(s\) of other run\(s\).*resume='<name>'"):
        zarr_dask.to_zarr(da.zeros(job.SHAPE, chunks=job.CHUNKS), str(tmp_path / "b.zarr"), chunks=job.CHUNKS,
                          resume=True)  # fmt: skip
    with pytest.raises(TypeError, match="resume must be"):
        zarr_dask.to_zarr(da.zeros(job.SHAPE, chunks=job.CHUNKS), str(url), mode="w", resume=3)  # type: ignore[arg-type]


def test_lazy_region_write_resumes(tmp_path: Path) -> None:
    """compute=False region writes: the journal begins when the graph is built; a resumed region write keeps
    one ``complete`` record (for the fan-out ledger) and no receipts."""
    url = tmp_path / "a.zarr"
    zarr_dask.to_zarr(da.zeros(job.SHAPE, chunks=job.CHUNKS), str(url), chunks=job.CHUNKS, fill_value=-1.0)
    seen = _failing("region", 3)
    region = (slice(16, 80),)
    part = da.from_array(np.arange(64 * 40, dtype="f8").reshape(64, 40), chunks=(8, 40))
    src = part.map_blocks(job.flaky, "region", dtype="f8")
    lazy = zarr_dask.to_zarr(src, str(url), region=region, compute=False, resume="part-1")
    with dask.config.set(scheduler="sync"), pytest.raises(Dies):
        lazy.compute()
    n, finished = len(seen), receipts(url)
    assert 0 < len(finished) < 8
    with dask.config.set(scheduler="sync"):
        zarr_dask.to_zarr(src, str(url), region=region, compute=False, resume="part-1").compute()
    assert sorted(seen[n:]) == sorted(set(range(8)) - finished)
    expected = np.zeros(job.SHAPE)
    expected[region] = np.arange(64 * 40).reshape(64, 40) * 3 + 1
    np.testing.assert_array_equal(zarr_dask.open_array(str(url))[:], expected)
    (journal,) = (url / JOURNAL_DIR).iterdir()
    assert sorted(p.name for p in journal.iterdir()) == ["begin", "complete"]


@pytest.mark.s3
def test_s3_resume_counts_requests(s3_bucket_url: str, s3_storage_options: dict[str, Any]) -> None:
    """moto S3, threads: the resumed run puts only the missing keys and their receipts."""
    seen = _failing("s3", 6)
    base = da.from_array(np.arange(np.prod(job.SHAPE), dtype="f8").reshape(job.SHAPE), chunks=job.CHUNKS)
    src = base.map_blocks(job.flaky, "s3", dtype="f8")
    with dask.config.set(scheduler="threads", num_workers=2), pytest.raises(Dies):
        zarr_dask.to_zarr(src, s3_bucket_url, storage_options=s3_storage_options, chunks=job.CHUNKS, resume=True)
    store = open_store(s3_bucket_url, storage_options=s3_storage_options)
    finished = settled(lambda: {int(k.rsplit("/", 1)[-1].split(".")[0]) for k in store.list_prefix(JOURNAL_DIR) if "/t/" in k})
    assert finished  # the uploads queued behind the tasks landed before the error was raised, with their receipts
    assert all(store.get(f"c/{i}/0") is not None for i in finished)  # a receipt only follows its task's key
    store = open_store(s3_bucket_url, storage_options=s3_storage_options)
    n = len(seen)
    with dask.config.set(scheduler="threads", num_workers=2):
        zarr_dask.to_zarr(src, store, chunks=job.CHUNKS, resume=True)
    assert sorted(seen[n:]) == sorted(set(range(12)) - finished)
    assert store.counters.snapshot()["set"] == 2 * (12 - len(finished))  # each missing key and its receipt
    assert store.list_prefix(JOURNAL_DIR) == []
    expected = np.arange(np.prod(job.SHAPE)).reshape(job.SHAPE) * 3 + 1
    np.testing.assert_array_equal(zarr_dask.open_array(store)[:], expected)


def start_job(url: Path, counter: Path, *kind: str, **env: str) -> subprocess.Popen[bytes]:
    """The job's write (``kind``: see tests/graph/_resume_job.py) in a child process that the test kills."""
    env = {**os.environ, "ZD_RESUME_SLEEP": "0.15", "PYTHONPATH": str(ROOT), **env}
    return subprocess.Popen([sys.executable, "-m", "tests.graph._resume_job", str(url), str(counter), *kind], env=env,
                            cwd=ROOT)  # fmt: skip


def kill_once_done(child: subprocess.Popen[bytes], done: Any, wait_for: int) -> set[int]:
    """SIGKILL ``child`` once ``done()`` (the finished writer tasks) holds ``wait_for`` of them (or the child
    ended, or 120 s passed); returns what ``done()`` holds then, checked to be part of the write."""
    deadline = time.monotonic() + 120
    while len(done()) < wait_for and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    child.send_signal(signal.SIGKILL)
    child.wait()
    finished: set[int] = done()
    assert wait_for <= len(finished) < 12, finished
    return finished


def _kill_client_and_resume(tmp_path: Path, wait_for: int) -> None:
    url, counter = tmp_path / "a.zarr", tmp_path / "count"
    finished = kill_once_done(start_job(url, counter), lambda: receipts(url), wait_for)
    before, computed = identities(url), len(job.calls(str(counter)))
    with dask.config.set(scheduler="threads", num_workers=2):
        zarr_dask.to_zarr(job.source(str(counter)), str(url), chunks=job.CHUNKS, resume=True)
    again = job.calls(str(counter))[computed:]
    assert not set(again) & finished  # finished blocks were not recomputed
    assert set(again) >= set(range(12)) - finished
    after = identities(url)
    assert all(after[f"c/{i}/0"] == before[f"c/{i}/0"] for i in finished)  # nor rewritten
    assert files(url) == files(_clean(tmp_path))


def test_client_process_killed_then_resumed(tmp_path: Path) -> None:
    _kill_client_and_resume(tmp_path, wait_for=4)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(6))
def test_client_process_killed_at_random_points(tmp_path: Path, seed: int) -> None:
    _kill_client_and_resume(tmp_path, wait_for=random.Random(seed).randint(1, 10))


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(4, 12))
def test_killed_write_at_random_points(tmp_path: Path, seed: int, capsys: pytest.CaptureFixture[str]) -> None:
    test_killed_write_resumes_without_recomputing_or_rewriting(tmp_path, seed, capsys)
