"""The ledger of a fan-out write: which regions of a target independent jobs finished, and its publication.

Fan-out writes: a template is written once (``compute=False``: metadata, no data), then independent jobs (a
Slurm array, serverless functions) each write their regions with ``to_zarr(..., region=..., resume=True)``
(or ``to_zarr_dataset``: one journal per dask variable). Each such region write keeps a journal
(:mod:`zarr_dask.graph.journal`): ``begin`` when it starts, a receipt per finished writer task, and once the
write finished, a ``complete`` record. :func:`write_ledger` reads them: writes ``done``, ``partial``
(started, not finished: run the same job again with ``resume=True``; it skips what its journal shows
finished) and ``superseded`` (partial, but a later run finished its region: a job killed and submitted
again with a changed computation), and, given the regions the jobs were assigned, those ``missing``: a
region is done only when every journaled array it applies to finished it and no unfinished write
overlaps it. :func:`publish_ledger` finishes the whole write once: consolidated metadata, then the journals
are deleted. The design: docs/design/resume.md ("The fan-out ledger").
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from zarr_dask.core import nodes
from zarr_dask.errors import GroupNotFoundError, IndexingError, MetadataError, WritePlanError, ZarrDaskError
from zarr_dask.graph.inputs import locate
from zarr_dask.graph.journal import BEGIN, COMPLETE, JOURNAL_DIR, RECEIPTS
from zarr_dask.graph.target import region_bounds
from zarr_dask.spec.paths import key_prefix
from zarr_dask.store import Store

__all__ = ["LedgerEntry", "WriteLedger", "publish_ledger", "write_ledger"]

Region = tuple[tuple[int, int], ...]
#: what :meth:`WriteLedger.missing` returns per region: ``((start, stop), ...)`` for the axes given, or, for a
#: region given by dimension names, ``{dim: (start, stop)}``
Bounds = tuple[tuple[int, int | None], ...] | dict[str, tuple[int, int | None]]

STATUSES = ("done", "partial", "superseded", "damaged")


@dataclass(frozen=True, kw_only=True)
class LedgerEntry:
    """One journaled write of one array (or, at a group, of a dataset)."""

    path: str  #: the array
    run: str  #: the write's run id
    region: Region  #: ``((start, stop), ...)`` per dimension
    #: ``"done"``; ``"partial"`` (started; some tasks may have finished: ``tasks_done``); ``"superseded"``
    #: (partial, and a later run finished its region: ``superseded_by``); ``"damaged"`` (its ``begin`` record is
    #: unreadable: only with ``write_ledger(..., strict=False)``)
    status: str
    tasks: int  #: writer tasks of the write
    tasks_done: int  #: of those, finished (receipts; all of them once done)
    started: float | None = None  #: when it began (the writing client's clock), from its ``begin`` record
    superseded_by: str | None = None  #: the run that finished its region later (status ``"superseded"``)

    @property
    def key(self) -> str:
        """The key prefix of its journal."""
        return f"{key_prefix(self.path)}{JOURNAL_DIR}/{self.run}/"

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (``zarr-dask ledger --json``)."""
        return {
            "path": self.path, "run": self.run, "region": [list(r) for r in self.region], "status": self.status,
            "tasks": self.tasks, "tasks_done": self.tasks_done, "started": self.started,
            "superseded_by": self.superseded_by,
        }  # fmt: skip


@dataclass(frozen=True)
class _ArrayInfo:
    shape: tuple[int, ...]
    dims: tuple[str | None, ...] | None


