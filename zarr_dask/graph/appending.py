"""Appends from dask: :func:`append` (and the plan :func:`~zarr_dask.explain_write` shows for one).

The rows are written beyond the committed shape under the array's append lease (:mod:`zarr_dask.core.lease`),
then one final task commits the new shape. ``resume=True`` journals the append so that a re-run after it died
skips what it finished, or recognises that it landed (:mod:`zarr_dask.graph.resume_append`).
"""

from __future__ import annotations

import dataclasses
import logging
import operator
from collections.abc import Mapping
from typing import Any

from dask.array.core import Array as DaskArray

from zarr_dask.core import nodes
from zarr_dask.core.array import Array
from zarr_dask.core.commit import check_no_incomplete_append
from zarr_dask.core.lease import AppendLease, Fence, lease_key, parse_lease
from zarr_dask.errors import ArrayNotFoundError, ContainsArrayError, IndexingError
from zarr_dask.graph import resume_append, witness
from zarr_dask.graph.handle import ArrayHandle
from zarr_dask.graph.in_task import compute_options
from zarr_dask.graph.inputs import locate
from zarr_dask.graph.journal import task_name
from zarr_dask.graph.plan import WritePlan
from zarr_dask.graph.target import IO_OPTIONS, Target, check_chunks_known, grown_metadata, resolve_target
from zarr_dask.graph.write import _as_dask, _check_consolidated_flag, _run, check_in_process, make_plan
from zarr_dask.store.transactions import is_transactional
from zarr_dask.store.versioned import conditional

__all__ = ["append", "explain_append"]

_log = logging.getLogger("zarr_dask.graph")


def _append_target(
    arr: DaskArray, array: Array, axis: Any, kwargs: Mapping[str, Any], fence: Fence | None = None
) -> Target:
    """The target of an append; ``fence``: the lease's, carried into every writer task (see
    :mod:`zarr_dask.core.lease`)."""
    stray = sorted(set(kwargs) - IO_OPTIONS)
    if stray:
        raise TypeError(f"{stray} describe a new array, but {array!r} exists; drop them")
    io = {k: bool(v) for k, v in kwargs.items()}
    shape = array.shape
    try:
        axis = operator.index(axis)
        if not -len(shape) <= axis < len(shape):
            raise IndexError
    except (TypeError, IndexError):
        raise IndexingError(
            f"axis {axis!r} is out of range for a {len(shape)}-d array", store=array.store.url, path=array.path
        ) from None
    axis %= len(shape)
    if arr.ndim != len(shape) or any(a != b for d, (a, b) in enumerate(zip(arr.shape, shape, strict=True)) if d != axis):
        raise IndexingError(
            f"cannot append an array of shape {arr.shape} to one of shape {shape} along axis {axis}: every other "
            "axis must match",
            store=array.store.url,
            path=array.path,
        )
    check_chunks_known(arr, array.store, array.path)
    metadata = grown_metadata(array.metadata, axis, arr.shape[axis], arr.chunks[axis])
    old = array.store.get_many(list(nodes.documents(array.path, array.metadata)))
    return Target(
        handle=ArrayHandle(array.store, array.path, metadata, fence=fence, **io),
        offsets=tuple(shape[axis] if d == axis else 0 for d in range(len(shape))),
        action="append",
        documents=nodes.documents(array.path, metadata),
        old_documents=old,
    )


def _open_for_append(url: Any, component: str | None, storage_options: Mapping[str, Any] | None) -> Array | None:
    """The array as stored now (an opened Array is re-read: its metadata may be stale), or None."""
    if isinstance(url, Array):
        store, path = url.store, url.path
    else:
        store, path = locate(url, component, storage_options)
    node = nodes.read_node(store, path)  # one read (Array.open of a missing array explains why: more requests)
    if node is None:
        return None  # the first append creates it
    if not nodes.is_array(node):
        return Array.open(store, path)  # raises, naming what is there (or opens an array that replaced it)
    return Array(store, path, node)


