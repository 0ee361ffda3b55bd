"""What a resumable write reads, and whether what its receipts name still stands (issue 37).

A run's journal (:mod:`zarr_dask.graph.journal`) says which writer tasks finished. That is evidence only for
*the same inputs* and only while the keys it names are still there; this module supplies both checks, each
for at most one listing per array:

* **The witness of the inputs.** :func:`~zarr_dask.from_zarr` registers each dask array it makes here
  (:func:`register`: its dask name to its :class:`~zarr_dask.graph.handle.ArrayHandle`); arrays wrapped by
  ``da.from_array`` (an opened :class:`~zarr_dask.Array`, the lazy arrays of ``engine="zarr_dask"``
  datasets) are found in the graph's ``original-*`` layers. :func:`of` collects the sources of a dask array's
  graph and witnesses each with **one listing** of its keys with sizes and versions (ETag, generation, local
  modification time and inode: :meth:`~zarr_dask.store.Store.list_prefix_versions`), metadata documents
  included: a digest that changes when any key of the source is written again. Hidden bookkeeping keys
  (``.zd-*``: journals, leases) are left out. Sources that cannot be witnessed (a lazily read foreign array
  whose dask name is its location: dask's own ``from_zarr``, ``from_array`` over an h5py dataset) are
  reported by :func:`warn_unwitnessed`, once, at WARNING.
* **Receipts that still stand.** A writer task's receipt carries the digest of the sizes its keys covered
  whole were stored with (``t/<task>-<digest>``: :func:`receipt_suffix`, noted by
  :meth:`~zarr_dask.graph.handle.ArrayHandle.write_box`'s ``sizes``); a resumed run lists the target array once and keeps only the
  receipts whose keys still have those sizes (:func:`standing`). A deleted or resized key makes its task run
  again.

The decision record: docs/design/resume.md, "What identifies a run".
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import logging
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from zarr_dask.core.array import Array
from zarr_dask.graph.handle import ArrayHandle
from zarr_dask.graph.journal import Journal
from zarr_dask.spec.paths import key_prefix
from zarr_dask.store import Store

__all__ = [
    "Witness",
    "changed",
    "digest_of_sizes",
    "of",
    "receipt_suffix",
    "register",
    "standing",
    "warn_unwitnessed",
]

_log = logging.getLogger("zarr_dask.graph")

#: dask name -> handle of the arrays :func:`~zarr_dask.from_zarr` made (bounded: oldest names dropped first)
_SOURCES: dict[str, ArrayHandle] = {}
_LIMIT = 4096
_LOCK = threading.Lock()


def register(name: str, handle: ArrayHandle) -> None:
    """Remember that the dask array named ``name`` reads the array of ``handle`` (called by ``from_zarr``)."""
    with _LOCK:
        _SOURCES.pop(name, None)
        _SOURCES[name] = handle
        while len(_SOURCES) > _LIMIT:
            del _SOURCES[next(iter(_SOURCES))]


@dataclass(frozen=True, kw_only=True)
class Witness:
    """What a write reads: a digest per witnessed source (``"<store url> /<path>"``), and the sources that
    cannot be witnessed (described for a log line)."""

    sources: Mapping[str, str] = dataclasses.field(default_factory=dict)
    unwitnessed: tuple[str, ...] = ()

    def record(self) -> dict[str, str]:
        """The JSON form kept in a journal's ``begin`` record."""
        return dict(sorted(self.sources.items()))

    def token(self) -> str:
        """One digest of every source (for run ids that include the inputs: appends)."""
        return _digest(f"{k}={v}" for k, v in sorted(self.sources.items()))


def of(*arrays: Any, target: Any = None) -> Witness:
    """The witness of what the dask arrays read: one listing per source array; ``target``: the handle of the
    array written, left out (a write that reads what it writes -- an in-place update, an append of its own
    last rows -- changes it itself)."""
    handles: dict[str, ArrayHandle] = {}
    foreign: list[str] = []
    for arr in arrays:
        found, more = _sources(arr)
        handles.update((f"{h.store.url} /{h.path}", h) for h in found)
        foreign.extend(more)
    if target is not None:
        handles.pop(f"{target.store.url} /{target.path}", None)
    sources = {label: listing_digest(h.store, h.path) for label, h in handles.items()}
    return Witness(sources=sources, unwitnessed=tuple(sorted(set(foreign))))


def listing_digest(store: Store, path: str) -> str:
    """A digest of the keys of the array at ``path`` with their sizes and versions (one listing)."""
    top = key_prefix(path)
    listed = store.list_prefix_versions(path)
    keys = (
        f"{k[len(top):]}:{size}:{version}"
        for k, (size, version) in listed.items()
        if k.startswith(top) and not any(part.startswith(".zd") for part in k[len(top) :].split("/"))
    )
    return _digest(keys)


def changed(recorded: Any, witness: Witness) -> list[str]:
    """The sources whose witness differs from the one ``recorded`` in a journal (a missing or unreadable
    record: every source, or ``["the journal's record of its inputs"]`` when none is witnessed now)."""
    if not isinstance(recorded, Mapping):
        return list(witness.sources) or (["the journal's record of its inputs"] if recorded is not None else [])
    now = witness.record()
    return sorted(k for k in set(now) | set(recorded) if now.get(k) != recorded.get(k))