@dataclass(frozen=True, kw_only=True)
class WriteLedger:
    """What :func:`write_ledger` found; ``repr`` is a table."""

    store: str
    path: str
    entries: tuple[LedgerEntry, ...]
    #: the shape and dimension names of each journaled array (to read regions as ``region=`` does)
    arrays: Mapping[str, _ArrayInfo] = field(default_factory=dict, compare=False, repr=False)

    def regions(self, status: str, path: str | None = None) -> list[Region]:
        """The regions with ``status`` (``"done"`` / ``"partial"`` / ``"superseded"``), of the array ``path`` if
        given."""
        return sorted({e.region for e in self.entries if e.status == status and (path is None or e.path == path)})

    def missing(self, regions: Iterable[Any], path: str | None = None) -> list[Bounds]:
        """Of ``regions``, those not done: never started, or partly written, to be submitted again (with
        ``resume=True``).

        Each region is given as ``region=`` takes it: for :func:`~zarr_dask.to_zarr` a slice or a tuple of
        slices for the leading dimensions (open-ended and negative bounds as in NumPy), also as ``[start,
        stop]`` pairs (``None``/``null`` for open ends; JSON); for :func:`~zarr_dask.to_zarr_dataset` a dict
        ``{dimension: slice or [start, stop]}``. ``"auto"`` is refused: it is resolved from the coordinates
        of the dataset a job writes, which the ledger does not hold.

        A region is done when, for every journaled array it applies to (only ``path`` if given; else every
        array with a journaled write at or below the node that has the region's dimensions), a finished
        write covers it and no unfinished one (partial, not superseded) overlaps it. A dataset job killed
        after one variable finished and before another did is therefore missing. Returned as
        ``((start, stop), ...)`` for the axes given (a dict region: ``{dimension: (start, stop)}``).
        """
        arrays = {e.path for e in self.entries if e.path in self.arrays and (path is None or e.path == path)}
        if path is not None and path not in self.arrays:
            arrays = set()
        by_path = _by_path(self.entries)
        out: list[Bounds] = []
        for given in regions:
            per_array, shown = self._resolve(given, arrays)
            if not per_array or not all(_done(by_path[p], r) for p, r in per_array.items()):
                out.append(shown)
        return out

    def _resolve(self, given: Any, arrays: set[str]) -> tuple[dict[str, Region], Bounds]:
        """``given`` read for each array it applies to (as ``region=`` reads it), and as :meth:`missing`
        returns it."""
        if isinstance(given, str) and given == "auto":
            raise _auto(given)
        per_array: dict[str, Region] = {}
        if isinstance(given, Mapping):
            wanted = {str(k): _slice(v, given) for k, v in given.items()}
            shown: dict[str, tuple[int, int | None]] = {}
            for p in sorted(arrays):
                dims = tuple(d or "" for d in self.arrays[p].dims or ())
                if set(wanted) & set(dims):
                    per_array[p] = region_bounds(tuple(wanted.get(d, slice(None)) for d in dims), self.arrays[p].shape)
                    shown.update({d: b for d, b in zip(dims, per_array[p], strict=True) if d in wanted and d not in shown})
            unknown = sorted(set(wanted) - set(shown))
            if arrays and unknown:
                have = {p: list(self.arrays[p].dims or ()) for p in sorted(arrays)}
                raise IndexingError(
                    f"the region {given!r} names dimension(s) {unknown} that no journaled array has (their dimensions: "
                    f"{have}); name the dimensions of the region= the jobs were given",
                    store=self.store, path=self.path,
                )  # fmt: skip
            _check_not_empty(given, per_array, self)
            return per_array, shown if per_array else {d: _open_bounds(s) for d, s in wanted.items()}
        items = _slices(given)
        for p in sorted(arrays):
            if len(self.arrays[p].shape) >= len(items):
                per_array[p] = region_bounds(items, self.arrays[p].shape)
        if arrays and not per_array:
            ndims = {p: len(self.arrays[p].shape) for p in sorted(arrays)}
            raise IndexingError(
                f"the region {given!r} has {len(items)} axes, more than any journaled array (their dimensions: "
                f"{ndims}); give one slice per leading axis, as in region=", store=self.store, path=self.path,
            )  # fmt: skip
        _check_not_empty(given, per_array, self)
        if per_array:
            return per_array, next(iter(per_array.values()))[: len(items)]
        return {}, tuple(_open_bounds(s) for s in items)

    @property
    def complete(self) -> bool:
        """True when every journaled write is done or superseded (what :func:`publish_ledger` needs)."""
        return all(e.status in ("done", "superseded") for e in self.entries)

    @property
    def unfinished(self) -> list[LedgerEntry]:
        """The writes that keep :func:`publish_ledger` from publishing: partial ones (not superseded), and
        damaged ones."""
        return [e for e in self.entries if e.status in ("partial", "damaged")]

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (``zarr-dask ledger --json``)."""
        return {"store": self.store, "path": self.path, "complete": self.complete,
                "entries": [e.to_json() for e in self.entries]}  # fmt: skip

    def _items(self) -> list[tuple[str, str, str, str, str]]:
        """(array, region, status, tasks, note) per journaled write, sorted."""
        out = []
        for e in sorted(self.entries, key=lambda e: (e.path, e.region, e.started or 0)):
            note = f"by run {e.superseded_by}" if e.superseded_by else ""
            if not note and e.status == "damaged":
                note = f"unreadable record {e.key}{BEGIN}"
            region = "[" + ", ".join(f"{a}:{b}" for a, b in e.region) + "]"
            out.append((f"/{e.path}", region, e.status, f"{e.tasks_done} of {e.tasks} tasks", note))
        return out

    def __repr__(self) -> str:
        rows = [f"WriteLedger {self.store} /{self.path}: {len(self.entries)} journaled write(s)"]
        for path, region, status, tasks, note in self._items():
            sep = ": " if note.startswith("unreadable") else " "
            rows.append(f"  {path} {region} {status} ({tasks})" + (sep + note if note else ""))
        return "\n".join(rows)

    def _repr_html_(self) -> str:
        """Notebook display: a summary and a table of the journaled writes, in the style of the array and
        group reprs."""
        from zarr_dask.core.html import record_html

        counts = {s: sum(e.status == s for e in self.entries) for s in ("done", "partial", "superseded", "damaged")}
        rows = [("journaled writes", ", ".join(f"{n} {s}" for s, n in counts.items() if n) or "none"),
                ("complete", "yes: ready to publish" if self.complete else
                 f"no: {len(self.unfinished)} unfinished (run them again with resume=True, or publish_ledger(..., force=True))")]  # fmt: skip
        return record_html("zarr_dask.WriteLedger", rows, name="/" + self.path, where=self.store,
                           columns=["array", "region", "status", "tasks", ""], items=self._items())  # fmt: skip


def _check_not_empty(given: Any, per_array: Mapping[str, Region], ledger: WriteLedger) -> None:
    """A region that selects nothing of an array is a mistake (never "done"): refused, naming the array."""
    for p, region in per_array.items():
        if any(a >= b for a, b in region):
            raise IndexingError(
                f"the region {given!r} selects no element of the journaled array /{p} (shape "
                f"{ledger.arrays[p].shape}: it reads as {[list(r) for r in region]}); check the regions against the "
                "template's shape",
                store=ledger.store, path=ledger.path,
            )  # fmt: skip


def _auto(given: Any) -> IndexingError:
    return IndexingError(
        f"region {given!r}: the ledger cannot resolve 'auto' (to_zarr_dataset resolves it from the coordinates of "
        "the dataset a job writes, and the ledger holds no dataset); pass the slices each job was given, e.g. "
        "{'time': slice(24, 48)} (or [[24, 48]] by axis)"
    )


def _slice(item: Any, given: Any) -> slice:
    """A slice of ``region=``, or a ``[start, stop]`` pair (JSON) as one."""
    if isinstance(item, slice):
        return item
    if isinstance(item, str) and item == "auto":
        raise _auto(given)
    if isinstance(item, list | tuple) and len(item) == 2 and all(v is None or isinstance(v, int) for v in item):
        return slice(item[0], item[1])
    raise IndexingError(
        f"region {given!r}: {item!r} is neither a slice nor a [start, stop] pair; give each region as region= "
        "takes it: (slice(0, 24),), [[0, 24]], [[72, null]] or {'time': slice(0, 24)}"
    )


def _slices(given: Any) -> tuple[slice, ...]:
    items = list(given) if isinstance(given, list | tuple) else [given]
    return tuple(_slice(s, given) for s in items)


def _open_bounds(s: slice) -> tuple[int, int | None]:
    """A region's bounds where no journaled array tells the shape (nothing journaled: reported as given)."""
    return (int(s.start or 0), None if s.stop is None else int(s.stop))


