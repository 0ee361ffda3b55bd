"""``to_zarr_dataset`` / ``to_zarr_datatree``: xarray's ``to_zarr`` semantics on the parallel-safe planner.

Order of work, whatever the number of groups and variables:

1. the store's current metadata is read once (one listing per group level, batched reads; never trusted
   from consolidated metadata), every write is planned and validated -- nothing is written if anything is
   wrong;
2. one batch writes every metadata document that does not depend on the data: new groups and arrays, group
   attributes (and, when no array grows, the consolidated metadata, whose final state is then known);
3. one dask graph writes all the data: every storage key (chunk or shard) has exactly one writer task, so
   any dask chunking is safe, region edges and the partial last chunk of an append are read, merged and
   rewritten once;
4. after the data, one task writes the grown array documents of an append (after checking that nobody else
   changed them meanwhile) together with the refreshed consolidated metadata.

Each metadata document is written once.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import quote

import numpy as np

from zarr_dask.core import nodes
from zarr_dask.core.array import Array
from zarr_dask.core.commit import (
    apply_intent,
    check_no_incomplete_appends,
    commit_intent,
    commit_metadata,
    incomplete_append,
    mark_commit,
)
from zarr_dask.core.key_writes import is_fill
from zarr_dask.core.lease import AppendLease, release_lease
from zarr_dask.errors import UnsupportedFeatureError, WriteConflictError
from zarr_dask.graph import resume_append, witness
from zarr_dask.graph.gateway import one_block_delayed
from zarr_dask.graph.handle import ArrayHandle
from zarr_dask.graph.in_task import compute_options
from zarr_dask.graph.journal import Journal
from zarr_dask.graph.progress import check_progress
from zarr_dask.graph.progress import run as run_with_progress
from zarr_dask.graph.write import settle_failed
from zarr_dask.graph.write import to_zarr_delayed as graph_to_zarr
from zarr_dask.spec import ConsolidatedMetadata, GroupMetadataV2, GroupMetadataV3
from zarr_dask.spec.ml_types import cast_values
from zarr_dask.spec.paths import key_prefix, normalize_path, parent_paths
from zarr_dask.store import MemoryStore, Store
from zarr_dask.store.transactions import carry, is_transactional, task_store
from zarr_dask.store.versioned import conditional
from zarr_dask.xarray_backend import dataset_journal, validation
from zarr_dask.xarray_backend.dataset_journal import DatasetJournal
from zarr_dask.xarray_backend.monotonic import warn_if_unordered
from zarr_dask.xarray_backend.reading import as_store
from zarr_dask.xarray_backend.write_plan import GroupPlan, StoreState, VarWrite, WriteOptions, plan_group

if TYPE_CHECKING:
    from dask.delayed import Delayed

__all__ = ["DatasetWriteResult", "execute", "to_zarr_dataset"]

ZarrFormat = Literal[2, 3]

_log = logging.getLogger("zarr_dask.xarray")


@dataclass(frozen=True, kw_only=True)
class DatasetWriteResult:
    """What a dataset (or tree) write did.

    Attributes
    ----------
    store
        The store URL.
    groups
        The group paths written.
    variables
        ``"group/variable"`` -> ``"create"``, ``"overwrite"``, ``"region"`` or ``"append"``.
    metadata_keys
        Every metadata document written, in order (each at most once).
    memory_store
        The in-memory store made for ``store=None`` (as xarray's ``to_zarr()`` makes one), holding what was
        written: read it with ``xr.open_dataset(result.memory_store, engine="zarr_dask")``. It lives in this
        process (pickling it raises). None when a store was given.
    """

    store: str
    groups: tuple[str, ...]
    variables: dict[str, str] = field(default_factory=dict)
    metadata_keys: tuple[str, ...] = ()
    memory_store: MemoryStore | None = field(default=None, repr=False, compare=False)

    def _repr_html_(self) -> str:
        """Notebook display: the groups, the variables and what was done to each, in the style of the array
        and group reprs."""
        from zarr_dask.core.html import record_html

        actions: dict[str, int] = {}
        for action in self.variables.values():
            actions[action] = actions.get(action, 0) + 1
        rows = [("groups", ", ".join("/" + g for g in self.groups) or "-"),
                ("variables", ", ".join(f"{n} {a}" for a, n in sorted(actions.items())) or "none"),
                ("metadata documents", str(len(self.metadata_keys)))]  # fmt: skip
        return record_html("zarr_dask.DatasetWriteResult", rows, where=self.store, columns=["variable", "action"],
                           items=sorted(self.variables.items()))  # fmt: skip


# ------------------------------------------------------------------------------------------ metadata
def _final_nodes(state: StoreState, plans: list[GroupPlan]) -> tuple[Any, dict[str, Any]]:
    """(root group metadata, every other node) as they will be once the write is done."""
    root = state.root
    found = dict(state.nodes)
    fmt = plans[0].zarr_format
    for plan in plans:
        if plan.replace:
            prefix = plan.path + "/" if plan.path else ""
            found = {k: v for k, v in found.items() if not k.startswith(prefix) and k != plan.path}
        for q in parent_paths(plan.path):
            if (root if not q else found.get(q)) is None or isinstance(found.get(q), nodes.ImplicitGroup):
                if q:
                    found[q] = nodes.empty_group(fmt)
                elif root is None or isinstance(root, nodes.ImplicitGroup):
                    root = nodes.empty_group(fmt)
        if plan.group is not None:
            if plan.path:
                found[plan.path] = plan.group
            else:
                root = plan.group
        for w in plan.writes:
            found[w.path] = w.metadata
    if root is None or isinstance(root, nodes.ImplicitGroup):
        root = nodes.empty_group(fmt)
    return root, found


def _consolidated_documents(root: Any, found: Mapping[str, Any], fmt: ZarrFormat) -> dict[str, bytes]:
    explicit = {k: v for k, v in found.items() if not isinstance(v, nodes.ImplicitGroup)}
    cm = ConsolidatedMetadata.from_nodes(fmt, explicit)
    if isinstance(root, GroupMetadataV3):
        return nodes.documents("", GroupMetadataV3(attributes=root.attributes, consolidated_metadata=cm))
    assert isinstance(root, GroupMetadataV2)
    return {**nodes.documents("", root), ".zmetadata": cm.to_v2_document(root=root)}


def _upfront_documents(state: StoreState, plans: list[GroupPlan], root: Any, found: Mapping[str, Any]) -> dict[str, bytes]:
    """Documents that do not depend on the data: groups, missing parents, new arrays."""
    docs: dict[str, bytes] = {}
    for plan in plans:
        for q in parent_paths(plan.path):
            existing = state.root if not q else state.nodes.get(q)
            if existing is None or isinstance(existing, nodes.ImplicitGroup):
                docs.update(nodes.documents(q, root if not q else found[q]))
        if plan.group is not None:
            docs.update(nodes.documents(plan.path, plan.group))
        for w in plan.writes:
            if w.action in ("create", "overwrite"):
                docs.update(nodes.documents(w.path, w.metadata))
    return docs


def _should_consolidate(state: StoreState, plans: list[GroupPlan], consolidated: bool | None) -> bool:
    if is_transactional(state.store):  # an Icechunk repository has its own: none of ours is written there
        return False
    changed = any(p.group is not None or any(w.action != "region" for w in p.writes) for p in plans)
    if not changed:  # mode r+: no metadata changes, nothing can go stale
        return False
    if consolidated is False:  # keep existing consolidated metadata fresh rather than leave it stale
        return state.has_consolidated and not any(p.replace and not p.path for p in plans)
    return True


def metadata_documents(
    state: StoreState, plans: list[GroupPlan], consolidated: bool | None
) -> tuple[dict[str, bytes], dict[str, bytes], dict[str, tuple[Any, Any]]]:
    """The documents planned group writes write: (before the data, after it, ``{path: (old, new)}`` of the
    arrays an append grows)."""
    root, found = _final_nodes(state, plans)
    upfront = _upfront_documents(state, plans, root, found)
    deferred: dict[str, bytes] = {}
    expected: dict[str, tuple[Any, Any]] = {}
    for plan in plans:
        for w in plan.writes:
            if w.action == "append":
                deferred.update(nodes.documents(w.path, w.metadata))
                expected[w.path] = (w.old_metadata, w.metadata)
    if _should_consolidate(state, plans, consolidated):
        cons = _consolidated_documents(root, found, plans[0].zarr_format)
        if deferred:
            deferred.update(cons)
            upfront = {k: v for k, v in upfront.items() if k not in cons}
        else:
            upfront.update(cons)
    if is_transactional(state.store):  # Icechunk stores no chunk beyond an array's shape; its commit hides the new one
        upfront.update(deferred)
    return upfront, deferred, expected


def _write_upfront(store: Store, plans: list[GroupPlan], upfront: dict[str, bytes]) -> None:
    """Write the documents that do not depend on the data. Nodes this write creates are created only if absent
    (:func:`~zarr_dask.core.nodes.create_documents`), first: the group of a ``mode="w-"`` write, then every new
    array, so of two writers racing to create the same dataset one fails with ``ContainsGroupError`` /
    ``ContainsArrayError`` before it wrote anything of its own, never both "succeed"."""
    exclusive: list[tuple[str, dict[str, bytes], bool]] = []
    for plan in plans:
        if plan.exclusive and plan.group is not None:
            exclusive.append((plan.path, nodes.documents(plan.path, plan.group), True))
        exclusive += [(w.path, nodes.documents(w.path, w.metadata), True) for w in plan.writes if w.action == "create"]
    rest = dict(upfront)
    for path, docs, strict in exclusive:
        mine = {k: rest[k] for k in docs if k in rest}
        if mine:
            nodes.create_documents(store, path, mine, strict=strict)
            for k in mine:
                del rest[k]
    if rest:
        store.set_many(rest)


# ------------------------------------------------------------------------------------------- data
def _as_dask(w: VarWrite, store: Store) -> Any:
    import dask.array as da

    dtype = w.metadata.data_type.numpy_dtype
    data = w.data
    if _is_dask(data):
        return data if data.dtype == dtype else data.map_blocks(functools.partial(cast_values, dtype=dtype), dtype=dtype)
    arr = np.asarray(data)
    if arr.dtype != dtype:
        arr = cast_values(arr, dtype)
    if not arr.size or not arr.ndim:
        return da.from_array(arr, chunks=-1, name=False)  # type: ignore[no-untyped-call]
    # blocks of about one storage unit, so encoding runs in parallel (the planner gathers them per key)
    return da.from_array(arr, chunks=_unit_block(ArrayHandle(store, w.path, w.metadata)), name=False)  # type: ignore[no-untyped-call]


def _unit_block(handle: ArrayHandle) -> tuple[int, ...]:
    """The largest storage unit (shard or chunk) along each dimension."""
    return tuple(
        max([g.size(i) for i in range(min(g.nchunks(), 64))] or [1]) for g in handle.io.grids
    )


def _write_scalar(data: Any, store: Store, w: VarWrite) -> Any:
    """A 0-d array is one chunk: encode and store it directly.

    (Works around ``ChunkIO.write_from`` taking ``value[()]`` of a 0-d *object* array, which NumPy returns
    as the element itself rather than an array.)"""
    store = task_store(store)  # a transaction's copy in another process: this task's own fork, carried back
    io = ArrayHandle(store, w.path, w.metadata).io
    value = np.empty((), dtype=io.dtype)
    value[()] = np.asarray(data)[()] if io.dtype.kind == "O" else cast_values(np.asarray(data), io.dtype)
    key = io.chunk_key(())
    if not w.write_empty_chunks and is_fill(value, io.fill):
        store.delete(key)
    else:
        store.set(key, io.encode_chunk(key, value, ()))
    return carry(store, 1)


def _is_dask(data: Any) -> bool:
    return hasattr(data, "dask") and hasattr(data, "chunks")


def _data_write(
    w: VarWrite, store: Store, lease: AppendLease | None = None, resume: bool | str = False,
    journal: Journal | None = None,
) -> Delayed:  # fmt: skip
    """The write of one variable (a Delayed); ``journal``: a resumable dataset append's, for this variable
    (:func:`~zarr_dask.graph.resume_append.member`)."""
    if not w.metadata.shape:
        from dask.delayed import delayed

        data = w.data
        if _is_dask(data):  # its one block's task, unoptimized: one graph, every shared task computed once
            data = one_block_delayed(data)
        # (dask looks into dataclass arguments: ``w`` without its data, or that data would be computed again)
        return delayed(_write_scalar, pure=False)(data, store, dataclasses.replace(w, data=None))  # type: ignore[no-any-return]
    target = Array(store, w.path, w.metadata)
    kwargs: dict[str, Any] = {} if w.write_empty_chunks is None else {"write_empty_chunks": bool(w.write_empty_chunks)}
    if lease is not None and w.action == "append" and w.old_metadata is not None:  # under the group's lease
        kwargs["fence"] = lease.fence(w.old_metadata.shape)
    if journal is not None and _is_dask(w.data):
        kwargs["journal"] = journal
    elif resume and _is_dask(w.data):  # (data in memory has no stable dask name to journal under: written again)
        kwargs["resume"] = f"{resume}/{w.path}" if isinstance(resume, str) else True
    # consolidated metadata is rewritten once by _commit, after every variable: no per-variable refresh
    return graph_to_zarr(_as_dask(w, store), target, region=w.region, consolidated=False, **kwargs)  # type: ignore[no-any-return]


def _commit(
    _tokens: Any,
    store: Store,
    docs: dict[str, bytes],
    expected: dict[str, tuple[Any, Any]],
    result: DatasetWriteResult,
    lease: tuple[str, str] | None = None,
    cleanup: tuple[str, ...] = (),
    journal_end: tuple[dict[str, bytes], str] | None = None,
) -> DatasetWriteResult:
    """After the data: commit the grown arrays' metadata by compare-and-swap (each only if it is still what the
    plan saw; attribute changes made meanwhile are kept), write the remaining documents (consolidated
    metadata), release the append lease (``lease``: ``(group path, token)``). The result carries the changes of
    a transaction's forks (an Icechunk session written from other processes) to the caller.

    Under a lease the whole commit is first recorded in it (:func:`~zarr_dask.core.commit.mark_commit`, fenced):
    if this process stalls or dies between two of its writes, whoever takes the lease over completes it. The
    consolidated metadata, written last, is the commit point readers with default options see: every variable
    grown, or none. ``cleanup``: the key prefixes of a resumable write's journals, deleted last. ``journal_end``:
    a resumable dataset append's ``(records proving the commit, receipts prefix)``
    (:func:`~zarr_dask.graph.resume_append.end_records`): the records are part of the commit recorded in the
    lease (written by whoever makes it), the receipts are deleted once it is made."""
    store = task_store(store)
    rest = {k: v for k, v in docs.items() if not any(k.startswith(key_prefix(p)) and "/" not in k[len(key_prefix(p)):] for p in expected)}
    if lease is None:  # a store without leases: each array only if it is still what the plan saw
        done: list[tuple[str, Any, Any]] = []
        try:
            for path, (old, new) in expected.items():
                done.append((path, old, commit_metadata(store, path, old, new, what="append")[0]))
            if rest:
                store.set_many(rest)
        except Exception as exc:
            if not done:
                raise
            errors = [incomplete_append(store, path, old, new, exc) for path, old, new in done]  # (leaves records)
            raise errors[0] from exc
        for prefix in cleanup:  # a finished resumable write: its journals go (the dataset's own last)
            store.delete_prefix(prefix)
        return carry(store, result, _tokens)  # type: ignore[no-any-return]
    records = journal_end[0] if journal_end is not None else None
    intent = commit_intent([(path, old, new) for path, (old, new) in expected.items()], after=rest, records=records)
    mark_commit(store, *lease, intent)
    try:
        apply_intent(store, intent, lease=lease)
    except Exception as exc:  # the record stays in the lease: whoever takes it over completes the commit
        raise WriteConflictError(
            f"the append's data landed and its commit is recorded, but writing it failed ({type(exc).__name__}: "
            f"{exc}); readers still see the dataset as before. Do not run this append again: the next append to "
            "this group (which then refuses once, naming what landed) or zarr_dask.consolidate_metadata(url) "
            "completes it once its lease lapses (ZARR_DASK_APPEND_LEASE_TTL)",
            store=store.url,
            path=lease[0],
        ) from exc
    release_lease(store, *lease, committed=True)
    if journal_end is not None:  # committed: the receipts are no evidence any more ('complete' is)
        store.delete_prefix(journal_end[1].rstrip("/"))
    return carry(store, result, _tokens)  # type: ignore[no-any-return]


def execute(
    state: StoreState,
    plans: list[GroupPlan],
    *,
    consolidated: bool | None,
    compute: bool,
    lease: AppendLease | None = None,
    keep_store: bool = False,
    resume: bool | str = False,
    journal: DatasetJournal | None = None,
    appended: AppendRun | None = None,
    progress: bool = False,
) -> DatasetWriteResult | Delayed:
    """Carry out planned group writes (see the module docstring for the order); ``keep_store``: the result
    holds the (in-memory) store, for ``store=None``; ``resume``: journal the writes of dask variables (see
    :func:`zarr_dask.to_zarr`); ``journal``: a resumable whole-dataset write's (resumed: its hierarchy is kept
    as its first run prepared it; see :mod:`~zarr_dask.xarray_backend.dataset_journal`); ``appended``: a
    resumable dataset append's decision (its journal written here, before any data); ``progress``: a bar on
    stderr while the data is written (:mod:`zarr_dask.graph.progress`), after a line saying what is written."""
    from dask.delayed import delayed

    store = state.store
    upfront, deferred, expected = metadata_documents(state, plans, consolidated)
    if expected:  # an earlier append whose listing failed: refuse, so that a re-run never stores rows twice
        check_no_incomplete_appends(store, {path: old for path, (old, _) in expected.items()})
    warn_if_unordered(store, [w for p in plans for w in p.writes])
    resumed = journal is not None and journal.resumed  # its first run prepared the hierarchy: kept as it is
    for plan in plans:
        if plan.replace and not resumed:
            store.delete_prefix(key_prefix(plan.path))
    if upfront and not resumed:
        _write_upfront(store, plans, upfront)
    if journal is not None:
        dataset_journal.start(store, journal, plans)
    result = DatasetWriteResult(
        store=store.url,
        groups=tuple(p.path for p in plans),
        variables={w.path: w.action for p in plans for w in p.writes},
        metadata_keys=tuple([*upfront, *deferred]) if not resumed else tuple(deferred),
        memory_store=store if keep_store and isinstance(store, MemoryStore) else None,
    )
    finished = dataset_journal.finished_variables(store, journal, plans) if journal is not None else set()
    members: dict[str, Journal] = {}
    journal_end = None
    if appended is not None:  # receipts per variable in the group's journal; a finished variable is not written
        members, done = _append_members(store, appended, plans)
        finished |= done
    todo = [w for p in plans for w in p.writes if np.prod(w.metadata.shape) > 0 and w.path not in finished]
    if appended is not None:
        _begin_append(store, appended, [w for w in todo if w.path in members], members, lease)
        assert appended.decision.journal is not None
        journal_end = resume_append.end_records(appended.decision.journal.prefix, (appended.end,))
    if not compute:  # as xarray: data in memory (index coordinates...) is written now, dask data when asked
        from dask.base import compute as dask_compute

        in_memory = [_data_write(w, store, lease) for w in todo if not _is_dask(w.data)]
        dask_compute(*in_memory, **compute_options())  # type: ignore[no-untyped-call]
        todo = [w for w in todo if _is_dask(w.data)]
    writes = [_data_write(w, store, lease, resume, members.get(w.path)) for w in todo]
    cleanup = dataset_journal.cleanup_prefixes(journal, plans) if journal is not None else ()
    final = delayed(_commit, pure=False)(
        writes, store, deferred, expected, result, lease and (lease.path, lease.token), cleanup, journal_end
    )
    if not compute:
        if lease is not None:
            lease.release_with(final)
        return final  # type: ignore[no-any-return]
    note = _progress_note(store, plans, todo, finished, appended) if progress else None
    try:
        out: DatasetWriteResult = run_with_progress(final, progress=progress, note=note, **compute_options())
    except BaseException:
        settle_failed(writes)  # the uploads its variables queued land before the error is raised
        raise
    return out


def _progress_note(
    store: Store, plans: list[GroupPlan], todo: list[VarWrite], finished: set[str], appended: AppendRun | None
) -> str:
    """The line above a dataset write's progress bar: what it writes, and what an earlier run finished."""
    actions: dict[str, int] = {}
    for w in todo:
        actions[w.action] = actions.get(w.action, 0) + 1
    words = {"create": "created", "overwrite": "overwritten", "append": "appended", "region": "written in place"}
    what = ", ".join(f"{n} {words.get(a, a)}" for a, n in actions.items())
    groups = ", ".join(f"/{p.path}" for p in plans)
    line = f"{store.url} {groups}: writing {len(todo)} variable(s) ({what or 'nothing'})"
    if appended is not None:
        line += f" along {appended.append_dim!r}, rows {appended.start} to {appended.end}"
    if finished:
        line += f"; {len(finished)} variable(s) finished by an earlier run, skipped"
    return line


