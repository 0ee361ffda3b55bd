"""Writes from dask: :func:`to_zarr` and :func:`explain_write` (appends: :mod:`zarr_dask.graph.append`).

Each storage key gets exactly one writer task by construction (see :mod:`zarr_dask.graph.plan`), so no lock
is taken, the dask chunks need not match the Zarr chunks or shards, and a region or append edge is read,
merged and rewritten once. Metadata is written once before the data (appends: after it, so readers never see
a shape whose data is not there yet). Writer tasks return key counts, never data, so retries and
distributed workers are cheap and a retried task rewrites exactly the same bytes.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Any, cast

import numpy as np
from dask.array.core import Array as DaskArray
from dask.base import tokenize

from zarr_dask.core.lease import Fence
from zarr_dask.errors import (
    ContainsArrayError,
    InvalidModeError,
    UnsupportedFeatureError,
)
from zarr_dask.graph import gateway
from zarr_dask.graph.chunking import chunks_token
from zarr_dask.graph.guard import claim
from zarr_dask.graph.in_task import compute_options, other_processes
from zarr_dask.graph.journal import Journal
from zarr_dask.graph.layers import commit_metadata, finish, readback_tasks, token_tree, writer_tasks
from zarr_dask.graph.plan import WritePlan, plan_dim
from zarr_dask.graph.progress import check_progress, write_note
from zarr_dask.graph.progress import run as run_with_progress
from zarr_dask.graph.resume import journaled_plan, resumable_target
from zarr_dask.graph.resume_append import end_records
from zarr_dask.graph.target import (
    Target,
    create_metadata,
    metadata_request_count,
    resolve_target,
)
from zarr_dask.graph.witness import standing
from zarr_dask.store.transactions import is_transactional
from zarr_dask.store.uploads import WriteBehind
from zarr_dask.store.versioned import conditional

__all__ = ["explain_write", "make_plan", "settle_failed", "to_zarr", "to_zarr_delayed"]


def _as_dask(arr: Any) -> DaskArray:
    """A dask array (either mode) whose name is the name of its keys."""
    return cast(DaskArray, gateway.as_dask(arr))


_log = logging.getLogger("zarr_dask.graph")


def _check_consolidated_flag(consolidated: Any) -> None:
    if consolidated is not None and not isinstance(consolidated, bool):
        raise TypeError(f"consolidated must be None, True or False, got {consolidated!r}")


def make_plan(arr: DaskArray, target: Target) -> WritePlan:
    """The write plan of ``arr`` into ``target`` (no I/O)."""
    h = target.handle
    _log.debug("%s /%s: planning a %s write of %d dask blocks", h.store.url, h.path, target.action, math.prod(arr.numblocks))
    dims = tuple(
        plan_dim(g, n, o, c) for g, n, o, c in zip(h.io.grids, h.shape, target.offsets, arr.chunks, strict=True)
    )
    region = tuple(slice(o, o + sum(c)) for o, c in zip(target.offsets, arr.chunks, strict=True))
    units = tuple(g.size(0) if g.nchunks(n) else 0 for g, n in zip(h.io.grids, h.shape, strict=True))
    docs = target.documents
    return WritePlan(
        store=h.store.url,
        path=h.path,
        action=target.action,
        unit="shard" if h.sharded else "chunk",
        unit_shape=units,
        shape=h.shape,
        region=region,
        dtype=h.dtype,
        dims=dims,
        nblocks=int(np.prod(arr.numblocks)) if arr.ndim else 1,
        metadata_documents=metadata_request_count(h.path, docs) if target.action in ("create", "overwrite")
        else len(docs),
        key_names=h.io.chunk_key,
    )


def _graph(
    arr: DaskArray,
    target: Target,
    plan: WritePlan,
    return_stored: bool,
    consolidated: bool | None,
    lease: str | None = None,
    as_array: bool = False,
    resumed: Journal | None = None,
) -> tuple[Any, str, str]:
    """Writer tasks, the final task (append: the shape commit) that refreshes consolidated metadata, and for
    ``return_stored`` the read-back after it (``as_array``: blocks of ``None`` after it, the array
    ``compute=False`` returns); returns (graph, result name, token)."""
    h = target.handle
    token = tokenize(arr.name, h, target.offsets, chunks_token(arr.chunks), target.action, return_stored, consolidated)
    name = f"to-zarr-{token}"
    handle_key = f"zarr-target-{token}"
    tasks: dict[Any, Any] = {handle_key: gateway.value(handle_key, h)}
    writers = writer_tasks(plan, arr.name, handle_key, name, token, resumed)
    tasks.update(writers)
    handle = gateway.ref(handle_key)
    pending = (gateway.data(h.store.__dask_tokenize__()), token)
    if target.action == "append":
        commit = f"{name}-commit"
        docs = (gateway.data(target.old_documents), gateway.data(target.documents))
        end = gateway.data(end_records(resumed.prefix, h.shape) if resumed is not None else None)
        tasks.update(
            token_tree(list(writers), name, commit, commit_metadata, (handle, *docs, consolidated, *pending, lease, end))
        )
    else:
        commit = f"{name}-done"
        prefix = resumed.prefix if resumed is not None else None
        tasks.update(
            token_tree(list(writers), name, commit, finish, (handle, target.action, consolidated, *pending, prefix))
        )
    final = commit
    if return_stored or as_array:
        final = f"stored-{token}" if return_stored else f"to-zarr-stored-{token}"
        tasks.update(readback_tasks(plan, arr.chunks, handle_key, commit, final, load=return_stored))
    # the layer is named after the result (a dask array / Delayed finds its layer by its own name)
    hlg = gateway.graph(final, tasks, dependencies=[arr])
    if plan.skipped_tasks:  # drop the blocks only finished tasks needed, and what feeds only them
        outputs = [(final, *b) for b in np.ndindex(*(len(c) for c in arr.chunks))] if final != commit else [final]
        hlg = gateway.culled(hlg, final, outputs)
    return hlg, final, token



def _run(
    arr: DaskArray,
    target: Target,
    compute: bool,
    return_stored: bool,
    consolidated: bool | None,
    lazy: bool | None = None,
    lease: str | None = None,
    as_array: bool = False,
    resumed: Journal | None = None,
    progress: bool = False,
) -> Any:
    """Build the write graph; compute it (``compute``; ``progress``: with a bar on stderr) or return it,
    registered as a pending lazy write (``lazy``, default ``not compute``). ``lease``: the token of the append
    lease its commit releases; ``resumed``: the journal of a resumable write (its finished tasks are skipped)."""
    check_in_process(target.handle.store)
    plan = make_plan(arr, target)
    if resumed is not None:
        plan, resumed = journaled_plan(plan, target, resumed)
    graph, final, token = _graph(arr, target, plan, return_stored, consolidated, lease, as_array, resumed)
    result: Any
    if return_stored or as_array:
        meta = np.empty((0,) * arr.ndim, dtype=target.handle.dtype if return_stored else arr.dtype)
        result = gateway.array_result(graph, final, arr.chunks, meta)
    else:
        result = gateway.delayed_result(final, graph)
    store = target.handle.store
    if ((not compute) if lazy is None else lazy) and conditional(store) is None:
        # without conditional writes, refuse a lazy write that would race a pending one (see graph.guard)
        claim(plan, store.__dask_tokenize__(), token, result)
    if not compute:
        return result
    note = write_note(target, plan, resumed) if progress else None
    try:
        if return_stored:
            return run_with_progress(result, progress=progress, note=note, persist=True, **compute_options())
        run_with_progress(result, progress=progress, note=note, **compute_options())
    except BaseException:
        _settle_failed(token)
        raise
    return None


def settle_failed(writes: Any) -> None:
    """After a failed compute of :func:`to_zarr_delayed` results (e.g. a dataset's variables, computed as one
    graph): let the uploads they queued land before the error reaches the caller, as :func:`to_zarr` does."""
    for write in writes:
        key = str(getattr(write, "key", ""))
        if key.startswith("to-zarr-") and key.endswith("-done"):
            _settle_failed(key[len("to-zarr-") : -len("-done")])


def _settle_failed(token: str) -> None:
    """After a failed write: let the uploads its tasks queued land (a resumable write keeps their receipts), so
    none lands after the error reaches the caller (e.g. over the write they run next); their own errors are
    dropped, the write's is raised."""
    try:
        WriteBehind(token).drain()
    except Exception as exc:  # noqa: BLE001 - the write's own error is the one to raise
        _log.debug("an upload of a failed write failed too: %s", exc)