def append(
    arr: Any,
    url: Any,
    axis: int = 0,
    component: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
    compute: bool = True,
    consolidated: bool | None = None,
    *,
    resume: bool | str = False,
    **kwargs: Any,
) -> Any:
    """Append a dask array to an existing Zarr array along ``axis`` (creating the array if there is none).

    The data is written first, beyond the stored shape (readers ignore it); the chunk or shard the old data
    ends in is read, merged and rewritten once by its single owner task. Only after every data task has
    succeeded does a final task write the new shape, and only if the metadata is still what this append
    started from (a concurrent change raises :class:`~zarr_dask.errors.WritePlanError` instead); the same
    task then records the new shape in the consolidated metadata of the enclosing groups, if they have any.

    Parameters
    ----------
    arr
        The dask array; every axis but ``axis`` must match the stored array.
    url, component, storage_options
        Where the array is (as for :func:`to_zarr`).
    axis
        The axis to grow (negative counts from the end).
    compute
        Append now (returns the new shape) or return a Delayed that appends (and computes to the new shape).
    consolidated
        As for :func:`to_zarr`: ``None`` refreshes existing consolidated metadata, ``False`` leaves it alone.
    resume
        ``True`` (or a run name, as for :func:`to_zarr`): make the append resumable. Run the same call again
        after it died: the writer tasks it finished are neither recomputed nor rewritten, the rest is written
        and the shape committed once; if it had landed already (even long ago: a job run again from its
        start), nothing is appended again and the shape it committed is returned; if other appends landed
        meanwhile, it is written again in full at the new end. "Landed" holds only for the same inputs: the
        witness of the source arrays it reads is part of its run (a rewritten ``latest.zarr`` is another append). Its journal keeps two small records under the
        array until :func:`~zarr_dask.publish_ledger`. Needs a store with conditional writes (append leases).
        See docs/safe-writes.md, "When a write dies".
    **kwargs
        ``write_empty_chunks``; creation options of :func:`to_zarr` when the array does not exist yet.

    Examples
    --------
    >>> import dask.array as da, zarr_dask
    >>> zarr_dask.to_zarr(da.ones((3, 2), chunks=2), "memory://append-doc", chunks=(2, 2))
    >>> zarr_dask.append(da.zeros((2, 2), chunks=1), "memory://append-doc")
    (5, 2)
    >>> zarr_dask.open_array("memory://append-doc")[:, 0]
    array([1., 1., 1., 0., 0.])
    """
    arr = _as_dask(arr)
    _check_consolidated_flag(consolidated)
    array = _open_for_append(url, component, storage_options)
    if array is None:  # create it empty along the axis (exclusively: a racing creator's array is kept), then append
        array = _create_empty(arr, url, component, storage_options, axis, kwargs)
        kwargs = {k: v for k, v in kwargs.items() if k in IO_OPTIONS}
    if resume is not False:
        return _append_resumable(arr, array, axis, kwargs, compute, consolidated, resume)
    if conditional(array.store) is None:  # no leases on this store: appends are not arbitrated
        check_no_incomplete_append(array.store, array.path, array.metadata)  # never rows twice on a re-run
        target = _append_target(arr, array, axis, kwargs)
        if is_transactional(array.store):  # Icechunk stores no chunk beyond the shape; its commit hides the new one
            array.store.set_many(target.documents)
        result = _run(arr, target, False, False, consolidated, lazy=not compute)  # computes to the new shape
        return result.compute(**compute_options()) if compute else result
    lease = AppendLease(array.store, array.path).acquire()  # one append at a time: see zarr_dask.core.lease
    try:
        array = Array.open(array.store, array.path)  # the shape as committed by the append before this one
        check_no_incomplete_append(array.store, array.path, array.metadata)
        target = _append_target(arr, array, axis, kwargs, fence=lease.fence(array.shape))
        result = _run(arr, target, False, False, consolidated, lazy=not compute, lease=lease.token)
        if compute:
            return result.compute(**compute_options())
    except BaseException:
        lease.release()
        raise
    finally:
        if compute:
            lease.release()
    lease.release_with(result)  # a lazy append never computed: its lease lapses after the TTL once dropped
    return result


