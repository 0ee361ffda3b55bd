"""Resumable dataset appends (``to_zarr_dataset(..., append_dim=..., resume=True)``): an append killed half way
(a task raising on its N-th call, the client process SIGKILLed) and run again neither recomputes nor rewrites
the writer tasks that finished and ends byte for byte equal to a plain append; run again once it landed, it
appends nothing; another append that ran between the failure and the re-run is never mixed with. The design:
zarr_dask/graph/resume_append.py (the array append's, at the group level) and docs/design/resume.md."""

from __future__ import annotations

import gc
import logging
from pathlib import Path
from typing import Any

import dask
import dask.array as da
import numpy as np
import pytest
import xarray as xr

import zarr_dask
from tests.graph import _resume_job as job
from tests.graph._resume_job import CHUNKS, SHAPE, Dies
from tests.graph.test_resume import files, identities, kill_once_done, settled, start_job
from tests.unconditional_store import UnconditionalStore
from zarr_dask.errors import NonMonotonicCoordinateWarning, UnsupportedFeatureError
from zarr_dask.graph.journal import JOURNAL_DIR
from zarr_dask.store import open_store

ROWS = 16  # the stored group's length along t before the append: two chunks of v
ENCODING: dict[str, dict[str, Any]] = {"v": {"chunks": CHUNKS}, "w": {"chunks": (8,)}, "t": {"chunks": (8,)}}
SOURCE = np.arange(np.prod(SHAPE), dtype="f8").reshape(SHAPE)  # v's appended rows: 12 blocks of 8 rows
W = np.linspace(-1.0, 1.0, SHAPE[0])


@pytest.fixture(autouse=True)
def _long_lease(monkeypatch: pytest.MonkeyPatch) -> None:
    # no renewal among the counted writes (a run that failed in this process marks its lease lapsed: the
    # re-run takes it at once); the killed process's test shortens it
    monkeypatch.setenv("ZARR_DASK_APPEND_LEASE_TTL", "60")


def _base(url: Path, t: np.ndarray[Any, Any] | None = None) -> Path:
    """The group appended to: v (t, x), w (t) and the index coordinate t, ``ROWS`` long."""
    t = np.arange(ROWS) if t is None else t
    base = xr.Dataset(
        {"v": (("t", "x"), np.full((ROWS, SHAPE[1]), -5.0)), "w": ("t", np.zeros(ROWS))}, coords={"t": t},
        attrs={"title": "base"},
    )  # fmt: skip
    zarr_dask.to_zarr_dataset(base, str(url), mode="w", encoding=ENCODING)
    return url


def _flaky(key: str, fail_at: int) -> tuple[da.Array, list[int]]:
    """v's appended data (``SOURCE * 3 + 1``), raising on its ``fail_at``-th block (0: never); and the list
    of the blocks it computed."""
    job.STATE[key] = {"fail_at": fail_at, "seen": []}
    return da.from_array(SOURCE, chunks=CHUNKS).map_blocks(job.flaky, key, dtype="f8"), job.STATE[key]["seen"]


def _more(v: Any, start: int = ROWS) -> xr.Dataset:
    """The appended dataset: two dask variables along t (v, w) and t itself, in memory."""
    n = v.shape[0]
    return xr.Dataset(
        {"v": (("t", "x"), v), "w": ("t", da.from_array(W[:n], chunks=8))}, coords={"t": np.arange(start, start + n)}
    )


def _seen(seen: list[int]) -> list[int]:
    return [b for b in seen if b >= 0]  # (not dask's call on an empty block for the meta)


def _receipts(url: Path, name: str = "v") -> set[int]:
    """The writer tasks (blocks) of variable ``name`` with a receipt in the group's journal."""
    return {
        int(p.name.split(".")[0])
        for p in url.glob(f"{JOURNAL_DIR}/*/from-*/{name}/t/*")
        if not p.name.startswith(".") and not p.name.endswith(".zd-tmp")
    }


def _finished(url: Path, name: str) -> set[int]:
    """All 12 once the variable's write finished (its receipts replaced by its ``complete``), else receipts."""
    return set(range(12)) if list(url.glob(f"{JOURNAL_DIR}/*/from-*/{name}/complete")) else _receipts(url, name)