def check_in_process(store: Any) -> None:
    """Refuse, before anything is written, to write into a store that lives in this process's memory (a
    Python mapping, a ``MemoryStore``, fsspec's ``memory://``) with a scheduler that runs tasks in other
    processes (``processes``, a ``distributed`` cluster): their writes would go to copies of it."""
    if not getattr(store, "process_local", False) or store.read_only:
        return
    name = other_processes()
    if name is None:
        return
    raise UnsupportedFeatureError(
        f"cannot write into a store in this process's memory with the {name} scheduler: it runs tasks in other "
        "processes, which would write into copies of it; use the threaded scheduler, or write to a URL or path "
        "that every process can reach",
        store=store.url,
    )


def to_zarr(
    arr: Any,
    url: Any,
    component: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
    region: Any = None,
    compute: bool = True,
    return_stored: bool = False,
    mode: str = "a",
    *,
    overwrite: bool = False,
    consolidated: bool | None = None,
    resume: bool | str = False,
    progress: bool = False,
    **kwargs: Any,
) -> Any:
    """Write a dask array to a Zarr array; a drop-in for :func:`dask.array.to_zarr`.

    Whatever the dask chunks, every storage key (chunk, or shard when sharded) is written by exactly one task:
    blocks that share a key are gathered by that key's task, and keys only partly covered (``region`` edges)
    are read, merged and written once. No lock is taken and no rechunk is needed. After the data, one final
    task brings the consolidated metadata of the enclosing groups up to date (if they have any).

    Parameters
    ----------
    arr
        The dask array (anything else is wrapped with :func:`dask.array.asarray`).
    url
        Where to write: a URL or path (fsspec URLs too), an fsspec mapper, any ``MutableMapping`` (``{}``
        included), a :class:`~zarr_dask.Store`, a zarr-python store, or an opened array to write into (a
        :class:`~zarr_dask.Array` or a zarr-python ``Array``; the write goes through this planner, one writer
        per key) or group (with ``component``).
    component
        The array's path inside the store.
    storage_options
        fsspec options for URLs.
    region
        A tuple of step-1 slices: write into that part of the *existing* array (which must not be given
        creation options).
    compute
        Write now (returns ``None``), or return a dask array whose computation writes (its blocks compute
        to ``None``, as :func:`dask.array.to_zarr`'s do). The metadata of a new array is written now either
        way, once.
    return_stored
        Return a dask array that reads the stored data back, once everything is written (persisted when
        ``compute=True``).
    mode
        As for :func:`dask.array.to_zarr`: ``"a"`` (default) creates the array, or writes into it with
        ``region=``; ``"w"`` replaces an existing node at ``component`` (same as ``overwrite=True``: its data
        is deleted first; other nodes of the store are kept); ``"w-"`` creates and fails if a node exists;
        ``"r+"`` writes into an existing array (the whole array, or ``region=``).
    overwrite
        The same as ``mode="w"``.
    consolidated
        ``None`` (default): after the data, refresh this array's entry (and those of the groups created for
        it) in the consolidated metadata of every enclosing group that has some -- one batched read of the
        ancestors' documents and, if an entry changes, one write; stores without consolidated metadata get
        none. ``True``: the same, and consolidate the store root when no group holds consolidated metadata
        yet. ``False``: leave consolidated metadata alone (for callers that rewrite it themselves).
    resume
        ``True``: make the write resumable, and resume it if a run of the very same write (same computation,
        target and options) died: the writer tasks its journal shows finished are neither recomputed (their
        dask blocks, and upstream tasks that feed only them, are culled) nor rewritten. A run name (``str``)
        instead of the dask array's name identifies the computation (for graphs whose names are random).
        What it reads is part of the run: source arrays opened by zarr_dask are witnessed (one listing each),
        and a source rewritten since the run died makes it start over (a named run raises
        :class:`~zarr_dask.errors.ResumeInputsChangedError` unless ``overwrite=True``); finished keys deleted
        or resized since are written again. The journal costs one small write per writer task; it is deleted once the write finished (a region
        write keeps one record for :func:`~zarr_dask.write_ledger`). See docs/safe-writes.md, "When a write
        dies".
    progress
        Show a progress bar on stderr while the write computes (``compute=True``; dask's bar, or distributed's
        on a cluster), after a line saying what it writes -- for a resumed write, how many writer tasks and
        keys an earlier run finished (they are skipped, so the bar counts only the rest).
    **kwargs
        New-array options: ``zarr_format`` (default: the format of the array being overwritten, else of the
        nearest group above the new array, else 3, so a v2 hierarchy gets v2 members), ``chunks`` (default:
        the dask blocks; for irregular blocks
        the largest, or exactly the blocks as a rectilinear v3 grid with ``rectilinear=True``), ``shards``,
        ``compressors``, ``filters``, ``serializer``, ``fill_value``, ``order``, ``dtype``,
        ``chunk_key_encoding``, ``dimension_separator``, ``dimension_names``, ``attributes``; and, for any
        write, ``write_empty_chunks`` (default False: chunks equal to the fill value are not stored).

    Returns
    -------
    None, Delayed or dask.array.Array

    Examples
    --------
    >>> import dask.array as da, zarr_dask
    >>> x = da.arange(12, chunks=5).reshape(3, 4)
    >>> zarr_dask.to_zarr(x, "memory://to-zarr-doc", chunks=(2, 2))
    >>> zarr_dask.open_array("memory://to-zarr-doc")[1]
    array([4, 5, 6, 7])
    >>> zarr_dask.to_zarr(x[:1] * 10, "memory://to-zarr-doc", region=(slice(2, 3),))
    >>> zarr_dask.open_array("memory://to-zarr-doc")[2]
    array([ 0, 10, 20, 30])
    """
    arr = _as_dask(arr)
    _check_consolidated_flag(consolidated)
    overwrite, region = _mode(mode, overwrite, region, arr, url, component, storage_options)
    check_progress(progress, compute)
    # compute=False: a dask array whose blocks compute to None once written, as dask's to_zarr returns
    return _write(arr, url, component, storage_options, region, compute, return_stored, overwrite, consolidated,
                  kwargs, as_array=not compute, resume=resume, progress=progress)  # fmt: skip


