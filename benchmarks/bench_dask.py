"""The dask engine: ``zarr_dask.from_zarr`` / ``to_zarr`` vs dask + zarr-python vs tensorstore vs a bare floor.

Workloads (issue 4), on local files, float32, zstd level 0, same data for everyone:

* ``read-4MiB``   full read of ~1 GiB in 4 MiB chunks (1024x1024);
* ``read-16KiB``  full read of ~256 MiB in 16 KiB chunks (64x64);
* ``read-shard``  full read of ~1 GiB in 64 MiB shards of 1 MiB inner chunks (4096x4096 / 512x512);
* ``read-shard-16KiB``  full read of ~256 MiB in 4 MiB shards of 16 KiB inner chunks (1024x1024 / 64x64):
  not in the issue; small chunks sharded, as ``docs/tuning.md`` advises;
* ``write-4MiB``  write a ~1 GiB dask array (64 MiB blocks) to 4 MiB chunks;
* ``write-shard`` write the same dask array to 64 MiB shards of 1 MiB inner chunks;
* ``1e6-chunks``  open a 10^6-chunk array, build the dask array and compute ``[0:10]``.

Contenders: ``zarr_dask`` (``from_zarr(url).compute()`` -- which on a local scheduler reads straight into the
result -- / ``to_zarr(x, url, ...)``, default settings), ``zarr_dask (graph)`` (reads: ``dask.compute(x)``, the
same blocks through dask's scheduler and dask's concatenation of the blocks),
``dask+zarr-python`` (``dask.array.from_zarr`` / ``dask.array.to_zarr`` into a zarr-python array), both on dask's
threaded scheduler with 2 workers; ``tensorstore`` (``read()`` / ``write()`` on a zarr3 TensorStore, 2 I/O and 2
copy threads; rows skipped if it is not installed); ``floor``: a bare 2-thread loop that reads each chunk (or
shard) file and decodes it with numcodecs into a preallocated array; for writes it encodes and writes the files
(shards: inner chunks encoded, concatenated, index + crc32c appended). Writes go to a fresh directory each run
(removed untimed before). Reads are warm (page cache). Medians of ZD_BENCH_REPEAT rounds (default 5) after a
warm-up, contenders interleaved round-robin (``race``).

Targets: every zarr_dask read and write <= 1.2x the best of tensorstore and the floor; ``1e6-chunks`` <= 0.05 s.

    python benchmarks/bench_dask.py                     # everything at full size (~10 minutes)
    ZD_BENCH_GIB=0.125 ZD_BENCH_REPEAT=3 python benchmarks/bench_dask.py   # a quick run
    ZD_BENCH_ONLY=read-4MiB,1e6-chunks python benchmarks/bench_dask.py     # some workloads
"""

from __future__ import annotations

import os
import resource
import shutil
import statistics
import struct
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import crc32c
import dask
import dask.array as da
import numcodecs
import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _common import Table, race, scratch, smooth_field  # noqa: E402

import zarr_dask  # noqa: E402

GIB = float(os.environ.get("ZD_BENCH_GIB", "1"))
ONLY = {w for w in os.environ.get("ZD_BENCH_ONLY", "").split(",") if w}
THREADS = 2
ZSTD0 = {"name": "zstd", "configuration": {"level": 0, "checksum": False}}
FLOOR, TS, OURS, PEER = "floor", "tensorstore", "zarr_dask", "dask+zarr-python"
GRAPH = "zarr_dask (graph)"  # the same read through dask's scheduler: blocks, then dask's concatenation

try:
    import tensorstore as ts
except ImportError:  # a benchmark-only dependency
    ts = None


