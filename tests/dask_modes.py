"""Which of dask's array modes the tests run in, and the gaps of dask's expression arrays (``array.query-planning:
True``, ``make test-expr``) that some tests meet. Each gap is dask's own, checked on a plain ``da.from_array`` /
``da.ones`` array (no zarr_dask involved); the tests meeting one are strict xfails in that mode only, so they
start failing -- and the mark must go -- as soon as dask closes the gap."""

from __future__ import annotations

import dask
import pytest

from zarr_dask.graph import gateway

QUERY_PLANNING = gateway.query_planning()
LEGACY = not QUERY_PLANNING

_GAPS = {
    "blocks": (AttributeError, "Array has no .blocks"),
    "reshape": (AttributeError, "Array has no .reshape"),
    "from_zarr": (NotImplementedError, "dask.array.from_zarr is not implemented"),
    "fancy": (AttributeError, "integer-array indexing fails ('Shuffle' object has no attribute '_token')"),
    "boolean": (
        NotImplementedError,
        "boolean-mask indexing (unknown chunk sizes) raises NotImplementedError",
    ),
    "result_type": (
        NotImplementedError,
        "np.result_type of an Array raises NotImplementedError (__array_function__), so xarray's CF encoding "
        "(fillna/where) of packed and fill-value variables and xarray.concat of dask-backed data fail",
    ),
}


def expr_gap(name: str, raises: type[BaseException] | None = None) -> pytest.MarkDecorator:
    """A strict xfail under query planning for dask's array-expr gap ``name``."""
    exc, what = _GAPS[name]
    return pytest.mark.xfail(
        QUERY_PLANNING,
        reason=f"dask {dask.__version__} array-expr: {what}",
        raises=raises or exc,
        strict=True,
    )
