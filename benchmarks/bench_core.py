"""Core read/write speed: ``Array[...]`` vs zarr-python's ``Array[...]`` vs a bare numcodecs floor.

Workload (issue: foundation): a ~1 GiB float32 array (ZD_BENCH_GIB to scale), zstd level 0, 4 MiB chunks,
on local files. Full read and full write. The floor is a bare loop that reads each chunk file and decodes it
with numcodecs into a preallocated array (for writes: encodes each chunk and writes its file) — with one
thread, and with as many threads as cores. Everything runs in this one process on the same data; medians of
ZD_BENCH_REPEAT rounds (default 5) after a warm-up run, contenders
interleaved round-robin so noise hits them alike.

Targets: ours <= 0.5x zarr-python's time and <= 1.2x the floor, for reads and writes.

    python benchmarks/bench_core.py
"""

from __future__ import annotations

import os
import shutil
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numcodecs
import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _common import Table, race, scratch, smooth_field  # noqa: E402

import zarr_dask  # noqa: E402

GIB = float(os.environ.get("ZD_BENCH_GIB", "1"))
THREADS = os.cpu_count() or 2


def make_data(gib: float) -> np.ndarray:
    side = int((gib * 2**30 / 4) ** 0.5) // 1024 * 1024 or 1024
    return smooth_field(side, side)


def chunk_files(root: Path, shape: tuple[int, int], chunk: int) -> list[tuple[tuple[slice, slice], str]]:
    out = []
    for i in range(shape[0] // chunk):
        for j in range(shape[1] // chunk):
            out.append(((slice(i * chunk, (i + 1) * chunk), slice(j * chunk, (j + 1) * chunk)), str(root / "c" / str(i) / str(j))))
    return out


def floor_read(files, shape, chunk, threads: int) -> np.ndarray:
    codec = numcodecs.Zstd()
    out = np.empty(shape, dtype="f4")

    def one(item):
        region, path = item
        with open(path, "rb") as f:
            buf = f.read()
        scratch_buf = np.empty((chunk, chunk), dtype="f4")
        codec.decode(buf, out=scratch_buf)
        out[region] = scratch_buf

    if threads == 1:
        for item in files:
            one(item)
    else:
        with ThreadPoolExecutor(threads) as ex:
            list(ex.map(one, files))
    return out


def floor_write(files, data, threads: int) -> None:
    codec = numcodecs.Zstd(level=0)

    def one(item):
        region, path = item
        enc = codec.encode(np.ascontiguousarray(data[region]))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(enc)

    if threads == 1:
        for item in files:
            one(item)
    else:
        with ThreadPoolExecutor(threads) as ex:
            list(ex.map(one, files))


def main() -> None:
    import zarr

    root = scratch("core")
    data = make_data(GIB)
    shape, chunk = data.shape, 1024
    print(f"bench_core: float32 {shape} = {data.nbytes / 2**30:.2f} GiB, zstd(0), chunks {chunk}x{chunk} "
          f"(4 MiB), {THREADS} cores, zarr-python {zarr.__version__}, numcodecs {numcodecs.__version__}")
    url = root / "ours.zarr"
    a = zarr_dask.create_array(str(url), shape=shape, dtype="f4", chunks=(chunk, chunk),
                               compressors={"name": "zstd", "configuration": {"level": 0, "checksum": False}})
    a[:] = data
    files = chunk_files(url, shape, chunk)
    table = Table("core")

    # ---- reads (all contenders read the same files)
    ours = zarr_dask.open_array(str(url), mode="r")
    np.testing.assert_array_equal(ours[:], data)
    zp = zarr.open_array(str(url), mode="r")
    np.testing.assert_array_equal(zp[:], data)
    np.testing.assert_array_equal(floor_read(files, shape, chunk, 1), data)
    reads = race({
        "zarr_dask": lambda: ours[:],
        "zarr-python": lambda: zp[:],
        "floor (1 thread)": lambda: floor_read(files, shape, chunk, 1),
        f"floor ({THREADS} threads)": lambda: floor_read(files, shape, chunk, THREADS),
    })
    for name, times in reads.items():
        table.add("read", name, times)

    # ---- writes: every run writes a NEW array into an empty directory (removed, untimed, before each run).
    # Overwriting existing files would mostly time this VM's ext4 "discard" block freeing, not the writers.
    zstd0 = {"name": "zstd", "configuration": {"level": 0, "checksum": False}}
    wdir = {"zarr_dask": root / "w_ours.zarr", "zarr-python": root / "w_zp.zarr"}
    ffiles = chunk_files(root / "w_floor", shape, chunk)

    def clean(name: str) -> None:
        target = wdir.get(name, root / "w_floor")
        if target.exists():
            shutil.rmtree(target)
        os.sync()

    def write_ours():
        a = zarr_dask.create_array(str(wdir["zarr_dask"]), shape=shape, dtype="f4", chunks=(chunk, chunk),
                                   compressors=zstd0)
        a[:] = data

    def write_zp():
        a = zarr.create_array(str(wdir["zarr-python"]), shape=shape, dtype="f4", chunks=(chunk, chunk),
                              compressors=zarr.codecs.ZstdCodec(level=0))
        a[:] = data

    writes = race({
        "zarr_dask": write_ours,
        "zarr-python": write_zp,
        "floor (1 thread)": lambda: floor_write(ffiles, data, 1),
        f"floor ({THREADS} threads)": lambda: floor_write(ffiles, data, THREADS),
    }, setup=clean)
    for name, times in writes.items():
        table.add("write", name, times)
    np.testing.assert_array_equal(zarr_dask.open_array(str(wdir["zarr_dask"]))[:], data)
    np.testing.assert_array_equal(zarr.open_array(str(wdir["zarr-python"]))[:], data)

    print("\nratios (median time / median time; lower is better for zarr_dask):")
    for w in ("read", "write"):
        zp_ratio = table.ratio(w, "zarr_dask", "zarr-python")
        f1 = table.ratio(w, "zarr_dask", "floor (1 thread)")
        fn = table.ratio(w, "zarr_dask", f"floor ({THREADS} threads)")
        ok = "OK" if zp_ratio <= 0.5 and f1 <= 1.2 else "MISS"
        print(f"  {w:<6} vs zarr-python {zp_ratio:5.2f}x (target <= 0.5)   vs floor 1 thread {f1:5.2f}x (target <= 1.2)"
              f"   vs floor {THREADS} threads {fn:5.2f}x   [{ok}]")


if __name__ == "__main__":
    main()
