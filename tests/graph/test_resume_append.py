"""Resumable appends (``append(..., resume=True)``, issue 25): an append that dies is run again and neither
recomputes nor rewrites what it finished, is never stored twice once it landed, and is never mixed with
another append that ran between the failure and the re-run. Local schedulers, local files and moto S3;
clusters of processes: test_resume_distributed.py."""

from __future__ import annotations

import logging
import random
import subprocess
from pathlib import Path
from typing import Any

import dask
import dask.array as da
import numpy as np
import pytest

import zarr_dask
from tests.graph import _resume_job as job
from tests.graph._resume_job import Dies
from tests.graph.test_resume import files, identities, kill_once_done, settled, start_job
from tests.unconditional_store import UnconditionalStore
from zarr_dask.cli import main
from zarr_dask.errors import UnsupportedFeatureError, WriteConflictError
from zarr_dask.graph.journal import JOURNAL_DIR
from zarr_dask.store import open_store

TTL = "1.0"  # append lease time to live in these tests (a killed client's lease lapses after it)
BASE = np.arange(16 * 40, dtype="f8").reshape(16, 40) - 1000.0  # two chunks: the append's tasks are its blocks
SOURCE = np.arange(np.prod(job.SHAPE), dtype="f8").reshape(job.SHAPE)  # 12 blocks of 8 rows
END = (16 + job.SHAPE[0], job.SHAPE[1])


