"""Sharded reads: ``Array[...]`` vs zarr-python's ``Array[...]`` vs a bare numcodecs floor, on local files.

Workload (issue 3): a ~1 GiB float32 array (ZD_BENCH_GIB to scale), 64 MiB shards of 1 MiB inner chunks,
zstd level 0, index at the end (bytes + crc32c), written once by zarr_dask and read by everyone.

(a) full read of the array;
(b) a strided selection ``[o::s, o::s]`` touching ~5% of the inner chunks, spread over every shard.

Request counts: ours from ``store.counters`` (one per key or byte range), zarr-python's by a ``LocalStore``
subclass counting ``get`` / ``get_sync`` calls (its whole-value and byte-range reads), the floor by its own
count of ``pread`` calls. The floor is a bare loop over the shards (2 threads): (a) read the shard file, decode
each inner chunk with numcodecs into a scratch buffer, copy it into the output; (b) pread the index, pread and
decode each needed inner chunk.

Everything runs in this one process on the same files; medians of ZD_BENCH_REPEAT rounds (default 5) after a
warm-up, contenders interleaved round-robin. Optional: ``ZD_BENCH_WRITE=1`` also times a full write.

Target: ours <= 0.5x zarr-python's time for (a) and (b) with no more requests.

    python benchmarks/bench_sharding.py
    ZD_BENCH_ONLY=b python benchmarks/bench_sharding.py    # only (b)
"""

from __future__ import annotations

import itertools
import os
import resource
import statistics
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numcodecs
import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _common import Table, race, scratch, smooth_field  # noqa: E402

import zarr_dask  # noqa: E402

GIB = float(os.environ.get("ZD_BENCH_GIB", "1"))
THREADS = os.cpu_count() or 2
ONLY = {w for w in os.environ.get("ZD_BENCH_ONLY", "").split(",") if w}  # "a", "b": some workloads only
ZSTD0 = {"name": "zstd", "configuration": {"level": 0, "checksum": False}}


