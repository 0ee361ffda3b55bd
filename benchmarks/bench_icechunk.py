"""Icechunk repositories (issue 24): a 256 MiB two-variable dataset written into a repository by
``zarr_dask.to_zarr_dataset(ds, session)`` vs ``icechunk.xarray.to_icechunk(ds, session)`` (the same data,
dask chunks equal to the Zarr chunks, which ``to_icechunk`` accepts), each then committed; and read back with
``xr.open_dataset(session, engine="zarr_dask", chunks={})`` vs xarray's zarr engine over ``session.store``,
computed. Local-filesystem repositories, dask's threaded scheduler, round-robin medians. Goal: ours <= 1.0x
theirs both ways.

    python benchmarks/bench_icechunk.py                  # ZD_BENCH_REPEAT rounds (default 5)
    ZD_BENCH_MIB=64 ZD_BENCH_REPEAT=2 python benchmarks/bench_icechunk.py   # a quick look
"""

from __future__ import annotations

import os
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import dask.array as da
import numpy as np
import xarray as xr

sys.path.insert(0, str(Path(__file__).parent))
from _common import REPEAT, Table, race, scratch, smooth_field  # noqa: E402

import zarr_dask  # noqa: E402

MIB = int(os.environ.get("ZD_BENCH_MIB", "256"))


def dataset() -> xr.Dataset:
    """Two float32 variables ``(time, y, x)`` of MIB/2 MiB each, dask chunks = Zarr chunks (about 4 MiB)."""
    y, x = 512, 512
    times = max(8, MIB * 2**20 // 2 // (y * x * 4))
    field = smooth_field(y, x)
    base = da.from_array(field, chunks=(y, x))
    steps = da.arange(times, chunks=8, dtype="f4")[:, None, None]
    temp = (base[None] + steps).rechunk((8, y // 2, x // 2))
    wind = (base[None] * 0.5 - steps).rechunk((8, y // 2, x // 2))
    ds = xr.Dataset(
        {"temp": (("time", "y", "x"), temp), "wind": (("time", "y", "x"), wind)},
        coords={"time": np.arange(times), "y": np.arange(y), "x": np.arange(x)},
    )
    ds = ds.persist()  # the source is memory: the write is timed, not the computation of the data
    for name in ("temp", "wind"):
        ds[name].encoding["chunks"] = (8, y // 2, x // 2)
    return ds


CPU: dict[str, list[float]] = {}


def cpu_timed(name: str, func: Callable[[], Any]) -> Callable[[], Any]:
    """``func``, recording the CPU time of this process (all threads) of every call under ``name``."""

    def run() -> Any:
        t0 = time.process_time()
        try:
            return func()
        finally:
            CPU.setdefault(name, []).append(time.process_time() - t0)

    return run


def cpu(name: str) -> str:
    return f"cpu {statistics.median(CPU[name][1:] or CPU[name]):.2f} s"


def main() -> None:
    import icechunk
    from icechunk.xarray import to_icechunk

    ds = dataset()
    root = scratch("icechunk")
    repos: dict[str, Any] = {}

    def fresh(name: str) -> None:
        repos[name] = icechunk.Repository.create(icechunk.local_filesystem_storage(str(root / f"{name}-{len(os.listdir(root))}")))

    def ours_write() -> None:
        session = repos["zarr_dask"].writable_session("main")
        zarr_dask.to_zarr_dataset(ds, session, mode="w")
        session.commit("ours")

    def theirs_write() -> None:
        session = repos["to_icechunk"].writable_session("main")
        to_icechunk(ds, session, mode="w")
        session.commit("theirs")

    table = Table(f"Icechunk: a {MIB} MiB two-variable dataset")
    print(f"\n{table.title} ({ds.nbytes / 2**20:.0f} MiB, chunks {ds.temp.data.chunksize})")
    writes = race({"zarr_dask": cpu_timed("w-ours", ours_write), "to_icechunk": cpu_timed("w-theirs", theirs_write)}, setup=fresh)
    for (name, times), key in zip(writes.items(), ("w-ours", "w-theirs"), strict=True):
        table.add("write + commit", name, times, f"{ds.nbytes / 2**20 / np.median(times):.0f} MiB/s, {cpu(key)}")
    print(f"  write ratio zarr_dask / to_icechunk: {table.ratio('write + commit', 'zarr_dask', 'to_icechunk'):.2f}x")

    ro = repos["zarr_dask"].readonly_session(branch="main")
    expected = ds.compute()
    ours = xr.open_dataset(ro, engine="zarr_dask", chunks={}).compute()
    theirs = xr.open_dataset(ro.store, engine="zarr", chunks={}, consolidated=False).compute()
    xr.testing.assert_equal(ours, expected)
    xr.testing.assert_equal(theirs, expected)
    reads = race(
        {
            "engine=zarr_dask": cpu_timed("r-ours", lambda: xr.open_dataset(ro, engine="zarr_dask", chunks={}).compute()),
            "engine=zarr": cpu_timed(
                "r-theirs", lambda: xr.open_dataset(ro.store, engine="zarr", chunks={}, consolidated=False).compute()
            ),
        },
        repeat=REPEAT,
    )
    for (name, times), key in zip(reads.items(), ("r-ours", "r-theirs"), strict=True):
        table.add("open + compute", name, times, f"{ds.nbytes / 2**20 / np.median(times):.0f} MiB/s, {cpu(key)}")
    print(f"  read ratio zarr_dask / zarr: {table.ratio('open + compute', 'engine=zarr_dask', 'engine=zarr'):.2f}x")


if __name__ == "__main__":
    warnings.simplefilter("ignore", category=UserWarning)
    main()
