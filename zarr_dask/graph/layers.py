"""Dask graph pieces of a write: writer tasks, the read-back of ``return_stored``, token fan-in, commit.

Every task function here runs inside a dask task, single-threaded (the scheduler is the parallelism), and
returns a tiny token (an ``int``), never data -- except :func:`read_back`, which *is* the data asked for.
"""

from __future__ import annotations

import itertools
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any, cast

import numpy as np
from dask.base import tokenize

from zarr_dask import config
from zarr_dask.core import nodes
from zarr_dask.core.commit import commit_held, incomplete_append
from zarr_dask.core.consolidated import consolidated_lock, refresh_consolidated, refresh_keys
from zarr_dask.core.lease import release_lease
from zarr_dask.errors import UnsupportedFeatureError
from zarr_dask.graph import buffers, journal
from zarr_dask.graph.gateway import data, fan_in, ref, task, value
from zarr_dask.graph.guard import release
from zarr_dask.graph.handle import ArrayHandle
from zarr_dask.graph.plan import WritePlan
from zarr_dask.graph.witness import receipt_suffix
from zarr_dask.spec.ml_types import cast_values
from zarr_dask.store.transactions import Carried, carry, combine, is_transactional, task_store
from zarr_dask.store.uploads import WriteBehind

__all__ = [
    "commit_metadata",
    "done",
    "finish",
    "read_back",
    "readback_tasks",
    "token_tree",
    "write_group",
    "write_journaled",
    "writer_tasks",
]

Box = tuple[tuple[int, int], ...]
#: A write's token and the id of the process that built its graph.
Group = tuple[str, int]
#: Per dimension: the array index where each of a task's blocks starts, then where the last one ends.
Edges = tuple[tuple[int, ...], ...]


def assemble(box: Box, edges: Edges, blocks: Sequence[Any], dtype: np.dtype[Any]) -> np.ndarray[Any, Any]:
    """The data of ``box`` from the blocks overlapping it (C order of block indices); a view when one
    block holds it all."""
    if len(blocks) == 1:
        block = np.asarray(blocks[0])
        where = tuple(slice(lo - e[0], hi - e[0]) for (lo, hi), e in zip(box, edges, strict=True))
        return cast_values(block[where], dtype)
    out = buffers.empty(tuple(hi - lo for lo, hi in box), dtype)
    combos = itertools.product(*(range(len(e) - 1) for e in edges))
    for combo, block in zip(combos, blocks, strict=True):
        src, dst = [], []
        for (lo, hi), e, i in zip(box, edges, combo, strict=True):
            a, b = max(lo, e[i]), min(hi, e[i + 1])
            src.append(slice(a - e[i], b - e[i]))
            dst.append(slice(a - lo, b - lo))
        if all(s.stop > s.start for s in src):
            out[tuple(dst)] = cast_values(np.asarray(block)[tuple(src)], dtype)
    return out


def write_group(handle: ArrayHandle, box: Box, edges: Edges, group: Group, *blocks: Any) -> int:
    """A writer task: assemble the box from its blocks and write the keys it owns; returns their number.

    ``group`` is ``(write token, id of the process that built the graph)``: on a local scheduler in that
    process, the keys it covers whole are uploaded behind the task (:mod:`zarr_dask.store.uploads`) and the
    write's final task waits for them."""
    value = assemble(box, edges, blocks, handle.dtype)
    token, built_in = group
    own = task_store(handle.store)
    if own is not handle.store:  # a transaction's copy in another process: a fork of this task's own, carried back
        return carry(own, _rebound(handle, own).write_box(value, box))  # type: ignore[no-any-return]
    return handle.write_box(value, box, behind=WriteBehind(token) if _may_defer(built_in) else None)


def write_journaled(handle: ArrayHandle, box: Box, edges: Edges, group: Group, receipt: str, *blocks: Any) -> int:
    """A writer task of a resumable write: :func:`write_group`, then its receipt (:mod:`zarr_dask.graph.journal`),
    which exists only once every key of the task has landed: written at once after keys the task stored itself,
    queued behind the uploads of the keys it deferred (:meth:`WriteBehind.then`)."""
    token, built_in = group
    behind = WriteBehind(token) if _may_defer(built_in) else None
    sizes: dict[str, int] = {}  # what the receipt vouches for: the sizes of the keys covered whole
    written = handle.write_box(assemble(box, edges, blocks, handle.dtype), box, behind=behind, sizes=sizes)
    receipt += receipt_suffix(sizes)
    if behind is None:
        journal.record(handle.store, receipt)
    else:
        behind.then(handle.store, {receipt: b""})
    return written


