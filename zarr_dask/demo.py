"""`make demo`: the ETL job people run most, end to end on local files (``python -m zarr_dask.demo [DIR]``).

1. Generate a synthetic hourly climate-like dataset (30 days x 1 deg grid, 2 variables, ~360 MiB) with
   time/lat/lon coordinates and CF attributes, and write it as Zarr v2 with blosc and daily map chunks,
   the way many archives look today -- with zarr_dask's xarray writer (``to_zarr_dataset``).
2. Convert it with the real ``zarr-dask convert`` command to Zarr v3 with shards and a time-friendly chunking
   (whole time series per chunk), in bounded memory.
3. Open the result with ``xr.open_dataset(..., engine="zarr_dask")``, check that it equals the source, read a
   time series from both to show why the new chunking matters, and print the summary.

Options: ``--small`` (a 1/10 sized sample, a few seconds), ``--keep`` (keep the output directory).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, cast

import numpy as np

import zarr_dask

__all__ = ["main", "sample_dataset"]


def sample_dataset(ndays: int = 30, step: float = 1.0) -> Any:
    """An hourly climate-like dataset (dask-backed, deterministic): 2 m temperature and precipitation on a
    regular lat/lon grid, with CF attributes."""
    import dask.array as da
    import pandas as pd
    import xarray as xr

    lat = np.arange(-90.0, 90.0 + step / 2, step)
    lon = np.arange(0.0, 360.0, step)
    time_index = pd.date_range("2000-01-01", periods=24 * ndays, freq="h")
    shape = (len(time_index), len(lat), len(lon))
    chunks = (24, len(lat), len(lon))
    rng = cast(Any, da.random).default_rng(42)
    hours = da.arange(shape[0], chunks=chunks[0], dtype="f4")[:, None, None]
    base = 288.0 - 35.0 * np.abs(np.sin(np.deg2rad(lat))).astype("f4")[None, :, None]
    daily = 6.0 * da.sin(2 * np.pi * (hours / 24.0 + lon.astype("f4")[None, None, :] / 360.0))
    t2m = (base + daily + rng.normal(0.0, 1.5, shape, chunks=chunks).astype("f4")).astype("f4")
    # (da.maximum, not da.clip(..., None): dask's expression arrays cannot clip with no upper bound)
    tp = da.maximum(rng.gamma(0.25, 1.2, shape, chunks=chunks).astype("f4") - 0.4, 0.0).astype("f4")
    coords = {
        "time": ("time", time_index, {"standard_name": "time", "long_name": "time", "axis": "T"}),
        "lat": ("lat", lat, {"standard_name": "latitude", "units": "degrees_north", "axis": "Y"}),
        "lon": ("lon", lon, {"standard_name": "longitude", "units": "degrees_east", "axis": "X"}),
    }
    ds = xr.Dataset(
        {
            "t2m": (("time", "lat", "lon"), t2m, {"standard_name": "air_temperature", "long_name": "2 metre temperature",
                                                  "units": "K"}),
            "tp": (("time", "lat", "lon"), tp, {"standard_name": "precipitation_amount", "long_name": "total precipitation",
                                                "units": "mm h-1", "cell_methods": "time: sum"}),
        },  # fmt: skip
        coords=coords,
        attrs={"Conventions": "CF-1.8", "title": "synthetic hourly climate sample", "institution": "zarr_dask demo",
               "source": "random fields with a diurnal cycle", "history": "created by python -m zarr_dask.demo"},  # fmt: skip
    )
    ds.time.encoding.update({"units": "hours since 2000-01-01", "calendar": "proleptic_gregorian", "dtype": "int64"})
    return ds


def _write_source(ds: Any, path: Path) -> float:
    t0 = time.perf_counter()
    blosc = {"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1}
    # the largest block along each dimension (dask's expression arrays have no ``.chunksize``)
    encoding = {name: {"chunks": tuple(max(c) for c in ds[name].data.chunks), "compressors": blosc,
                       "_FillValue": np.float32("nan")} for name in ds.data_vars}  # fmt: skip
    zarr_dask.to_zarr_dataset(ds, str(path), mode="w", zarr_format=2, encoding=encoding)
    return time.perf_counter() - t0


def _convert(src: Path, dst: Path, small: bool) -> float:
    chunks = "time=-1,lat=10,lon=20"
    shards = "lat=90,lon=180" if not small else "lat=30,lon=60"
    cmd = [sys.executable, "-m", "zarr_dask.cli", "convert", str(src), str(dst), "--zarr-format", "3",
           "--chunks", chunks, "--shards", shards, "--compressor", "zstd:3", "--max-memory", "1GiB", "--overwrite"]  # fmt: skip
    print("$ zarr-dask " + " ".join(cmd[3:]), flush=True)
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True)
    return time.perf_counter() - t0


def _check(src: Path, dst: Path) -> dict[str, float]:
    import xarray as xr

    a = xr.open_dataset(src, engine="zarr_dask", chunks={})
    b = xr.open_dataset(dst, engine="zarr_dask", chunks={})
    # compared a few days at a time, in memory: bounded memory, and the same in both of dask's array modes
    # (xarray compares dask-backed data with np.all, which dask's expression arrays do not implement)
    step = 24 * 5
    for start in range(0, a.sizes["time"], step):
        days = {"time": slice(start, start + step)}
        xr.testing.assert_identical(a.isel(days).load(), b.isel(days).load())
    timings = {}
    for label, ds in (("v2 source", a), ("v3 result", b)):
        t0 = time.perf_counter()
        _ = ds.t2m.sel(lat=45.0, lon=10.0, method="nearest").values  # one time series
        timings[label] = time.perf_counter() - t0
    return timings


def main(argv: list[str] | None = None) -> int:
    """Run the demo (see the module docstring); returns the exit status."""
    argv = sys.argv[1:] if argv is None else argv
    small, keep = "--small" in argv, "--keep" in argv
    dirs = [a for a in argv if not a.startswith("--")]
    out = Path(dirs[0]).resolve() if dirs else Path(tempfile.mkdtemp(prefix="zarr-dask-demo-"))
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    t0 = time.perf_counter()
    ds = sample_dataset(ndays=3 if small else 30, step=2.0 if small else 1.0)
    src, dst = out / "climate-v2.zarr", out / "climate-v3.zarr"
    nbytes = sum(v.nbytes for v in ds.data_vars.values())
    print(f"== 1. writing a {nbytes / 2**20:.0f} MiB hourly sample as Zarr v2 (blosc, daily maps) to {src}")
    write_s = _write_source(ds, src)
    print(f"   written in {write_s:.1f} s\n== 2. converting it to Zarr v3 with shards and whole time series per chunk")
    convert_s = _convert(src, dst, small)
    print("== 3. checking the result")
    timings = _check(src, dst)
    result = zarr_dask.open_group(str(dst), mode="r")
    t2m = result["t2m"]
    assert isinstance(t2m, zarr_dask.Array)
    from zarr_dask.cli.show import tree_text

    print(tree_text(result, details=True))
    print(f"   xr.open_dataset(..., engine='zarr_dask') of both: identical ({nbytes / 2**20:.0f} MiB compared)")
    print("   one time series (t2m at 45N 10E): " + ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in timings.items()))
    removed = not keep and not dirs
    where = "output removed (pass a directory or --keep to keep it)" if removed else f"output in {out}"
    print(f"demo OK in {time.perf_counter() - t0:.1f} s (write {write_s:.1f} s, convert {convert_s:.1f} s); {where}")
    if removed:
        shutil.rmtree(out, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