def _as_dataset(obj: Any) -> Any:
    """A DataArray as ``DataArray.to_zarr`` writes it (so ``xr.open_dataarray`` reads it back, name included)."""
    import xarray as xr

    if not isinstance(obj, xr.DataArray):
        return obj
    from xarray.backends.api import DATAARRAY_NAME, DATAARRAY_VARIABLE

    if obj.name is None:
        return obj.to_dataset(name=DATAARRAY_VARIABLE)
    if obj.name in obj.coords or obj.name in obj.dims:  # a name the data model cannot hold: kept in an attribute
        ds = obj.to_dataset(name=DATAARRAY_VARIABLE)
        ds.attrs[DATAARRAY_NAME] = obj.name
        return ds
    return obj.to_dataset()


def to_zarr_dataset(
    ds: Any,
    store: Any = None,
    *,
    mode: Literal["w", "w-", "a", "a-", "r+"] | None = None,
    group: str | None = None,
    append_dim: Hashable | None = None,
    region: Mapping[str, slice | Literal["auto"]] | Literal["auto"] | None = None,
    encoding: Mapping[str, Mapping[str, Any]] | None = None,
    consolidated: bool | None = None,
    zarr_format: ZarrFormat | None = None,
    compute: bool = True,
    storage_options: Mapping[str, Any] | None = None,
    write_empty_chunks: bool | None = None,
    safe_chunks: bool = True,
    align_chunks: bool = False,
    resume: bool | str = False,
    progress: bool = False,
    fill_missing: bool = False,
) -> DatasetWriteResult | Delayed:
    """Write a Dataset to a Zarr group: the semantics of ``Dataset.to_zarr``, without its chunk-alignment
    rules.

    Parameters
    ----------
    ds
        The dataset (dask-backed or in memory); a DataArray is written as ``DataArray.to_zarr`` writes it.
    store
        A path, a URL (``"s3://bucket/data.zarr"``), a zarr_dask Store, an fsspec mapper, a ``MutableMapping``
        (``{}``), a zarr-python store (``LocalStore``, ``MemoryStore``, ``FsspecStore``, ``ZipStore``,
        ``ObjectStore``), or None: a new in-memory store, as xarray's ``to_zarr()`` makes, returned as the
        result's ``memory_store`` (with ``compute=False``, the Delayed's result's).
    mode
        ``"w"`` replace, ``"w-"`` create (fail if anything exists), ``"a"`` add / overwrite variables (or append
        with ``append_dim``), ``"a-"`` append only the variables holding ``append_dim``, ``"r+"`` write into
        existing variables only. Default as xarray: ``"a"`` with ``append_dim``, ``"r+"`` with ``region``,
        else ``"w-"``.
    group
        The group to write (default: the root).
    append_dim
        Grow the stored variables along this dimension. A partial last chunk is completed by exactly one
        task; the new shape is recorded only after all data has landed. The dataset must hold every stored
        variable along ``append_dim`` (else :class:`~zarr_dask.errors.WritePlanError` before anything is
        written; see ``fill_missing``) and no new one along it (create it first over the stored length with
        ``mode="a"``); new variables without ``append_dim`` are added, as xarray adds them.
    region
        ``{dim: slice}`` (step 1), ``{dim: "auto"}`` or ``"auto"`` (located from the stored coordinates):
        write into that part of existing variables. Any dask chunking is fine: chunks cut by the region's
        edges are read, merged and rewritten once.
    encoding
        Per variable: ``chunks``, ``shards``, ``compressors``, ``filters``, ``serializer``, ``fill_value`` (v3),
        ``write_empty_chunks``, ``chunk_key_encoding`` and the CF keys (``dtype``, ``scale_factor``,
        ``add_offset``, ``_FillValue``, ``units``, ``calendar``). Codecs may be numcodecs objects, v3 codec dicts
        or objects with a zarr-python style ``to_dict()``. Unknown keys raise xarray's error.
    consolidated
        Write consolidated metadata at the store root (None/True, the default); False skips it, but refreshes
        consolidated metadata that already exists so it never goes stale.
    zarr_format
        2 or 3 for new data (None: 3, or the existing group's format).
    compute
        Write the data now, or (False) return a dask ``Delayed`` that writes the dask-backed data. As with
        xarray, metadata of new arrays and groups and the variables held in memory (index coordinates...) are
        written at once either way; grown shapes and consolidated metadata when the Delayed runs.
    storage_options
        fsspec options for URLs.
    write_empty_chunks
        Store chunks that are all fill value (default: no, as zarr-python).
    resume
        ``True`` (or a run name, for graphs with random dask names): make the write resumable and, run again
        with the same arguments after a failure, resume it. A whole-dataset write (``mode="w"``, ``"w-"``,
        ``"a"``, ``"r+"``) keeps the hierarchy its first run prepared (``mode="w"`` does not delete it again)
        and skips each dask variable's finished writer tasks (neither recomputed nor rewritten); variables in
        memory are written again; if the group changed meanwhile it starts over. With ``region=``: each dask
        variable's region write is journaled (fan-out jobs: :func:`~zarr_dask.write_ledger`). With
        ``append_dim``: the append is resumed as :func:`~zarr_dask.append`'s is, for the whole group under its
        append lease: finished writer tasks are skipped (a variable whose write finished is not written at
        all); if it landed already (even long ago: a job run again), nothing is appended and the result names
        no variable; if other appends landed meanwhile, every row is appended at the new end. Its journal
        keeps two small records under the group until :func:`~zarr_dask.publish_ledger`; it needs a store
        with conditional writes (else :class:`~zarr_dask.errors.UnsupportedFeatureError`). See
        docs/safe-writes.md, "When a write dies".
    progress
        Show a progress bar on stderr while the data is written (``compute=True``; dask's bar, or distributed's
        on a cluster), after a line saying what is written: how many variables are created, overwritten,
        appended or written into a region, and for a resumed write how many an earlier run finished (as
        :func:`~zarr_dask.to_zarr`'s ``progress``).
    fill_missing
        With ``append_dim``: append missing values (NaN, NaT; their chunks are not stored) to the stored
        variables along ``append_dim`` that the dataset lacks, instead of refusing. Variables of a type
        without a missing value (integers without ``_FillValue``, booleans, text) are still refused.
    safe_chunks, align_chunks
        Accepted for compatibility. Writes are always safe here: every storage key has exactly one writer, so
        dask chunks never need to match Zarr chunks and no rechunk is needed.

    Returns
    -------
    DatasetWriteResult or dask.delayed.Delayed

    Examples
    --------
    >>> import dask.array as da, numpy as np, xarray as xr, zarr_dask
    >>> ds = xr.Dataset({"v": ("t", da.arange(10.0, chunks=3))}, coords={"t": np.arange(10)})
    >>> ds.v.encoding["chunks"] = (4,)  # dask blocks of 3 over chunks of 4: xarray refuses, this is safe
    >>> _ = zarr_dask.to_zarr_dataset(ds, "memory://to-zarr-dataset-doc")
    >>> more = xr.Dataset({"v": ("t", da.arange(10.0, 15.0, chunks=2))}, coords={"t": np.arange(10, 15)})
    >>> _ = zarr_dask.to_zarr_dataset(more, "memory://to-zarr-dataset-doc", append_dim="t")
    >>> xr.open_dataset("memory://to-zarr-dataset-doc", engine="zarr_dask").v.values.tolist()
    [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0]
    """
    del safe_chunks, align_chunks
    check_resume(resume, append_dim)
    check_progress(progress, compute)
    ds = _as_dataset(ds)
    opts = WriteOptions(
        mode=validation.choose_mode(mode, append_dim, region),
        append_dim=append_dim,
        region=region,
        encoding=dict(encoding or {}),
        zarr_format=zarr_format,
        write_empty_chunks=write_empty_chunks,
        fill_missing=fill_missing,
    )
    s = new_memory_store(storage_options) if store is None else as_store(store, storage_options)
    path = normalize_path(group or "")

    def plan(adjust: Callable[[StoreState], StoreState] = _same) -> tuple[StoreState, list[GroupPlan]]:
        state = adjust(StoreState.load(s, empty=opts.mode == "w" and not path))
        return state, [plan_group(state, path, ds, opts)]

    identity = (ds, opts.mode, zarr_format, write_empty_chunks, consolidated) if region is None else None
    if resume and opts.append_dim is not None:
        return _append_resumable(
            s, path, plan, consolidated=consolidated, compute=compute, resume=resume, identity=identity,
            append_dim=opts.append_dim, encoding=opts.encoding, progress=progress,
        )  # fmt: skip
    return execute_in_turn(
        s, path, opts.append_dim is not None, plan, consolidated=consolidated, compute=compute, keep_store=store is None,
        resume=resume, identity=identity, progress=progress,
    )  # fmt: skip


