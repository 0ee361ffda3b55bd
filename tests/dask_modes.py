"""Which of dask's array modes the tests run in, and the gaps of dask's expression arrays (``array.query-planning:
True``, ``make test-expr``) that some tests meet. Each gap is dask's own, checked on a plain ``da.from_array`` /
``da.ones`` array (no zarr_dask involved); the tests meeting one are strict xfails in that mode only, so they
start failing -- and the mark must go -- as soon as dask closes the gap."""

from __future__ import annotations

import sys

import dask
import pytest

from zarr_dask.graph import gateway

QUERY_PLANNING = gateway.query_planning()
#: the dask-array package registered (``make test-dask-array``): zarr_dask's arrays are ``dask_array`` arrays
DASK_ARRAY = gateway.dask_array_registered()
LEGACY = not QUERY_PLANNING and not DASK_ARRAY
#: the array module of the running mode, as a user would import it: dask.array, or dask_array (registered)
DA = gateway.array_module()

_GAPS = {
    "blocks": (AttributeError, "Array has no .blocks"),
    "reshape": (AttributeError, "Array has no .reshape"),
    "from_zarr": (NotImplementedError, "dask.array.from_zarr is not implemented"),
    "fancy": (AttributeError, "integer-array indexing fails ('Shuffle' object has no attribute '_token')"),
    "boolean": (
        NotImplementedError,
        "boolean-mask indexing (unknown chunk sizes) raises NotImplementedError",
    ),
    "store": (
        NotImplementedError,
        "da.store is not implemented ('Function store is not implemented for dask-expr'), so xarray's own "
        "engine='zarr' cannot write dask data",
    ),
    "np_reshape": (
        NotImplementedError,
        "np.reshape of an Array raises NotImplementedError (__array_function__), so xarray's coarsen "
        "(Variable.coarsen_reshape) of dask-backed data fails: zarr_dask.pyramid needs it",
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


_DASK_ARRAY_GAPS = {
    "graph_manipulation": (
        ValueError,
        "dask.graph_manipulation clone/bind of a from_array of a non-NumPy array-like fails "
        "('Missing dependency original-...')",
    ),
}


#: dask-array 0.7 tokenizes ``from_array(..., name=...)`` with a UUID per call (checked: ``dask_array.from_array(x,
#: chunks=2, name="n").map_blocks(f).name`` differs between two constructions; without ``name=`` it does not)
DASK_ARRAY_NAMES = (
    "dask-array: from_array(..., name=) tokenizes with a UUID per call, so from_zarr(...).map_blocks(f) is named "
    "anew each time and an unnamed resume finds another run id (resume='<name>' is unaffected)"
)


def dask_array_gap(name: str) -> pytest.MarkDecorator:
    """A strict xfail with the dask-array package registered (``make test-dask-array``) for its gap ``name``,
    checked on a plain ``dask_array.from_array`` (no zarr_dask involved)."""
    exc, what = _DASK_ARRAY_GAPS[name]
    version = getattr(sys.modules.get("dask_array"), "__version__", "?")
    return pytest.mark.xfail(DASK_ARRAY, reason=f"dask-array {version}: {what}", raises=exc, strict=True)