def _write(
    arr: DaskArray, url: Any, component: str | None, storage_options: Mapping[str, Any] | None, region: Any,
    compute: bool, return_stored: bool, overwrite: bool, consolidated: bool | None, kwargs: Mapping[str, Any],
    as_array: bool, fence: Fence | None = None, resume: bool | str = False, progress: bool = False,
    journal: Journal | None = None,
) -> Any:  # fmt: skip
    resumed: Journal | None = journal
    if journal is not None:  # kept by the caller (a dataset append's variable: zarr_dask.graph.resume_append.member)
        target = resolve_target(arr, url, component, storage_options, overwrite, region, kwargs, fence)
    elif resume:
        target, resumed = resumable_target(arr, url, component, storage_options, overwrite, region, kwargs, fence, resume)
    else:
        target = resolve_target(arr, url, component, storage_options, overwrite, region, kwargs, fence)
    if compute:
        check_in_process(target.handle.store)  # before the metadata: a refused write leaves nothing behind
    transactional = is_transactional(target.handle.store)
    if return_stored and transactional and other_processes() is not None:
        raise UnsupportedFeatureError(
            "return_stored=True cannot read back a write into an Icechunk session made by other processes: the "
            "data is in forks of the session until the write's result reaches it; write with compute=True, then "
            "read the session (zarr_dask.from_zarr(session.store, ...))",
            store=target.handle.store.url,
        )
    if target.action in ("create", "overwrite") and not (resumed is not None and resumed.resumed and not resumed.metadata):
        # a resumed write's first run did it (and deleted what it overwrote) already, unless it was deleted since
        try:
            create_metadata(target)
        except ContainsArrayError as exc:
            if not overwrite:
                raise
            raise ContainsArrayError(
                "another writer created an array here while this overwrite=True write was replacing it (two runs of "
                "one job at once, or another writer of this target): nothing of this write was written. Fix: run "
                "it again once the other writer is done (it replaces that array; with resume=True it resumes it "
                "if it is this job's)",
                store=exc.store, path=exc.path,
            ) from exc
    # into an Icechunk session: a Delayed, whose result carries the forks' changes back to the session
    as_array = as_array and not transactional
    return _run(arr, target, compute, return_stored, consolidated, as_array=as_array, resumed=resumed,
                progress=progress)  # fmt: skip


