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
import time
from collections.abc import Sequence
from typing import Any

from zarr_dask.core import nodes
from zarr_dask.errors import WriteConflictError, ZarrDaskError
from zarr_dask.spec.paths import key_prefix
from zarr_dask.store import Store
from zarr_dask.store.versioned import conditional, retry_policy

__all__ = ["INCOMPLETE_NAME", "check_no_incomplete_append", "commit_metadata", "incomplete_append"]


def commit_metadata(
    store: Store, path: str, expected: Any, new: Any, *, extra_keys: Sequence[str] = (), what: str = "change"
) -> tuple[Any, dict[str, bytes]]:
    """Write ``new`` over ``expected`` (see the module docstring).

    Returns ``(metadata written, documents read)``: the metadata as committed (with merged attributes), and
    every document read on the way (the node's and ``extra_keys``, e.g. for a consolidated refresh).
    ``what`` names the operation in the error.
    """
    cas = conditional(store)
    own = nodes.candidate_keys(path, new.zarr_format)
    keys = [*own, *extra_keys]
    policy = retry_policy()
    for attempt in range(1, policy.attempts + 1):
        versioned = cas.get_versioned(keys) if cas is not None else None
        docs = (
            {k: v.value for k, v in versioned.items() if v.value is not None} if versioned is not None else store.get_many(keys)
        )
        current = nodes.parse_node({k: docs[k] for k in own if k in docs}, path, store)
        target = _merged(current, expected, new)
        if target is None:
            raise WriteConflictError(
                f"the array's metadata changed while this {what} was under way (another writer changed its shape, "
                "data type or codecs), so the new metadata was not committed; rows written beyond the stored shape "
                "are ignored by readers. Fix: check the array, then run the operation again",
                store=store.url,
                path=path,
            )
        wanted = nodes.documents(path, target)
        changed = {k: v for k, v in wanted.items() if docs.get(k) != v}
        if not changed:
            return target, docs
        if versioned is None:
            store.set_many(changed)
            docs.update(changed)
            return target, docs
        won = cas.set_if_unchanged({k: (v, versioned[k].version) for k, v in changed.items()})  # type: ignore[union-attr]
        if all(won.values()):
            docs.update(changed)
            return target, docs
        policy.wait(attempt)
    raise WriteConflictError(
        f"the array's metadata kept changing under {policy.attempts} conditional attempts of this {what}",
        store=store.url,
        path=path,
    )


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
    except Exception:
        refused = ""
    return WriteConflictError(
        f"the append landed (rows {rows}; the array's shape is now {list(new)}), but the consolidated metadata of "
        f"the enclosing groups could not be updated ({type(exc).__name__}: {exc}), so readers that use it still see "
        f"shape {list(old)}. Do not run this append again: its rows are stored. Repair the listing with "
        f"zarr_dask.consolidate_metadata({store.url!r}){refused}",
        store=store.url,
        path=path,
    )


def check_no_incomplete_append(store: Store, path: str, metadata: Any) -> None:
    """Before an append: refuse while an earlier append's rows are stored but missing from the consolidated
    metadata (see :func:`incomplete_append`); once the listing is repaired, forget the record."""
    from zarr_dask.core.consolidated import refresh_keys, refreshed_documents

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
