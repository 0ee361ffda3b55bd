"""Resumable writes (issue 25): what resume tracking costs, and what a resumed run saves.

Workload: ``ZD_BENCH_GIB`` (default 1) GiB of float32 computed by an upstream ``map_blocks`` (a smooth field
plus noise per block, the same bytes every run) and written with ``zarr_dask.to_zarr(..., mode="w")`` to a
local directory, blocks = chunks of 16 MiB, default codecs, the threaded scheduler (2 threads).

Rows (medians of ``ZD_BENCH_REPEAT`` rounds, default 3, round-robin after a warm-up):

* ``plain``: the whole write without ``resume``;
* ``tracked``: the whole write with ``resume=True`` (journal: a record, a receipt per task, deleted at the end);
* ``resumed``: a write with ``resume=True`` killed half way (its upstream fails from the middle block on;
  not timed), then the same call again: only the resumed run is timed.

Targets: ``resumed / plain <= 0.55`` and ``tracked / plain <= 1.05``.

``ZD_BENCH_KIND=dataset``: the same array as the variable ``v`` of a dataset written whole with
``zarr_dask.to_zarr_dataset(..., mode="w")`` (the dataset journal and a resumed ``mode="w"`` that keeps the
group its first run prepared).

    python benchmarks/bench_resume.py
    ZD_BENCH_GIB=0.25 ZD_BENCH_REPEAT=2 python benchmarks/bench_resume.py   # a quick run
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

import dask
import dask.array as da
import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _common import scratch  # noqa: E402

import zarr_dask  # noqa: E402

GIB = float(os.environ.get("ZD_BENCH_GIB", "1"))
KIND = os.environ.get("ZD_BENCH_KIND", "array")  # or "dataset"
REPEAT = int(os.environ.get("ZD_BENCH_REPEAT", "3"))
COLS, ROWS_PER_CHUNK = 4096, 1024  # 16 MiB float32 chunks
#: while set, blocks fail once this many were produced (a job killed half way); None: nothing fails
DIE_AFTER: list[int | None] = [None]
_PRODUCED = [0]
_LOCK = threading.Lock()


class Killed(Exception):
    pass


def produce(block_info: Any = None) -> np.ndarray:
    """One block of the field (deterministic per block), or :class:`Killed` once ``DIE_AFTER`` blocks were."""
    (i, _), shape = block_info[None]["chunk-location"], block_info[None]["chunk-shape"]
    with _LOCK:
        _PRODUCED[0] += 1
        if DIE_AFTER[0] is not None and _PRODUCED[0] > DIE_AFTER[0]:
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


def write(url: str, x: Any, resume: bool) -> None:
    if KIND == "dataset":
        import xarray as xr

        ds = xr.Dataset({"v": (("t", "x"), x)}, attrs={"bench": "resume"})
        encoding = {"v": {"chunks": (ROWS_PER_CHUNK, COLS)}}
        zarr_dask.to_zarr_dataset(ds, url, mode="w", encoding=encoding, resume=resume)
        return
    zarr_dask.to_zarr(x, url, chunks=(ROWS_PER_CHUNK, COLS), mode="w", resume=resume)


def skipped_fraction(url: str, x: Any) -> float:
    """The fraction of writer tasks a resumed run of the killed write skips."""
    if KIND == "dataset":  # the variable's journal: one receipt per finished writer task
        return len(list(Path(url).glob("v/.zd-resume/*/t/*"))) / x.numblocks[0]
    plan = zarr_dask.explain_write(x, url, chunks=(ROWS_PER_CHUNK, COLS), overwrite=True, resume=True)
    return plan.skipped_tasks / plan.tasks


def kill_half_way(url: str, x: Any) -> None:
    """A resumable write that dies once half of its blocks were produced (most of them land)."""
    _PRODUCED[0], DIE_AFTER[0] = 0, x.numblocks[0] // 2
    try:
        write(url, x, True)
    except Killed:
        pass
    else:
        raise AssertionError("the killed run finished")
    finally:
        DIE_AFTER[0] = None


def measure(gib: float, repeat: int, root: Path) -> dict[str, list[float]]:
    """Wall times of each row (after one warm-up round; ``"skipped"``: the fraction of writer tasks each
    resumed run skipped); checks every result against the plain write."""
    x = source(gib)
    times: dict[str, list[float]] = {"plain": [], "tracked": [], "resumed": []}
    skipped: list[float] = []
    url = str(root / "w.zarr")
    with dask.config.set(scheduler="threads", num_workers=2):
        for r in range(repeat + 1):
            for row in times:
                shutil.rmtree(url, ignore_errors=True)
                if row == "resumed":
                    kill_half_way(url, x)
                    skipped.append(skipped_fraction(url, x))
                t0 = time.perf_counter()
                write(url, x, row != "plain")
                if r:
                    times[row].append(time.perf_counter() - t0)
                array = url + "/v" if KIND == "dataset" else url
                if r == 0 and row == "plain":
                    expected = zarr_dask.open_array(array)[:: ROWS_PER_CHUNK // 2]
                elif r == 0:
                    np.testing.assert_array_equal(zarr_dask.open_array(array)[:: ROWS_PER_CHUNK // 2], expected)
                    assert not list(Path(url).glob("**/.zd-resume/*")), "journal left behind"
    shutil.rmtree(url, ignore_errors=True)
    times["skipped"] = skipped
    return times


def main() -> None:
    times = measure(GIB, REPEAT, scratch("resume"))
    skipped = times.pop("skipped")
    plain = statistics.median(times["plain"])
    print(f"{KIND}: {GIB:g} GiB float32, 16 MiB chunks, threads x2, medians of {REPEAT}")
    print(f"{'row':<10}{'median s':>10}{'x plain':>10}   target")
    targets = {"plain": "", "tracked": "<= 1.05", "resumed": "<= 0.55"}
    for row, ts in times.items():
        m = statistics.median(ts)
        print(f"{row:<10}{m:>10.2f}{m / plain:>10.2f}   {targets[row]}")
    print(f"resumed runs skipped {', '.join(f'{s:.0%}' for s in skipped)} of their writer tasks")


if __name__ == "__main__":
    main()
