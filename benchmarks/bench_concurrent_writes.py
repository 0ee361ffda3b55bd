"""Conditional writes: what they cost aligned writes, and what merging costs independent misaligned writers.

1. Aligned writes (every key covered whole) of ``ZD_BENCH_MIB`` MiB (default 64) in 64 KiB chunks to local
   files: requests and seconds with the per-key locks that make conditional writes safe (zarr_dask today),
   against the same store with the key locks switched off (what a write cost before them). Medians of
   ``ZD_BENCH_REPEAT`` (default 5); the requests must be equal, the ratio within noise.
2. Misaligned independent writers: ``ZD_BENCH_WRITERS`` (default 32) threads, each writing one row with its
   own ``to_zarr(region=...)`` call into 8-row chunks, on a memory store, local files and moto S3 (when moto is
   installed: ``make bench`` runs in the oracle venv, which has it): requests per writer,
   conditional writes per merged key and the conflicts among them that were read, merged and retried.
3. What fencing costs (issue 23): a new array written whole (aligned, and with a partial edge chunk) and
   single appends of ``ZD_BENCH_APPEND_MIB`` MiB (default 16) whose first rows land in the chunk the stored rows
   end in, on local files and moto S3: seconds (median of ``ZD_BENCH_REPEAT``) and requests per write. With
   ``ZD_BENCH_BASELINE=<checkout of another revision>`` the same runs are made with that revision's
   ``zarr_dask`` (a subprocess with it first on ``PYTHONPATH``), alternating, and the ratios printed.
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import dask
import dask.array as da
import numpy as np

import zarr_dask
from zarr_dask.store import LocalStore, MemoryStore, Store

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import make_moto_writes_atomic  # noqa: E402

MIB = int(os.environ.get("ZD_BENCH_MIB", "64"))
REPEAT = int(os.environ.get("ZD_BENCH_REPEAT", "5"))
WRITERS = int(os.environ.get("ZD_BENCH_WRITERS", "32"))


class UnlockedLocalStore(LocalStore):
    """LocalStore without its per-key lock: the plain writes of a LocalStore before conditional writes."""

    @contextlib.contextmanager
    def key_lock(self, key: str) -> Iterator[None]:
        yield


def aligned(store_cls: type[LocalStore]) -> tuple[float, dict[str, int]]:
    """One aligned write into a fresh directory: (seconds, requests)."""
    rows = MIB * 2**20 // (128 * 8)
    data = da.random.default_rng(0).random((rows, 128), chunks=(4096, 128))
    with tempfile.TemporaryDirectory() as tmp:
        store = store_cls(tmp)
        zarr_dask.create_array(store, shape=data.shape, dtype="f8", chunks=(64, 128), fill_value=0)
        with dask.config.set(scheduler="threads", num_workers=2), store.counters.counting() as delta:
            t0 = time.perf_counter()
            zarr_dask.to_zarr(data, store, region=(slice(0, rows),))
            seconds = time.perf_counter() - t0
        return seconds, dict(delta)


def misaligned(store: Store) -> dict[str, Any]:
    rows = WRITERS
    zarr_dask.create_array(store, shape=(rows, 64), dtype="f8", chunks=(8, 64), fill_value=np.nan, overwrite=True)
    barrier = threading.Barrier(WRITERS)

    def write(i: int) -> None:
        barrier.wait()
        zarr_dask.to_zarr(da.full((1, 64), float(i), chunks=1), store, region=(slice(i, i + 1),))

    with dask.config.set(scheduler="sync"), store.counters.counting() as delta:
        t0 = time.perf_counter()
        with ThreadPoolExecutor(WRITERS) as ex:
            list(ex.map(write, range(WRITERS)))
        seconds = time.perf_counter() - t0
    got = zarr_dask.open_array(store)[:]
    merged = WRITERS  # every writer merges exactly one chunk
    return {
        "seconds": seconds,
        "exact": bool((got == np.arange(rows, dtype="f8")[:, None]).all()),
        "requests per writer (metadata included)": (delta["get"] + delta["set"] + delta["delete"]) / WRITERS,
        "conditional writes per merged key": delta["set"] / merged,
        "conflicts retried per merged key": (delta["set"] - merged) / merged,
    }


@contextlib.contextmanager
def moto_s3() -> Iterator[Store | None]:
    """A moto S3 server on 127.0.0.1 with a fresh bucket (its conditional writes made atomic, as S3's are; see
    _common.make_moto_writes_atomic), or None when moto is not installed."""
    try:
        from moto.server import ThreadedMotoServer
    except ImportError:
        yield None
        return
    for name, value in {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_DEFAULT_REGION": "us-east-1"}.items():
        os.environ.setdefault(name, value)
    make_moto_writes_atomic()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        options = {"client_kwargs": {"endpoint_url": f"http://{host}:{port}", "region_name": "us-east-1"}}
        store = zarr_dask.open_store("s3://zd-bench/a.zarr", storage_options=options)
        store.fs.call_s3("create_bucket", Bucket="zd-bench")  # type: ignore[attr-defined]
        yield store
    finally:
        server.stop()


APPEND_MIB = int(os.environ.get("ZD_BENCH_APPEND_MIB", "16"))


def fencing_runs(store: Store) -> dict[str, tuple[float, dict[str, int]]]:
    """One run of each write of section 3 into ``store``: {name: (seconds, requests)}."""
    rows = APPEND_MIB * 2**20 // (64 * 4)
    data = da.random.default_rng(1).random((rows, 64), chunks=(4096, 64)).astype("f4")
    out: dict[str, tuple[float, dict[str, int]]] = {}
    for name, shape in (("create aligned", rows), ("create with edge", rows - 100)):
        store.delete_prefix("")
        with dask.config.set(scheduler="threads", num_workers=2), store.counters.counting() as delta:
            t0 = time.perf_counter()
            zarr_dask.to_zarr(data[:shape], store, chunks=(1024, 64))
            seconds = time.perf_counter() - t0
        out[name] = (seconds, dict(delta))
    for i in range(2):  # the stored rows end inside a chunk: the first appended rows are merged into it
        with dask.config.set(scheduler="threads", num_workers=2), store.counters.counting() as delta:
            t0 = time.perf_counter()
            zarr_dask.append(data, store)
            seconds = time.perf_counter() - t0
        out[f"append {i + 1}"] = (seconds, dict(delta))
    return out


def fencing_section(json_lines: bool = False) -> dict[str, dict[str, tuple[float, dict[str, int]]]]:
    """Section 3 with the zarr_dask importable here: {store: {write: (median seconds, requests)}}."""
    results: dict[str, dict[str, tuple[float, dict[str, int]]]] = {}
    with moto_s3() as s3:
        stores: list[tuple[str, Store]] = [("local", LocalStore(tempfile.mkdtemp()))]
        stores += [("moto S3", s3)] if s3 is not None else []
        for name, store in stores:
            fencing_runs(store)  # warm: the codec pipelines, the bucket's discovery
            runs = [fencing_runs(store) for _ in range(REPEAT)]
            results[name] = {w: (statistics.median(r[w][0] for r in runs), runs[-1][w][1]) for w in runs[0]}
    if json_lines:
        print("FENCING " + json.dumps(results))
    return results


def _baseline(checkout: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": checkout + os.pathsep + os.environ.get("PYTHONPATH", ""), "ZD_BENCH_REPEAT": "1"}
    out = subprocess.run([sys.executable, __file__, "--fencing-json"], env=env, capture_output=True, text=True, check=True)
    line = next(x for x in out.stdout.splitlines() if x.startswith("FENCING "))
    return dict(json.loads(line[len("FENCING ") :]))


def compare_fencing(checkout: str | None) -> None:
    print(f"\nwhat fencing costs: a new {APPEND_MIB} MiB array, and appends of {APPEND_MIB} MiB (1024-row chunks)")
    if checkout is None:
        for store, writes in fencing_section().items():
            for w, (sec, req) in writes.items():
                print(f"  {store:8s} {w:18s} {sec:.3f} s   requests {req}")
        return
    mine: list[dict[str, Any]] = []
    theirs: list[dict[str, Any]] = []
    env_repeat = os.environ.get("ZD_BENCH_REPEAT")
    os.environ["ZD_BENCH_REPEAT"] = "1"
    try:
        for _ in range(REPEAT):  # alternating, so that drift in the machine's load hits both alike
            theirs.append(_baseline(checkout))
            mine.append(json.loads(json.dumps(fencing_section())))
    finally:
        if env_repeat is None:
            os.environ.pop("ZD_BENCH_REPEAT")
        else:
            os.environ["ZD_BENCH_REPEAT"] = env_repeat
    print(f"  baseline: {checkout}; medians of {REPEAT}")
    for store in mine[0]:
        for w in mine[0][store]:
            a = statistics.median(r[store][w][0] for r in mine)
            b = statistics.median(r[store][w][0] for r in theirs)
            ra, rb = mine[-1][store][w][1], theirs[-1][store][w][1]
            extra = {k: ra.get(k, 0) - rb.get(k, 0) for k in ("get", "set", "delete") if ra.get(k, 0) != rb.get(k, 0)}
            print(f"  {store:8s} {w:18s} {a:.3f} s vs {b:.3f} s  {a / b:.2f}x   requests {ra}  (vs baseline: {extra or 'equal'})")


def main() -> None:
    if "--fencing-json" in sys.argv:
        fencing_section(json_lines=True)
        return
    print(f"aligned writes: {MIB} MiB in 64 KiB chunks, local files, median of {REPEAT}")
    runs: dict[type[LocalStore], list[float]] = {LocalStore: [], UnlockedLocalStore: []}
    counts: dict[type[LocalStore], dict[str, int]] = {}
    for _ in range(REPEAT):  # interleaved, so that drift in the machine's load hits both alike
        for cls in runs:
            seconds, counts[cls] = aligned(cls)
            runs[cls].append(seconds)
    locked, unlocked = statistics.median(runs[LocalStore]), statistics.median(runs[UnlockedLocalStore])
    locked_counts, unlocked_counts = counts[LocalStore], counts[UnlockedLocalStore]
    print(f"  with key locks (today)    {locked:.3f} s   requests {locked_counts}")
    print(f"  without key locks (before) {unlocked:.3f} s   requests {unlocked_counts}")
    print(f"  ratio today / before       {locked / unlocked:.2f}x; equal requests: {locked_counts == unlocked_counts}")
    print(f"\nmisaligned independent writers: {WRITERS} threads, one row each, 8-row chunks")
    with moto_s3() as s3:
        stores: list[tuple[str, Store]] = [("memory", MemoryStore()), ("local", LocalStore(tempfile.mkdtemp()))]
        stores += [("moto S3", s3)] if s3 is not None else []
        for name, store in stores:
            result = misaligned(store)
            print(f"  {name:8s} " + ", ".join(f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}" for k, v in result.items()))
    compare_fencing(os.environ.get("ZD_BENCH_BASELINE"))


if __name__ == "__main__":
    main()
