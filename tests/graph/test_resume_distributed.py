"""Resumable writes on a ``LocalCluster`` of worker processes (issue 25): a task that exits its worker
process on its N-th call, a worker SIGKILLed mid-write; then the same write resumed. Local files and moto S3.
The scheduler gives up on a task at the first lost worker (``allowed-failures: 0``), so the write dies."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dask
import dask.array
import numpy as np
import pytest

import zarr_dask
from tests.conftest import local_cluster_client
from tests.graph import _resume_job as job
from tests.graph.test_resume import files, identities, receipts, settled
from zarr_dask.graph.journal import JOURNAL_DIR

distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    with local_cluster_client(losing_workers=True) as c:
        yield c


def _idle(client: Any) -> None:
    """Wait until the scheduler holds no task of the failed write (a lost write's other tasks are released)."""
    deadline = time.monotonic() + 60
    while client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks)) and time.monotonic() < deadline:
        time.sleep(0.05)
    client.wait_for_workers(2, timeout=60)


def _order(control: Path, orders: dict[str, Any]) -> None:
    """Give the workers new orders atomically (a worker reading a half-written file would fail its task)."""
    temp = control.with_suffix(".tmp")
    temp.write_text(json.dumps(orders))
    os.replace(temp, control)


def _die(
    client: Any, counter: Path, url: str, options: dict[str, Any] | None, kill: bool, done: Any, sleep: float = 0.2,
    append: bool = False,
) -> None:  # fmt: skip
    """Run the job's write (``append``: its resumable append) on the cluster until it dies (:func:`lose_a_worker`)."""
    if append:
        write = zarr_dask.append(job.source(str(counter)), url, storage_options=options, resume=True, compute=False)
    else:
        write = zarr_dask.to_zarr(
            job.source(str(counter)), url, storage_options=options, chunks=job.CHUNKS, resume=True, compute=False
        )
    lose_a_worker(client, write, counter, done, kill=kill, sleep=sleep)


#: Upstream calls from the 7th on sleep 1 s: the 12 blocks' writer tasks all wait for the write's one target
#: task (the array's creation, its journal), and while it runs (slowly: a fresh worker's imports) the workers
#: compute the upstream blocks ahead; had all 12 been computed before 3 receipts landed, the exit order below
#: would find no call left to exit, and the write would complete (seen once in 12 runs under load).
RUN_AHEAD = {"slow_from": 7, "slow": 1.0}


def lose_a_worker(client: Any, write: Any, counter: Path, done: Any, kill: bool = False, sleep: float = 0.2) -> None:
    """Compute ``write`` (of :mod:`_resume_job`'s blocks, counted in ``counter``) on the cluster until it dies,
    once ``done()`` (its receipts) lists 3 finished tasks: the next upstream task to start exits its worker
    process, or (``kill``) the test SIGKILLs a worker. Upstream blocks sleep ``sleep`` seconds (time to see
    receipts land)."""
    control = Path(f"{counter}.ctl")
    _order(control, {"sleep": sleep, **RUN_AHEAD})
    client.run(job.warm)
    future = client.compute(write)
    deadline = time.monotonic() + 60
    while len(done()) < 3 and not future.done() and time.monotonic() < deadline:
        time.sleep(0.005)
    if kill:
        os.kill(next(iter(client.run(os.getpid).values())), signal.SIGKILL)
    else:  # the task that starts next exits its worker on its call, the N-th
        _order(control, {"sleep": sleep, "exit_at": len(job.calls(str(counter))) + 1})
    expect_killed_worker(client, future)
    control.unlink()


def expect_killed_worker(client: Any, future: Any) -> None:
    """Wait for ``future`` (a write that lost a worker) to fail with KilledWorker, release it (else the scheduler
    keeps the failed keys, and the resumed write gets their error), and wait until the cluster is whole again."""
    try:
        future.result(timeout=120)
        err = None
    except Exception as e:  # noqa: BLE001 - KilledWorker, checked below
        err = repr(e)
    finally:
        future.release()
    assert err is not None and "KilledWorker" in err, err
    _idle(client)


