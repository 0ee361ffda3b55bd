"""Resumable writes (issue 25): what resume tracking costs, and what a resumed run saves.

Workload: ``ZD_BENCH_GIB`` (default 1) GiB of float32 computed by an upstream ``map_blocks`` (a smooth field
plus noise per block, the same bytes every run) and written with ``zarr_dask.to_zarr(..., mode="w")`` to a
local directory, blocks = chunks of 16 MiB, default codecs, the threaded scheduler (2 threads).

Rows (medians of ``ZD_BENCH_REPEAT`` rounds, default 3, round-robin after a warm-up):

* ``plain``: the whole write without ``resume``;
* ``tracked``: the whole write with ``resume=True`` (journal: a record, a receipt per task, deleted at the end);
* ``resumed``: a write with ``resume=True`` killed half way (once half of its writer tasks finished, its
  upstream fails; not timed), then the same call again: only the resumed run is timed.

Each round runs the rows in another order (a row's place in the round changes what the disk and allocator
left behind for it), and every timed run starts from the same state of the machine (:func:`quiesce`):

* what earlier (untimed) runs wrote is flushed to disk (``os.sync``) and a second passes, so no row pays for
  the write-back of the run before it (the killed run's half GiB would otherwise be flushed during the
  resumed run);
* then ``ZD_BENCH_WARM_MIB`` MiB (default 3072; 0: off) of memory are touched and freed. On a virtual machine
  that hands free memory back to its host (virtio-balloon free page reporting, as on the machine these numbers
  come from), memory freed a few seconds earlier is slow to touch again, so a run was slower the longer the
  machine idled before it: the same resumed write took 0.51x the plain one right after the killed run and
  0.65x after 10 s more (and 0.45x after dropping the page cache). Warming the same memory before every row
  gives 0.48x and 0.48x (``benchmarks/README.md``, "Session 12").

Targets: ``resumed / plain <= 0.55`` and ``tracked / plain <= 1.05``.

``ZD_BENCH_KIND=dataset``: the same array as the variable ``v`` of a dataset written whole with
``zarr_dask.to_zarr_dataset(..., mode="w")`` (the dataset journal and a resumed ``mode="w"`` that keeps the
group its first run prepared). ``ZD_BENCH_KIND=append``: the same array appended with ``zarr_dask.append`` to
an array of one 16 MiB block (written before each row, untimed): the append lease, the receipts per starting
length, and a resumed append that takes over its killed run's lease.

``ZD_BENCH_KIND=source`` (issue 37): the upstream reads a stored array instead of computing one --
``zarr_dask.from_zarr(src).map_blocks(step)`` with ``src`` the same field written once beside the target
(untimed) -- so a resumable write also witnesses its input (one listing of ``src``) and a resumed one checks
its receipts against the target's keys (one listing of the target).

Targets (``ZD_BENCH_TARGET``, comma-separated, default ``local``): ``local``, a directory; ``s3``, a moto S3 server
in its own process adding ``ZD_BENCH_LATENCY`` seconds (default 0.02) to every request (bench_remote.py's), each
round starting from an empty bucket.

    python benchmarks/bench_resume.py
    ZD_BENCH_TARGET=local,s3 python benchmarks/bench_resume.py               # local files and moto S3
    ZD_BENCH_KIND=dataset python benchmarks/bench_resume.py                  # a dataset written whole
    ZD_BENCH_GIB=0.25 ZD_BENCH_REPEAT=2 python benchmarks/bench_resume.py   # a quick run
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import dask
import dask.array as da
import numpy as np
from dask.callbacks import Callback

sys.path.insert(0, str(Path(__file__).parent))
from _common import scratch  # noqa: E402

import zarr_dask  # noqa: E402

GIB = float(os.environ.get("ZD_BENCH_GIB", "1"))
REPEAT = int(os.environ.get("ZD_BENCH_REPEAT", "5"))
KIND = os.environ.get("ZD_BENCH_KIND", "array")  # or "dataset", "append", "source"
WARM_MIB = int(os.environ.get("ZD_BENCH_WARM_MIB", "3072"))
COLS, ROWS_PER_CHUNK = 4096, 1024  # 16 MiB float32 chunks
#: while set, blocks fail once this many writer tasks finished (a job killed half way); None: nothing fails
DIE_AFTER: list[int | None] = [None]
_WRITTEN = [0]


class CountWriters(Callback):
    """Counts the writer tasks of a write (keys ``("to-zarr-<token>", i, ...)``) that finished."""

    def _posttask(self, key: Any, result: Any, dsk: Any, state: Any, worker_id: Any) -> None:
        if isinstance(key, tuple) and str(key[0]).startswith("to-zarr-") and "-fan-in-" not in str(key[0]):
            _WRITTEN[0] += 1


class Killed(Exception):
    pass


def produce(block_info: Any = None) -> np.ndarray:
    """One block of the field (deterministic per block), or :class:`Killed` once ``DIE_AFTER`` writer tasks
    finished."""
    (i, _), shape = block_info[None]["chunk-location"], block_info[None]["chunk-shape"]
    if DIE_AFTER[0] is not None and _WRITTEN[0] >= DIE_AFTER[0]:
        raise Killed(f"block {i}")
    rng = np.random.default_rng(i)
    y = np.linspace(i, i + 1, shape[0], dtype="f4")[:, None]
    x = np.linspace(0, 30, shape[1], dtype="f4")[None, :]
    out = np.sin(y) * np.cos(x) * 100
    out += rng.standard_normal(shape, dtype="f4")
    return out.astype("f4")


def source(gib: float) -> Any:
    rows = max(ROWS_PER_CHUNK, int(gib * 2**30 / (COLS * 4)) // ROWS_PER_CHUNK * ROWS_PER_CHUNK)
    chunks = ((ROWS_PER_CHUNK,) * (rows // ROWS_PER_CHUNK), (COLS,))
    return da.map_blocks(produce, chunks=chunks, dtype="f4", meta=np.empty((0, 0), "f4"))


def step(block: np.ndarray) -> np.ndarray:
    """``KIND=source``'s upstream step over a stored block, or :class:`Killed` once ``DIE_AFTER`` writer tasks
    finished."""
    if DIE_AFTER[0] is not None and _WRITTEN[0] >= DIE_AFTER[0]:
        raise Killed("step")
    return block * 2 + 1


def stored_source(gib: float, target: Target) -> Any:
    """``KIND=source``: the field written once (untimed) beside the target, read back lazily and stepped."""
    url = target.url.rsplit("/", 1)[0] + "/src.zarr"
    with dask.config.set(scheduler="threads", num_workers=2):
        zarr_dask.to_zarr(source(gib), url, storage_options=target.options, chunks=(ROWS_PER_CHUNK, COLS), mode="w")
    x = zarr_dask.from_zarr(url, storage_options=target.options, chunks=(ROWS_PER_CHUNK, COLS))
    return da.map_blocks(step, x, dtype="f4")


class Target:
    """Where the benchmark writes: ``url`` with ``options``; ``reset()`` empties it; ``journal()`` lists what
    is left of resume journals."""

    def __init__(self, url: str, options: dict[str, Any] | None, reset: Any) -> None:
        self.url, self.options, self.reset = url, options, reset

    def journal(self, under: str = "") -> list[str]:
        """The keys of resume journals under ``under`` (a node path with ``/``), or anywhere in the target."""
        keys = zarr_dask.open_store(self.url, storage_options=self.options).list_prefix(under.rstrip("/"))
        return [k for k in keys if f"/{k}".startswith(f"/{under}") and ".zd-resume/" in f"/{k}"]


def local_target(root: Path) -> Target:
    url = str(root / "w.zarr")
    return Target(url, None, lambda: shutil.rmtree(url, ignore_errors=True))


def s3_target(endpoint: str, bucket: str = "zd-resume") -> Target:
    """``s3://<bucket>/w.zarr`` on the S3 server at ``endpoint`` (the bucket made if missing), emptied between
    runs (untimed)."""
    import urllib.error
    import urllib.request

    try:
        urllib.request.urlopen(urllib.request.Request(f"{endpoint}/{bucket}", method="PUT")).read()
    except urllib.error.HTTPError as e:  # 409: the bucket exists
        if e.code != 409:
            raise
    options = {"key": "bench", "secret": "bench", "use_listings_cache": False,
               "client_kwargs": {"endpoint_url": endpoint, "region_name": "us-east-1"}}  # fmt: skip
    url = f"s3://{bucket}/w.zarr"
    return Target(url, options, lambda: zarr_dask.open_store(url, storage_options=options).delete_prefix(""))


def write(target: Target, x: Any, resume: bool) -> None:
    if KIND == "dataset":
        import xarray as xr

        ds = xr.Dataset({"v": (("t", "x"), x)}, attrs={"bench": "resume"})
        encoding = {"v": {"chunks": (ROWS_PER_CHUNK, COLS)}}
        zarr_dask.to_zarr_dataset(ds, target.url, storage_options=target.options, mode="w", encoding=encoding,
                                  resume=resume)  # fmt: skip
        return
    if KIND == "append":
        zarr_dask.append(x, target.url, storage_options=target.options, resume=resume)
        return
    zarr_dask.to_zarr(x, target.url, storage_options=target.options, chunks=(ROWS_PER_CHUNK, COLS), mode="w",
                      resume=resume)  # fmt: skip


def reset(target: Target) -> None:
    """Empty the target (``append``: then write the array of one block the rows append to)."""
    target.reset()
    if KIND == "append":
        base = da.zeros((ROWS_PER_CHUNK, COLS), chunks=(ROWS_PER_CHUNK, COLS), dtype="f4")
        zarr_dask.to_zarr(base, target.url, storage_options=target.options, chunks=(ROWS_PER_CHUNK, COLS))


def skipped_fraction(target: Target, x: Any) -> float:
    """The fraction of writer tasks a resumed run of the killed write skips."""
    if KIND in ("dataset", "append"):  # the journal: one receipt per finished writer task
        return len([k for k in target.journal("v/" if KIND == "dataset" else "") if "/t/" in k]) / x.numblocks[0]
    plan = zarr_dask.explain_write(x, target.url, storage_options=target.options, chunks=(ROWS_PER_CHUNK, COLS),
                                   overwrite=True, resume=True)  # fmt: skip
    return plan.skipped_tasks / plan.tasks


def kill_half_way(target: Target, x: Any) -> None:
    """A resumable write that dies once half of its writer tasks finished (the blocks produced for the next
    ones are lost with it)."""
    _WRITTEN[0], DIE_AFTER[0] = 0, x.numblocks[0] // 2
    try:
        with CountWriters():
            write(target, x, True)
    except Killed:
        pass
    else:
        raise AssertionError("the killed run finished")
    finally:
        DIE_AFTER[0] = None


def quiesce() -> None:
    """Flush what earlier runs wrote, let the machine settle, then warm the memory the timed run will use (see
    the module notes; untimed)."""
    os.sync()
    time.sleep(1)
    if WARM_MIB:
        warm = np.ones(WARM_MIB << 20, dtype=np.uint8)  # every page touched, then given back
        del warm


def measure(gib: float, repeat: int, target: Target) -> dict[str, list[float]]:
    """Wall times of each row (after one warm-up round; ``"skipped"``: the fraction of writer tasks each
    resumed run skipped); checks every result against the plain write."""
    x = stored_source(gib, target) if KIND == "source" else source(gib)
    times: dict[str, list[float]] = {"plain": [], "tracked": [], "resumed": []}
    skipped: list[float] = []
    url, options = target.url, target.options
    with dask.config.set(scheduler="threads", num_workers=2):
        for r in range(repeat + 1):
            rows = list(times)
            for row in rows[r % len(rows) :] + rows[: r % len(rows)]:  # round 0: plain first (the reference)
                reset(target)
                if row == "resumed":
                    kill_half_way(target, x)
                quiesce()
                if row == "resumed":
                    skipped.append(skipped_fraction(target, x))
                t0 = time.perf_counter()
                write(target, x, row != "plain")
                if r:
                    times[row].append(time.perf_counter() - t0)
                array = f"{url}/v" if KIND == "dataset" else url
                if r == 0 and row == "plain":
                    expected = zarr_dask.open_array(array, storage_options=options)[:: ROWS_PER_CHUNK // 2]
                elif r == 0:
                    got = zarr_dask.open_array(array, storage_options=options)[:: ROWS_PER_CHUNK // 2]
                    np.testing.assert_array_equal(got, expected)
                    left = target.journal()  # an append keeps its begin and complete records (until published)
                    assert not (left if KIND != "append" else [k for k in left if "/t/" in k]), "journal left behind"
    target.reset()
    times["skipped"] = skipped
    return times


def report(name: str, times: dict[str, list[float]]) -> None:
    skipped = times.pop("skipped")
    plain = statistics.median(times["plain"])
    print(f"{name}, {KIND}: {GIB:g} GiB float32, 16 MiB chunks, threads x2, medians of {REPEAT}")
    print(f"{'row':<10}{'median s':>10}{'x plain':>10}   target")
    targets = {"plain": "", "tracked": "<= 1.05", "resumed": "<= 0.55"}
    for row, ts in times.items():
        m = statistics.median(ts)
        print(f"{row:<10}{m:>10.2f}{m / plain:>10.2f}   {targets[row]}")
    print(f"resumed runs skipped {', '.join(f'{s:.0%}' for s in skipped)} of their writer tasks", flush=True)


def main() -> None:
    for name in os.environ.get("ZD_BENCH_TARGET", "local").split(","):
        if name == "local":
            report("local files", measure(GIB, REPEAT, local_target(scratch("resume"))))
        elif name == "s3":
            from bench_remote import _serve_s3, child_server

            latency = float(os.environ.get("ZD_BENCH_LATENCY", "0.02"))
            with child_server(_serve_s3, latency) as endpoint:
                report(f"moto S3 ({latency * 1000:g} ms per request)", measure(GIB, REPEAT, s3_target(endpoint)))
        else:
            raise SystemExit(f"ZD_BENCH_TARGET: unknown target {name!r} (local, s3)")


if __name__ == "__main__":
    main()