def warn_unwitnessed(witness: Witness, store: Store, path: str, run: str) -> None:
    """Say, once, at WARNING, that a resumed run trusts sources it cannot witness."""
    if not witness.unwitnessed:
        return
    names = ", ".join(witness.unwitnessed[:3]) + (", ..." if len(witness.unwitnessed) > 3 else "")
    _log.warning(
        "%s /%s: resuming run %s over inputs zarr_dask cannot witness (%s: a lazily read array whose dask name is "
        "its location, so a change of its data is not seen); if they may have changed since the run died, give "
        "each version of the inputs its own run name (resume='<job>-<version>') or start over (overwrite=True)",
        store.url, path, run, names,
    )  # fmt: skip


def _digest(parts: Iterable[str]) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode())
        h.update(b"\n")
    return h.hexdigest()[:32]


def _sources(arr: Any) -> tuple[list[ArrayHandle], list[str]]:
    """The handles of the arrays ``arr``'s graph reads (registered names; ``original-*`` layers holding ours)
    and descriptions of the lazily read foreign arrays in it."""
    graph = arr.__dask_graph__()
    layers = getattr(graph, "layers", None)
    names = set(layers) if layers is not None else {k[0] if isinstance(k, tuple) else k for k in graph}
    found: dict[tuple[Any, str], ArrayHandle] = {}
    foreign: list[str] = []
    with _LOCK:
        names_read = {n for n in names if n in _SOURCES}
        registered = [_SOURCES[n] for n in names_read]
    for h in registered:
        found.setdefault((h.store.__dask_tokenize__(), h.path), h)
    for name in names:
        if not (isinstance(name, str) and name.startswith("original-")) or name[len("original-") :] in names_read:
            continue
        holder = layers[name] if layers is not None else graph
        try:
            obj = holder[name]
        except (KeyError, TypeError):
            continue
        held, described = _original(obj)
        if held is not None:
            found.setdefault((held.store.__dask_tokenize__(), held.path), held)
        elif described:
            foreign.append(described)
    return list(found.values()), foreign


def _original(obj: Any) -> tuple[ArrayHandle | None, str]:
    """The handle an ``original-*`` layer's object reads (unwrapping xarray's adapters), or a description of
    a foreign lazy array (``""`` for data held in memory: its dask name is a token of its content)."""
    inner = getattr(obj, "value", obj) if type(obj).__name__ == "DataNode" else obj  # (dask's task spec)
    for _ in range(8):
        if isinstance(inner, np.ndarray | ArrayHandle | Array):
            break
        handle = getattr(type(inner), "handle", None)
        if isinstance(handle, property):
            inner = inner.handle
            break
        nxt = getattr(inner, "array", None)
        if nxt is None or nxt is inner:
            break
        inner = nxt
    if isinstance(inner, np.ndarray):
        return None, ""
    if isinstance(inner, ArrayHandle):
        return inner, ""
    if isinstance(inner, Array):
        return ArrayHandle(inner.store, inner.path, inner.metadata), ""
    where = next(
        (str(v) for v in (getattr(getattr(inner, "file", None), "filename", None), getattr(inner, "filename", None),
                          getattr(inner, "store", None)) if v),
        "",
    )  # fmt: skip
    node = getattr(inner, "name", None) or getattr(inner, "path", None)
    kind = f"{type(inner).__module__.split('.')[0]}.{type(inner).__name__}"
    return None, " ".join(x for x in (kind, where, str(node) if node else "") if x)


# ------------------------------------------------------------------------------------------------- receipts
def digest_of_sizes(sizes: Mapping[str, int]) -> str:
    """The digest a receipt carries: the keys a task covered whole, each with its stored size (-1: absent).

    Examples
    --------
    >>> digest_of_sizes({"c/0": 12, "c/1": -1}) == digest_of_sizes({"c/1": -1, "c/0": 12})
    True
    >>> len(digest_of_sizes({}))
    12
    """
    return _digest(f"{k}:{int(v)}" for k, v in sorted(sizes.items()))[:12]


def receipt_suffix(sizes: Mapping[str, int]) -> str:
    """What a receipt's name ends with (after its task name): ``-<digest>``."""
    return "-" + digest_of_sizes(sizes)


def standing(store: Store, path: str, plan: Any, found: Journal, key_name: Any) -> tuple[Journal, int]:
    """The journal ``found`` keeping only the receipts whose keys still stand: every key its task covered
    whole is stored with the size recorded (one listing of the array's keys with sizes). Returns the journal
    and the number of receipts dropped (their tasks run again)."""
    if not found.done:
        return found, 0
    listed = store.list_prefix_sizes(path)
    partial = set(plan.partial_key_coords())
    index = itertools.product(*(range(len(d.segments)) for d in plan.dims))
    keep: set[str] = set()
    for gidx, segs in zip(index, plan.groups(), strict=True):
        task = ".".join(map(str, gidx)) or "0"
        if task not in found.done:
            continue
        coords = (c for c in itertools.product(*(s.keys for s in segs)) if c not in partial)
        sizes = {k: listed.get(k, -1) for k in (key_name(c) for c in coords)}
        if found.digests.get(task) == digest_of_sizes(sizes):
            keep.add(task)
    dropped = len(found.done) - len(keep)
    if dropped:
        _log.info(
            "%s /%s: %d receipt(s) of run %s name keys that were deleted or replaced since: their tasks run again",
            store.url, path, dropped, found.run,
        )  # fmt: skip
    return dataclasses.replace(found, done=frozenset(keep)), dropped
