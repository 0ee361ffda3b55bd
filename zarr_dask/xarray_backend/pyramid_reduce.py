"""The window reductions of :func:`zarr_dask.pyramid`: NumPy functions of ``(array, axis=tuple)``, as
``xarray``'s ``coarsen().reduce`` calls them, applied block by block to dask arrays (a window never crosses a
block once xarray has reshaped the array into windows).

Examples
--------
>>> import numpy as np
>>> windows = np.array([[1.0, np.nan], [3.0, 3.0], [2.0, 5.0]])  # three windows of two values
>>> reducer("mean")(windows, axis=1).tolist(), reducer("mode")(windows, axis=1).tolist()
([1.0, 3.0, 3.5], [1.0, 3.0, 2.0])
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

Reducer = Callable[..., Any]


def _axes(axis: Any, ndim: int) -> tuple[int, ...]:
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    return tuple(sorted(a % ndim for a in axes))


def _mean(x: np.ndarray[Any, Any], axes: tuple[int, ...]) -> np.ndarray[Any, Any]:
    if x.dtype.kind not in "fc":
        return np.asarray(x.mean(axis=axes))
    valid = ~np.isnan(x)
    count = valid.sum(axis=axes)
    total = np.where(valid, x, 0).sum(axis=axes, dtype=np.float64 if x.dtype.kind == "f" else None)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(count > 0, total / np.maximum(count, 1), np.nan)
    return out.astype(x.dtype, copy=False)


def _extreme(x: np.ndarray[Any, Any], axes: tuple[int, ...], ufunc: np.ufunc) -> np.ndarray[Any, Any]:
    out = x
    for a in reversed(axes):  # fmin/fmax ignore NaN; an all-NaN window stays NaN, without a warning
        out = ufunc.reduce(out, axis=a)
    return np.asarray(out)


def _nearest(x: np.ndarray[Any, Any], axes: tuple[int, ...]) -> np.ndarray[Any, Any]:
    out = x
    for a in reversed(axes):
        out = np.take(out, 0, axis=a)
    return np.asarray(out)


def _mode(x: np.ndarray[Any, Any], axes: tuple[int, ...]) -> np.ndarray[Any, Any]:
    """The most frequent value of each window (ties: the smallest; NaN never counts, an all-NaN window is
    NaN)."""
    keep = [a for a in range(x.ndim) if a not in axes]
    moved = np.transpose(x, keep + list(axes))
    flat = np.sort(moved.reshape(moved.shape[: len(keep)] + (-1,)), axis=-1)
    counts = (flat[..., :, None] == flat[..., None, :]).sum(axis=-1)  # windows are small: factor ** 2 values
    if flat.dtype.kind in "fc":
        counts = np.where(np.isnan(flat), 0, counts)
    best = np.take_along_axis(flat, counts.argmax(axis=-1)[..., None], axis=-1)[..., 0]
    return np.asarray(best)


_NUMPY: dict[str, Callable[[np.ndarray[Any, Any], tuple[int, ...]], np.ndarray[Any, Any]]] = {
    "mean": _mean,
    "min": lambda x, axes: _extreme(x, axes, np.fmin),
    "max": lambda x, axes: _extreme(x, axes, np.fmax),
    "nearest": _nearest,
    "mode": _mode,
}

METHODS = tuple(_NUMPY)


def reducer(method: str) -> Reducer:
    """The ``coarsen().reduce`` function of a named method: NumPy arrays directly, dask arrays block by block
    (each window axis whole in its block)."""
    func = _NUMPY[method]

    def reduce(x: Any, axis: Any = None, **kwargs: Any) -> Any:
        axes = _axes(axis, x.ndim)
        if isinstance(x, np.ndarray):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                return func(x, axes)
        x = x.rechunk({a: -1 for a in axes})  # a no-op after xarray's reshape into windows
        sample = func(np.zeros((1,) * x.ndim, dtype=x.dtype), axes)
        return x.map_blocks(func, axes, drop_axis=axes, dtype=sample.dtype)

    reduce.__name__ = f"pyramid_{method}"
    return reduce
