"""The ledger of a fan-out write: which regions of a target independent jobs finished, and its publication.

Fan-out writes: a template is written once (``compute=False``: metadata, no data), then independent jobs (a
Slurm array, serverless functions) each write their regions with ``to_zarr(..., region=..., resume=True)``.
Each such region write keeps a journal (:mod:`zarr_dask.graph.journal`): ``begin`` when it starts, a receipt
per finished writer task, and once the write finished, a ``complete`` record. :func:`write_ledger` reads
them: regions ``done``, regions ``partial`` (started, not finished: run the same job again with
``resume=True``; it skips what its journal shows finished), and, given the regions the jobs were assigned,
those ``missing``. :func:`publish_ledger` finishes the whole write once: consolidated metadata, then the
journals are deleted.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from zarr_dask.errors import GroupNotFoundError, WritePlanError
from zarr_dask.graph.inputs import locate
from zarr_dask.graph.journal import BEGIN, COMPLETE, JOURNAL_DIR, RECEIPTS

__all__ = ["LedgerEntry", "WriteLedger", "publish_ledger", "write_ledger"]

Region = tuple[tuple[int, int], ...]


@dataclass(frozen=True, kw_only=True)
class LedgerEntry:
    """One journaled write of one array."""

    path: str  #: the array
    run: str  #: the write's run id
    region: Region  #: ``((start, stop), ...)`` per dimension
    status: str  #: ``"done"`` or ``"partial"`` (started; some tasks may have finished: ``tasks_done``)
    tasks: int  #: writer tasks of the write
    tasks_done: int  #: of those, finished (receipts; all of them once done)


@dataclass(frozen=True, kw_only=True)
class WriteLedger:
    """What :func:`write_ledger` found; ``repr`` is a table."""

    store: str
    path: str
    entries: tuple[LedgerEntry, ...]

    def regions(self, status: str, path: str | None = None) -> list[Region]:
        """The regions with ``status`` (``"done"`` / ``"partial"``), of the array ``path`` if given."""
        return sorted({e.region for e in self.entries if e.status == status and (path is None or e.path == path)})

    def missing(self, regions: Iterable[Any], path: str | None = None) -> list[Region]:
        """Of ``regions`` (tuples of slices, or of ``(start, stop)`` pairs, for the leading dimensions as in
        ``region=``), those not ``done``: never started or partly written, to be submitted again (with
        ``resume=True``)."""
        done = self.regions("done", path)
        wanted = [_region(x) for x in regions]
        return [r for r in wanted if not any(d[: len(r)] == r for d in done)]

    @property
    def complete(self) -> bool:
        """True when no journaled write is partial."""
        return all(e.status == "done" for e in self.entries)

    def __repr__(self) -> str:
        rows = [f"WriteLedger {self.store} /{self.path}: {len(self.entries)} journaled write(s)"]
        for e in sorted(self.entries, key=lambda e: (e.path, e.region)):
            region = ", ".join(f"{a}:{b}" for a, b in e.region)
            rows.append(f"  /{e.path} [{region}] {e.status} ({e.tasks_done} of {e.tasks} tasks)")
        return "\n".join(rows)


def _region(x: Any) -> Region:
    return tuple((int(s.start or 0), int(s.stop)) if isinstance(s, slice) else (int(s[0]), int(s[1])) for s in x)


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


def write_ledger(url: Any, component: str | None = None, storage_options: Mapping[str, Any] | None = None) -> WriteLedger:
    """The journaled writes (``resume=True``) of every array at or below ``url`` / ``component``.

    Cost: one listing of the node's keys (chunks included: one request per 1000 keys on object stores) and
    one batched read of the ``begin`` records.

    Examples
    --------
    >>> import dask.array as da, zarr_dask
    >>> t = zarr_dask.to_zarr(da.zeros((8, 2), chunks=4), "memory://ledger-doc", compute=False)  # the template
    >>> zarr_dask.to_zarr(da.ones((4, 2), chunks=4), "memory://ledger-doc", region=(slice(0, 4),), resume=True)
    >>> ledger = zarr_dask.write_ledger("memory://ledger-doc")
    >>> ledger.regions("done"), ledger.missing([(slice(0, 4),), (slice(4, 8),)])
    ([((0, 4), (0, 2))], [((4, 8),)])
    """
    store, path = locate(url, component, storage_options)
    found = _journals(store.list_prefix(path))
    begins = store.get_many([f"{p + '/' if p else ''}{JOURNAL_DIR}/{run}/{BEGIN}" for p, run in found])
    entries = []
    for (p, run), names in sorted(found.items()):
        raw = begins.get(f"{p + '/' if p else ''}{JOURNAL_DIR}/{run}/{BEGIN}")
        if raw is None:
            continue  # a journal being deleted, or not ours
        record = json.loads(bytes(raw))
        done = COMPLETE in names
        tasks = int(record.get("tasks", 0))
        receipts = sum(1 for n in names if n.startswith(RECEIPTS + "/") or f"/{RECEIPTS}/" in n)  # (appends: from-<n>/t/)
        entries.append(LedgerEntry(
            path=p, run=run, region=_region(record.get("region", ())), status="done" if done else "partial",
            tasks=tasks, tasks_done=tasks if done else receipts,
        ))  # fmt: skip
    return WriteLedger(store=store.url, path=path, entries=tuple(entries))


def publish_ledger(
    url: Any, component: str | None = None, storage_options: Mapping[str, Any] | None = None, *, force: bool = False
) -> WriteLedger:
    """Finish a fan-out write once every job is done: consolidate the metadata of the group ``url`` /
    ``component`` (once), then delete
    the journals (at an array: delete the journals its resumable appends keep). Refuses (:class:`~zarr_dask.errors.WritePlanError`) while a write is partial, unless
    ``force``. Returns the ledger as it was.

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

    ledger = write_ledger(url, component, storage_options)
    store, path = locate(url, component, storage_options)
    partial = [e for e in ledger.entries if e.status != "done"]
    if partial and not force:
        raise WritePlanError(
            f"{len(partial)} journaled write(s) are not finished (e.g. /{partial[0].path} region "
            f"{list(partial[0].region)}); run them again with resume=True, or pass force=True to publish anyway",
            store=store.url,
            path=path,
        )
    try:
        consolidate_metadata(store, path=path)
    except GroupNotFoundError:  # an array (its appends' journals): it holds no consolidated metadata of its own
        if not ledger.entries:
            raise
    for p, run in {(e.path, e.run) for e in ledger.entries}:
        store.delete_prefix(f"{p + '/' if p else ''}{JOURNAL_DIR}/{run}")
    return ledger
