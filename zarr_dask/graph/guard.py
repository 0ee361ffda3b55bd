"""The one race a single plan cannot rule out: two *separate* lazy writes computed together.

Within one :func:`~zarr_dask.to_zarr` call every storage key has exactly one writer. But two region writes
built with ``compute=False`` and computed together (``dask.compute(w1, w2)``, the classic xarray pattern) each
read-modify-write the keys their region edges cut; when both cut the same key, one loses the other's data.
Every pending lazy write is registered here (per process, weakly: it is forgotten when its dask object is
garbage collected or its final task runs in this process), and a new one that would share a
read-modify-written key with a pending one, or overlap its region, is refused with an error naming the array,
the key, the blocks of both writes and the fixes.
"""

from __future__ import annotations

import itertools
import threading
import weakref
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from zarr_dask.errors import WritePlanError
from zarr_dask.graph.plan import WritePlan

__all__ = ["claim", "release"]

#: Read-modify-written keys remembered per pending write (a region's edges); more are not checked.
_MAX_KEYS = 1_000_000


@dataclass(eq=False)
class _Pending:
    token: str
    plan: WritePlan
    partial: dict[tuple[int, ...], None]  # ordered set of key coordinates


_LOCK = threading.RLock()
_PENDING: dict[tuple[Hashable, str], dict[str, _Pending]] = {}


def _overlap(a: WritePlan, b: WritePlan) -> bool:
    return all(x.start < y.stop and y.start < x.stop for x, y in zip(a.region, b.region, strict=True))


def _error(plan: WritePlan, other: _Pending, coords: tuple[int, ...] | None) -> WritePlanError:
    unit = f"{plan.unit}s {plan.unit_shape}"
    fix = (
        f"Fix: align the region edges with the {unit}, write both regions with one to_zarr call, or compute "
        "the first write before building the second (and drop your reference to it once computed)"
    )
    if coords is None:
        return WritePlanError(
            f"the region {_fmt(plan)} overlaps the region {_fmt(other.plan)} of a pending (not yet computed) "
            f"write to the same array; computed together, which one wins is undefined. {fix}",
            store=plan.store,
            path=plan.path,
        )
    key = plan.key_names(coords) if plan.key_names else str(coords)
    return WritePlanError(
        f"key {key!r} would be read-merged-written by two writes computed together: blocks "
        f"{plan.blocks_of(coords)} of this write (region {_fmt(plan)}) and blocks "
        f"{other.plan.blocks_of(coords)} of a pending write (region {_fmt(other.plan)}); one would lose the "
        f"other's data. {fix}",
        store=plan.store,
        path=plan.path,
    )


def _fmt(plan: WritePlan) -> str:
    return "[" + ", ".join(f"{s.start}:{s.stop}" for s in plan.region) + "]"


def claim(plan: WritePlan, store_token: Hashable, token: str, owner: Any) -> None:
    """Register a lazy write (refusing one that races a pending write); forgotten when ``owner`` dies."""
    if plan.keys == 0:
        return
    partial = dict.fromkeys(itertools.islice(plan.partial_key_coords(), _MAX_KEYS))
    where = (store_token, plan.path)
    with _LOCK:
        for other in _PENDING.get(where, {}).values():
            if other.token == token:
                continue
            if _overlap(plan, other.plan):
                raise _error(plan, other, None)
            shared = next((c for c in partial if c in other.partial), None)
            if shared is not None:
                raise _error(plan, other, shared)
        _PENDING.setdefault(where, {})[token] = _Pending(token, plan, partial)
    weakref.finalize(owner, release, store_token, plan.path, token)


def release(store_token: Hashable, path: str, token: str, *ignored: Any) -> None:
    """Forget a pending write (its final task ran, or its dask object is gone)."""
    with _LOCK:
        entries = _PENDING.get((store_token, path))
        if entries is not None:
            entries.pop(token, None)
            if not entries:
                del _PENDING[(store_token, path)]