def _journal(url: Path) -> dict[str, bytes]:
    """The journal of the one run under the group: its ``begin`` and ``complete`` records only."""
    journal = {k: v for k, v in files(url).items() if k.startswith(JOURNAL_DIR)}
    assert sorted(k.rsplit("/", 1)[-1] for k in journal) == ["begin", "complete"], journal
    return journal


def _data(url: Path) -> dict[str, bytes]:
    """The group's files but its journal (checked to be reduced to its two records)."""
    _journal(url)
    return {k: v for k, v in files(url).items() if not k.startswith(JOURNAL_DIR)}


def _clean(tmp_path: Path, *appends: xr.Dataset, t: np.ndarray[Any, Any] | None = None) -> dict[str, bytes]:
    """The files of the base group with ``appends`` made by plain appends, in order."""
    url = _base(tmp_path / f"clean-{len(list(tmp_path.iterdir()))}.zarr", t)
    for ds in appends:
        zarr_dask.to_zarr_dataset(ds, str(url), append_dim="t")
    return files(url)


def _dies(ds: xr.Dataset, url: Any, scheduler: str = "threads", options: dict[str, Any] | None = None) -> None:
    with dask.config.set(scheduler=scheduler, num_workers=2), pytest.raises(Dies):
        zarr_dask.to_zarr_dataset(ds, url, append_dim="t", resume=True, storage_options=options)


def _plain_puts(tmp_path: Path) -> int:
    """The PUTs of a plain append of the same dataset (a copy of the group as it was)."""
    url = _base(tmp_path / "plain.zarr")
    store = open_store(str(url))
    src, _ = _flaky("plain", 0)
    with dask.config.set(scheduler="sync"), store.counters.counting() as counted:
        zarr_dask.to_zarr_dataset(_more(src), store, append_dim="t")
    return counted["set"]


def test_killed_dataset_append_resumes_without_recomputing_or_rewriting(tmp_path: Path) -> None:
    url = _base(tmp_path / "a.zarr")
    src, seen = _flaky("killed", 6)
    _dies(_more(src), str(url))
    finished = settled(lambda: _receipts(url))
    finished_w = _finished(url, "w")
    assert 0 < len(finished) < 12
    assert xr.open_dataset(url, engine="zarr_dask").sizes["t"] == ROWS  # nothing committed
    ledger = zarr_dask.write_ledger(str(url))  # the dead append: partial, at the group, its rows
    assert [(e.path, e.region, e.status) for e in ledger.entries] == [("", ((ROWS, ROWS + SHAPE[0]),), "partial")]
    before, n = identities(url), len(seen)
    store = open_store(str(url))
    with dask.config.set(scheduler="threads", num_workers=2), store.counters.counting() as counted:
        result = zarr_dask.to_zarr_dataset(_more(src), store, append_dim="t", resume=True)
    assert result.variables == {"v": "append", "w": "append", "t": "append"}
    assert sorted(_seen(seen[n:])) == sorted(set(range(12)) - finished)  # finished blocks were not recomputed
    after = identities(url)
    assert all(after[f"v/c/{i + 2}/0"] == before[f"v/c/{i + 2}/0"] for i in finished)  # nor rewritten
    assert all(after[f"w/c/{i + 2}"] == before[f"w/c/{i + 2}"] for i in finished_w)
    # a plain append's writes but the finished keys, plus a receipt per missing writer task, the group's begin
    # and complete, and each variable's complete (its receipts then deleted)
    missing = (12 - len(finished)) + (12 - len(finished_w))
    assert counted["set"] == _plain_puts(tmp_path) - (24 - missing) + missing + 2 + 2
    clean = _clean(tmp_path, _more(da.from_array(SOURCE * 3 + 1, chunks=CHUNKS)))
    assert _data(url) == clean  # byte for byte a plain append's
    np.testing.assert_array_equal(xr.open_dataset(url, engine="zarr_dask").v.values[ROWS:], SOURCE * 3 + 1)


