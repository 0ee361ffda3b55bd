"""Committing a node's new metadata by compare-and-swap (appends, resizes, attribute updates).

:func:`commit_metadata` replaces the documents of an array that a writer read as ``expected`` with those of
``new``, only if they are still ``expected`` -- with conditional writes where the store makes them, so a
concurrent change between the check and the write is caught too. A change of the attributes alone (another
writer updated them meanwhile) is merged: the new documents keep the other writer's attributes. Any other change
raises :class:`~zarr_dask.errors.WriteConflictError` and writes nothing.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

from zarr_dask.core import nodes
from zarr_dask.core.lease import fenced_error, lease_key, parse_lease
from zarr_dask.errors import WriteConflictError, ZarrDaskError
from zarr_dask.spec.paths import key_prefix
from zarr_dask.store import Store
from zarr_dask.store.versioned import Versioned, conditional, transact

__all__ = [
    "INCOMPLETE_NAME",
    "apply_intent",
    "check_no_incomplete_append",
    "check_no_incomplete_appends",
    "commit_held",
    "commit_intent",
    "commit_metadata",
    "mark_commit",
    "incomplete_append",
]

_log = logging.getLogger("zarr_dask.core")


def commit_metadata(
    store: Store, path: str, expected: Any, new: Any, *, extra_keys: Sequence[str] = (), what: str = "change"
) -> tuple[Any, dict[str, bytes]]:
    """Write ``new`` over ``expected`` (see the module docstring).

    Returns ``(metadata written, documents read)``: the metadata as committed (with merged attributes), and
    every document read on the way (the node's and ``extra_keys``, e.g. for a consolidated refresh).
    ``what`` names the operation in the error.
    """
    own = nodes.candidate_keys(path, new.zarr_format)
    keys = [*own, *extra_keys]
    committed: list[Any] = []

    def step(got: Mapping[str, Versioned]) -> dict[str, bytes]:
        docs = {k: v.value for k, v in got.items() if v.value is not None}
        current = nodes.parse_node({k: docs[k] for k in own if k in docs}, path, store)
        target = _merged(current, expected, new)
        if target is None:
            raise _changed_meanwhile(store, path, what)
        committed[:] = [target]
        return {k: v for k, v in nodes.documents(path, target).items() if docs.get(k) != v}

    cas = conditional(store)
    if cas is None:  # no conditional writes: check, then write (as safe as the store allows)
        found = store.get_many(keys)
        writes = step({k: Versioned(found.get(k), None) for k in keys})
        store.set_many(writes)
        return committed[0], {**found, **writes}
    got = transact(cas, keys, step, exhausted=lambda pending, n: WriteConflictError(
        f"the array's metadata kept changing under {n} conditional attempts of this {what}", store=store.url, path=path))
    return committed[0], {k: v.value for k, v in got.items() if v.value is not None}


def commit_held(
    store: Store,
    lease: tuple[str, str] | None,
    path: str,
    expected: Any,
    new: Any,
    *,
    extra_keys: Sequence[str] = (),
    what: str = "append",
    records: Mapping[str, bytes] | None = None,
) -> tuple[Any, dict[str, bytes]]:
    """:func:`commit_metadata` by the holder of an append lease (``lease``: ``(leased node path, token)``;
    None on stores without leases): first record the commit in the lease (:func:`mark_commit`, refused with
    :class:`~zarr_dask.errors.FencedWriteError` once the lease was taken over, nothing written), then commit.
    If the lease is taken over after the record was made, the taker completes the commit
    (:func:`~zarr_dask.core.lease.roll_forward`): then it is committed all the same. ``records``: documents
    written once the commit is made, by this holder or by whoever completes its commit (a resumable append's
    ``complete`` record: the proof that it landed)."""
    if lease is None:
        return commit_metadata(store, path, expected, new, extra_keys=extra_keys, what=what)
    mark_commit(store, *lease, commit_intent([(path, expected, new)], records=records))
    try:
        done = commit_metadata(store, path, expected, new, extra_keys=extra_keys, what=what)
        if records:
            store.set_many(dict(records))
        return done
    except WriteConflictError:
        if _holds(store, *lease):
            raise
        _log.warning("%s /%s: this %s's commit was completed by the writer that took its lease over", store.url, path, what)
        return new, {}


def mark_commit(store: Store, lease_path: str, token: str, intent: Mapping[str, Any]) -> None:
    """Record in the lease of ``lease_path`` the commit its holder is about to make (``intent``:
    :func:`commit_intent`), by a conditional write on the lease as read: from then on the commit is decided --
    this holder makes it, or whoever takes the lease over completes it. Raises
    :class:`~zarr_dask.errors.FencedWriteError` (nothing committed) when the lease is no longer ``token``'s."""
    cas = conditional(store)
    if cas is None:
        return
    key = lease_key(lease_path)

    def step(got: Mapping[str, Versioned]) -> dict[str, bytes]:
        holder = parse_lease(got[key].value)
        if holder.get("owner") != token:
            raise fenced_error(store, lease_path, "commit its new shape", holder)
        return {key: json.dumps({**holder, "intent": dict(intent)}).encode()}

    transact(cas, [key], step, exhausted=lambda keys, n: fenced_error(store, lease_path, "commit its new shape", {}))


def _holds(store: Store, lease_path: str, token: str) -> bool:
    key = lease_key(lease_path)
    return bool(parse_lease(store.get(key)).get("owner") == token)


def _changed_meanwhile(store: Store, path: str, what: str) -> WriteConflictError:
    return WriteConflictError(
        f"the array's metadata changed while this {what} was under way (another writer changed its shape, "
        "data type or codecs), so the new metadata was not committed; rows written beyond the stored shape "
        "are ignored by readers. Fix: check the array, then run the operation again",
        store=store.url,
        path=path,
    )


def commit_intent(
    changes: Sequence[tuple[str, Any, Any]], after: Mapping[str, bytes] | None = None,
    records: Mapping[str, bytes] | None = None,
) -> dict[str, Any]:  # fmt: skip
    """The record of a commit kept in an append lease (:func:`~zarr_dask.core.lease.mark_commit`): for every
    ``(array path, expected metadata, new metadata)`` the documents before and after, and the documents
    ``after`` to write once every array is committed (consolidated metadata), or None to refresh the
    consolidated metadata of each array instead; ``records``: documents written last (a resumable append's
    proof that it landed). JSON-serialisable."""

    def text(docs: Mapping[str, bytes]) -> dict[str, str]:
        return {k: v.decode() for k, v in docs.items()}

    intent: dict[str, Any] = {
        "arrays": [
            {"path": p, "expected": text(nodes.documents(p, old)), "new": text(nodes.documents(p, new))}
            for p, old, new in changes
        ],
        "after": text(after) if after is not None else None,
    }
    if records:
        intent["records"] = text(records)
    return intent


def apply_intent(store: Store, intent: Mapping[str, Any], *, lease: tuple[str, str] | None = None) -> list[Any]:
    """Carry out a commit recorded by :func:`commit_intent`; returns the metadata committed per array.

    ``lease``: ``(leased path, token)`` when the holder commits its own record. An array whose document changed
    since in a way the record does not expect is skipped when completing another's record (a later append
    already built on it); for the holder it means that its lease was taken over after the record was made and
    the taker completed it (the documents already moved on: committed either way) -- unless the holder still
    holds the lease, when another tool changed the array and the error is raised. Afterwards the ``after`` documents are written, or the
    consolidated metadata of each array refreshed."""
    from zarr_dask.core.consolidated import refresh_consolidated

    written: list[Any] = []
    for entry in intent["arrays"]:
        path = entry["path"]
        expected = nodes.parse_node({k: v.encode() for k, v in entry["expected"].items()}, path, store)
        new = nodes.parse_node({k: v.encode() for k, v in entry["new"].items()}, path, store)
        try:
            meta, _ = commit_metadata(store, path, expected, new, what="append")
        except WriteConflictError:
            if lease is None:
                _log.warning("%s /%s: not completing an interrupted append: the array changed since", store.url, path)
                continue
            if _holds(store, *lease):
                raise
            meta = new
        written.append(meta)
    after = intent.get("after")
    if after:
        store.set_many({k: v.encode() for k, v in after.items()})
    elif after is None:
        for entry, meta in zip(intent["arrays"], written, strict=False):
            refresh_consolidated(store, entry["path"], meta)
    if intent.get("records") and len(written) == len(intent["arrays"]):  # only a commit made proves it
        store.set_many({k: v.encode() for k, v in intent["records"].items()})
    return written


def _merged(current: Any, expected: Any, new: Any) -> Any:
    """What to write given the stored ``current``: ``new`` (also when ``current`` already is ``new``: a retried
    commit), ``new`` with ``current``'s attributes when only the attributes changed, or None (a conflict)."""
    if current in (new, expected):
        return new
    if current is None or type(current) is not type(expected):
        return None
    if dataclasses.replace(expected, attributes=new.attributes) == new:  # an attribute update: keep the rest
        return dataclasses.replace(current, attributes=new.attributes)
    if dataclasses.replace(current, attributes=expected.attributes) == expected:
        return dataclasses.replace(new, attributes=current.attributes)
    if dataclasses.replace(current, attributes=new.attributes) == new:
        return current  # a retried commit whose attributes were changed afterwards
    return None


#: Left next to an array whose append landed but whose consolidated listing could not be updated.
INCOMPLETE_NAME = ".zd-append-incomplete"


def incomplete_append(store: Store, path: str, expected: Any, written: Any, exc: BaseException) -> WriteConflictError:
    """The error of an append whose shape was committed but whose consolidated refresh failed; leaves a record
    (best effort) so that running the append again is refused until the listing is repaired
    (:func:`check_no_incomplete_append`)."""
    old, new = tuple(expected.shape), tuple(written.shape)
    rows = ", ".join(f"{o}:{n} along axis {d}" for d, (o, n) in enumerate(zip(old, new, strict=True)) if o != n) or "none"
    record = json.dumps({"from": list(old), "to": list(new), "time": time.time()}).encode()
    try:
        store.set(key_prefix(path) + INCOMPLETE_NAME, record)
        refused = "; until then zarr_dask refuses further appends to this array, so that rows are never appended twice"
    except OSError:  # the store refused the record too (StoreError, ReadOnlyError): say only what landed
        refused = ""
    return WriteConflictError(
        f"the append landed (rows {rows}; the array's shape is now {list(new)}), but the consolidated metadata of "
        f"the enclosing groups could not be updated ({type(exc).__name__}: {exc}), so readers that use it still see "
        f"shape {list(old)}. Do not run this append again: its rows are stored. Repair the listing with "
        f"zarr_dask.consolidate_metadata({store.url!r}){refused}",
        store=store.url,
        path=path,
    )


def check_no_incomplete_appends(store: Store, arrays: Mapping[str, Any]) -> None:
    """:func:`check_no_incomplete_append` for several arrays (``path: metadata``), with one batched read."""
    if getattr(store, "transactional", False):  # a transaction (Icechunk) keeps no records of ours
        return
    found = store.get_many([key_prefix(p) + INCOMPLETE_NAME for p in arrays])
    for path, metadata in arrays.items():
        if key_prefix(path) + INCOMPLETE_NAME in found:
            check_no_incomplete_append(store, path, metadata)


def check_no_incomplete_append(store: Store, path: str, metadata: Any) -> None:
    """Before an append: refuse while an earlier append's rows are stored but missing from the consolidated
    metadata (see :func:`incomplete_append`); once the listing is repaired, forget the record."""
    from zarr_dask.core.consolidated import refresh_keys, refreshed_documents

    if getattr(store, "transactional", False):  # a transaction (Icechunk) keeps no records of ours
        return
    key = key_prefix(path) + INCOMPLETE_NAME
    data = store.get(key)
    if data is None:
        return
    docs = store.get_many(refresh_keys(path, metadata.zarr_format, own=False))
    try:
        stale = bool(refreshed_documents(store, path, metadata.zarr_format, docs, metadata)[0])
    except ZarrDaskError:  # a listing that cannot even be read is not repaired
        stale = True
    if not stale:
        store.delete(key)
        return
    try:
        record = json.loads(data)
        landed = f"rows up to shape {record['to']} (from {record['from']})"
    except (ValueError, KeyError, TypeError):
        landed = "its rows"
    raise WriteConflictError(
        f"an earlier append to this array landed ({landed}) but the consolidated metadata was not updated; "
        "appending now could store rows twice if that append is being re-run. Repair the listing with "
        f"zarr_dask.consolidate_metadata({store.url!r}) first, then append",
        store=store.url,
        path=path,
    )
