"""Bounded-memory copy plans: how one array is copied (and re-chunked) task by task.

A copy task reads a *box* of the array from the source and writes it to the target. Boxes are made of whole
target write units (shards when sharded, else chunks), so every storage key is written by exactly one task,
whole (no read-modify-write). What one task holds at its peak (:func:`task_memory`):

* the box itself, uncompressed;
* a batch of fetched source units (compressed bytes, counted at their uncompressed size: a chunk, or the
  part of a shard the box needs) and one decoded source chunk (the scratch buffer a chunk that is not
  contiguous in the box is decoded into);
* a batch of encoded target units plus the unit being encoded (twice its size: the data and its encoding).

A *direct* plan uses boxes that cover whole source chunks too (no source chunk decoded twice, except where
the two grids do not line up). When such a box does not fit into the memory budget of one task, the copy
is *staged*, like rechunker: the source is first copied to an intermediate array whose chunks lie between
the source and the target chunks, then the intermediate to the target, each stage with boxes that fit.
When no intermediate grid fits either, boxes of single target units read the source directly (source
chunks that straddle two boxes are decoded twice). When even one target unit (or one source chunk) cannot
fit, the plan is refused with the numbers.

A pass of only a few boxes (fewer than two per thread; e.g. one variable whose source chunks span whole maps)
would leave threads idle, so each of its tasks reads and writes its box with several threads, as many as its
share of the budget holds (each thread with its own batches and buffers, the box shared).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from zarr_dask.errors import WritePlanError

__all__ = ["Layout", "Stage", "StagePlan", "plan_copy", "task_memory"]

#: Largest uncompressed size of a box (fewer, bigger tasks beyond that buy nothing).
TARGET_TASK_BYTES = 64 * 2**20
#: Largest intermediate chunk of a staged copy.
TARGET_STAGING_CHUNK_BYTES = 16 * 2**20
#: Largest batch of chunks fetched (or encoded units stored) in one store call within a task.
MAX_BATCH_BYTES = 32 * 2**20


@dataclass(frozen=True, kw_only=True)
class Layout:
    """How one side stores the array: ``unit`` is the storage key shape (shard or chunk), ``chunk`` what a
    reader decodes at once (the inner chunk when sharded; the unit otherwise)."""

    unit: tuple[int, ...]
    chunk: tuple[int, ...]


@dataclass(frozen=True, kw_only=True)
class Stage:
    """One pass: copy ``source`` to ``target`` in boxes of ``box`` elements (whole target units)."""

    source: Layout
    target: Layout
    box: tuple[int, ...]
    memory: int  #: estimated peak bytes of one task
    read_batch: int  #: source chunks fetched per store call
    write_batch: int  #: target units stored per store call
    box_bytes: int = 0  #: uncompressed bytes of one box
    workers: int = 1  #: threads one task reads and writes with (when the pass has few tasks)


@dataclass(frozen=True, kw_only=True)
class StagePlan:
    """The stages of one array's copy: one (direct) or two (through ``intermediate`` chunks)."""

    stages: tuple[Stage, ...]
    intermediate: tuple[int, ...] | None = None
    task_budget: int = 0

    @property
    def staged(self) -> bool:
        return len(self.stages) > 1


def _nbytes(shape: Sequence[int], itemsize: int) -> int:
    return math.prod(shape) * itemsize