def _by_path(entries: Iterable[LedgerEntry]) -> dict[str, list[LedgerEntry]]:
    out: dict[str, list[LedgerEntry]] = {}
    for e in entries:
        out.setdefault(e.path, []).append(e)
    return out


def _done(entries: Sequence[LedgerEntry], region: Region) -> bool:
    """Whether ``region`` of an array is done, given the entries of its journaled writes: a finished write
    covers it and no unfinished one (partial, not superseded; damaged: region unknown) overlaps it."""
    covered = any(e.status == "done" and _contains(e.region, region) for e in entries)
    blocked = any((e.status == "partial" and _overlaps(e.region, region)) or e.status == "damaged" for e in entries)
    return covered and not blocked


def _contains(outer: Region, inner: Region) -> bool:
    return len(outer) >= len(inner) and all(a <= c and d <= b for (a, b), (c, d) in zip(outer, inner, strict=False))


def _overlaps(one: Region, other: Region) -> bool:
    return all(a < d and c < b for (a, b), (c, d) in zip(one, other, strict=False))


def _journals(keys: Sequence[str]) -> dict[tuple[str, str], list[str]]:
    """``(array path, run) -> names under that run's journal`` from a listing."""
    out: dict[tuple[str, str], list[str]] = {}
    marker = JOURNAL_DIR + "/"
    for key in keys:
        head, sep, tail = key.partition(marker)
        if not sep or (head and not head.endswith("/")) or "/" not in tail:
            continue
        run, name = tail.split("/", 1)
        out.setdefault((head.rstrip("/"), run), []).append(name)
    return out


