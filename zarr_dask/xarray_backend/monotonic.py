"""Index coordinates that an append makes non-monotonic.

Appends from independent writers (``client.map`` tasks, several processes) land in whatever order they get
their turn, so ``time`` may end up out of order; label selections (``sel``, slices) on such a dimension no
longer work as expected, and nothing else would say so. :func:`warn_if_unordered` checks each index
coordinate (the 1-D variable named like its dimension) that an ``append_dim`` write grows, cheaply: it reads
the last two stored values (one or two chunks) and compares them with the appended values (in memory, as
xarray holds index coordinates). :func:`is_monotonic` is what ``zarr-dask validate`` checks on a whole
stored coordinate. Values are compared encoded (as stored), and shown decoded (dates as dates).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from zarr_dask.core.array import Array
from zarr_dask.errors import NonMonotonicCoordinateWarning
from zarr_dask.spec import ArrayMetadataV2, ArrayMetadataV3
from zarr_dask.store import Store
from zarr_dask.xarray_backend.encoding import dims_and_attrs

if TYPE_CHECKING:
    from zarr_dask.xarray_backend.write_plan import VarWrite

__all__ = ["index_dimension", "is_monotonic", "warn_if_unordered"]


def is_monotonic(values: Any) -> bool:
    """Non-decreasing or non-increasing (a NaN breaks both; values that cannot be ordered count as
    monotonic: nothing to report).

    Examples
    --------
    >>> is_monotonic([1, 2, 2, 5]), is_monotonic([5, 3, 1]), is_monotonic([1, 3, 2])
    (True, True, False)
    """
    v = np.asarray(values)
    if v.ndim != 1 or v.size < 2:
        return True
    try:
        return bool(np.all(v[1:] >= v[:-1]) or np.all(v[1:] <= v[:-1]))
    except TypeError:
        return True


def index_dimension(name: str, meta: ArrayMetadataV2 | ArrayMetadataV3) -> str | None:
    """The dimension ``name`` indexes, if the array is an index coordinate (1-D, named like its dimension)."""
    if len(meta.shape) != 1:
        return None
    try:
        dims, _ = dims_and_attrs(meta)
    except KeyError:
        return None
    return dims[0] if dims[0] == name else None


def _shown(values: np.ndarray[Any, Any], meta: ArrayMetadataV2 | ArrayMetadataV3, dim: str) -> Any:
    """The first value decoded as xarray reads it (a date, not days since...), else as stored."""
    try:
        import xarray as xr
        from xarray import conventions

        _, attrs = dims_and_attrs(meta)
        decoded = conventions.decode_cf_variable(dim, xr.Variable((dim,), values[:1], attrs=attrs))
        return decoded.values[0]
    except Exception:  # noqa: BLE001 - only for the message: the stored value is as good a name
        return values[0]


def warn_if_unordered(store: Store, writes: Iterable[VarWrite]) -> None:
    """Warn (:class:`~zarr_dask.errors.NonMonotonicCoordinateWarning`) for every appended index coordinate
    whose appended values, after the stored ones, are not monotonic."""
    for w in writes:
        old = w.old_metadata
        if w.action != "append" or old is None or not isinstance(w.data, np.ndarray):
            continue
        dim = index_dimension(w.name, old)
        n = old.shape[0] if dim is not None else 0
        if not n or not w.data.size:
            continue
        tail = np.asarray(Array(store, w.path, old)[max(0, n - 2) : n])
        if is_monotonic(np.concatenate([tail, w.data])):
            continue
        last, first = _shown(tail[-1:], old, str(dim)), _shown(w.data, old, str(dim))
        warnings.warn(
            f"{store.url}: appending along {dim!r} made the index coordinate {w.path!r} non-monotonic: the last "
            f"stored value is {last}, the first appended is {first} (or the appended values are out of order); "
            "label selections on this dimension (sel, slices) will not work as expected. Appends from "
            "independent writers land in the order they get their turn: sort after writing (ds.sortby) or "
            "append in order",
            NonMonotonicCoordinateWarning,
            stacklevel=5,
        )
