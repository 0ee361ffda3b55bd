"""The copy tasks of a conversion, their dask graph and how it runs.

One task copies one box (whole target units; see :mod:`zarr_dask._convert.plan`): it reads the box from the
source in batches of chunks, writes the target units inside it in batches, and returns the requests and bytes
it made -- counted on fresh views of the two stores, so tasks running side by side (or in other processes,
whose stores count separately) each report their own. A staged array's second pass waits for its first.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
from dask.base import tokenize
from dask.delayed import Delayed

from zarr_dask.core import chunk_io
from zarr_dask.core.indexing import DimSelection, chunk_projections
from zarr_dask.graph import gateway
from zarr_dask.graph.handle import ArrayHandle
from zarr_dask.graph.plan import WritePlan
from zarr_dask.graph.progress import run as run_with_progress
from zarr_dask.spec.ml_types import cast_values
from zarr_dask.store.arena import release_read_arena

__all__ = ["CopyJob", "Stats", "build_graph", "copy_box", "merge", "run_graph", "write_plan"]

log = logging.getLogger("zarr_dask.convert")

Box = tuple[tuple[int, int], ...]
#: Counters every task reports (summed over the tasks): ``nbytes`` counts every pass's boxes, ``data_bytes``
#: the final pass's only (the data copied, once, however many passes a staged copy makes).
STAT_KINDS = (
    "tasks", "nbytes", "data_bytes", "read_requests", "bytes_read", "write_requests", "bytes_written", "delete_requests",
    "list_requests",
)  # fmt: skip
Stats = dict[str, int]


@dataclass(frozen=True, kw_only=True)
class CopyJob:
    """One pass over one array: copy ``source`` into ``target`` box by box."""

    path: str  #: the array's path in the target hierarchy (for messages)
    source: ArrayHandle
    target: ArrayHandle
    box: tuple[int, ...]
    read_batch: int
    write_batch: int
    workers: int = 1  #: threads each task reads and writes with

    def edges(self) -> list[list[int]]:
        """Per dimension, where the boxes start (whole target units), then the extent."""
        out = []
        for grid, n, b in zip(self.target.io.grids, self.target.shape, self.box, strict=True):
            nunits = grid.nchunks()
            # the planned unit: the largest one (a rectilinear grid's boxes then hold at most the planned size)
            unit = (grid.size(0) if grid.is_regular else max(grid.size(i) for i in range(nunits))) if nunits else 1
            step = max(1, -(-b // max(unit, 1)))
            out.append([min(grid.start(i), n) for i in range(0, nunits, step)] + [n] if nunits and n else [])
        return out

    def boxes(self) -> Iterator[Box]:
        """Every box, in C order."""
        per_dim = [list(itertools.pairwise(e)) for e in self.edges()]
        for combo in itertools.product(*per_dim):
            yield tuple(combo)

    def box_keys(self, box: Box) -> Iterator[str]:
        """The target storage keys inside ``box``."""
        io = self.target.io
        ranges = [g.chunk_range(lo, hi) for g, (lo, hi) in zip(io.grids, box, strict=True)]
        for coords in itertools.product(*ranges):
            yield io.chunk_key(tuple(coords))

    def pending(self, present: set[str] | None) -> list[Box]:
        """The boxes still to copy: all, or (resuming) those with a target key not stored yet."""
        if present is None:
            return list(self.boxes())
        return [b for b in self.boxes() if not all(k in present for k in self.box_keys(b))]


def _counts(store: Any) -> dict[str, int]:
    c = store.counters.snapshot()
    return c if isinstance(c, dict) else {}


_LIBC: Any = None
#: Buffers from this size up are mapped from (and given back to) the system at once (glibc's ``mallopt``).
MMAP_THRESHOLD = 2**20


_TUNED = False


def _libc() -> Any:
    """glibc (False elsewhere), loaded once per process."""
    global _LIBC
    if _LIBC is None:
        try:
            import ctypes

            libc = ctypes.CDLL("libc.so.6")
            libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
            libc.malloc_trim.argtypes = [ctypes.c_size_t]
            _LIBC = libc
        except (OSError, AttributeError):  # not glibc: nothing to tune
            _LIBC = False
    return _LIBC


def _tune_malloc() -> None:
    """A fixed mmap threshold for this whole process, so that freed buffers of a MiB or more go back to the
    system at once. (By default glibc raises the threshold to the largest block freed so far and keeps later
    blocks of that size in per-thread arenas: a process running tasks on several threads then holds well above
    the tasks' own peak, and ``max_memory`` would not bound it.) It lasts, and it makes every large allocation
    of the process a fresh mapping, so only processes that exist to convert do it (``tune_malloc=True``: the
    ``zarr-dask convert`` command and its workers), never a user's process by default."""
    global _TUNED
    libc = _libc()
    if libc and not _TUNED:
        libc.mallopt(-3, MMAP_THRESHOLD)  # M_MMAP_THRESHOLD
        _TUNED = True


def _release_memory() -> None:
    """Give the memory a finished task freed back to the system (glibc's ``malloc_trim``: no lasting change)."""
    libc = _libc()
    if libc:
        libc.malloc_trim(0)


#: set when the run of this process was interrupted (Ctrl-C): the copy tasks still running in its threads stop
#: at their next batch instead of finishing their boxes (the process would wait for them before it exits)
_INTERRUPTED = threading.Event()


class Interrupted(Exception):
    """A copy task stopped because its run was interrupted (what it wrote is whole: a resume redoes its box)."""


def _batch(func: Any) -> Any:
    def run(batch: Any) -> Any:
        if _INTERRUPTED.is_set():
            raise Interrupted("the conversion was interrupted")
        return func(batch)

    return run


def _run(func: Any, items: Sequence[Any], size: int, workers: int) -> None:
    """``func`` over batches of ``size`` items, on ``workers`` threads (their decode buffers die with them);
    none starts once the run is interrupted."""
    batches = [items[i : i + size] for i in range(0, len(items), size)]
    func = _batch(func)
    if workers <= 1 or len(batches) <= 1:
        for batch in batches:
            func(batch)
        return
    with ThreadPoolExecutor(min(workers, len(batches)), thread_name_prefix="zarr_dask_copy") as pool:
        for _ in pool.map(func, batches):  # re-raises the first failure
            pass


def _copy(src: ArrayHandle, dst: ArrayHandle, box: Box, read_batch: int, write_batch: int, workers: int) -> int:
    """Read ``box`` from ``src`` in batches of chunks and write it to ``dst`` in batches of units; with several
    ``workers`` the batches run side by side (each batch touches its own part of the box, its own keys)."""
    dims = [DimSelection(lo, hi, 1) for lo, hi in box]
    out = np.empty(tuple(hi - lo for lo, hi in box), dtype=src.dtype)
    if out.size:
        reads = list(chunk_projections(dims, src.io.grids, src.shape))
        _run(lambda batch: src.io.read_into(out, batch), reads, read_batch, workers)
        value = out if out.dtype == dst.dtype else cast_values(out, dst.dtype)
        writes = list(chunk_projections(dims, dst.io.grids, dst.shape))
        _run(lambda batch: dst.io.write_from(value, batch), writes, write_batch, workers)
    return int(out.nbytes)


def copy_box(
    source: ArrayHandle, target: ArrayHandle, box: Box, read_batch: int, write_batch: int, workers: int,
    tune_malloc: bool = False, final: bool = True, *_after: Any,
) -> Stats:  # fmt: skip
    """Copy one box; returns the task's :data:`Stats` (never data). ``tune_malloc``: see :func:`_tune_malloc`;
    ``final``: the box belongs to the array's last pass (its bytes count as ``data_bytes``)."""
    src = ArrayHandle(source.store.with_read_only(True), source.path, source.metadata,
                      allow_unsafe_codecs=source.allow_unsafe_codecs)  # fmt: skip
    dst = ArrayHandle(target.store.with_read_only(False), target.path, target.metadata,
                      allow_unsafe_codecs=target.allow_unsafe_codecs, write_empty_chunks=target.write_empty_chunks)  # fmt: skip
    if tune_malloc:
        _tune_malloc()
    try:
        nbytes = _copy(src, dst, box, read_batch, write_batch, workers)
    finally:
        # the per-thread decode buffers would otherwise outlive the task (one per chunk shape seen)
        chunk_io.release_scratch()
        release_read_arena()  # the fetched-bytes buffer too (up to ZARR_DASK_READ_ARENA per thread)
        _release_memory()
    r, w = _counts(src.store), _counts(dst.store)
    return {
        "tasks": 1,
        "nbytes": nbytes,
        "data_bytes": nbytes if final else 0,
        "read_requests": r.get("get", 0) + r.get("get_range", 0),
        "bytes_read": r.get("bytes_read", 0),
        "write_requests": w.get("set", 0),
        "bytes_written": w.get("bytes_written", 0),
        "delete_requests": w.get("delete", 0),
        "list_requests": r.get("list", 0) + w.get("list", 0),
    }


def merge(*stats: Stats) -> Stats:
    """The sum of task statistics."""
    out = dict.fromkeys(STAT_KINDS, 0)
    for s in stats:
        for k, v in s.items():
            out[k] = out.get(k, 0) + int(v)
    return out


def _fan_in(keys: Sequence[Any], name: str, final: Any, tasks: dict[Any, Any]) -> None:
    """``final`` = merge of ``keys``, through a tree of at most 32 inputs per task."""
    tasks.update(gateway.fan_in(keys, name, final, merge))


def build_graph(arrays: Sequence[Sequence[tuple[CopyJob, list[Box]]]], *, tune_malloc: bool = False) -> Delayed:
    """A graph that runs every array's passes (the second pass of a staged array after its first) and
    computes to the merged :data:`Stats`. ``tune_malloc``: the tasks tune glibc's malloc for the process they
    run in (:func:`_tune_malloc`)."""
    token = tokenize([[(job.source, job.target, job.box, boxes) for job, boxes in stages] for stages in arrays])
    name = f"zarr-dask-convert-{token}"
    tasks: dict[Any, Any] = {}
    ends: list[Any] = []
    for a, stages in enumerate(arrays):
        after: list[Any] = []
        for s, (job, boxes) in enumerate(stages):
            src, dst = gateway.data(job.source), gateway.data(job.target)
            keys = []
            for b, box in enumerate(boxes):
                key = (f"{name}-copy-{a}-{s}", b)
                tasks[key] = gateway.task(key, copy_box, src, dst, gateway.data(box), job.read_batch,
                                          job.write_batch, job.workers, tune_malloc, s == len(stages) - 1,
                                          *after)  # fmt: skip
                keys.append(key)
            done = (f"{name}-done", a, s)
            _fan_in(keys, f"{name}-{a}-{s}", done, tasks)
            after = [gateway.ref(done)]
            ends.append(done)
    final = f"{name}-total"
    _fan_in(ends, f"{name}-total", final, tasks)
    return gateway.delayed_result(final, gateway.graph(name, tasks), layer=name)


def run_graph(graph: Delayed, *, scheduler: Any, threads: int, progress: bool) -> Stats:
    """Run the copy graph on ``scheduler`` (a ``distributed.Client``), else on dask's local scheduler
    ``scheduler`` (None/``"threads"`` with ``threads`` workers, ``"synchronous"``: in this thread); ``progress``:
    with a bar on stderr (:mod:`zarr_dask.graph.progress`). Interrupted (Ctrl-C), the copy tasks running in
    this process's threads stop at their next batch."""
    _INTERRUPTED.clear()
    try:
        if scheduler is not None and not isinstance(scheduler, str):
            return cast(Stats, run_with_progress(graph, progress=progress, scheduler=scheduler))
        return cast(Stats, run_with_progress(graph, progress=progress, scheduler=scheduler or "threads", num_workers=threads))
    except KeyboardInterrupt:
        _INTERRUPTED.set()
        raise


def write_plan(job: CopyJob) -> WritePlan | None:
    """The dask engine's write plan of one pass (its boxes as dask blocks), or None for an empty array."""
    import dask.array as da

    from zarr_dask.core import nodes
    from zarr_dask.graph.target import Target
    from zarr_dask.graph.write import make_plan

    edges = job.edges()
    if any(len(e) < 2 for e in edges):
        return None
    chunks = tuple(tuple(int(b - a) for a, b in itertools.pairwise(e)) for e in edges)
    blocks = gateway.as_dask(cast(Any, da).empty(job.target.shape, chunks=chunks, dtype=job.target.dtype))
    target = Target(handle=job.target, offsets=(0,) * len(chunks), action="create",
                    documents=nodes.documents(job.target.path, job.target.metadata))  # fmt: skip
    return make_plan(blocks, target)