def _begin(raw: bytes) -> tuple[Region, int, float | None] | None:
    """``(region, tasks, started)`` of a ``begin`` record, or None when it is not one."""
    try:
        record = json.loads(bytes(raw))
        region = tuple((int(a), int(b)) for a, b in record.get("region", ()))
        tasks = int(record.get("tasks", 0))
        started = record.get("started")
        return region, tasks, float(started) if isinstance(started, int | float) else None
    except (ValueError, TypeError, AttributeError):
        return None


def _damaged_error(store: Store, entries: Sequence[LedgerEntry], raw: Mapping[str, bytes]) -> MetadataError:
    e = entries[0]
    key = e.key + BEGIN
    more = f" (and {len(entries) - 1} more)" if len(entries) > 1 else ""
    return MetadataError(
        f"the journal record {key!r}{more} is not a begin record of a resumable write of this node (a JSON object "
        f"with a region of one [start, stop] pair per dimension and a number of tasks); found {bytes(raw.get(key, b''))[:60]!r}: it was damaged or "
        "written by something else, so the ledger cannot tell which region that write covers. Fix: run the job "
        "that wrote it again with resume=True (it treats the damaged record as absent and writes its region "
        f"again), or delete the journal {e.key!r}; publish_ledger(..., force=True) (zarr-dask ledger --publish "
        "--force) deletes it with the others",
        store=store.url,
        path=e.path,
    )


def _arrays(store: Store, docs: Mapping[str, bytes], paths: Iterable[str]) -> dict[str, _ArrayInfo]:
    out = {}
    for p in paths:
        try:
            node = nodes.parse_node(docs, p, store)
        except ZarrDaskError:  # not the ledger's business (zarr-dask validate reports it): not an array here
            continue
        if nodes.is_array(node):
            out[p] = _ArrayInfo(tuple(node.shape), node.dimension_names)
    return out


def _supersede(entries: list[LedgerEntry]) -> list[LedgerEntry]:
    """Mark partial writes whose region a later run of the same array finished as superseded."""
    by_path = _by_path(entries)
    out = []
    for e in entries:
        later = None
        if e.status == "partial" and e.region and e.started is not None:
            later = next((d for d in by_path[e.path] if d.status == "done" and d.started is not None
                          and d.started > e.started and _contains(d.region, e.region)), None)  # fmt: skip
        out.append(dataclasses.replace(e, status="superseded", superseded_by=later.run) if later else e)
    return out


def _read(store: Store, path: str) -> tuple[list[LedgerEntry], dict[str, _ArrayInfo], dict[str, bytes]]:
    keys = store.list_prefix(path)
    found = _journals(keys)
    documents = nodes.list_documents(keys)
    doc_keys = [k for p in {p for p, _ in found} for k in documents.get(p, [])]
    raw = store.get_many([f"{key_prefix(p)}{JOURNAL_DIR}/{run}/{BEGIN}" for p, run in found] + doc_keys)
    entries = []
    for (p, run), names in sorted(found.items()):
        begin_key = f"{key_prefix(p)}{JOURNAL_DIR}/{run}/{BEGIN}"
        if begin_key not in raw:
            continue  # a journal being deleted, or not ours
        record = _begin(raw[begin_key])
        if record is None:
            entries.append(LedgerEntry(path=p, run=run, region=(), status="damaged", tasks=0, tasks_done=0))
            continue
        region, tasks, started = record
        done = COMPLETE in names
        receipts = sum(1 for n in names if n.startswith(RECEIPTS + "/") or f"/{RECEIPTS}/" in n)  # (appends: from-<n>/t/)
        entries.append(LedgerEntry(
            path=p, run=run, region=region, status="done" if done else "partial",
            tasks=tasks, tasks_done=tasks if done else receipts, started=started,
        ))  # fmt: skip
    arrays = _arrays(store, raw, {p for p, _ in found})
    entries = [_fits(e, arrays) for e in entries]
    return _supersede(entries), arrays, raw