def task_memory(
    box: Sequence[int], source: Layout, target: Layout, itemsize: int, budget: int
) -> tuple[int, int, int]:
    """``(peak bytes, read batch, write batch)`` of a task copying ``box`` (see the module docstring).

    The least a task needs is the box, one fetched source unit (the part of a shard the box needs: its inner
    chunks, or the whole shard) and one decoded source chunk, one stored and one encoding target unit (twice);
    memory left in ``budget`` goes to larger batches (fewer store calls), up to 64 items or 32 MiB each. So the
    peak never exceeds ``budget`` unless even the least does.
    """
    needed = (min(u, -(-b // c) * c + c) for b, u, c in zip(box, source.unit, source.chunk, strict=True))
    fetch = max(min(_nbytes(source.unit, itemsize), math.prod(needed) * itemsize), 1)
    chunk = max(_nbytes(source.chunk, itemsize), 1)
    unit = max(_nbytes(target.unit, itemsize), 1)
    nfetch = math.prod(-(-b // u) + 1 for b, u in zip(box, source.unit, strict=True))
    nunits = math.prod(-(-b // u) for b, u in zip(box, target.unit, strict=True))
    least = _nbytes(box, itemsize) + fetch + chunk + 3 * unit
    spare = max(0, budget - least) // 2
    read_batch = max(1, min(1 + spare // fetch, 64, max(1, MAX_BATCH_BYTES // fetch), nfetch))
    write_batch = max(1, min(1 + spare // unit, 64, max(1, MAX_BATCH_BYTES // unit), max(nunits, 1)))
    peak = least + (read_batch - 1) * fetch + (write_batch - 1) * unit
    return peak, read_batch, write_batch


def _cover(inner: int, unit: int, extent: int) -> int:
    """The smallest multiple of ``unit`` that is >= max(inner, unit), at most the extent rounded up."""
    need = min(max(inner, unit), max(extent, 1))
    return -(-need // unit) * unit


def _stage(box: Sequence[int], source: Layout, target: Layout, itemsize: int, budget: int, shape: Sequence[int]) -> Stage:
    box = tuple(min(b, max(n, 1)) for b, n in zip(box, shape, strict=True))  # one box covers the whole dimension
    peak, rb, wb = task_memory(box, source, target, itemsize, budget)
    return Stage(source=source, target=target, box=tuple(box), memory=peak, read_batch=rb, write_batch=wb,
                 box_bytes=_nbytes(box, itemsize))  # fmt: skip


def _grow(stage: Stage, shape: Sequence[int], itemsize: int, budget: int) -> Stage:
    """Make the box bigger (whole multiples, trailing dimensions first) up to the task size target."""
    box = list(stage.box)
    for d in reversed(range(len(box))):
        while box[d] < shape[d]:
            trial = list(box)
            trial[d] = min(box[d] * 2, -(-shape[d] // box[d]) * box[d])
            trial[d] = min(trial[d], shape[d])
            peak = task_memory(trial, stage.source, stage.target, itemsize, budget)[0]
            if peak > budget or _nbytes(trial, itemsize) > TARGET_TASK_BYTES:
                return _stage(box, stage.source, stage.target, itemsize, budget, shape)
            box = trial
    return _stage(box, stage.source, stage.target, itemsize, budget, shape)


def _with_workers(stage: Stage, shape: Sequence[int], itemsize: int, budget: int, threads: int) -> Stage:
    """A pass of few big tasks (fewer than two per thread) reads and writes each box with several threads, as
    many as the budget allows: each thread holds its own batches and buffers besides the shared box, so the
    batches shrink to make room (threads matter more than batch size here)."""
    tasks = math.prod(-(-max(n, 1) // max(b, 1)) for n, b in zip(shape, stage.box, strict=True))
    least = task_memory(stage.box, stage.source, stage.target, itemsize, 0)[0] - stage.box_bytes
    if threads <= 1 or tasks >= 2 * threads or least <= 0:
        return stage
    workers = max(1, min(threads, (budget - stage.box_bytes) // least))
    if workers == 1:
        return stage
    share = stage.box_bytes + (budget - stage.box_bytes) // workers  # what one thread may hold, box included
    peak, rb, wb = task_memory(stage.box, stage.source, stage.target, itemsize, share)
    return replace(stage, workers=workers, read_batch=rb, write_batch=wb,
                   memory=stage.box_bytes + workers * (peak - stage.box_bytes))  # fmt: skip


def _direct_box(source: Layout, target: Layout, shape: Sequence[int]) -> tuple[int, ...]:
    return tuple(
        _cover(s, t, n) for s, t, n in zip(source.chunk, target.unit, shape, strict=True)
    )


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def _refuse(what: str, shape: Sequence[int], need: int, budget: int, threads: int, max_memory: int) -> WritePlanError:
    return WritePlanError(
        f"one {what} {tuple(shape)} needs about {_human(need)} in a copy task (the data, its encoding and the "
        f"chunks read for it), but --max-memory {_human(max_memory)} shared by {threads} concurrent task(s) leaves "
        f"{_human(budget)} per task; raise --max-memory to at least {_human(need * threads)}, run fewer tasks "
        "at once (--threads), or choose smaller --chunks/--shards"
    )


def _staging_chunks(
    source: Layout, target: Layout, shape: Sequence[int], itemsize: int, budget: int
) -> tuple[int, ...] | None:
    """Intermediate chunks between the source chunks and the target units: start from their elementwise
    minimum and double the dimension that keeps both stages smallest, while both fit."""

    def stages_peak(chunk: Sequence[int]) -> int:
        mid = Layout(unit=tuple(chunk), chunk=tuple(chunk))
        first = task_memory(_direct_box(source, mid, shape), source, mid, itemsize, budget)[0]
        second = task_memory(_direct_box(mid, target, shape), mid, target, itemsize, budget)[0]
        return max(first, second)

    lo = [max(1, min(s, t, max(n, 1))) for s, t, n in zip(source.chunk, target.unit, shape, strict=True)]
    hi = [max(1, min(max(s, t), max(n, 1))) for s, t, n in zip(source.chunk, target.unit, shape, strict=True)]
    if stages_peak(lo) > budget:
        return None
    limit = min(budget, max(stages_peak(lo), 2 * TARGET_TASK_BYTES))  # big enough; smaller tasks run better
    current = lo
    while True:
        options = []
        for d in range(len(current)):
            if current[d] < hi[d]:
                trial = list(current)
                trial[d] = min(current[d] * 2, hi[d])
                if _nbytes(trial, itemsize) <= TARGET_STAGING_CHUNK_BYTES:
                    peak = stages_peak(trial)
                    if peak <= limit:
                        options.append((peak, d, trial))
        if not options:
            return tuple(current)
        current = min(options)[2]


def plan_copy(
    shape: Sequence[int],
    itemsize: int,
    source: Layout,
    target: Layout,
    *,
    max_memory: int,
    threads: int,
) -> StagePlan:
    """Plan the copy of an array of ``shape`` from the ``source`` layout to the ``target`` layout so that
    ``threads`` tasks at once stay within ``max_memory`` bytes.

    Raises
    ------
    WritePlanError
        When even one target unit or one source chunk cannot be copied within the budget of a task.

    Examples
    --------
    >>> src = Layout(unit=(1, 720, 1440), chunk=(1, 720, 1440))        # one map per hour
    >>> dst = Layout(unit=(8760, 10, 10), chunk=(8760, 10, 10))        # time series
    >>> plan = plan_copy((8760, 720, 1440), 4, src, dst, max_memory=2 * 2**30, threads=2)
    >>> plan.staged, plan.intermediate is not None
    (True, True)
    >>> plan_copy((8760, 720, 1440), 4, src, src, max_memory=2**30, threads=2).staged
    False
    """
    budget = max_memory // max(threads, 1)
    shape = tuple(int(n) for n in shape)
    direct = _stage(_direct_box(source, target, shape), source, target, itemsize, budget, shape)
    if direct.memory <= budget:
        stage = _with_workers(_grow(direct, shape, itemsize, budget), shape, itemsize, budget, threads)
        return StagePlan(stages=(stage,), task_budget=budget)
    least = tuple(min(s, u) for s, u in zip(source.chunk, target.unit, strict=True))
    smallest = Layout(unit=least, chunk=least)
    one_unit = _stage(target.unit, smallest, target, itemsize, budget, shape)  # read from chunks no larger
    if one_unit.memory > budget:
        raise _refuse("target unit (shard or chunk)", target.unit, one_unit.memory, budget, threads, max_memory)
    mid = _staging_chunks(source, target, shape, itemsize, budget)
    if mid is None:  # no intermediate grid helps: boxes of whole target units read straight from the source
        units = _stage(target.unit, source, target, itemsize, budget, shape)
        if units.memory <= budget:
            stage = _with_workers(_grow(units, shape, itemsize, budget), shape, itemsize, budget, threads)
            return StagePlan(stages=(stage,), task_budget=budget)
        need = task_memory(source.chunk, source, Layout(unit=source.chunk, chunk=source.chunk), itemsize, budget)[0]
        if need > budget:
            raise _refuse("source chunk", source.chunk, need, budget, threads, max_memory)
        raise _refuse("target unit (shard or chunk)", target.unit, units.memory, budget, threads, max_memory)
    layout = Layout(unit=mid, chunk=mid)
    first = _stage(_direct_box(source, layout, shape), source, layout, itemsize, budget, shape)
    second = _stage(_direct_box(layout, target, shape), layout, target, itemsize, budget, shape)
    first, second = (_with_workers(_grow(s, shape, itemsize, budget), shape, itemsize, budget, threads) for s in (first, second))
    return StagePlan(stages=(first, second), intermediate=mid, task_budget=budget)