def square(gib: float, multiple: int) -> int:
    return max(multiple, int((gib * 2**30 / 4) ** 0.5) // multiple * multiple)


def make_data(side: int) -> np.ndarray:
    return smooth_field(side, side)


# ------------------------------------------------------------------------------------------------ floor
def grid(side: int, unit: int) -> list[tuple[int, int]]:
    return [(i, j) for i in range(side // unit) for j in range(side // unit)]


def floor_read_chunks(root: Path, side: int, chunk: int) -> np.ndarray:
    codec = numcodecs.Zstd()
    out = np.empty((side, side), dtype="f4")

    def one(ij: tuple[int, int]) -> None:
        i, j = ij
        with open(root / "c" / str(i) / str(j), "rb") as f:
            buf = f.read()
        tmp = np.empty((chunk, chunk), dtype="f4")
        codec.decode(buf, out=tmp)
        out[i * chunk : (i + 1) * chunk, j * chunk : (j + 1) * chunk] = tmp

    with ThreadPoolExecutor(THREADS) as ex:
        list(ex.map(one, grid(side, chunk)))
    return out


def floor_read_shards(root: Path, side: int, shard: int, inner: int) -> np.ndarray:
    codec = numcodecs.Zstd()
    out = np.empty((side, side), dtype="f4")
    n = shard // inner

    def one(ij: tuple[int, int]) -> None:
        i, j = ij
        with open(root / "c" / str(i) / str(j), "rb") as f:
            buf = f.read()
        index = np.frombuffer(buf, dtype="<u8", count=2 * n * n, offset=len(buf) - 16 * n * n - 4).reshape(n, n, 2)
        tmp = np.empty((inner, inner), dtype="f4")
        for a in range(n):
            for b in range(n):
                off, nbytes = index[a, b]
                codec.decode(memoryview(buf)[off : off + nbytes], out=tmp)
                r, c = i * shard + a * inner, j * shard + b * inner
                out[r : r + inner, c : c + inner] = tmp

    with ThreadPoolExecutor(THREADS) as ex:
        list(ex.map(one, grid(side, shard)))
    return out


def floor_write_chunks(root: Path, data: np.ndarray, chunk: int) -> None:
    codec = numcodecs.Zstd(level=0)

    def one(ij: tuple[int, int]) -> None:
        i, j = ij
        enc = codec.encode(np.ascontiguousarray(data[i * chunk : (i + 1) * chunk, j * chunk : (j + 1) * chunk]))
        os.makedirs(root / "c" / str(i), exist_ok=True)
        with open(root / "c" / str(i) / str(j), "wb") as f:
            f.write(enc)

    with ThreadPoolExecutor(THREADS) as ex:
        list(ex.map(one, grid(data.shape[0], chunk)))


def floor_write_shards(root: Path, data: np.ndarray, shard: int, inner: int) -> None:
    codec = numcodecs.Zstd(level=0)
    n = shard // inner

    def one(ij: tuple[int, int]) -> None:
        i, j = ij
        parts, index, offset = [], [], 0
        for a in range(n):
            for b in range(n):
                r, c = i * shard + a * inner, j * shard + b * inner
                enc = codec.encode(np.ascontiguousarray(data[r : r + inner, c : c + inner]))
                parts.append(enc)
                index += [offset, len(enc)]
                offset += len(enc)
        idx = struct.pack(f"<{len(index)}Q", *index)
        parts += [idx, struct.pack("<I", crc32c.crc32c(idx))]
        os.makedirs(root / "c" / str(i), exist_ok=True)
        with open(root / "c" / str(i) / str(j), "wb") as f:
            f.write(b"".join(parts))

    with ThreadPoolExecutor(THREADS) as ex:
        list(ex.map(one, grid(data.shape[0], shard)))


# ------------------------------------------------------------------------------------------ tensorstore
def ts_codecs(inner: int | None) -> list[dict[str, Any]]:
    base = [{"name": "bytes", "configuration": {"endian": "little"}}, ZSTD0]
    if inner is None:
        return base
    return [{"name": "sharding_indexed", "configuration": {
        "chunk_shape": [inner, inner], "codecs": base, "index_location": "end",
        "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}]}}]


def ts_spec(path: Path) -> dict[str, Any]:
    return {
        "driver": "zarr3",
        "kvstore": {"driver": "file", "path": str(path)},
        "context": {"data_copy_concurrency": {"limit": THREADS}, "file_io_concurrency": {"limit": THREADS},
                    "cache_pool": {"total_bytes_limit": 0}},
    }


def ts_read(path: Path) -> Callable[[], Any]:
    return lambda: ts.open(ts_spec(path), read=True).result().read().result()


def ts_write(path: Path, data: np.ndarray, unit: int, inner: int | None) -> Callable[[], Any]:
    meta = {"shape": list(data.shape), "data_type": "float32", "fill_value": 0,
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [unit, unit]}},
            "chunk_key_encoding": {"name": "default"}, "codecs": ts_codecs(inner)}

    def run() -> None:
        arr = ts.open({**ts_spec(path), "metadata": meta}, create=True, delete_existing=True).result()
        arr.write(data).result()

    return run


# --------------------------------------------------------------------------------------------- workloads
def with_cpu(contenders: dict[str, Callable[[], Any]]) -> tuple[dict[str, Callable[[], Any]], dict[str, list[float]]]:
    """Wrap contenders to record the process CPU time (user + system, all threads) of every run: less
    sensitive than wall time to the other tenants of a shared machine (system time is mostly page faults)."""
    cpu: dict[str, list[float]] = {name: [] for name in contenders}

    def wrap(name: str, func: Callable[[], Any]) -> Callable[[], Any]:
        def run() -> Any:
            r0 = resource.getrusage(resource.RUSAGE_SELF)
            out = func()
            r1 = resource.getrusage(resource.RUSAGE_SELF)
            cpu[name].append(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
            return out

        return run

    return {name: wrap(name, f) for name, f in contenders.items()}, cpu


def add_rows(table: Table, label: str, times: dict[str, list[float]], cpu: dict[str, list[float]],
             extra: dict[str, str] | None = None) -> None:
    for name, t in times.items():
        note = f"cpu {statistics.median(cpu[name][-len(t):]):6.2f} s " + (extra or {}).get(name, "")
        table.add(label, name, t, note)


def check(name: str, got: Any, want: np.ndarray) -> None:
    if not np.array_equal(np.asarray(got), want):
        raise AssertionError(f"{name} returned wrong data")


def read_workload(table: Table, label: str, root: Path, data: np.ndarray, chunk: int, shard: int | None) -> None:
    import zarr

    url = root / f"{label}.zarr"
    extra = {"shards": (shard, shard)} if shard else {}
    a = zarr_dask.create_array(str(url), shape=data.shape, dtype="f4", chunks=(chunk, chunk), compressors=ZSTD0, **extra)
    a[:] = data
    side = data.shape[0]
    contenders: dict[str, Callable[[], Any]] = {
        OURS: lambda: zarr_dask.from_zarr(str(url)).compute(),
        GRAPH: lambda: dask.compute(zarr_dask.from_zarr(str(url)))[0],
        PEER: lambda: da.from_zarr(zarr.open_array(str(url), mode="r")).compute(),
        FLOOR: (lambda: floor_read_shards(url, side, shard, chunk)) if shard else (lambda: floor_read_chunks(url, side, chunk)),
    }
    if ts is not None:
        contenders[TS] = ts_read(url)
    for name, func in contenders.items():
        check(f"{label}/{name}", func(), data)
    x = zarr_dask.from_zarr(a)
    with a.store.counters.counting() as delta:
        x.compute()
    extra_info = {OURS: f"[{x.npartitions} tasks, requests {delta['get']} get + {delta['get_range']} range]"}
    timed, cpu = with_cpu(contenders)
    add_rows(table, label, race(timed), cpu, extra_info)


def write_workload(table: Table, label: str, root: Path, data: np.ndarray, chunk: int, shard: int | None) -> None:
    import zarr

    side = data.shape[0]
    x = da.from_array(data, chunks=(min(4096, side), min(4096, side)))  # a dask array of 64 MiB blocks
    dirs = {name: root / f"{label}-{name.replace('+', '_')}" for name in (OURS, PEER, TS, FLOOR)}
    extra = {"shards": (shard, shard)} if shard else {}

    def ours() -> None:
        zarr_dask.to_zarr(x, str(dirs[OURS]), chunks=(chunk, chunk), compressors=ZSTD0, **extra)

    def peer() -> None:
        z = zarr.create_array(str(dirs[PEER]), shape=data.shape, dtype="f4", chunks=(chunk, chunk),
                              compressors=zarr.codecs.ZstdCodec(level=0), **extra)
        da.to_zarr(x, z)

    contenders: dict[str, Callable[[], Any]] = {
        OURS: ours,
        PEER: peer,
        FLOOR: (lambda: floor_write_shards(dirs[FLOOR], data, shard, chunk)) if shard
        else (lambda: floor_write_chunks(dirs[FLOOR], data, chunk)),
    }
    if ts is not None:
        contenders[TS] = ts_write(dirs[TS], data, shard or chunk, chunk if shard else None)

    def clean(name: str) -> None:
        if dirs[name].exists():
            shutil.rmtree(dirs[name])
        os.sync()

    timed, cpu = with_cpu(contenders)
    add_rows(table, label, race(timed, setup=clean), cpu)
    check(f"{label}/{OURS}", zarr_dask.open_array(str(dirs[OURS]))[:], data)
    check(f"{label}/{PEER}", zarr_dask.open_array(str(dirs[PEER]))[:], data)
    plan = zarr_dask.explain_write(x, zarr_dask.store.MemoryStore(), chunks=(chunk, chunk), **extra)
    print(f"    plan: {plan.keys} keys, {plan.tasks} writer tasks, aligned={plan.aligned}, "
          f"{plan.read_modify_writes} read-modify-writes", flush=True)


def huge_grid_workload(table: Table, root: Path) -> None:
    import zarr

    url = root / "huge.zarr"
    n, chunk = 10**8, 100  # 10^6 chunks of 100 float32
    a = zarr_dask.create_array(str(url), shape=(n,), dtype="f4", chunks=(chunk,), compressors=ZSTD0)
    a[:chunk] = np.arange(chunk, dtype="f4")
    want = np.arange(10, dtype="f4")
    codec = numcodecs.Zstd()

    def floor() -> np.ndarray:
        with open(url / "zarr.json", "rb") as f:
            f.read()
        with open(url / "c" / "0", "rb") as f:
            buf = f.read()
        out = np.empty(chunk, dtype="f4")
        codec.decode(buf, out=out)
        return out[:10]

    contenders: dict[str, Callable[[], Any]] = {
        OURS: lambda: zarr_dask.from_zarr(str(url))[0:10].compute(),
        PEER: lambda: da.from_zarr(zarr.open_array(str(url), mode="r"))[0:10].compute(),
        FLOOR: floor,
    }
    if ts is not None:
        contenders[TS] = lambda: ts.open(ts_spec(url), read=True).result()[0:10].read().result()
    for name, func in contenders.items():
        check(f"1e6/{name}", func(), want)
    timed, cpu = with_cpu(contenders)
    add_rows(table, "1e6-chunks", race(timed), cpu)


def report(table: Table) -> None:
    print("\nratios (median / median; target: zarr_dask <= 1.2x the best of tensorstore and the floor):")
    for workload in dict.fromkeys(w for w, *_ in table.rows):
        meds = {c: statistics.median(t) for w, c, t, _ in table.rows if w == workload}
        best_name = min((c for c in (TS, FLOOR) if c in meds), key=meds.__getitem__)
        ours = meds[OURS]
        line = (f"  {workload:<16} zarr_dask {ours:7.3f} s | {ours / meds[best_name]:5.2f}x best ({best_name}) | "
                f"{ours / meds[FLOOR]:5.2f}x floor")
        if TS in meds:
            line += f" | {ours / meds[TS]:5.2f}x tensorstore"
        line += f" | dask+zarr-python {meds[PEER] / meds[FLOOR]:5.2f}x floor ({meds[PEER] / ours:4.1f}x ours)"
        if GRAPH in meds:
            line += f" | graph path {meds[GRAPH] / meds[best_name]:5.2f}x best"
        print(line, flush=True)
    if any(w == "1e6-chunks" for w, *_ in table.rows):
        print(f"  1e6-chunks target <= 0.05 s: zarr_dask {table.median('1e6-chunks', OURS):.4f} s")


def main() -> None:
    import zarr

    dask.config.set(scheduler="threads", num_workers=THREADS)
    root = scratch("dask")
    table = Table("dask")
    big = square(GIB, 4096)
    small = square(GIB / 4, 1024)
    print(f"bench_dask: {big}^2 float32 ({big * big * 4 / 2**30:.2f} GiB), small {small}^2 "
          f"({small * small * 4 / 2**20:.0f} MiB); dask {dask.__version__}, zarr-python {zarr.__version__}, "
          f"tensorstore {'yes' if ts is not None else 'not installed'}; threaded scheduler, {THREADS} workers",
          flush=True)

    def want(workload: str) -> bool:
        return not ONLY or workload in ONLY

    data = make_data(big) if any(want(w) for w in ("read-4MiB", "read-shard", "write-4MiB", "write-shard")) else None
    if want("read-4MiB"):
        read_workload(table, "read-4MiB", root, data, 1024, None)
    if want("read-16KiB"):
        read_workload(table, "read-16KiB", root, make_data(small), 64, None)
    if want("read-shard"):
        read_workload(table, "read-shard", root, data, 512, min(4096, big))
    if want("read-shard-16KiB"):
        read_workload(table, "read-shard-16KiB", root, make_data(small), 64, min(1024, small))
    if want("write-4MiB"):
        write_workload(table, "write-4MiB", root, data, 1024, None)
    if want("write-shard"):
        write_workload(table, "write-shard", root, data, 512, min(4096, big))
    if want("1e6-chunks"):
        huge_grid_workload(table, root)
    report(table)


if __name__ == "__main__":
    main()