def _rebound(handle: ArrayHandle, store: Any) -> ArrayHandle:
    """``handle`` over another store (a writer task's fork of a transaction)."""
    return ArrayHandle(
        store,
        handle.path,
        handle.metadata,
        allow_unsafe_codecs=handle.allow_unsafe_codecs,
        write_empty_chunks=handle.write_empty_chunks,
    )


def _may_defer(built_in: int) -> bool:
    """Uploads may be deferred to the final task when it is sure to run in this process: a local scheduler in
    the process that built the graph (not dask's multiprocessing scheduler, not a distributed worker)."""
    return os.getpid() == built_in and int(config.get("write_behind")) > 0 and not buffers.in_distributed_worker()


def read_back(handle: ArrayHandle, slices: tuple[slice, ...], *tokens: Any) -> np.ndarray[Any, Any]:
    """``return_stored``: read one block back once the writers of its keys are done."""
    if any(isinstance(t, Carried) for t in tokens):
        raise UnsupportedFeatureError(
            "return_stored=True cannot read back a write into an Icechunk session made by other processes: the "
            "data is in forks of the session until they reach it; write with compute=True, then read the session "
            "(zarr_dask.from_zarr(session.store, ...))",
            store=handle.store.url,
            path=handle.path,
        )
    return handle[slices]


def done(*tokens: Any) -> Any:
    """Fan-in of writer tokens: the number of keys written (carrying the changes of a transaction's forks,
    :mod:`zarr_dask.store.transactions`)."""
    return combine(tokens)


def _cluster_lock(store: Any) -> AbstractContextManager[Any]:
    """A ``distributed.Lock`` per store when running on a distributed worker (the final tasks of two writes
    computed together may run in different processes), else nothing."""
    mod = sys.modules.get("distributed")
    if mod is None:
        return nullcontext()
    try:
        mod.get_worker()
    except ValueError:
        return nullcontext()
    return cast(AbstractContextManager[Any], mod.Lock(f"zarr-dask-consolidated-{tokenize(store)}"))


@contextmanager
def _exclusive(store: Any, path: str, consolidated: bool | None) -> Iterator[None]:
    """Held while a final task reads and rewrites consolidated metadata (nothing to hold for a root array,
    which has no enclosing group, or with ``consolidated=False``)."""
    if not path or consolidated is False:
        yield
        return
    with _cluster_lock(store), consolidated_lock(store):
        yield


def _refresh(
    handle: ArrayHandle, metadata: Any, consolidated: bool | None, prefetched: Mapping[str, bytes] | None = None
) -> None:
    """Refresh the consolidated metadata enclosing the written array (``consolidated=False``: leave it;
    ``True``: consolidate the store root when no group holds any yet)."""
    if consolidated is False or not handle.path or is_transactional(handle.store):
        return  # an Icechunk repository keeps no consolidated metadata of ours (it has its own)
    fmt = handle.metadata.zarr_format
    holders = refresh_consolidated(handle.store, handle.path, metadata, zarr_format=fmt, prefetched=prefetched)
    if consolidated and not holders:
        from zarr_dask.core.api import consolidate_metadata

        consolidate_metadata(handle.store, zarr_format=fmt)


def finish(
    handle: ArrayHandle, action: str, consolidated: bool | None, store_token: Any, token: str, journal_prefix: str | None,
    *tokens: Any,
) -> Any:  # fmt: skip
    """The final task of a write: refresh consolidated metadata (from the metadata written, or for a region
    write, which changes none, from the array's own document), release the pending write, end the journal of
    a resumable write (``journal_prefix``); returns the number of keys written."""
    WriteBehind(token).drain()
    release(store_token, handle.path, token)
    with _exclusive(handle.store, handle.path, consolidated):
        _refresh(handle, None if action == "region" else handle.metadata, consolidated)
    if journal_prefix is not None:
        journal.close(handle.store, journal_prefix, keep=action == "region")
    return done(*tokens)