def to_zarr_delayed(
    arr: Any,
    url: Any,
    component: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
    region: Any = None,
    *,
    overwrite: bool = False,
    consolidated: bool | None = None,
    fence: Fence | None = None,
    resume: bool | str = False,
    journal: Journal | None = None,
    **kwargs: Any,
) -> Any:
    """:func:`to_zarr` with ``compute=False``, returning a :class:`~dask.delayed.Delayed` that computes to
    the number of keys written (for callers that combine writes, like the xarray backend); ``fence``: the
    region is a dataset append's, written under its group's append lease; ``resume``: as for :func:`to_zarr`;
    ``journal``: instead of ``resume``, the journal to keep (a resumable dataset append's variable, whose
    receipts live in its group's journal: :func:`zarr_dask.graph.resume_append.member`)."""
    arr = _as_dask(arr)
    _check_consolidated_flag(consolidated)
    return _write(arr, url, component, storage_options, region, False, False, overwrite, consolidated, kwargs,
                  as_array=False, fence=fence, resume=resume, journal=journal)  # fmt: skip


_MODES = ("a", "w", "w-", "r+")


def _mode(
    mode: str, overwrite: bool, region: Any, arr: DaskArray, url: Any, component: str | None,
    storage_options: Mapping[str, Any] | None,
) -> tuple[bool, Any]:  # fmt: skip
    """``(overwrite, region)`` for dask's ``mode=`` of :func:`to_zarr`."""
    where: dict[str, Any] = {"store": url if isinstance(url, str) else getattr(url, "url", None), "path": component}
    if mode not in _MODES:
        raise InvalidModeError(
            f"mode={mode!r} cannot write; to_zarr takes mode='a' (create, or write into region=), 'w' (replace "
            "an existing node), 'w-' (create, fail if one exists) or 'r+' (write into the existing array)",
            **where,
        )
    if mode == "w-" and overwrite:
        raise InvalidModeError(
            "mode='w-' refuses to replace an existing node, but overwrite=True asks to; drop one", **where
        )
    if mode == "r+" and region is None:
        if overwrite:
            raise InvalidModeError(
                "mode='r+' writes into the existing array, but overwrite=True replaces it; drop one", **where
            )
        region = tuple(slice(0, n) for n in arr.shape)  # the whole existing array (must have its shape)
    return overwrite or mode == "w", region