def make_data(gib: float) -> np.ndarray:
    side = max(2048, int((gib * 2**30 / 4) ** 0.5) // 2048 * 2048)
    return smooth_field(side, side)


def layout(side: int) -> tuple[int, int]:
    """(shard side, inner side): 64 MiB / 1 MiB float32 squares, smaller when the array is scaled down."""
    shard = min(4096, side // 2)
    return shard, min(512, shard // 4)


def counting_zarr_store(root: Path) -> Any:
    import zarr

    class CountingLocalStore(zarr.storage.LocalStore):  # type: ignore[misc]
        requests = itertools.count()

        async def get(self, key, prototype=None, byte_range=None):  # type: ignore[no-untyped-def]
            next(self.requests)
            return await super().get(key, prototype, byte_range)

        def get_sync(self, key, *, prototype=None, byte_range=None):  # type: ignore[no-untyped-def]
            next(self.requests)
            return super().get_sync(key, prototype=prototype, byte_range=byte_range)

        async def get_partial_values(self, prototype, key_ranges):  # type: ignore[no-untyped-def]
            key_ranges = list(key_ranges)
            for _ in key_ranges:
                next(self.requests)
            return await super().get_partial_values(prototype, key_ranges)

    return CountingLocalStore(str(root), read_only=True)


def zp_count(store: Any) -> int:
    """Requests so far (reading the counter consumes one number, which is subtracted)."""
    return next(store.requests)


# ------------------------------------------------------------------------------------------------ floor
class Floor:
    """A bare reader of the shards: pread + numcodecs, no Zarr machinery (index at the end, 16*n+4 bytes)."""

    def __init__(self, root: Path, shape: tuple[int, int], shard: int, inner: int) -> None:
        self.root, self.shape, self.shard, self.inner = root, shape, shard, inner
        self.n = shard // inner
        self.index_size = 16 * self.n * self.n + 4
        self.codec = numcodecs.Zstd()
        self.preads = 0
        self._lock = threading.Lock()

    def _path(self, i: int, j: int) -> str:
        return str(self.root / "c" / str(i) / str(j))

    def _pread(self, fd: int, n: int, off: int) -> bytes:
        with self._lock:
            self.preads += 1
        return os.pread(fd, n, off)

    def _index(self, buf: bytes) -> np.ndarray:
        return np.frombuffer(buf, "<u8", count=self.n * self.n * 2).reshape(self.n, self.n, 2)

    def read_all(self) -> np.ndarray:
        out = np.empty(self.shape, dtype="f4")
        g = self.shape[0] // self.shard

        def one(ij: tuple[int, int]) -> None:
            i, j = ij
            fd = os.open(self._path(i, j), os.O_RDONLY)
            try:
                buf = self._pread(fd, os.fstat(fd).st_size, 0)
            finally:
                os.close(fd)
            index = self._index(buf[-self.index_size :])
            tmp = np.empty((self.inner, self.inner), dtype="f4")
            view = memoryview(buf)
            for a in range(self.n):
                for b in range(self.n):
                    off, nb = (int(v) for v in index[a, b])
                    self.codec.decode(view[off : off + nb], out=tmp)
                    r, c = i * self.shard + a * self.inner, j * self.shard + b * self.inner
                    out[r : r + self.inner, c : c + self.inner] = tmp

        with ThreadPoolExecutor(THREADS) as ex:
            list(ex.map(one, itertools.product(range(g), range(g))))
        return out

    def read_strided(self, start: int, step: int) -> np.ndarray:
        rows = range(start, self.shape[0], step)
        out = np.empty((len(rows), len(rows)), dtype="f4")
        by_shard: dict[tuple[int, int], list[tuple[int, int, int, int]]] = {}
        for oi, r in enumerate(rows):
            for oj, c in enumerate(rows):
                by_shard.setdefault((r // self.shard, c // self.shard), []).append((oi, oj, r, c))

        def one(item: tuple[tuple[int, int], list[tuple[int, int, int, int]]]) -> None:
            (i, j), cells = item
            fd = os.open(self._path(i, j), os.O_RDONLY)
            try:
                size = os.fstat(fd).st_size
                index = self._index(self._pread(fd, self.index_size, size - self.index_size))
                tmp = np.empty((self.inner, self.inner), dtype="f4")
                for oi, oj, r, c in cells:
                    a, b = (r % self.shard) // self.inner, (c % self.shard) // self.inner
                    off, nb = (int(v) for v in index[a, b])
                    self.codec.decode(self._pread(fd, nb, off), out=tmp)
                    out[oi, oj] = tmp[r % self.inner, c % self.inner]
            finally:
                os.close(fd)

        with ThreadPoolExecutor(THREADS) as ex:
            list(ex.map(one, by_shard.items()))
        return out


# ------------------------------------------------------------------------------------------------- main
class Cpu:
    """Wraps contenders to record the process CPU time (user + system) of each call besides race()'s wall
    time: on a shared machine CPU time is the steadier measure of the work done."""

    def __init__(self) -> None:
        self.times: dict[str, list[float]] = {}

    def wrap(self, contenders: dict[str, Any]) -> dict[str, Any]:
        def timed(name: str, fn: Any) -> Any:
            def run() -> Any:
                t0 = resource.getrusage(resource.RUSAGE_SELF)
                out = fn()
                t1 = resource.getrusage(resource.RUSAGE_SELF)
                used = t1.ru_utime - t0.ru_utime + t1.ru_stime - t0.ru_stime
                self.times.setdefault(name, []).append(used)
                return out

            return run

        self.times.clear()
        return {name: timed(name, fn) for name, fn in contenders.items()}

    def median(self, name: str) -> float:
        return statistics.median(self.times[name][1:])  # without the warm-up run


def run_workload(table: Table, label: str, contenders: dict[str, Any], counts: dict[str, int]) -> dict[str, float]:
    cpu = Cpu()
    times = race(cpu.wrap(contenders))
    for name, t in times.items():
        table.add(label, name, t, f"cpu {cpu.median(name):6.3f} s  requests {counts[name]}")
    return {name: cpu.median(name) for name in times}


def main() -> None:
    import zarr

    root = scratch("sharding")
    data = make_data(GIB)
    side = data.shape[0]
    shard, inner = layout(side)
    url = root / "ours.zarr"
    print(
        f"bench_sharding: float32 {data.shape} = {data.nbytes / 2**30:.2f} GiB, shards {shard}x{shard} "
        f"({shard * shard * 4 / 2**20:.0f} MiB), inner chunks {inner}x{inner} ({inner * inner * 4 / 2**20:.2f} MiB), "
        f"zstd(0), {THREADS} cores, zarr-python {zarr.__version__}, numcodecs {numcodecs.__version__}"
    )
    a = zarr_dask.create_array(str(url), shape=data.shape, dtype="f4", chunks=(inner, inner), shards=(shard, shard),
                               compressors=ZSTD0)
    a[:] = data
    ours = zarr_dask.open_array(str(url), mode="r")
    zstore = counting_zarr_store(url)
    zp = zarr.open_array(zstore, mode="r")
    floor = Floor(url, data.shape, shard, inner)
    fl = f"floor ({THREADS} threads)"
    table = Table("sharding")
    cpu: dict[str, dict[str, float]] = {}

    # (a) full read
    full = {"zarr_dask": lambda: ours[:], "zarr-python": lambda: zp[:], fl: floor.read_all}
    if not ONLY or "a" in ONLY:
        for fn in full.values():
            np.testing.assert_array_equal(fn(), data)
        cpu["(a) full read"] = run_workload(table, "(a) full read", full, request_counts(ours, zstore, floor, full))

    # (b) strided selection touching ~5% of the inner chunks, spread over every shard
    step, start = inner * 5, inner // 2  # every 5th inner chunk along each axis: 1/25 = 4% of them
    sel = (slice(start, None, step), slice(start, None, step))
    label = f"(b) {len(range(start, side, step)) ** 2}/{(side // inner) ** 2} inner"
    strided = {"zarr_dask": lambda: ours[sel], "zarr-python": lambda: zp[sel],
               fl: lambda: floor.read_strided(start, step)}
    if not ONLY or "b" in ONLY:
        for fn in strided.values():
            np.testing.assert_array_equal(fn(), data[sel])
        cpu[label] = run_workload(table, label, strided, request_counts(ours, zstore, floor, strided))

    if os.environ.get("ZD_BENCH_WRITE"):
        bench_write(table, root, data, shard, inner)
    report(table, cpu, fl)


def bench_write(table: Table, root: Path, data: np.ndarray, shard: int, inner: int) -> None:
    import zarr

    w_ours = zarr_dask.create_array(str(root / "w_ours.zarr"), shape=data.shape, dtype="f4", chunks=(inner, inner),
                                    shards=(shard, shard), compressors=ZSTD0)
    w_zp = zarr.create_array(str(root / "w_zp.zarr"), shape=data.shape, dtype="f4", chunks=(inner, inner),
                             shards=(shard, shard), compressors=zarr.codecs.ZstdCodec(level=0))

    def write_ours() -> None:
        w_ours[:] = data

    def write_zp() -> None:
        w_zp[:] = data

    for name, t in race({"zarr_dask": write_ours, "zarr-python": write_zp}).items():
        table.add("(c) full write", name, t)


def report(table: Table, cpu: dict[str, dict[str, float]], fl: str) -> None:
    print("\nratios (median / median; lower is better for zarr_dask):")
    for w, per in cpu.items():
        zp_ratio = table.ratio(w, "zarr_dask", "zarr-python")
        print(f"  {w:<24} wall vs zarr-python {zp_ratio:5.2f}x (target <= 0.5) [{'OK' if zp_ratio <= 0.5 else 'MISS'}]"
              f"  vs floor {table.ratio(w, 'zarr_dask', fl):5.2f}x   cpu vs zarr-python "
              f"{per['zarr_dask'] / max(per['zarr-python'], 1e-9):5.2f}x  vs floor "
              f"{per['zarr_dask'] / max(per[fl], 1e-9):5.2f}x")
    if any(w == "(c) full write" for w, *_ in table.rows):
        print(f"  {'(c) full write':<24} wall vs zarr-python {table.ratio('(c) full write', 'zarr_dask', 'zarr-python'):5.2f}x")


def request_counts(ours: Any, zstore: Any, floor: Floor, contenders: dict[str, Any]) -> dict[str, int]:
    """Requests of one run of each contender."""
    f_ours, f_zp, f_floor = contenders.values()
    with ours.store.counters.counting() as delta:
        f_ours()
    n_ours = delta["get"] + delta["get_range"]
    before = zp_count(zstore)
    f_zp()
    n_zp = zp_count(zstore) - before - 1
    floor.preads = 0
    f_floor()
    return {"zarr_dask": n_ours, "zarr-python": n_zp, f"floor ({THREADS} threads)": floor.preads}


if __name__ == "__main__":
    main()
