"""Peak memory of a full read: how much memory reading a whole array takes, over the array's size.

Workload (issue 17): a ~1 GiB float32 array (ZD_BENCH_GIB to scale), zstd level 0, 4 MiB chunks, on local
files; the same data in 64 MiB shards of 4 MiB inner chunks. Each contender reads the whole array into memory
once, in a fresh process, with 2 threads:

* ``zarr_dask``          ``zarr_dask.open_array(url)[:]``
* ``zarr_dask (dask)``   ``zarr_dask.from_zarr(url).compute()``
* ``dask+zarr-python``   ``dask.array.from_zarr(zarr.open_array(url)).compute()``
* ``zarr-python``        ``zarr.open_array(url)[:]``
* ``tensorstore``        ``ts.open(spec).result().read().result()`` (no cache)
* ``floor``              ``np.empty`` of the array, then numcodecs decodes each chunk into its place

The child process reports its resident memory just before the read (after imports and the open) and its peak
(``VmHWM``) after; "peak over size" is (peak - before) / array bytes: 1.0 means the result and nothing else.
Printed: medians over ZD_BENCH_REPEAT fresh processes (default 3), round-robin.

Target: zarr_dask (both rows) <= 1.1x the array size.

    python benchmarks/bench_memory.py
    ZD_BENCH_GIB=0.25 python benchmarks/bench_memory.py      # a quick look
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _common import scratch, smooth_field  # noqa: E402

GIB = float(os.environ.get("ZD_BENCH_GIB", "1"))
REPEAT = int(os.environ.get("ZD_BENCH_REPEAT", "3"))
THREADS = 2
CHUNK = 1024  # 1024 x 1024 float32: 4 MiB
SHARD = 4096  # 64 MiB shards
ZSTD0 = {"name": "zstd", "configuration": {"level": 0, "checksum": False}}
CONTENDERS = ("zarr_dask", "zarr_dask (dask)", "dask+zarr-python", "zarr-python", "tensorstore", "floor")


def _status(field: str) -> int:
    """A ``/proc/self/status`` field in bytes (``VmRSS``, ``VmHWM``)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def _reader(name: str, url: str, sharded: bool) -> Any:
    """Child side: everything the read needs, imported and opened; returns the read to time and measure."""
    import dask

    dask.config.set(scheduler="threads", num_workers=THREADS)
    os.environ["ZARR_DASK_IO_THREADS"] = str(THREADS)
    if name == "zarr_dask":
        import zarr_dask

        a = zarr_dask.open_array(url)
        return lambda: a[:]
    if name == "zarr_dask (dask)":
        import zarr_dask

        x = zarr_dask.from_zarr(url)
        return x.compute
    if name == "dask+zarr-python":
        import dask.array as da
        import zarr

        x = da.from_zarr(zarr.open_array(url, mode="r"))
        return x.compute
    if name == "zarr-python":
        import zarr

        zarr.config.set({"threading.max_workers": THREADS})
        z = zarr.open_array(url, mode="r")
        return lambda: z[:]
    if name == "tensorstore":
        import tensorstore as ts

        spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": url},
                "context": {"data_copy_concurrency": {"limit": THREADS}, "file_io_concurrency": {"limit": THREADS},
                            "cache_pool": {"total_bytes_limit": 0}}}  # fmt: skip
        t = ts.open(spec, read=True).result()
        return lambda: t.read().result()
    if name == "floor":
        from concurrent.futures import ThreadPoolExecutor

        import numcodecs

        meta = json.loads((Path(url) / "zarr.json").read_text())
        shape = tuple(meta["shape"])
        codec = numcodecs.Zstd()

        def floor() -> np.ndarray:
            out = np.empty(shape, dtype="f4")
            rows, cols = shape[0] // CHUNK, shape[1] // CHUNK

            def one(ij: tuple[int, int]) -> None:
                i, j = ij
                with open(Path(url) / "c" / str(i) / str(j), "rb") as f:
                    buf = f.read()
                tile = np.empty((CHUNK, CHUNK), dtype="f4")
                codec.decode(buf, out=tile)
                out[i * CHUNK : (i + 1) * CHUNK, j * CHUNK : (j + 1) * CHUNK] = tile

            with ThreadPoolExecutor(THREADS) as pool:
                list(pool.map(one, [(i, j) for i in range(rows) for j in range(cols)]))
            return out

        return floor
    raise ValueError(name)


def child(name: str, url: str, sharded: bool) -> None:
    read = _reader(name, url, sharded)
    before = _status("VmRSS")
    t0 = time.perf_counter()
    out = np.asarray(read())
    seconds = time.perf_counter() - t0
    print(json.dumps({"before": before, "peak": _status("VmHWM"), "seconds": seconds, "nbytes": out.nbytes,
                      "sum": float(out[:: max(1, out.shape[0] // 64), ::97].sum(dtype="f8"))}))  # fmt: skip


def run(name: str, url: str, sharded: bool) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, __file__, "--child", name, url, str(int(sharded))], capture_output=True,
                          text=True, timeout=900)  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeError(f"{name}: {proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else proc.returncode}")
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def build(root: Path) -> dict[str, tuple[str, bool]]:
    import zarr_dask

    side = int((GIB * 2**30 / 4) ** 0.5) // SHARD * SHARD or SHARD
    data = smooth_field(side, side)
    urls = {}
    for label, extra in (("chunks", {}), ("shards", {"shards": (SHARD, SHARD)})):
        url = str(root / f"{label}.zarr")
        a = zarr_dask.create_array(url, shape=data.shape, dtype="f4", chunks=(CHUNK, CHUNK), compressors=ZSTD0,
                                   **extra)  # fmt: skip
        a[:] = data
        urls[label] = (url, bool(extra))
    print(f"bench_memory: {data.nbytes / 2**30:.2f} GiB float32 {data.shape}, 4 MiB chunks (zstd 0), and 64 MiB "
          f"shards; {THREADS} threads, fresh process per read, medians of {REPEAT}", flush=True)  # fmt: skip
    return urls


def main() -> None:
    root = scratch("bench_memory")
    urls = build(root)
    rows: list[str] = []
    for label, (url, sharded) in urls.items():
        names = [n for n in CONTENDERS if not (sharded and n == "floor")]  # the floor reads plain chunks
        results: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
        skipped: dict[str, str] = {}
        sums: dict[str, float] = {}
        for _ in range(REPEAT):
            for n in names:
                if n in skipped:
                    continue
                try:
                    r = run(n, url, sharded)
                except Exception as e:  # a peer that cannot do this read: reported, skipped
                    skipped[n] = str(e)[:200]
                    continue
                results[n].append(r)
                sums[n] = r["sum"]
        ref = sums.get("floor", sums.get("tensorstore"))
        for n, runs in results.items():
            if not runs:
                print(f"  {label:7s} {n:18s} skipped: {skipped.get(n)}")
                continue
            if ref is not None and abs(sums[n] - ref) > 1e-6 * max(1.0, abs(ref)):
                raise SystemExit(f"{label}/{n}: wrong data (checksum {sums[n]} != {ref})")
            extra = statistics.median((r["peak"] - r["before"]) / r["nbytes"] for r in runs)
            secs = statistics.median(r["seconds"] for r in runs)
            print(f"  {label:7s} {n:18s} peak over size {extra:5.2f}x   read {secs:6.3f} s", flush=True)
            rows.append(f"| {label} | {n} | {extra:.2f}x | {secs:.3f} |")
    print("\n| layout | contender | peak memory over array size | read seconds |\n|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3], sys.argv[4] == "1")
    else:
        main()