def _append_resumable(
    arr: DaskArray, array: Array, axis: Any, kwargs: Mapping[str, Any], compute: bool, consolidated: bool | None,
    resume: bool | str,
) -> Any:  # fmt: skip
    """:func:`append` with ``resume=`` (see :mod:`zarr_dask.graph.resume_append`): under the lease, decide
    from the journal; a failure marks the lease lapsed (the re-run takes it over at once)."""
    store = array.store
    resume_append.check_resumable(store, array.path, resume)
    lease = AppendLease(store, array.path, refuse_after_completing=False).acquire()
    try:
        array = Array.open(store, array.path)  # the shape as committed by the append before this one
        check_no_incomplete_append(store, array.path, array.metadata)
        target = _append_target(arr, array, axis, kwargs, fence=lease.fence(array.shape))
        ax = operator.index(axis) % array.ndim
        inputs = witness.of(arr, target=array)
        run = resume_append.append_run_id(arr, array, ax, target.handle.write_empty_chunks, resume, inputs)
        decision = resume_append.decide(store, array.path, run, lease.previous, array.shape, ax)
        resume_append.check_inputs(store, array.path, decision, inputs, resume)
        if decision.landed is not None and array.shape[ax] < decision.landed[ax]:  # never success over nothing
            _log.info("%s /%s: this append landed once (shape %s), but the array is now %s (deleted or replaced "
                      "since): appending again", store.url, array.path, list(decision.landed), list(array.shape))  # fmt: skip
            store.delete_prefix(decision.top.rstrip("/"))
            decision = resume_append.decide(store, array.path, run, lease.previous, array.shape, ax)
        resume_append.log_decision(store, array.path, decision)
        if decision.landed is not None:
            if decision.void is not None:
                store.delete_prefix(decision.void.rstrip("/"))
            lease.release()
            return decision.landed if compute else _delayed_shape(decision.landed)
        plan = make_plan(arr, target)
        resume_append.begin(store, decision, array.shape, target.handle.shape, ax, lease.token, plan.tasks, plan.keys,
                            inputs=inputs.record())  # fmt: skip
        result = _run(arr, target, False, False, consolidated, lazy=not compute, lease=lease.token,
                      resumed=decision.journal)  # fmt: skip
        if compute:
            shape = result.compute(**compute_options())
    except BaseException:
        lease.abandon()  # lapsed at once, still naming this run: its re-run knows no other append came between
        raise
    if not compute:
        lease.release_with(result)
        return result
    lease.release()  # (its commit released it already: this stops the renewal)
    return shape


def _delayed_shape(shape: tuple[int, ...]) -> Any:
    from dask.delayed import delayed

    return delayed(_landed, pure=True)(shape)


def _landed(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(shape)


def _create_empty(
    arr: DaskArray, url: Any, component: str | None, storage_options: Mapping[str, Any] | None, axis: Any,
    kwargs: Mapping[str, Any],
) -> Array:  # fmt: skip
    """The first append to a missing array: create it with length 0 along ``axis`` (its metadata written only
    if absent); if another writer created it first, that array is appended to."""
    try:
        target = resolve_target(arr, url, component, storage_options, False, None, kwargs)
        h = target.handle
        try:
            ax = operator.index(axis) % max(1, arr.ndim)
        except TypeError:
            ax = 0
        empty = dataclasses.replace(h.metadata, shape=tuple(0 if d == ax else n for d, n in enumerate(h.metadata.shape)))
        check_in_process(h.store)
        nodes.write_node(h.store, h.path, empty, known_absent=True)
        store, path = h.store, h.path
    except ContainsArrayError:  # created by another writer meanwhile: append to it
        store, path = locate(url, component, storage_options) if not isinstance(url, Array) else (url.store, url.path)
    opened = _open_for_append(store, path, None)
    if opened is None:
        raise ArrayNotFoundError("the array was removed while this append created it", store=store.url, path=path)
    return opened


def explain_append(
    arr: DaskArray, url: Any, component: str | None, storage_options: Mapping[str, Any] | None, axis: Any,
    kwargs: Mapping[str, Any], resume: bool | str = False,
) -> WritePlan:  # fmt: skip
    """The plan of :func:`append` (``explain_write(..., append_axis=...)``); ``resume``: what a resumed run
    would skip, judged from the journal and the lease as stored now (reads only)."""
    array = _open_for_append(url, component, storage_options)
    if array is None:
        return make_plan(arr, resolve_target(arr, url, component, storage_options, False, None, kwargs))
    target = _append_target(arr, array, axis, kwargs)
    plan = make_plan(arr, target)
    if not resume:
        return plan
    ax = operator.index(axis) % array.ndim
    run = resume_append.append_run_id(arr, array, ax, target.handle.write_empty_chunks, resume, witness.of(arr, target=array))
    holder = parse_lease(array.store.get(lease_key(array.path)))
    decision = resume_append.decide(array.store, array.path, run, holder, array.shape, ax)
    if decision.landed is not None:  # nothing left to do
        return plan.skipping(frozenset(task_name(i) for i in _task_grid(plan)))
    assert decision.journal is not None
    found = decision.journal
    if found.resumed:
        found, _ = witness.standing(array.store, array.path, plan, found, target.handle.io.chunk_key)
    return plan.skipping(found.done)


def _task_grid(plan: WritePlan) -> list[tuple[int, ...]]:
    import itertools

    return list(itertools.product(*(range(len(d.segments)) for d in plan.dims)))