def _fits(e: LedgerEntry, arrays: Mapping[str, _ArrayInfo]) -> LedgerEntry:
    """``e``, or ``e`` damaged when its region cannot be one of its array's (a pair per dimension, start <= stop)."""
    info = arrays.get(e.path)
    if info is None or e.status == "damaged":
        return e
    if len(e.region) == len(info.shape) and all(0 <= a <= b for a, b in e.region):
        return e
    return dataclasses.replace(e, region=(), status="damaged", tasks=0, tasks_done=0)


def write_ledger(
    url: Any, component: str | None = None, storage_options: Mapping[str, Any] | None = None, *, strict: bool = True
) -> WriteLedger:
    """The journaled writes (``resume=True``) of every array at or below ``url`` / ``component``.

    A journal whose ``begin`` record is unreadable (damaged, or not written by zarr_dask) raises
    :class:`~zarr_dask.errors.MetadataError` naming its key and the fix; with ``strict=False`` it is listed
    as a ``"damaged"`` entry instead (a region of its array is then never done, and publishing needs
    ``force=True``).

    Cost: one listing of the node's keys (chunks included: one request per 1000 keys on object stores) and
    one batched read of the ``begin`` records and of the journaled arrays' metadata documents.

    Examples
    --------
    >>> import dask.array as da, zarr_dask
    >>> t = zarr_dask.to_zarr(da.zeros((8, 2), chunks=4), "memory://ledger-doc", compute=False)  # the template
    >>> zarr_dask.to_zarr(da.ones((4, 2), chunks=4), "memory://ledger-doc", region=(slice(0, 4),), resume=True)
    >>> ledger = zarr_dask.write_ledger("memory://ledger-doc")
    >>> ledger.regions("done"), ledger.missing([(slice(0, 4),), (slice(4, None),)])
    ([((0, 4), (0, 2))], [((4, 8),)])
    """
    store, path = locate(url, component, storage_options)
    entries, arrays, raw = _read(store, path)
    damaged = [e for e in entries if e.status == "damaged"]
    if damaged and strict:
        raise _damaged_error(store, damaged, raw)
    return WriteLedger(store=store.url, path=path, entries=tuple(entries), arrays=arrays)


def publish_ledger(
    url: Any, component: str | None = None, storage_options: Mapping[str, Any] | None = None, *, force: bool = False
) -> WriteLedger:
    """Finish a fan-out write once every job is done: consolidate the metadata of the group ``url`` /
    ``component`` (once), then delete the journals, superseded ones included (at an array: delete the
    journals its resumable appends keep). Refuses (:class:`~zarr_dask.errors.WritePlanError`) while a write is
    partial (and not superseded), or (:class:`~zarr_dask.errors.MetadataError`) while a journal record is
    damaged, unless ``force``. Returns the ledger as it was.

    Examples
    --------
    >>> import dask.array as da, zarr_dask
    >>> g = zarr_dask.create_group("memory://publish-doc")
    >>> t = zarr_dask.to_zarr(da.zeros((8, 2), chunks=4), g.store, component="v", compute=False)
    >>> for start in (0, 4):  # two independent jobs
    ...     zarr_dask.to_zarr(da.ones((4, 2), chunks=4), g.store, component="v", region=(slice(start, start + 4),),
    ...                       resume=True)
    >>> zarr_dask.publish_ledger("memory://publish-doc").complete
    True
    >>> zarr_dask.write_ledger("memory://publish-doc").entries
    ()
    """
    from zarr_dask.core.api import consolidate_metadata

    ledger = write_ledger(url, component, storage_options, strict=not force)
    store, path = locate(url, component, storage_options)
    partial = ledger.unfinished
    if partial and not force:
        e = partial[0]
        raise WritePlanError(
            f"{len(partial)} journaled write(s) are not finished (e.g. /{e.path} region {[list(r) for r in e.region]}, "
            f"{e.tasks_done} of {e.tasks} writer tasks, run {e.run}); run their jobs again with resume=True (they "
            "skip what they finished), or pass force=True (zarr-dask ledger --publish --force) to publish anyway "
            "(their journals are deleted; the regions they did not finish keep what was there)",
            store=store.url,
            path=path,
        )
    try:
        consolidate_metadata(store, path=path)
    except GroupNotFoundError:  # an array (its appends' journals): it holds no consolidated metadata of its own
        if not ledger.entries:
            raise
    for p, run in {(e.path, e.run) for e in ledger.entries}:
        store.delete_prefix(f"{key_prefix(p)}{JOURNAL_DIR}/{run}")
    return ledger
