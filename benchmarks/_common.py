"""Shared helpers for the benchmarks: timing with medians, a results table with ratios, scratch dirs."""

from __future__ import annotations

import gc
import os
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

REPEAT = int(os.environ.get("ZD_BENCH_REPEAT", "5"))


def scratch(name: str) -> Path:
    """A fresh scratch directory (ZD_BENCH_DIR or the system temp dir)."""
    root = Path(os.environ.get("ZD_BENCH_DIR", tempfile.gettempdir())) / "zarr_dask_bench" / name
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    return root


def drop_page_cache_hint() -> None:
    """We cannot drop the OS page cache without root; every contender reads warm files (run once first)."""


def timeit(func: Callable[[], Any], repeat: int = REPEAT, setup: Callable[[], Any] | None = None) -> list[float]:
    """Wall times of ``repeat`` runs (after one warm-up run)."""
    if setup:
        setup()
    func()
    times = []
    for _ in range(repeat):
        if setup:
            setup()
        gc.collect()
        t0 = time.perf_counter()
        func()
        times.append(time.perf_counter() - t0)
    return times


def smooth_field(rows: int, cols: int, y_extent: float = 20.0) -> np.ndarray:
    """float32 data that compresses like real data (zstd ratio ~1.1-1.5), not like pure noise or zeros: a
    smooth field plus unit noise, the same for the same arguments (seed 0)."""
    rng = np.random.default_rng(0)
    y = np.linspace(0, y_extent, rows, dtype="f4")[:, None]
    x = np.linspace(0, 30, cols, dtype="f4")[None, :]
    data = np.sin(y) * np.cos(x) * 100
    data += rng.standard_normal((rows, cols), dtype="f4")
    return data.astype("f4")


def race(
    contenders: dict[str, Callable[[], Any]],
    repeat: int = REPEAT,
    setup: Callable[[str], Any] | None = None,
    warmup: bool = True,
) -> dict[str, list[float]]:
    """Time several contenders round-robin (one warm-up each, then ``repeat`` rounds), so that machine noise
    and cache state hit all of them alike rather than whoever happens to run first. Each round runs them in
    another order (a fixed-seed shuffle), so no contender always runs right after the same other one: what a
    contender leaves behind, in the client's memory or in a server's, then hits every contender alike.
    ``setup(name)`` runs untimed before each run (e.g. removing the previous run's output).
    ``warmup=False``: the caller has run every contender once already (e.g. to check its result)."""
    for name, func in contenders.items() if warmup else ():
        if setup:
            setup(name)
        func()
    times: dict[str, list[float]] = {name: [] for name in contenders}
    names = list(contenders)
    for r in range(repeat):
        for name in random.Random(r).sample(names, len(names)):
            func = contenders[name]
            if setup:
                setup(name)
            gc.collect()
            t0 = time.perf_counter()
            func()
            times[name].append(time.perf_counter() - t0)
    return times


class Table:
    """Rows of (workload, contender, times, extra) printed with medians and ratios to a reference."""

    def __init__(self, title: str) -> None:
        self.title = title
        self.rows: list[tuple[str, str, list[float], str]] = []

    def add(self, workload: str, contender: str, times: list[float], extra: str = "") -> float:
        self.rows.append((workload, contender, times, extra))
        med = statistics.median(times)
        print(f"  {workload:<28} {contender:<22} median {med:8.3f} s  (min {min(times):.3f}, n={len(times)}) {extra}",
              flush=True)
        return med

    def median(self, workload: str, contender: str) -> float:
        for w, c, t, _ in self.rows:
            if w == workload and c == contender:
                return statistics.median(t)
        raise KeyError((workload, contender))

    def ratio(self, workload: str, a: str, b: str) -> float:
        return self.median(workload, a) / self.median(workload, b)

    def paired(self, workload: str, a: str, b: str) -> tuple[float, int, int]:
        """``a`` against ``b`` round by round (times of one :func:`race`, so round ``i`` of each ran close
        together): the median of the per-round ratios, the rounds ``a`` was faster in, the rounds. Slow
        drifts of the machine's load cancel out of each round's ratio, which a ratio of medians keeps."""
        times = {c: t for w, c, t, _ in self.rows if w == workload}
        ratios = [x / y for x, y in zip(times[a], times[b], strict=True)]
        return statistics.median(ratios), sum(r < 1 for r in ratios), len(ratios)


def make_moto_writes_atomic(setter: Callable[[Any, str, Any], Any] = setattr) -> None:
    """Make moto's ``PutObject`` / ``DeleteObject`` atomic, as S3 documents its conditional writes.

    moto 5 checks ``If-Match`` / ``If-None-Match`` and then stores the object in two steps, with no lock, on a
    threaded server: two concurrent conditional writes of one key can both pass the check, which real S3 never
    allows. One lock across each object write (in the server's process) gives the server S3's semantics.
    ``setter`` installs each wrapper (``setattr``, or a test's ``monkeypatch.setattr`` to undo it after).
    """
    import threading

    from moto.s3.responses import S3Response

    lock = threading.Lock()
    for name in ("put_object", "delete_object"):
        original = getattr(S3Response, name)

        def atomic(self: Any, _original: Any = original) -> Any:
            with lock:
                return _original(self)

        setter(S3Response, name, atomic)