def _same(state: StoreState) -> StoreState:
    return state


def check_resume(resume: bool | str, append_dim: Hashable | None, tree: bool = False) -> None:
    """Refuse what ``resume=`` cannot resume (before anything is written): a datatree append (``tree``; a
    dataset append is resumable: :func:`_append_resumable`)."""
    if not isinstance(resume, bool | str):
        raise TypeError(f"resume must be True, False or a run name (str), got {resume!r}")
    if resume and append_dim is not None and tree:
        raise UnsupportedFeatureError(
            "resume= cannot resume an append_dim= write of a datatree: run it again without resume= (an append "
            "that died before its commit is refused or completed, never stored twice), append each node's "
            "dataset with to_zarr_dataset(..., append_dim=..., resume=True), or write the new rows into a grown "
            "template with region=..., resume=True"
        )


def new_memory_store(storage_options: Mapping[str, Any] | None) -> MemoryStore:
    """The store of ``store=None``: a new, empty in-memory store of this process (xarray has zarr-python make
    one). Refuses to pickle, so a cluster's writes can never silently go to a copy."""
    from zarr_dask.store.mapping import MappingStore

    if storage_options:
        raise ValueError(f"store must be a string to use storage_options. Got {type(None)}")
    return MappingStore({})


def execute_in_turn(
    store: Store,
    path: str,
    appending: bool,
    plan: Callable[..., tuple[StoreState, list[GroupPlan]]],
    *,
    consolidated: bool | None,
    compute: bool,
    keep_store: bool = False,
    resume: bool | str = False,
    identity: Any = None,
    progress: bool = False,
) -> DatasetWriteResult | Delayed:
    """Plan (from the store's state) and :func:`execute`; an append first takes the group's append lease, so
    appends to one group take turns and each plans from the state the previous one committed (see
    :mod:`zarr_dask.core.lease`). The commit gives the lease back (a lazy write also when it is dropped).
    ``resume`` with ``identity`` (what the run id is a token of): a resumable whole-dataset write, planned
    by :func:`~zarr_dask.xarray_backend.dataset_journal.prepare`."""
    if compute:
        from zarr_dask.graph.write import check_in_process

        check_in_process(store)
    lease = AppendLease(store, path).acquire() if appending and conditional(store) is not None else None
    try:
        found = None
        if resume and identity is not None:
            run = dataset_journal.run_id(identity, store, path, resume)
            state, plans, found = dataset_journal.prepare(
                store, path, run, plan, lambda st, pl: metadata_documents(st, pl, consolidated)[0], resume, identity
            )
        else:
            state, plans = plan()
        return execute(state, plans, consolidated=consolidated, compute=compute, lease=lease, keep_store=keep_store,
                       resume=resume, journal=found, progress=progress)  # fmt: skip
    except BaseException:
        if lease is not None:
            lease.release()
        raise
    finally:
        if lease is not None and compute:
            lease.release()


