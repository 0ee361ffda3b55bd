"""``open_dataset`` / ``open_groups_as_dict`` / ``open_datatree`` for ``engine="zarr_dask"``.

The hierarchy's metadata is loaded once (:func:`~zarr_dask.xarray_backend.hierarchy.load_hierarchy`: one
consolidated read, or one listing per level plus one batched read of the documents), then xarray's own
``StoreBackendEntrypoint`` decodes every group with xarray's CF machinery.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal

from zarr_dask.spec.paths import normalize_path
from zarr_dask.store import FsspecStore, Store, open_store
from zarr_dask.xarray_backend.datastore import ZarrDaskDataStore
from zarr_dask.xarray_backend.hierarchy import Hierarchy, load_hierarchy

if TYPE_CHECKING:
    from xarray import Dataset, DataTree

__all__ = ["as_store", "open_dataset", "open_datatree", "open_groups_as_dict"]

ZarrFormat = Literal[2, 3]


def as_store(obj: Any, storage_options: Mapping[str, Any] | None = None, *, read_only: bool = False) -> Store:
    """A zarr_dask Store from what xarray users pass: a path, a URL, a Store, an fsspec ``FSMap``, or a
    zarr-python ``LocalStore`` / ``FsspecStore``.

    Raises
    ------
    TypeError
        For anything else (the message lists what is accepted).
    """
    if isinstance(obj, Store | str | os.PathLike):
        return open_store(obj, storage_options=storage_options, read_only=read_only)
    if storage_options:
        raise ValueError(f"store must be a string to use storage_options. Got {type(obj)}")
    fs = getattr(obj, "fs", None)
    if fs is not None and hasattr(fs, "cat_file"):  # fsspec FSMap (.root) or zarr-python FsspecStore (.path)
        root = getattr(obj, "root", None)
        if not isinstance(root, str):
            root = getattr(obj, "path", "")
        return FsspecStore(_blocking(fs), str(root), read_only=read_only or bool(getattr(obj, "read_only", False)))
    root = getattr(obj, "root", None)
    if isinstance(root, os.PathLike) and type(obj).__name__ == "LocalStore":  # zarr-python's LocalStore
        return open_store(root, read_only=read_only)
    raise TypeError(
        f"cannot open a Zarr store from {type(obj).__name__}; pass a path or URL ('s3://bucket/x.zarr'), a "
        "zarr_dask Store, an fsspec mapper (fsspec.get_mapper) or a zarr-python LocalStore / FsspecStore"
    )


def _blocking(fs: Any) -> Any:
    """A filesystem usable with blocking calls: zarr-python hands out asynchronous instances bound to its own
    event loop, which must not be driven from here; rebuild them from their configuration."""
    if not getattr(fs, "asynchronous", False):
        return fs
    sync_fs = getattr(fs, "sync_fs", None)  # fsspec's AsyncFileSystemWrapper around a blocking filesystem
    if sync_fs is not None:
        return sync_fs
    options = {k: v for k, v in getattr(fs, "storage_options", {}).items() if k not in ("asynchronous", "loop")}
    return type(fs)(**options)


def _drop(drop_variables: str | Iterable[str] | None) -> tuple[str, ...]:
    if drop_variables is None:
        return ()
    if isinstance(drop_variables, str):
        return (drop_variables,)
    return tuple(drop_variables)


def _decode(
    datastore: ZarrDaskDataStore, drop_variables: tuple[str, ...], decoders: Mapping[str, Any]
) -> Dataset:
    from xarray.backends.store import StoreBackendEntrypoint

    return StoreBackendEntrypoint().open_dataset(datastore, drop_variables=drop_variables or None, **decoders)


def open_dataset(
    filename_or_obj: Any,
    *,
    drop_variables: str | Iterable[str] | None = None,
    group: str | None = None,
    consolidated: bool | None = None,
    storage_options: Mapping[str, Any] | None = None,
    zarr_format: ZarrFormat | None = None,
    use_zarr_fill_value_as_mask: bool | None = None,
    allow_unsafe_codecs: bool = False,
    **decoders: Any,
) -> Dataset:
    """Open one group as a Dataset (see :meth:`ZarrDaskBackendEntrypoint.open_dataset`)."""
    store = as_store(filename_or_obj, storage_options, read_only=True)
    hierarchy = load_hierarchy(store, normalize_path(group or ""), zarr_format=zarr_format, consolidated=consolidated)
    drop = _drop(drop_variables)
    datastore = ZarrDaskDataStore(
        hierarchy,
        use_zarr_fill_value_as_mask=use_zarr_fill_value_as_mask,
        drop_variables=drop,
        allow_unsafe_codecs=allow_unsafe_codecs,
    )
    return _decode(datastore, drop, decoders)


def _tree_name(rel: str) -> str:
    return "/" + rel if rel else "/"


def open_groups_as_dict(
    filename_or_obj: Any,
    *,
    drop_variables: str | Iterable[str] | None = None,
    group: str | None = None,
    consolidated: bool | None = None,
    storage_options: Mapping[str, Any] | None = None,
    zarr_format: ZarrFormat | None = None,
    use_zarr_fill_value_as_mask: bool | None = None,
    allow_unsafe_codecs: bool = False,
    **decoders: Any,
) -> dict[str, Dataset]:
    """Every group below ``group`` (implicit groups included) as ``{"/path": Dataset}``, paths relative to
    ``group`` (the group itself is ``"/"``). The whole hierarchy's metadata is loaded once."""
    store = as_store(filename_or_obj, storage_options, read_only=True)
    hierarchy: Hierarchy = load_hierarchy(
        store, normalize_path(group or ""), zarr_format=zarr_format, consolidated=consolidated, max_depth=None
    )
    drop = _drop(drop_variables)
    out: dict[str, Dataset] = {}
    for rel in hierarchy.group_paths():
        datastore = ZarrDaskDataStore(
            hierarchy,
            rel,
            use_zarr_fill_value_as_mask=use_zarr_fill_value_as_mask,
            drop_variables=drop,
            allow_unsafe_codecs=allow_unsafe_codecs,
        )
        out[_tree_name(rel)] = _decode(datastore, drop, decoders)
    return out


def open_datatree(filename_or_obj: Any, **kwargs: Any) -> DataTree:
    """The hierarchy below ``group`` as a DataTree (see :func:`open_groups_as_dict`)."""
    from xarray.backends.common import datatree_from_dict_with_io_cleanup

    return datatree_from_dict_with_io_cleanup(open_groups_as_dict(filename_or_obj, **kwargs))