def commit_metadata(
    handle: ArrayHandle,
    old: Mapping[str, bytes],
    new: Mapping[str, bytes],
    consolidated: bool | None,
    store_token: Any,
    token: str,
    lease: str | None,
    journal_end: tuple[Mapping[str, bytes], str] | None,
    *tokens: Any,
) -> Any:
    """Write the grown metadata of an append after its data, only if the documents are still what the plan
    saw (or already the new ones: a retried task), so a concurrent change is reported, not overwritten --
    by conditional writes where the store has them; then refresh consolidated metadata (read in the same batch
    as the check) and release the append's lease (``lease``: its token). ``journal_end``: a resumable append's
    ``(records proving the commit, receipts prefix)`` (:func:`zarr_dask.graph.resume_append.end_records`): the
    records are part of the commit recorded in the lease, the receipts are deleted after it. Returns the new
    shape (carrying the changes of a transaction's forks)."""
    own = task_store(handle.store)
    handle = _rebound(handle, own) if own is not handle.store else handle
    store, path = handle.store, handle.path
    WriteBehind(token).drain()
    release(store_token, path, token)
    with _exclusive(store, path, consolidated):
        extra = refresh_keys(path, handle.metadata.zarr_format, own=False) if consolidated is not False else []
        expected = nodes.parse_node(old, path, store)
        held = (path, lease) if lease is not None else None  # fenced: committed only while the lease is this append's
        records = journal_end[0] if journal_end is not None else None
        written, current = commit_held(store, held, path, expected, handle.metadata, extra_keys=extra, records=records)
        try:
            _refresh(handle, written, consolidated, prefetched=current)
        except Exception as exc:
            raise incomplete_append(store, path, expected, written, exc) from exc
        finally:  # the shape is committed: the lease goes, whatever became of the consolidated refresh
            if lease is not None:
                release_lease(store, path, lease, committed=True)
    if journal_end is not None:  # committed: the receipts are no evidence any more ('complete' is)
        store.delete_prefix(journal_end[1].rstrip("/"))
    return carry(own, handle.shape, tokens)


def _edges(plan: WritePlan, segs: Sequence[Any]) -> Edges:
    return tuple(
        tuple(d.block_starts[s.blocks.start : s.blocks.stop + 1]) for d, s in zip(plan.dims, segs, strict=True)
    )


def writer_tasks(
    plan: WritePlan, source: str, handle_key: str, name: str, token: str, resumed: journal.Journal | None = None
) -> dict[Any, Any]:
    """One task per segment combination; each receives exactly the source blocks overlapping its keys.
    ``token``: the write's token, under which its uploads are deferred (see :func:`write_group`).
    ``resumed``: the journal of a resumable write: a task with a receipt there is a constant (its blocks are
    no longer needed, so culling drops them and what feeds only them), the others write their receipt."""
    tasks: dict[Any, Any] = {}
    handle = ref(handle_key)
    group = data((token, os.getpid()))
    index = itertools.product(*(range(len(d.segments)) for d in plan.dims))
    for gidx, segs in zip(index, plan.groups(), strict=True):
        key = (name, *gidx)
        if resumed is not None and journal.task_name(gidx) in resumed.done:
            tasks[key] = value(key, 0)
            continue
        box = tuple((s.start, s.stop) for s in segs)
        deps = [ref((source, *b)) for b in itertools.product(*(s.blocks for s in segs))]
        if resumed is not None:
            receipt = journal.receipt_key(resumed.prefix, gidx)
            tasks[key] = task(key, write_journaled, handle, data(box), data(_edges(plan, segs)), group, receipt, *deps)
        else:
            tasks[key] = task(key, write_group, handle, data(box), data(_edges(plan, segs)), group, *deps)
    return tasks


def token_tree(keys: Sequence[Any], name: str, final: Any, func: Any = done, extra: Sequence[Any] = ()) -> dict[Any, Any]:
    """Reduce writer tokens in a tree (at most 32 inputs per task, summed) into the single key ``final``."""
    return fan_in(keys, name, final, func, extra, reduce=done)


def stored_nothing(*tokens: Any) -> None:
    """A block of what ``to_zarr(..., compute=False)`` returns: nothing, once the write is complete (as
    dask's ``store`` blocks)."""
    return None


def readback_tasks(
    plan: WritePlan, chunks: Sequence[Sequence[int]], handle_key: str, after: Any, name: str, load: bool = True
) -> dict[Any, Any]:
    """One task per source block, once the write is complete (``after``: its final task, which follows every
    writer and refreshes consolidated metadata): ``return_stored`` reads the block back (``load``), else it
    is ``None`` (the array ``compute=False`` returns)."""
    tasks: dict[Any, Any] = {}
    handle, last = ref(handle_key), ref(after)
    for bidx in itertools.product(*(range(len(c)) for c in chunks)):
        key = (name, *bidx)
        if not load:
            tasks[key] = task(key, stored_nothing, last)
            continue
        slices = tuple(
            slice(d.block_starts[i], d.block_starts[i + 1]) for d, i in zip(plan.dims, bidx, strict=True)
        )
        tasks[key] = task(key, read_back, handle, data(slices), last)
    return tasks