# ---------------------------------------------------------------------------- resumable dataset appends
@dataclass(frozen=True, kw_only=True)
class AppendRun:
    """A resumable dataset append as decided under its group's lease (see :func:`_append_resumable`)."""

    group: str  #: the group appended to (its lease, its journal)
    append_dim: str
    start: int  #: the group's committed length along ``append_dim``
    end: int  #: its length once this append is committed
    decision: resume_append.Decision  #: what the journal says (trusted receipts, or a fresh start)
    inputs: Mapping[str, str] = field(default_factory=dict)  #: the witness of its sources (recorded in ``begin``)


def _append_resumable(
    store: Store,
    path: str,
    plan: Callable[..., tuple[StoreState, list[GroupPlan]]],
    *,
    consolidated: bool | None,
    compute: bool,
    resume: bool | str,
    identity: Any,
    append_dim: Hashable,
    encoding: Mapping[str, Any],
    progress: bool = False,
) -> DatasetWriteResult | Delayed:
    """``to_zarr_dataset(..., append_dim=..., resume=...)``: the array append's resume
    (:mod:`zarr_dask.graph.resume_append`) for a group. Under the group's append lease (a killed run's own
    lease is taken over, and its commit completed if it recorded one), plan at the committed length, decide from
    the group's journal (``<group>/.zd-resume/<run id>/``): landed (``complete`` found: nothing appended, a
    result naming no variable returned), resumed (the lease taken over is the one ``begin`` names and the
    length is its ``from``: each dask variable skips the writer tasks with a receipt, a variable whose write
    finished is not written at all), or started (over) at the committed end. A failure marks the lease lapsed
    at once (its re-run takes it over without waiting)."""
    if compute:
        from zarr_dask.graph.write import check_in_process

        check_in_process(store)
    resume_append.check_resumable(store, path, resume, "dataset append")
    lease = AppendLease(store, path, refuse_after_completing=False).acquire()
    try:
        state, plans = plan()
    except BaseException:  # refused before anything was written: a lease of our own goes (the store as it was)
        lease.abandon() if lease.previous else lease.release()
        raise
    try:
        start, end = dataset_journal.group_length(plans, append_dim)
        inputs = witness.of(*dataset_journal.dask_data(identity))  # an unnamed run's inputs name it
        keyed = identity if isinstance(resume, str) or not inputs.sources else (*identity, inputs.token())
        run = dataset_journal.append_run_id(keyed, store, path, resume, plans, append_dim, encoding)
        decision = resume_append.decide(store, path, run, lease.previous, (start,), 0, members=True)
        resume_append.check_inputs(store, path, decision, inputs, resume)
        resume_append.log_decision(store, path, decision, f"length along {append_dim!r}")
        if decision.landed is not None:
            if decision.void is not None:
                store.delete_prefix(decision.void.rstrip("/"))
            lease.release()
            landed = DatasetWriteResult(store=store.url, groups=tuple(p.path for p in plans))
            return landed if compute else _delayed_value(landed)
        appended = AppendRun(group=path, append_dim=str(append_dim), start=start, end=end, decision=decision,
                             inputs=inputs.record())  # fmt: skip
        out = execute(state, plans, consolidated=consolidated, compute=compute, lease=lease, resume=resume,
                      appended=appended, progress=progress)  # fmt: skip
    except BaseException:
        lease.abandon()  # lapsed at once, still naming this run: its re-run knows no other append came between
        raise
    if compute:
        lease.release()  # (its commit released it already: this stops the renewal)
    return out  # (lazy: execute tied the lease's renewal to the Delayed)


