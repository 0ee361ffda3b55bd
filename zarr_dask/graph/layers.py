"""Dask graph pieces of a write: writer tasks, the read-back of ``return_stored``, token fan-in, commit.

Every task function here runs inside a dask task, single-threaded (the scheduler is the parallelism), and
returns a tiny token (an ``int``), never data -- except :func:`read_back`, which *is* the data asked for.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from dask._task_spec import DataNode, Task, TaskRef

from zarr_dask.errors import WritePlanError
from zarr_dask.graph import buffers
from zarr_dask.graph.guard import release
from zarr_dask.graph.handle import ArrayHandle
from zarr_dask.graph.plan import WritePlan

__all__ = [
    "commit_metadata",
    "done",
    "finish",
    "read_back",
    "readback_tasks",
    "token_tree",
    "write_group",
    "writer_tasks",
]

Box = tuple[tuple[int, int], ...]
#: Per dimension: the array index where each of a task's blocks starts, then where the last one ends.
Edges = tuple[tuple[int, ...], ...]
_FAN_IN = 32


def assemble(box: Box, edges: Edges, blocks: Sequence[Any], dtype: np.dtype[Any]) -> np.ndarray[Any, Any]:
    """The data of ``box`` from the blocks overlapping it (C order of block indices); a view when one
    block holds it all."""
    if len(blocks) == 1:
        block = np.asarray(blocks[0])
        where = tuple(slice(lo - e[0], hi - e[0]) for (lo, hi), e in zip(box, edges, strict=True))
        return np.asarray(block[where], dtype=dtype)
    out = buffers.empty(tuple(hi - lo for lo, hi in box), dtype)
    combos = itertools.product(*(range(len(e) - 1) for e in edges))
    for combo, block in zip(combos, blocks, strict=True):
        src, dst = [], []
        for (lo, hi), e, i in zip(box, edges, combo, strict=True):
            a, b = max(lo, e[i]), min(hi, e[i + 1])
            src.append(slice(a - e[i], b - e[i]))
            dst.append(slice(a - lo, b - lo))
        if all(s.stop > s.start for s in src):
            out[tuple(dst)] = np.asarray(block)[tuple(src)]
    return out


def write_group(handle: ArrayHandle, box: Box, edges: Edges, *blocks: Any) -> int:
    """A writer task: assemble the box from its blocks and write the keys it owns; returns their number."""
    value = assemble(box, edges, blocks, handle.dtype)
    return handle.write_box(value, box)


def read_back(handle: ArrayHandle, slices: tuple[slice, ...], *tokens: Any) -> np.ndarray[Any, Any]:
    """``return_stored``: read one block back once the writers of its keys are done."""
    return handle[slices]


def done(*tokens: Any) -> int:
    """Fan-in of writer tokens: the number of keys written."""
    return sum(int(t) for t in tokens)


def finish(store_token: Any, path: str, token: str, *tokens: Any) -> int:
    """The final task of a write: the number of keys written; the write is no longer pending here."""
    release(store_token, path, token)
    return done(*tokens)


def commit_metadata(
    store: Any,
    path: str,
    old: Mapping[str, bytes],
    new: Mapping[str, bytes],
    shape: tuple[int, ...],
    store_token: Any,
    token: str,
    *tokens: Any,
) -> tuple[int, ...]:
    """Write the grown metadata of an append after its data, only if the documents are still what the plan
    saw (or already the new ones: a retried task), so a concurrent change is reported, not overwritten.
    Returns the new shape."""
    release(store_token, path, token)
    current = store.get_many(list(new))
    if all(current.get(k) == v for k, v in new.items()):
        return shape
    if any(current.get(k) != v for k, v in old.items()):
        raise WritePlanError(
            "the array's metadata changed while the append was writing (another writer?), so the new shape "
            "was not committed; the appended chunks lie beyond the stored shape and are ignored by readers. "
            "Fix: make one process append at a time, then retry",
            store=store.url,
            path=path,
        )
    store.set_many(dict(new))
    return shape


def _edges(plan: WritePlan, segs: Sequence[Any]) -> Edges:
    return tuple(
        tuple(d.block_starts[s.blocks.start : s.blocks.stop + 1]) for d, s in zip(plan.dims, segs, strict=True)
    )


def writer_tasks(plan: WritePlan, source: str, handle_key: str, name: str) -> dict[Any, Task]:
    """One task per segment combination; each receives exactly the source blocks overlapping its keys."""
    tasks: dict[Any, Task] = {}
    ref = TaskRef(handle_key)
    index = itertools.product(*(range(len(d.segments)) for d in plan.dims))
    for gidx, segs in zip(index, plan.groups(), strict=True):
        key = (name, *gidx)
        box = tuple((s.start, s.stop) for s in segs)
        deps = [TaskRef((source, *b)) for b in itertools.product(*(s.blocks for s in segs))]
        tasks[key] = Task(key, write_group, ref, DataNode(None, box), DataNode(None, _edges(plan, segs)), *deps)
    return tasks


def token_tree(keys: Sequence[Any], name: str, final: Any, func: Any = done, extra: Sequence[Any] = ()) -> dict[Any, Task]:
    """Reduce writer tokens in a tree (at most 32 inputs per task) into the single key ``final``."""
    tasks: dict[Any, Task] = {}
    level = list(keys)
    depth = 0
    while len(level) > _FAN_IN:
        nxt = []
        for i in range(0, len(level), _FAN_IN):
            key = (f"{name}-fan-in-{depth}", i // _FAN_IN)
            tasks[key] = Task(key, done, *(TaskRef(k) for k in level[i : i + _FAN_IN]))
            nxt.append(key)
        level, depth = nxt, depth + 1
    tasks[final] = Task(final, func, *extra, *(TaskRef(k) for k in level))
    return tasks


def readback_tasks(plan: WritePlan, chunks: Sequence[Sequence[int]], handle_key: str, writers: str, name: str) -> dict[Any, Task]:
    """``return_stored``: one read task per source block, after the writers of the keys it overlaps."""
    per_dim: list[list[range]] = []
    for d in plan.dims:
        owners: list[list[int]] = [[] for _ in range(len(d.block_starts) - 1)]
        for si, s in enumerate(d.segments):
            for b in s.blocks:
                owners[b].append(si)
        per_dim.append([range(o[0], o[-1] + 1) if o else range(0) for o in owners])
    tasks: dict[Any, Task] = {}
    ref = TaskRef(handle_key)
    for bidx in itertools.product(*(range(len(c)) for c in chunks)):
        key = (name, *bidx)
        slices = tuple(
            slice(d.block_starts[i], d.block_starts[i + 1]) for d, i in zip(plan.dims, bidx, strict=True)
        )
        deps = [TaskRef((writers, *g)) for g in itertools.product(*(per_dim[a][i] for a, i in enumerate(bidx)))]
        tasks[key] = Task(key, read_back, ref, DataNode(None, slices), *deps)
    return tasks