@pytest.fixture(autouse=True)
def _short_lease(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZARR_DASK_APPEND_LEASE_TTL", TTL)


def _base(url: Path) -> Path:
    zarr_dask.to_zarr(da.from_array(BASE, chunks=job.CHUNKS), str(url), chunks=job.CHUNKS)
    return url


def receipts(root: Path) -> set[int]:
    """The append's writer tasks (its blocks) with a receipt in the journal."""
    return {
        int(p.name.split(".")[0])
        for p in root.glob(f"{JOURNAL_DIR}/*/from-*/t/*")
        if not p.name.startswith(".") and not p.name.endswith(".zd-tmp")
    }


def stored(url: Path) -> dict[str, bytes]:
    """The array's files, its journals apart; asserts that each journal is reduced to its two records."""
    journals = {p.name: sorted(q.name for q in p.iterdir()) for p in (url / JOURNAL_DIR).glob("*")}
    assert all(names == ["begin", "complete"] for names in journals.values()), journals
    return {k: v for k, v in files(url).items() if not k.startswith(JOURNAL_DIR)}


def _journal(url: Path) -> dict[str, bytes]:
    """The journal files of the one run under ``url``: its ``begin`` and ``complete`` records only."""
    journal = {k: v for k, v in files(url).items() if k.startswith(JOURNAL_DIR)}
    assert sorted(k.rsplit("/", 1)[-1] for k in journal) == ["begin", "complete"], journal
    return journal


def _flaky(name: str, fail_at: int, scale: float = 3.0) -> tuple[da.Array, list[int]]:
    """The append's source, raising on its ``fail_at``-th block (0: never); returns it and the blocks computed."""
    job.STATE[name] = {"fail_at": fail_at, "seen": []}
    src = da.from_array(SOURCE, chunks=job.CHUNKS).map_blocks(job.flaky, name, scale, dtype="f8")
    return src, job.STATE[name]["seen"]


def _clean(tmp_path: Path, *sources: np.ndarray[Any, Any]) -> dict[str, bytes]:
    """The files of the base array with ``sources`` appended by plain appends, in order."""
    url = _base(tmp_path / f"clean-{len(list(tmp_path.iterdir()))}.zarr")
    for s in sources:
        zarr_dask.append(da.from_array(s, chunks=job.CHUNKS), str(url))
    return files(url)


def _dies(src: da.Array, url: str, scheduler: str = "threads", options: dict[str, Any] | None = None) -> set[int]:
    """Run the resumable append of ``src`` until its source raises; the receipts then (local files)."""
    with dask.config.set(scheduler=scheduler, num_workers=2), pytest.raises(Dies):
        zarr_dask.append(src, url, storage_options=options, resume=True)
    return settled(lambda: receipts(Path(url))) if options is None else set()


def _raising_append_then_resume(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    url = _base(tmp_path / "a.zarr")
    src, seen = _flaky(f"append-{seed}", rng.randint(4, 10))
    finished = _dies(src, str(url))
    assert finished and len(finished) < 12
    assert zarr_dask.open_array(str(url)).shape == BASE.shape  # nothing committed
    before = identities(url)
    store = open_store(str(url))
    plan = zarr_dask.explain_write(src, store, append_axis=0, resume=True)
    assert (plan.skipped_tasks, plan.skipped_keys) == (len(finished), len(finished))
    n = len(seen)
    with dask.config.set(scheduler="threads", num_workers=2):
        assert zarr_dask.append(src, store, resume=True) == END
    recomputed = seen[n:]
    assert sorted(recomputed) == sorted(set(range(12)) - finished)  # finished blocks were not recomputed
    missing = 12 - len(finished)
    # each missing key and its receipt, the begin and 'complete' records, and as for any append: the lease,
    # the commit recorded in it, the grown metadata; no finished key
    assert store.counters.snapshot()["set"] == 2 * missing + 2 + 3
    after = identities(url)
    assert all(after[f"c/{i + 2}/0"] == before[f"c/{i + 2}/0"] for i in finished)  # nor rewritten
    assert files(url) == {**_clean(tmp_path, SOURCE * 3 + 1), **_journal(url)}


@pytest.mark.parametrize("seed", [3])
def test_raising_append_resumes_without_recomputing_or_rewriting(
    tmp_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ZARR_DASK_APPEND_LEASE_TTL", "60")  # no renewal among the counted writes (a failed run
    _raising_append_then_resume(tmp_path, seed)  # marks its lease lapsed: the re-run takes it at once)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(4, 14))
def test_raising_append_at_random_points(tmp_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZARR_DASK_APPEND_LEASE_TTL", "60")
    _raising_append_then_resume(tmp_path, seed)


def test_resumed_append_logs_what_it_skips(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    url = _base(tmp_path / "a.zarr")
    src, _ = _flaky("log", 5)
    n = len(_dies(src, str(url), scheduler="sync"))
    assert n
    with caplog.at_level(logging.INFO, logger="zarr_dask.graph"), dask.config.set(scheduler="sync"):
        zarr_dask.append(src, str(url), resume=True)
    assert "resuming run" in caplog.text and f"{n} of 12 writer tasks ({n} of 12 keys)" in caplog.text


def _child(url: Path, counter: Path, **env: str) -> subprocess.Popen[bytes]:
    return start_job(url, counter, "append", **{"ZARR_DASK_APPEND_LEASE_TTL": TTL, **env})


def _kill_client_and_resume(tmp_path: Path, wait_for: int) -> None:
    url, counter = _base(tmp_path / "a.zarr"), tmp_path / "count"
    finished = kill_once_done(_child(url, counter), lambda: receipts(url), wait_for)
    before, computed = identities(url), len(job.calls(str(counter)))
    with dask.config.set(scheduler="threads", num_workers=2):  # takes the killed run's lease over once it lapses
        assert zarr_dask.append(job.source(str(counter)), str(url), resume=True) == END
    again = job.calls(str(counter))[computed:]
    assert not set(again) & finished  # finished blocks were not recomputed
    assert set(again) >= set(range(12)) - finished
    after = identities(url)
    assert all(after[f"c/{i + 2}/0"] == before[f"c/{i + 2}/0"] for i in finished)  # nor rewritten
    assert stored(url) == _clean(tmp_path, SOURCE * 3 + 1)


def test_client_killed_mid_append_then_resumed(tmp_path: Path) -> None:
    _kill_client_and_resume(tmp_path, wait_for=4)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(6))
def test_client_killed_mid_append_at_random_points(tmp_path: Path, seed: int) -> None:
    _kill_client_and_resume(tmp_path, wait_for=random.Random(seed).randint(1, 10))


def test_append_killed_during_its_commit_is_not_appended_twice(tmp_path: Path) -> None:
    """The client dies after recording its commit in the lease and before making it. Another append that
    comes first completes that commit (and refuses to run once, as always); the re-run then finds the
    'complete' record the completed commit wrote and appends nothing; the other append, run again, lands after."""
    url, counter = _base(tmp_path / "a.zarr"), tmp_path / "count"
    assert _child(url, counter, ZD_DIE_AT_COMMIT="1").wait() == 18
    assert zarr_dask.open_array(str(url)).shape == BASE.shape
    other = da.from_array(-SOURCE[:8], chunks=8)
    with pytest.raises(WriteConflictError, match="interrupted between its commits"):
        zarr_dask.append(other, str(url))  # waits for the lease to lapse, completes the commit
    assert zarr_dask.open_array(str(url)).shape == END
    computed = len(job.calls(str(counter)))
    assert zarr_dask.append(job.source(str(counter)), str(url), resume=True) == END
    assert len(job.calls(str(counter))) == computed  # nothing computed, nothing appended
    zarr_dask.append(other, str(url))
    assert stored(url) == _clean(tmp_path, SOURCE * 3 + 1, -SOURCE[:8])


def test_landed_lazy_append_is_not_appended_twice(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A lazy append computed elsewhere landed (its caller never saw the result): the same call again returns
    the shape it committed and appends nothing, as often as it is made, until the journal is published."""
    url = _base(tmp_path / "a.zarr")
    src, seen = _flaky("lazy", 0)
    with dask.config.set(scheduler="sync"):
        assert zarr_dask.append(src, str(url), resume=True, compute=False).compute() == END
        assert sorted(p.name for p in next((url / JOURNAL_DIR).iterdir()).iterdir()) == ["begin", "complete"]
        assert zarr_dask.explain_write(src, str(url), append_axis=0, resume=True).skipped_tasks == 12
        assert zarr_dask.append(src, str(url), resume=True) == END
        assert zarr_dask.append(src, str(url), resume=True, compute=False).compute() == END  # (a job run again)
        assert len([b for b in seen if b >= 0]) == 12
        assert zarr_dask.write_ledger(str(url)).regions("done") == [((16, END[0]), (0, 40))]
        assert main(["ledger", str(url), "--publish"]) == 0  # deletes the journals: the same call is a new append now
        assert "published: an array: no consolidated metadata, 1 journal(s) deleted" in capsys.readouterr().out
        assert zarr_dask.append(src, str(url), resume=True) == (END[0] + 96, 40)
    assert len([b for b in seen if b >= 0]) == 24


def test_append_landed_meanwhile_is_not_mixed_with(tmp_path: Path) -> None:
    """Another append lands between the failure and the re-run: the re-run appends all its rows at the new
    end (the rows it had written lie where the other append's are now)."""
    url = _base(tmp_path / "a.zarr")
    src, seen = _flaky("after-other", 6)
    assert _dies(src, str(url))
    zarr_dask.append(da.from_array(-SOURCE[:20], chunks=8), str(url))  # takes the lapsed lease at once
    n = len(seen)
    with dask.config.set(scheduler="threads", num_workers=2):
        assert zarr_dask.append(src, str(url), resume=True) == (END[0] + 20, 40)
    assert sorted(seen[n:]) == list(range(12))
    assert stored(url) == _clean(tmp_path, -SOURCE[:20], SOURCE * 3 + 1)


def test_failed_append_meanwhile_voids_the_receipts(tmp_path: Path) -> None:
    """Another append takes the lease, overwrites rows the first run had written beyond the shape, and fails
    too: the re-run does not trust its receipts (another append held the lease since) and writes every row."""
    url = _base(tmp_path / "a.zarr")
    src, _ = _flaky("first", 7)
    finished = _dies(src, str(url), scheduler="sync")
    assert finished
    before = identities(url)
    other, _ = _flaky("second", 12, scale=5.0)
    with dask.config.set(scheduler="sync"), pytest.raises(Dies):
        zarr_dask.append(other, str(url))  # not resumable: writes most blocks over the first run's, then dies
    overwritten = {i for i in finished if identities(url)[f"c/{i + 2}/0"] != before[f"c/{i + 2}/0"]}
    assert overwritten  # rows the first run's receipts vouch for now hold the other append's data
    with dask.config.set(scheduler="sync"):
        zarr_dask.append(src, str(url), resume=True)
    assert stored(url) == _clean(tmp_path, SOURCE * 3 + 1)


def test_resumable_append_needs_leases() -> None:
    store = UnconditionalStore()
    zarr_dask.to_zarr(da.from_array(BASE, chunks=job.CHUNKS), store, chunks=job.CHUNKS)
    with pytest.raises(UnsupportedFeatureError, match="needs a store with conditional writes.*drop resume=True"):
        zarr_dask.append(da.from_array(SOURCE, chunks=job.CHUNKS), store, resume=True)
    with pytest.raises(TypeError, match="resume must be"):
        zarr_dask.append(da.from_array(SOURCE, chunks=job.CHUNKS), store, resume=2)  # type: ignore[arg-type]


@pytest.mark.s3
def test_s3_append_resume_counts_requests(
    s3_bucket_url: str, s3_storage_options: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """moto S3, threads: the resumed append puts only the missing keys and their receipts."""
    monkeypatch.setenv("ZARR_DASK_APPEND_LEASE_TTL", "60")
    zarr_dask.to_zarr(da.from_array(BASE, chunks=job.CHUNKS), s3_bucket_url, storage_options=s3_storage_options,
                      chunks=job.CHUNKS)  # fmt: skip
    src, seen = _flaky("s3-append", 6)
    _dies(src, s3_bucket_url, options=s3_storage_options)
    store = open_store(s3_bucket_url, storage_options=s3_storage_options)
    finished = settled(lambda: {int(k.rsplit("/", 1)[-1].split(".")[0]) for k in store.list_prefix(JOURNAL_DIR) if "/t/" in k})
    assert finished
    store = open_store(s3_bucket_url, storage_options=s3_storage_options)
    n = len(seen)
    with dask.config.set(scheduler="threads", num_workers=2):
        assert zarr_dask.append(src, store, resume=True) == END
    assert sorted(seen[n:]) == sorted(set(range(12)) - finished)
    assert store.counters.snapshot()["set"] == 2 * (12 - len(finished)) + 2 + 3  # (see the local test)
    assert sorted(k.rsplit("/", 1)[-1] for k in store.list_prefix(JOURNAL_DIR)) == ["begin", "complete"]
    expected = np.concatenate([BASE, SOURCE * 3 + 1])
    np.testing.assert_array_equal(zarr_dask.open_array(store)[:], expected)