def _delayed_value(value: Any) -> Delayed:
    from dask.delayed import delayed

    return delayed(value, traverse=False)  # type: ignore[no-any-return]


def _member_name(group: str, path: str) -> str:
    """A variable's name in its group's append journal: its path below the group, one key segment.

    Examples
    --------
    >>> _member_name("g", "g/temp"), _member_name("", "a/b")
    ('temp', 'a%2Fb')
    """
    rel = path[len(key_prefix(group)) :] if group else path
    return quote(rel, safe="")


def _append_members(
    store: Store, appended: AppendRun, plans: list[GroupPlan]
) -> tuple[dict[str, Journal], set[str]]:
    """The journal of each dask variable of a resumable dataset append (receipts under its group's journal,
    per variable), and the variables a resumed run need not write (their write finished)."""
    parent = appended.decision.journal
    assert parent is not None
    members: dict[str, Journal] = {}
    finished: set[str] = set()
    for w in (w for p in plans for w in p.writes if _is_dask(w.data) and w.metadata.shape):
        member, done = resume_append.member(parent, _member_name(appended.group, w.path))
        members[w.path] = member
        if done:
            finished.add(w.path)
    if parent.resumed:
        skipped = sum(len(m.done) for m in members.values())
        _log.info(
            "%s /%s: resuming this dataset append (run %s): %d variable(s) finished, %d writer task(s) of the "
            "others finished already: not run again", store.url, appended.group, parent.run, len(finished), skipped,
        )  # fmt: skip
    return members, finished


def _begin_append(
    store: Store, appended: AppendRun, todo: list[VarWrite], members: Mapping[str, Journal], lease: AppendLease | None
) -> None:
    """Before any data: delete receipts that are no longer evidence and write the group journal's ``begin``
    (with this run's lease token; ``tasks`` and ``keys``: those of the dask variables still to write, for
    :func:`~zarr_dask.write_ledger`)."""
    from zarr_dask.graph.target import resolve_target
    from zarr_dask.graph.write import make_plan

    assert lease is not None
    tasks = keys = 0
    for w in todo:
        arr = _as_dask(w, store)
        plan = make_plan(arr, resolve_target(arr, Array(store, w.path, w.metadata), None, None, False, w.region, {}))
        tasks, keys = tasks + plan.tasks, keys + plan.keys
    resume_append.begin(
        store, appended.decision, (appended.start,), (appended.end,), 0, lease.token, tasks, keys,
        kind="dataset-append", append_dim=appended.append_dim, inputs=dict(appended.inputs),
        variables=sorted(_member_name(appended.group, p) for p in members),
    )  # fmt: skip