def explain_write(
    arr: Any,
    url: Any,
    component: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
    overwrite: bool = False,
    region: Any = None,
    append_axis: int | None = None,
    consolidated: bool | None = None,
    resume: bool | str = False,
    **kwargs: Any,
) -> WritePlan:
    """The plan :func:`to_zarr` (or :func:`append`, with ``append_axis``) would carry out, without writing.

    Returns a :class:`~zarr_dask.graph.plan.WritePlan`: storage keys, writer tasks, bytes, read-modify-writes,
    expected store requests, the largest task; its ``repr`` is a readable table.

    Examples
    --------
    >>> import dask.array as da, zarr_dask
    >>> plan = zarr_dask.explain_write(da.zeros((100, 100), chunks=50), "memory://explain-doc", chunks=(30, 100))
    >>> plan.keys, plan.tasks, plan.read_modify_writes
    (4, 3, 0)
    """
    del consolidated  # accepted for the same call signature as to_zarr / append; it plans no data
    arr = _as_dask(arr)
    if append_axis is None and resume:  # what a resumed run would skip (reads its journal, writes nothing)
        target, found = resumable_target(arr, url, component, storage_options, overwrite, region, kwargs, None, resume)
        plan = make_plan(arr, target)
        if found.resumed:
            found, _ = standing(target.handle.store, target.handle.path, plan, found, target.handle.io.chunk_key)
        return plan.skipping(found.done)
    if append_axis is None:
        return make_plan(arr, resolve_target(arr, url, component, storage_options, overwrite, region, kwargs))
    from zarr_dask.graph.appending import explain_append  # (that module builds on this one)

    return explain_append(arr, url, component, storage_options, append_axis, kwargs, resume)

