"""zarr_dask — Zarr v2/v3 as a first-class, fast and safe storage engine for Dask and xarray.

Importing this package is cheap: names are loaded on first use, and xarray / distributed are never imported
by it.
"""

from __future__ import annotations

import importlib
import threading
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_LAZY = {
    "Array": "zarr_dask.core.array",
    "Group": "zarr_dask.core.group",
    "ConsolidatedMismatch": "zarr_dask.core.consolidated",
    "check_consolidated": "zarr_dask.core.consolidated",
    "consolidate_metadata": "zarr_dask.core.api",
    "create_array": "zarr_dask.core.api",
    "create_group": "zarr_dask.core.api",
    "open": "zarr_dask.core.api",
    "open_array": "zarr_dask.core.api",
    "open_group": "zarr_dask.core.api",
    "FsspecStore": "zarr_dask.store",
    "LocalStore": "zarr_dask.store",
    "MemoryStore": "zarr_dask.store",
    "Store": "zarr_dask.store",
    "open_store": "zarr_dask.store",
    "errors": "zarr_dask.errors",
    "convert": "zarr_dask._convert",
    "ArraySpec": "zarr_dask.zom",
    "GroupSpec": "zarr_dask.zom",
    "zom": "zarr_dask.zom",
    "append": "zarr_dask.graph",
    "explain_write": "zarr_dask.graph",
    "from_zarr": "zarr_dask.graph",
    "to_zarr": "zarr_dask.graph",
    "write_ledger": "zarr_dask.graph",
    "publish_ledger": "zarr_dask.graph",
    "to_zarr_dataset": "zarr_dask.xarray_backend.to_zarr",
    "to_zarr_datatree": "zarr_dask.xarray_backend.datatree",
    "pyramid": "zarr_dask.xarray_backend.pyramid",
    "pyramid_level": "zarr_dask.xarray_backend.pyramid",
    "Limits": "zarr_dask.spec.limits",
    "get_limits": "zarr_dask.spec.limits",
    "set_limits": "zarr_dask.spec.limits",
    "release_memory": "zarr_dask.pools",
    "config": "zarr_dask.config",
}

__all__ = sorted([*_LAZY, "__version__"])

if TYPE_CHECKING:
    from zarr_dask import config as config
    from zarr_dask import errors as errors
    from zarr_dask import zom as zom
    from zarr_dask._convert import convert as convert
    from zarr_dask.core.api import consolidate_metadata as consolidate_metadata
    from zarr_dask.core.api import create_array as create_array
    from zarr_dask.core.api import create_group as create_group
    from zarr_dask.core.api import open as open
    from zarr_dask.core.api import open_array as open_array
    from zarr_dask.core.api import open_group as open_group
    from zarr_dask.core.array import Array as Array
    from zarr_dask.core.consolidated import ConsolidatedMismatch as ConsolidatedMismatch
    from zarr_dask.core.consolidated import check_consolidated as check_consolidated
    from zarr_dask.core.group import Group as Group
    from zarr_dask.graph import append as append
    from zarr_dask.graph import explain_write as explain_write
    from zarr_dask.graph import from_zarr as from_zarr
    from zarr_dask.graph import publish_ledger as publish_ledger
    from zarr_dask.graph import to_zarr as to_zarr
    from zarr_dask.graph import write_ledger as write_ledger
    from zarr_dask.pools import release_memory as release_memory
    from zarr_dask.spec.limits import Limits as Limits
    from zarr_dask.spec.limits import get_limits as get_limits
    from zarr_dask.spec.limits import set_limits as set_limits
    from zarr_dask.store import FsspecStore as FsspecStore
    from zarr_dask.store import LocalStore as LocalStore
    from zarr_dask.store import MemoryStore as MemoryStore
    from zarr_dask.store import Store as Store
    from zarr_dask.store import open_store as open_store
    from zarr_dask.xarray_backend.datatree import to_zarr_datatree as to_zarr_datatree
    from zarr_dask.xarray_backend.pyramid import pyramid as pyramid
    from zarr_dask.xarray_backend.pyramid import pyramid_level as pyramid_level
    from zarr_dask.xarray_backend.to_zarr import to_zarr_dataset as to_zarr_dataset
    from zarr_dask.zom import ArraySpec as ArraySpec
    from zarr_dask.zom import GroupSpec as GroupSpec


_IMPORT_LOCK = threading.RLock()


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'zarr_dask' has no attribute {name!r}")
    with _IMPORT_LOCK:  # two threads' first calls (a dask worker's) must not import the package cycle twice
        mod = importlib.import_module(module)
        value = mod if name in ("errors", "zom", "config") else getattr(mod, name)
        globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
