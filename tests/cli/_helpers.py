"""Shared helpers of the CLI tests: run the real command, build small hierarchies, compare two of them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Literal

import numpy as np

import zarr_dask

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str, check: bool = True, timeout: float = 120, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m zarr_dask.cli ARGS`` in a subprocess (the real command), with Python's fault handler on: a
    command that crashes in C (once: exit -6 after its output, stderr empty) shows its threads' stacks."""
    env = {**(os.environ if env is None else env), "PYTHONFAULTHANDLER": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "zarr_dask.cli", *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"zarr-dask {' '.join(args)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def options(opts: dict[str, Any] | None) -> list[str]:
    return ["--storage-options", json.dumps(opts)] if opts else []


def data(shape: tuple[int, ...], dtype: str = "f4", seed: int = 0) -> np.ndarray[Any, Any]:
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        out = rng.normal(280.0, 10.0, shape).astype(dtype)
        out.flat[:: max(1, out.size // 7)] = np.nan  # some missing values
        return out
    return rng.integers(-500, 500, shape).astype(dtype)


def make_hierarchy(
    url: Any, zarr_format: Literal[2, 3], storage_options: dict[str, Any] | None = None, *, sharded: bool = False
) -> dict[str, np.ndarray[Any, Any]]:
    """A small xarray-style hierarchy; returns path -> data.

    ``/`` (attrs) with coordinates ``time``, ``lat``, ``lon`` and ``t2m (time, lat, lon)`` float32 (NaN fill,
    some NaNs); ``/surface`` with ``sst (time, lat, lon)`` int16 (fill -999, a masked value); the empty group
    ``/surface/meta``; in v3 with ``sharded`` t2m is sharded.
    """
    nt, ny, nx = 24, 12, 20
    root = zarr_dask.create_group(url, zarr_format=zarr_format, attributes={"title": "cli test", "Conventions": "CF-1.8"},
                                  overwrite=True, storage_options=storage_options)  # fmt: skip
    out = {"time": np.arange(nt, dtype="i8"), "lat": np.linspace(-60, 60, ny), "lon": np.linspace(0, 342, nx)}
    units = {"time": "hours since 2000-01-01", "lat": "degrees_north", "lon": "degrees_east"}
    for name, values in out.items():
        fill = -1 if values.dtype.kind == "i" else np.nan  # a value no coordinate holds (v2: xarray masks it)
        a = root.create_array(name, shape=values.shape, dtype=values.dtype, chunks=(10,), dimension_names=[name],
                              fill_value=fill, attributes={"units": units[name]})  # fmt: skip
        a[:] = values
    dims = ["time", "lat", "lon"]
    extra = {"shards": (12, 12, 20)} if sharded and zarr_format == 3 else {}
    t2m = root.create_array("t2m", shape=(nt, ny, nx), dtype="f4", chunks=(4, 6, 10), fill_value=np.nan,
                            dimension_names=dims, attributes={"units": "K", "long_name": "temperature"}, **extra)  # fmt: skip
    out["t2m"] = data((nt, ny, nx))
    t2m[:] = out["t2m"]
    surface = root.create_group("surface", attributes={"kind": "surface"})
    sst = surface.create_array("sst", shape=(nt, ny, nx), dtype="i2", chunks=(1, ny, nx), fill_value=-999,
                               dimension_names=dims, attributes={"units": "cK"})  # fmt: skip
    out["surface/sst"] = data((nt, ny, nx), "i2", seed=1)
    out["surface/sst"][0, 0, 0] = -999
    sst[:] = out["surface/sst"]
    surface.create_group("meta", attributes={"note": "empty"})
    return out


def assert_same_data(url: Any, expected: dict[str, np.ndarray[Any, Any]], storage_options: dict[str, Any] | None = None) -> None:
    group = zarr_dask.open_group(url, mode="r", storage_options=storage_options)
    for path, values in expected.items():
        array = group[path]
        assert isinstance(array, zarr_dask.Array), path
        np.testing.assert_array_equal(array[...], values, err_msg=path)


def assert_same_datasets(a: str, b: str, groups: tuple[str, ...] = ("", "surface")) -> None:
    """xarray (engine zarr_dask) sees the same datasets in both hierarchies."""
    import xarray as xr

    for group in groups:
        kw = {"group": group} if group else {}
        left = xr.open_dataset(a, engine="zarr_dask", consolidated=False, **kw)
        right = xr.open_dataset(b, engine="zarr_dask", consolidated=False, **kw)
        xr.testing.assert_identical(left, right)


def chunk_files(root: Path) -> list[Path]:
    """Stored chunk/shard files below a local store (no metadata, no temporary files)."""
    docs = {"zarr.json", ".zarray", ".zgroup", ".zattrs", ".zmetadata"}
    return [p for p in root.rglob("*") if p.is_file() and p.name not in docs and not p.name.endswith(".zd-tmp")]
