"""How one write stores its keys: written plainly, merged by compare-and-swap, created only if absent, or
replaced under a fence -- the rules of ``docs/safe-writes.md`` applied key by key.

:meth:`~zarr_dask.core.chunk_io.ChunkIO.write_from` builds each key's new bytes; :func:`write_keys` decides how
each is stored (:func:`key_mode`) and stores them: plain keys in one batched call (or offered to the write's
:class:`~zarr_dask.store.uploads.WriteBehind`), the others as optimistic transactions
(:func:`~zarr_dask.store.versioned.transact`) where the store can make conditional writes, else read, merged and
written once with an :class:`~zarr_dask.errors.UnprotectedWriteWarning`.

Examples
--------
>>> import numpy as np, zarr_dask
>>> a = zarr_dask.create_array("memory://key-writes-doc", shape=(4,), dtype="i1", chunks=(2,), overwrite=True)
>>> key_mode(a._io, (0,), True, True), key_mode(a._io, (0,), False, True)
('plain', 'merge')
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias, cast

import numpy as np

from zarr_dask.codecs.base import BufferLike
from zarr_dask.errors import UnprotectedWriteWarning, WriteConflictError
from zarr_dask.store.base import Buffer, Parts, value_nbytes
from zarr_dask.store.uploads import WriteBehind
from zarr_dask.store.versioned import ConditionalStore, Versioned, conditional, transact

if TYPE_CHECKING:
    from zarr_dask.core.chunk_io import ChunkIO

__all__ = ["Build", "is_fill", "key_mode", "write_keys"]

#: Builds a storage key's new bytes from the write's data and the key's stored bytes (None: nothing to store).
#: ``build(key, unit, value, existing, parts)``: the new stored value of one key, or None (all fill: not stored);
#: ``parts``: may be a :class:`~zarr_dask.store.base.Parts` (a shard's index and inner chunks, unjoined) -- only
#: for a plain write to a store that takes them (:attr:`~zarr_dask.store.base.Store.takes_parts`).
Build: TypeAlias = "Callable[[str, Any, np.ndarray[Any, Any], BufferLike | None, bool], bytes | Parts | None]"
_WARNED: set[tuple[str, str]] = set()
_WARNED_LOCK = threading.Lock()


def _record(sizes: dict[str, int] | None, items: Mapping[str, Buffer | Parts | None]) -> None:
    """Note in ``sizes`` (when given) the stored size of keys covered whole (``-1``: absent, all fill): what a
    resumable write's receipt vouches for (:mod:`zarr_dask.graph.witness`)."""
    if sizes is not None:
        sizes.update((k, -1 if v is None else value_nbytes(v)) for k, v in items.items())


def is_fill(chunk: np.ndarray[Any, Any], fill: np.ndarray[Any, Any]) -> bool:
    """True when every element of ``chunk`` has the bits of the fill value (as the sharded path compares): -0.0
    is not a fill value of 0.0, nor a NaN of another payload one of NaN; strings and objects compare by value.

    Real data almost always differs at the first element, so that is checked before anything that would
    scan (or copy) the whole chunk.
    """
    if chunk.size == 0:
        return True
    if chunk.dtype.kind == "O":
        fv = fill[()]
        return all(x == fv for x in chunk.flat)
    if chunk.dtype.kind in "SU":
        return bool(chunk[(0,) * chunk.ndim] == fill[()]) and bool((chunk == fill).all())
    fill = np.asarray(fill, dtype=chunk.dtype).reshape(())
    size = chunk.dtype.itemsize
    if size in (1, 2, 4, 8):  # one unsigned integer per item: a view, whatever the strides
        words, word = chunk.view(f"u{size}"), fill.view(f"u{size}")[()]
        return bool(words[(0,) * chunk.ndim] == word) and bool((words == word).all())
    width = next(w for w in (8, 4, 2, 1) if size % w == 0)  # wider items (complex128, records): k words each
    flat = np.ascontiguousarray(chunk).reshape(-1).view(f"u{width}")
    fill_words = fill.reshape(1).view(f"u{width}")
    k = len(fill_words)
    if not bool((flat[:k] == fill_words).all()):
        return False
    if bool((fill_words == fill_words[0]).all()):  # e.g. zeros: one comparison of every word
        return bool((flat == fill_words[0]).all())
    return all(bool((flat[i::k] == fill_words[i]).all()) for i in range(k))  # a word at a time: no broadcasting


def _warn_unprotected(url: str, path: str, nkeys: int) -> None:
    """Once per array and process: this store merges partly covered keys without conditional writes."""
    with _WARNED_LOCK:
        if (url, path) in _WARNED:
            return
        _WARNED.add((url, path))
    warnings.warn(
        f"store {url!r}, node {'/' + path!r}: {nkeys} storage keys are only partly covered by this write and are "
        "read, merged and written back, but this store cannot make conditional writes, so another writer of the "
        "same keys at the same time (another process, job or machine) could lose data. Align concurrent writes "
        "with the chunks (or shards), or write from one to_zarr call; see docs/safe-writes.md",
        UnprotectedWriteWarning,
        stacklevel=4,
    )


def _beyond(io: ChunkIO, coords: tuple[int, ...]) -> bool:
    """True when the key holds elements at or beyond the fence's committed shape."""
    assert io.fence is not None
    return any(g.start(c) + g.size(c) > n for g, c, n in zip(io.grids, coords, io.fence.committed, strict=True))


