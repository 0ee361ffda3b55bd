"""``zarr-dask convert`` vs the peers' ways of re-chunking a Zarr v2 archive into sharded Zarr v3.

Workload: the ``make demo`` sample (hourly, 30 days x 1 deg, 2 float32 variables, ~360 MiB; ``ZD_BENCH_DAYS``
scales it) written as Zarr v2 with blosc-lz4 and daily-map chunks (24, 181, 360), converted to Zarr v3 with
whole-time-series inner chunks (720, 10, 20) in shards (720, 90, 180), zstd level 3.

Contenders, each run in a fresh process (so its peak RSS is its own), 2 threads:

* ``zarr_dask``: ``zarr_dask.convert(src, dst, zarr_format=3, chunks=..., shards=..., max_memory="1GiB",
  tune_malloc=True)`` (what ``zarr-dask convert`` runs);
* ``xarray+zarr-python``: ``xr.open_zarr(src)`` (xarray's zarr engine), ``.chunk()`` to the shard shape,
  ``to_zarr(dst, zarr_format=3, encoding={chunks, shards, compressors})`` -- the shard-aligned dask chunks
  xarray requires (``safe_chunks``);
* ``dask+zarr-python``: per variable ``da.from_zarr(v2 array).rechunk(shards).to_zarr(v3 array)``.

Printed: wall-time medians (ZD_BENCH_REPEAT rounds, default 3, round-robin after a warm-up), peak RSS, and the
ratio of each peer to zarr_dask. Every result is checked equal to the source.

    python benchmarks/bench_convert.py
    ZD_BENCH_DAYS=5 ZD_BENCH_REPEAT=2 python benchmarks/bench_convert.py   # a quick run
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import scratch  # noqa: E402

DAYS = int(os.environ.get("ZD_BENCH_DAYS", "30"))
REPEAT = int(os.environ.get("ZD_BENCH_REPEAT", "3"))
CHUNKS, SHARDS = (24 * DAYS, 10, 20), (24 * DAYS, 90, 180)
OURS, XR, DA = "zarr_dask", "xarray+zarr-python", "dask+zarr-python"
VARS = ("t2m", "tp")


def run_ours(src: str, dst: str) -> None:
    import zarr_dask

    zarr_dask.convert(src, dst, zarr_format=3, chunks="time=-1,lat=10,lon=20", shards="lat=90,lon=180",
                      compressors="zstd:3", max_memory="1GiB", threads=2, tune_malloc=True)  # fmt: skip


def run_xarray(src: str, dst: str) -> None:
    import dask
    import xarray as xr
    import zarr

    dask.config.set(scheduler="threads", num_workers=2)
    ds = xr.open_zarr(src, consolidated=True)
    ds = ds.chunk({"time": SHARDS[0], "lat": SHARDS[1], "lon": SHARDS[2]})
    codec = zarr.codecs.ZstdCodec(level=3)
    encoding = {v: {"chunks": CHUNKS, "shards": SHARDS, "compressors": [codec]} for v in VARS}
    for var in ds.variables.values():  # drop the v2 codecs xarray carries over from the source
        var.encoding = {k: v for k, v in var.encoding.items() if k in ("units", "calendar", "dtype", "_FillValue")}
    ds.to_zarr(dst, zarr_format=3, encoding=encoding, consolidated=True, mode="w")


def run_dask(src: str, dst: str) -> None:
    import dask
    import dask.array as da
    import zarr

    dask.config.set(scheduler="threads", num_workers=2)
    source = zarr.open_group(src, mode="r")
    target = zarr.open_group(dst, mode="w", zarr_format=3)
    for name in VARS:
        arr = source[name]
        out = target.create_array(name, shape=arr.shape, dtype=arr.dtype, chunks=CHUNKS, shards=SHARDS,
                                  compressors=[zarr.codecs.ZstdCodec(level=3)], fill_value=float("nan"))  # fmt: skip
        da.from_zarr(arr).rechunk(SHARDS).to_zarr(out)


RUNNERS = {OURS: run_ours, XR: run_xarray, DA: run_dask}


#: Runs its arguments as its only child and prints the child's peak RSS (KiB): a small, clean parent, so the
#: child's peak is its own (Linux keeps a process's peak RSS across fork and exec).
_MEASURE = (
    "import resource, subprocess, sys; subprocess.run([sys.executable, *sys.argv[1:]], check=True); "
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
)


def _child(name: str, src: str, dst: str) -> tuple[float, float]:
    """Run one contender in a fresh process: (wall seconds, peak RSS MiB)."""
    shutil.rmtree(dst, ignore_errors=True)
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", _MEASURE, __file__, "--run", name, src, dst], capture_output=True,
                         text=True)  # fmt: skip
    seconds = time.perf_counter() - t0
    if out.returncode != 0:
        raise RuntimeError(f"{name} failed:\n{out.stderr}")
    return seconds, int(out.stdout.split()[-1]) / 1024


def _check(src: str, dst: str) -> None:
    import numpy as np

    import zarr_dask

    for name in VARS:
        a = zarr_dask.open_array(src, path=name)
        b = zarr_dask.open_array(dst, path=name)
        assert b.chunks == CHUNKS and b.shards == SHARDS, (name, b.chunks, b.shards)
        np.testing.assert_array_equal(a[:], b[:])


def main() -> None:
    from zarr_dask.demo import _write_source, sample_dataset

    root = scratch("convert")
    src = str(root / "src.zarr")
    ds = sample_dataset(ndays=DAYS)
    _write_source(ds, Path(src))
    import zarr_dask

    zarr_dask.consolidate_metadata(src)
    nbytes = sum(v.nbytes for v in ds.data_vars.values())
    print(f"convert {nbytes / 2**20:.0f} MiB: v2 blosc (24, 181, 360) -> v3 zstd chunks {CHUNKS} in shards {SHARDS}")
    results: dict[str, list[tuple[float, float]]] = {n: [] for n in RUNNERS}
    for name in RUNNERS:  # warm-up and correctness
        _child(name, src, str(root / name))
        _check(src, str(root / name))
    for _ in range(REPEAT):
        for name in RUNNERS:
            results[name].append(_child(name, src, str(root / name)))
    base = statistics.median(t for t, _ in results[OURS])
    for name, runs in results.items():
        med = statistics.median(t for t, _ in runs)
        rss = max(r for _, r in runs)
        print(f"  {name:<20} median {med:7.2f} s (min {min(t for t, _ in runs):.2f}, n={len(runs)})  "
              f"peak RSS {rss:6.0f} MiB  {med / base:5.2f}x zarr_dask  {nbytes / 2**20 / med:6.1f} MiB/s")  # fmt: skip


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--run":
        RUNNERS[sys.argv[2]](sys.argv[3], sys.argv[4])
    else:
        main()