@pytest.mark.parametrize("kill", [False, True], ids=["task-exits-worker", "worker-sigkilled"])
def test_worker_death_then_resume_local(client: Any, tmp_path: Path, kill: bool, capsys: pytest.CaptureFixture[str]) -> None:
    url, counter = tmp_path / "a.zarr", tmp_path / "count"
    _die(client, counter, str(url), None, kill, lambda: receipts(url))
    finished = settled(lambda: receipts(url))
    assert 0 < len(finished) < 12
    before, computed = identities(url), len(job.calls(str(counter)))
    capsys.readouterr()
    zarr_dask.to_zarr(job.source(str(counter)), str(url), chunks=job.CHUNKS, resume=True, progress=True)
    shown = capsys.readouterr()  # distributed's bar (the client is the default scheduler), on stderr
    assert f"{len(finished)} of 12 writer tasks ({len(finished)} of 12 keys) finished by an earlier run" in shown.err
    assert "100% Completed" in shown.err and not shown.out
    again = job.calls(str(counter))[computed:]
    assert sorted(again) == sorted(set(range(12)) - finished)  # finished blocks: not recomputed
    after = identities(url)
    assert all(after[f"c/{i}/0"] == before[f"c/{i}/0"] for i in finished)  # nor rewritten
    clean = tmp_path / "clean.zarr"
    zarr_dask.to_zarr(job.source(str(tmp_path / "clean-count")), str(clean), chunks=job.CHUNKS)
    assert files(url) == files(clean)


@pytest.mark.s3
def test_worker_death_then_resume_s3(client: Any, tmp_path: Path, s3_bucket_url: str, s3_storage_options: dict[str, Any]) -> None:
    import s3fs

    counter = tmp_path / "count"
    fs = s3fs.S3FileSystem(**s3_storage_options)
    root = s3_bucket_url.removeprefix("s3://")

    def stamps() -> dict[str, Any]:
        fs.invalidate_cache()
        return {p.removeprefix(root + "/"): i["LastModified"] for p, i in fs.find(root, detail=True).items()}

    def done() -> set[int]:
        return {int(k.rsplit("/", 1)[-1].split(".")[0]) for k in stamps() if "/t/" in k}

    _die(client, counter, s3_bucket_url, s3_storage_options, False, done, sleep=0.5)  # listings take a while
    finished = settled(done)
    assert 0 < len(finished) < 12
    before, computed = stamps(), len(job.calls(str(counter)))
    time.sleep(1.1)  # S3 times have a resolution of one second
    zarr_dask.to_zarr(job.source(str(counter)), s3_bucket_url, storage_options=s3_storage_options,
                      chunks=job.CHUNKS, resume=True)  # fmt: skip
    assert sorted(job.calls(str(counter))[computed:]) == sorted(set(range(12)) - finished)
    after = stamps()
    assert all(after[f"c/{i}/0"] == before[f"c/{i}/0"] for i in finished)  # finished keys: not put again
    assert not [k for k in after if JOURNAL_DIR in k]
    expected = np.arange(np.prod(job.SHAPE)).reshape(job.SHAPE) * 3 + 1
    np.testing.assert_array_equal(zarr_dask.open_array(s3_bucket_url, storage_options=s3_storage_options)[:], expected)


@pytest.mark.slow  # once in the dask-array leg the killed worker's nanny closed instead of restarting it (60 s lost)
def test_worker_killed_mid_append_then_resume(client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A resumable append on the cluster loses a worker (SIGKILL); the same append, run again once the lazy
    append's lease lapsed (its object was dropped), computes and writes only what has no receipt, commits
    once, and equals a clean append byte for byte."""
    from tests.graph.test_resume_append import BASE, SOURCE, _clean, stored
    from tests.graph.test_resume_append import receipts as append_receipts

    monkeypatch.setenv("ZARR_DASK_APPEND_LEASE_TTL", "1.0")
    url, counter = tmp_path / "a.zarr", tmp_path / "count"
    zarr_dask.to_zarr(dask.array.from_array(BASE, chunks=job.CHUNKS), str(url), chunks=job.CHUNKS)
    _die(client, counter, str(url), None, True, lambda: append_receipts(url), append=True)
    finished = settled(lambda: append_receipts(url))
    assert 0 < len(finished) < 12
    assert zarr_dask.open_array(str(url)).shape == BASE.shape
    before, computed = identities(url), len(job.calls(str(counter)))
    assert zarr_dask.append(job.source(str(counter)), str(url), resume=True) == (16 + job.SHAPE[0], job.SHAPE[1])
    assert sorted(job.calls(str(counter))[computed:]) == sorted(set(range(12)) - finished)
    after = identities(url)
    assert all(after[f"c/{i + 2}/0"] == before[f"c/{i + 2}/0"] for i in finished)
    assert stored(url) == _clean(tmp_path, SOURCE * 3 + 1)