def key_mode(io: ChunkIO, coords: tuple[int, ...], complete: bool, conditional_store: bool) -> str:
    """How a key is written: ``plain`` (no read, no condition), ``merge`` (read with its version, merge,
    write if unchanged), ``create`` (first created if absent; if it exists, merged as ``merge``) or
    ``replace`` (first created if absent; if it exists, replaced whole under the fence)."""
    past = io._data_shape(coords) != io.chunk_shape(coords)  # reaches past the shape this write planned
    if not conditional_store:
        return "plain" if complete else "merge"
    if io.fence is not None and _beyond(io, coords):
        wholly = any(g.start(c) >= n for g, c, n in zip(io.grids, coords, io.fence.committed, strict=True))
        if not complete or not wholly:
            return "merge"
        return "create" if past else "replace"
    if complete and not past:
        return "plain"
    if complete and io.fresh:
        return "create"
    return "merge"


def write_keys(
    io: ChunkIO, value: np.ndarray[Any, Any], items: Sequence[tuple[str, Any, bool, Any]], build: Build,
    behind: WriteBehind | None, sizes: dict[str, int] | None = None,
) -> None:  # fmt: skip
    """Write ``(key, coords, covered whole, what build needs)`` items (see :meth:`ChunkIO.write_from`); ``sizes``:
    where to note the stored size of each key covered whole (-1: absent; a resumable write's receipt). Keys
    written plainly are offered to ``behind`` (uploaded behind the calling dask task); the others never are. A
    key that reaches past the array's shape is merged even when covered whole, so rows another writer appended
    meanwhile survive a write planned on the shorter shape."""
    cas = conditional(io.store)
    pieces = io.store.takes_parts
    to_set: dict[str, bytes | Parts] = {}
    merged: dict[str, bytes | Parts] = {}
    to_delete: list[str] = []
    guarded: dict[str, tuple[Any, str]] = {}
    partial = 0
    for key, coords, complete, unit in items:
        mode = key_mode(io, coords, complete, cas is not None)
        if mode == "plain" and complete:
            data = build(key, unit, value, None, pieces)
            if data is None:
                to_delete.append(key)
            else:
                to_set[key] = data
        else:
            guarded[key] = (unit, mode)
            partial += not complete
    if guarded and cas is not None:
        whole = {key for key, _, complete, _ in items if complete} if sizes is not None else set()
        _write_conditionally(io, cas, build, value, guarded, whole, sizes)
    elif guarded:
        if partial and not getattr(io.store, "transactional", False):  # a transaction commits or conflicts
            _warn_unprotected(io.store.url, io.path, partial)
        existing = io.store.get_many(list(guarded))
        for key, (unit, _) in guarded.items():
            data = build(key, unit, value, existing.get(key), False)
            if data is not None:
                merged[key] = data
            elif key in existing:
                to_delete.append(key)
    if sizes is not None:
        whole = {key for key, _, complete, _ in items if complete}
        _record(sizes, {**to_set, **{k: v for k, v in merged.items() if k in whole}})
        _record(sizes, {k: None for k in to_delete if k in whole})
    if to_set and behind is not None and behind.offer(io.store, to_set, batched_io=io.store.batched_io):
        to_set = {}
    if to_set or merged:
        io.store.set_many(cast("dict[str, Buffer]", {**to_set, **merged}))  # Parts only where takes_parts
    if to_delete:
        io.store.delete_many(to_delete)


def _write_conditionally(
    io: ChunkIO, cas: ConditionalStore, build: Build, value: np.ndarray[Any, Any], items: dict[str, tuple[Any, str]],
    whole: frozenset[str] | set[str] = frozenset(), sizes: dict[str, int] | None = None,
) -> None:
    """Write the keys of ``items`` (``key: (unit, mode)``, see :func:`key_mode`) as optimistic transactions
    (:func:`~zarr_dask.store.versioned.transact`): one batched versioned read and one batched conditional
    write per round; the keys that lost go round again. A key that was absent and stays all fill needs no
    write (it reads as fill either way). Under a fence, a stored value is replaced only while the lease is
    still this writer's."""
    fence = io.fence

    def step(got: Mapping[str, Versioned]) -> dict[str, bytes | None]:
        writes: dict[str, bytes | None] = {}
        for key, current in got.items():
            unit, mode = items[key]
            data = build(key, unit, value, None if mode == "replace" else current.value, False)
            assert not isinstance(data, Parts)  # (asked for one buffer)
            if data is not None or current.value is not None:
                writes[key] = data
            if key in whole:
                _record(sizes, {key: data})
        return writes

    transact(
        cas, list(items), step, exhausted=lambda pending, attempts: _kept_changing(io, pending, attempts), independent=True,
        absent=[k for k, (_, mode) in items.items() if mode in ("create", "replace")],
        fence=None if fence is None else (lambda: fence.check(io.store)),
    )  # fmt: skip


def _kept_changing(io: ChunkIO, pending: Sequence[str], attempts: int) -> WriteConflictError:
    return WriteConflictError(
        f"key {pending[0]!r} (and {len(pending) - 1} more) kept changing under this write: {attempts} conditional "
        "attempts lost to other writers of the same chunk or shard. Nothing of this write is lost or torn in "
        "that key; retry the write, align the regions of concurrent writers with the storage keys, or raise "
        "ZARR_DASK_WRITE_ATTEMPTS",
        store=io.store.url,
        path=io.path,
    )