def test_resumed_dataset_append_logs_what_it_skips(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    url = _base(tmp_path / "a.zarr")
    src, _ = _flaky("log", 5)
    _dies(_more(src), str(url), scheduler="sync")
    with caplog.at_level(logging.INFO), dask.config.set(scheduler="sync"):
        zarr_dask.to_zarr_dataset(_more(src), str(url), append_dim="t", resume=True)
        assert "resuming this dataset append" in caplog.text and "resuming run" in caplog.text
        caplog.clear()
        zarr_dask.to_zarr_dataset(_more(src), str(url), append_dim="t", resume=True)
    assert "this append landed already (length along 't' [112])" in caplog.text


def test_landed_dataset_append_is_not_appended_twice(tmp_path: Path) -> None:
    """Run again once it landed (eagerly or lazily, as often as wanted): nothing appended, nothing computed;
    once the ledger is published, the same call is a new append."""
    url = _base(tmp_path / "a.zarr")
    src, seen = _flaky("landed", 0)
    with dask.config.set(scheduler="sync"):
        lazy = zarr_dask.to_zarr_dataset(_more(src), str(url), append_dim="t", resume=True, compute=False)
        assert lazy.compute().variables == {"v": "append", "w": "append", "t": "append"}
        journal = _journal(url)
        store = open_store(str(url))
        with store.counters.counting() as counted:
            again = zarr_dask.to_zarr_dataset(_more(src), store, append_dim="t", resume=True)
        assert (again.variables, again.metadata_keys) == ({}, ())
        print("landed re-run requests:", {k: v for k, v in counted.items() if v})
        # the lease taken and given back, the receipts a takeover that completed the commit would leave deleted
        assert counted["set"] == 1 and counted["delete"] == 2
        later = zarr_dask.to_zarr_dataset(_more(src), str(url), append_dim="t", resume=True, compute=False)
        assert later.compute().variables == {}
    assert len(_seen(seen)) == 12
    assert xr.open_dataset(url, engine="zarr_dask").sizes["t"] == ROWS + SHAPE[0]
    assert _journal(url) == journal
    assert _data(url) == _clean(tmp_path, _more(da.from_array(SOURCE * 3 + 1, chunks=CHUNKS)))
    ledger = zarr_dask.publish_ledger(str(url))
    assert [(e.path, e.status) for e in ledger.entries] == [("", "done")]
    assert not (url / JOURNAL_DIR).exists() or not list((url / JOURNAL_DIR).rglob("*"))
    with dask.config.set(scheduler="sync"), pytest.warns(NonMonotonicCoordinateWarning):
        zarr_dask.to_zarr_dataset(_more(src), str(url), append_dim="t", resume=True)  # a new append now
    assert xr.open_dataset(url, engine="zarr_dask").sizes["t"] == ROWS + 2 * SHAPE[0]


def test_append_landed_meanwhile_is_not_mixed_with(tmp_path: Path) -> None:
    """Another (plain) append lands between the failure and the re-run (it took the lapsed lease): nothing of
    the killed run is trusted, every row is appended once, at the new end."""
    t0 = np.arange(-ROWS - 20, -20)
    url = _base(tmp_path / "a.zarr", t0)
    src, seen = _flaky("meanwhile", 6)
    _dies(_more(src, 0), str(url))
    assert _receipts(url)
    other = _more(da.from_array(-SOURCE[:20], chunks=8), -20)
    zarr_dask.to_zarr_dataset(other, str(url), append_dim="t")  # takes the lapsed lease at once
    n = len(seen)
    with dask.config.set(scheduler="threads", num_workers=2):
        zarr_dask.to_zarr_dataset(_more(src, 0), str(url), append_dim="t", resume=True)
    assert sorted(_seen(seen[n:])) == list(range(12))  # all written again
    clean = _clean(tmp_path, other, _more(da.from_array(SOURCE * 3 + 1, chunks=CHUNKS), 0), t=t0)
    assert _data(url) == clean
    ds = xr.open_dataset(url, engine="zarr_dask")
    assert ds.sizes["t"] == ROWS + 20 + SHAPE[0] and (np.diff(ds.t.values) == 1).all()  # none twice, none lost


def test_failed_append_meanwhile_voids_the_receipts(tmp_path: Path) -> None:
    """Another append takes the lease, overwrites rows the first run had written beyond the length, and fails
    too (the length unchanged): the re-run does not trust its receipts and writes every row again."""
    url = _base(tmp_path / "a.zarr")
    src, _ = _flaky("first", 7)
    _dies(_more(src), str(url), scheduler="sync")
    finished = _receipts(url)
    assert finished
    before = identities(url)
    job.STATE["second"] = {"fail_at": 12, "seen": []}
    other = da.from_array(SOURCE, chunks=CHUNKS).map_blocks(job.flaky, "second", 5.0, dtype="f8")
    with dask.config.set(scheduler="sync"), pytest.raises(Dies):
        zarr_dask.to_zarr_dataset(_more(other), str(url), append_dim="t")  # not resumable: dies after most blocks
    assert any(identities(url)[f"v/c/{i + 2}/0"] != before[f"v/c/{i + 2}/0"] for i in finished)
    with dask.config.set(scheduler="sync"):
        zarr_dask.to_zarr_dataset(_more(src), str(url), append_dim="t", resume=True)
    assert _data(url) == _clean(tmp_path, _more(da.from_array(SOURCE * 3 + 1, chunks=CHUNKS)))


def test_lazy_dataset_append_resumes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """compute=False: the Delayed commits (and gives the lease back); killed, the same call resumes it."""
    monkeypatch.setenv("ZARR_DASK_APPEND_LEASE_TTL", "0.5")
    url = _base(tmp_path / "a.zarr")
    src, seen = _flaky("lazy", 4)
    with dask.config.set(scheduler="sync"):
        lazy = zarr_dask.to_zarr_dataset(_more(src), str(url), append_dim="t", resume=True, compute=False)
        with pytest.raises(Dies):
            lazy.compute()
        finished = _receipts(url)
        n = len(seen)
        del lazy  # its lease's renewal stops once the Delayed is collected (the traceback's cycle holds it)
        gc.collect()  # then it lapses after the TTL: the re-run waits for that
        zarr_dask.to_zarr_dataset(_more(src), str(url), append_dim="t", resume=True, compute=False).compute()
    assert finished and sorted(_seen(seen[n:])) == sorted(set(range(12)) - finished)
    assert _data(url) == _clean(tmp_path, _more(da.from_array(SOURCE * 3 + 1, chunks=CHUNKS)))


def test_client_process_killed_then_dataset_append_resumed(tmp_path: Path) -> None:
    """A client process SIGKILLed mid-append (local files); the re-run here waits for its lease to lapse,
    takes it over (it names the killed run: receipts trusted), and finishes the append."""
    counter = tmp_path / "count"
    url = _base(tmp_path / "a.zarr", np.arange(-ROWS, 0))
    child = start_job(url, counter, "dataset-append", ZARR_DASK_APPEND_LEASE_TTL="1.0")
    finished = kill_once_done(child, lambda: _receipts(url), 4)
    with dask.config.set(scheduler="threads", num_workers=2):
        resume_job_append(url, counter, finished, tmp_path)


def resume_job_append(url: Path, counter: Path, finished: set[int], tmp_path: Path) -> None:
    """Run the job's dataset append (group from :func:`_base` at ``-ROWS``) again with ``resume=True`` after a
    run that died with the writer tasks ``finished``: those blocks are neither recomputed nor rewritten, the
    others are computed, and the group equals a clean append's."""
    before, computed = identities(url), len(job.calls(str(counter)))
    zarr_dask.to_zarr_dataset(job.dataset(str(counter)), str(url), append_dim="t", resume=True)
    again = job.calls(str(counter))[computed:]
    assert not set(again) & finished  # finished blocks were not recomputed
    assert set(again) >= set(range(12)) - finished
    after = identities(url)
    assert all(after[f"v/c/{i + 2}/0"] == before[f"v/c/{i + 2}/0"] for i in finished)  # nor rewritten
    clean_url = _base(tmp_path / "clean.zarr", np.arange(-ROWS, 0))
    zarr_dask.to_zarr_dataset(job.dataset(str(tmp_path / "count-clean")), str(clean_url), append_dim="t")
    assert _data(url) == files(clean_url)


def test_resumable_dataset_append_refusals(tmp_path: Path) -> None:
    store = UnconditionalStore()
    zarr_dask.to_zarr_dataset(_more(da.from_array(SOURCE, chunks=CHUNKS)), store, encoding=ENCODING)
    with pytest.raises(UnsupportedFeatureError, match="dataset append needs a store with conditional writes") as e:
        zarr_dask.to_zarr_dataset(_more(da.from_array(SOURCE, chunks=CHUNKS), 112), store, append_dim="t", resume=True)
    assert "drop resume=True" in str(e.value) and store.url in str(e.value)
    assert not [k for k in store.list_prefix("") if JOURNAL_DIR in k]
    with pytest.raises(TypeError, match="resume must be"):
        zarr_dask.to_zarr_dataset(_more(da.from_array(SOURCE, chunks=CHUNKS), 112), store, append_dim="t", resume=3)  # type: ignore[arg-type]
    url = str(tmp_path / "tree.zarr")
    tree = xr.DataTree.from_dict({"/a": _more(da.from_array(SOURCE, chunks=CHUNKS))})
    zarr_dask.to_zarr_datatree(tree, url)
    with pytest.raises(UnsupportedFeatureError, match="append_dim= write of a datatree"):
        zarr_dask.to_zarr_datatree(tree, url, append_dim="t", resume=True)


@pytest.mark.s3
def test_s3_dataset_append_resume_counts_requests(s3_bucket_url: str, s3_storage_options: dict[str, Any]) -> None:
    """moto S3: the resumed append puts only the missing keys and their receipts (and begin, complete)."""
    base = xr.Dataset({"v": (("t", "x"), np.full((ROWS, SHAPE[1]), -5.0)), "w": ("t", np.zeros(ROWS))},
                      coords={"t": np.arange(ROWS)}, attrs={"title": "base"})  # fmt: skip
    zarr_dask.to_zarr_dataset(base, s3_bucket_url, mode="w", encoding=ENCODING, storage_options=s3_storage_options)
    src, seen = _flaky("s3", 6)
    _dies(_more(src), s3_bucket_url, scheduler="sync", options=s3_storage_options)
    store = open_store(s3_bucket_url, storage_options=s3_storage_options)
    names = [k for k in store.list_prefix(JOURNAL_DIR) if "/from-" in k]
    finished = {int(k.rsplit("/", 1)[-1].split(".")[0]) for k in names if "/v/t/" in k}
    finished_w = {int(k.rsplit("/", 1)[-1]) for k in names if "/w/t/" in k}
    assert finished and not [k for k in names if k.endswith("/complete")]
    store = open_store(s3_bucket_url, storage_options=s3_storage_options)
    n = len(seen)
    with dask.config.set(scheduler="threads", num_workers=2):
        zarr_dask.to_zarr_dataset(_more(src), store, append_dim="t", resume=True)
    assert sorted(_seen(seen[n:])) == sorted(set(range(12)) - finished)
    missing = (12 - len(finished)) + (12 - len(finished_w))
    # per missing task its key and receipt; the group's begin and complete, v's and w's complete; as for a plain
    # append: the lease, the commit recorded in it, the 3 grown arrays' documents and the group's (consolidated
    # metadata), t's 12 keys (in memory: written again); no finished key
    assert store.counters.snapshot()["set"] == 2 * missing + 2 + 2 + 2 + 4 + 12
    assert sorted(k.rsplit("/", 1)[-1] for k in store.list_prefix(JOURNAL_DIR)) == ["begin", "complete"]
    ds = xr.open_dataset(store, engine="zarr_dask")
    np.testing.assert_array_equal(ds.v.values, np.concatenate([base.v.values, SOURCE * 3 + 1]))
    np.testing.assert_array_equal(ds.t.values, np.arange(ROWS + SHAPE[0]))

