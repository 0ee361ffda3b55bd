"""``open_dataset`` / ``open_groups_as_dict`` / ``open_datatree`` for ``engine="zarr_dask"``.

The hierarchy's metadata is loaded once (:func:`~zarr_dask.xarray_backend.hierarchy.load_hierarchy`: one
consolidated read, or one listing per level plus one batched read of the documents), then every group is
decoded with xarray's CF machinery, as xarray's ``StoreBackendEntrypoint`` does.

The dimension coordinates are read (one batched call) from the moment their documents arrive, while the rest
of the metadata is parsed and the variables are CF-decoded; the coordinates are decoded last, because
decoding times reads their values and would otherwise make every later variable wait for that round trip.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, MutableMapping
from typing import TYPE_CHECKING, Any, Literal

from zarr_dask.spec.paths import normalize_path
from zarr_dask.store import Store, open_store
from zarr_dask.store.foreign import is_zarr_python
from zarr_dask.store.mapping import MappingStore
from zarr_dask.xarray_backend.datastore import ZarrDaskDataStore
from zarr_dask.xarray_backend.hierarchy import Hierarchy, load_hierarchy
from zarr_dask.xarray_backend.prefetch import EarlyCoordinates

if TYPE_CHECKING:
    from xarray import Dataset, DataTree

__all__ = ["as_store", "open_dataset", "open_datatree", "open_groups_as_dict"]

ZarrFormat = Literal[2, 3]


def as_store(obj: Any, storage_options: Mapping[str, Any] | None = None, *, read_only: bool = False) -> Store:
    """A zarr_dask Store from what xarray users pass, through the one recognition path every entry point
    shares (:func:`~zarr_dask.store.open_store`: paths, URLs, Stores, Icechunk sessions, any zarr-python store,
    ``UPath``, fsspec mappers). A plain ``MutableMapping`` (``{}``) holds zarr-python buffers when zarr-python is
    installed, as xarray's own engine leaves there, so either engine reads what the other wrote.

    Raises
    ------
    TypeError
        For anything else (the message lists what is accepted).
    """
    if storage_options and not isinstance(obj, Store | str | os.PathLike):
        raise ValueError(f"store must be a string to use storage_options. Got {type(obj)}")
    if isinstance(obj, MutableMapping) and type(obj).__name__ != "FSMap" and not is_zarr_python(obj):
        return MappingStore(obj, read_only=read_only, wrap=_zarr_buffer())
    try:
        return open_store(obj, storage_options=storage_options, read_only=read_only)
    except TypeError as e:
        if "cannot open a store" not in str(e):
            raise
        raise TypeError(
            f"cannot open a Zarr store from {type(obj).__name__}; pass a path or URL ('s3://bucket/x.zarr'), a "
            "zarr_dask Store, an Icechunk session, a zarr-python store, a MutableMapping ({}) or an fsspec mapper "
            "(fsspec.get_mapper)"
        ) from None


def _zarr_buffer() -> Callable[[bytes], Any] | None:
    """zarr-python's ``Buffer.from_bytes`` when zarr-python is installed, else None (keep bytes): a dict
    store then holds what xarray's own engine puts there, so either engine reads what the other wrote."""
    import importlib.util

    if importlib.util.find_spec("zarr") is None:
        return None
    from zarr.core.buffer import default_buffer_prototype

    return default_buffer_prototype().buffer.from_bytes


def _drop(drop_variables: str | Iterable[str] | None) -> tuple[str, ...]:
    if drop_variables is None:
        return ()
    if isinstance(drop_variables, str):
        return (drop_variables,)
    return tuple(drop_variables)


def _decode(
    datastore: ZarrDaskDataStore, drop_variables: tuple[str, ...], decoders: Mapping[str, Any]
) -> Dataset:
    """``StoreBackendEntrypoint.open_dataset`` (xarray's CF decoding, the same Dataset), with the variables
    being prefetched decoded after the others (decoding is per variable; the order is restored after)."""
    from xarray import conventions
    from xarray.core.coordinates import Coordinates
    from xarray.core.dataset import Dataset

    variables, attrs = datastore.load()  # type: ignore[no-untyped-call]
    waiting = datastore.prefetched_names
    staged = {k: v for k, v in variables.items() if k not in waiting}
    staged.update((k, v) for k, v in variables.items() if k in waiting)
    decoded, attrs, coord_names = conventions.decode_cf_variables(
        staged, attrs, drop_variables=drop_variables or None, **decoders
    )
    data_vars: dict[str, Any] = {}
    coord_vars: dict[str, Any] = {}
    for name in variables:
        if name in decoded:
            var = decoded[name]
            target = coord_vars if name in coord_names or var.dims == (name,) else data_vars
            target[name] = var
    ds = Dataset(data_vars, coords=Coordinates(coord_vars, indexes={}), attrs=attrs)
    ds.set_close(datastore.close)
    ds.encoding = datastore.get_encoding()
    return ds


def _load(
    filename_or_obj: Any,
    storage_options: Mapping[str, Any] | None,
    group: str | None,
    drop_variables: str | Iterable[str] | None,
    allow_unsafe_codecs: bool,
    **load: Any,
) -> tuple[Hierarchy, EarlyCoordinates, tuple[str, ...]]:
    """The hierarchy at ``group`` (``load``: :func:`load_hierarchy`'s options), with its dimension coordinates
    already being read, and the names to drop."""
    store = as_store(filename_or_obj, storage_options, read_only=True)
    path, drop = normalize_path(group or ""), _drop(drop_variables)
    early = EarlyCoordinates(store, path, drop_variables=drop, allow_unsafe_codecs=allow_unsafe_codecs)
    return load_hierarchy(store, path, peek=early, **load), early, drop


def _datasets(
    filename_or_obj: Any,
    rels: Callable[[Hierarchy], Iterable[str]],
    *,
    drop_variables: str | Iterable[str] | None,
    group: str | None,
    storage_options: Mapping[str, Any] | None,
    use_zarr_fill_value_as_mask: bool | None,
    allow_unsafe_codecs: bool,
    decoders: Mapping[str, Any],
    **load: Any,
) -> dict[str, Dataset]:
    """Load the hierarchy at ``group`` once (``load``: :func:`load_hierarchy`'s options; the dimension
    coordinates are read from the moment their documents arrive), then decode the groups ``rels`` picks."""
    store = as_store(filename_or_obj, storage_options, read_only=True)
    path, drop = normalize_path(group or ""), _drop(drop_variables)
    early = EarlyCoordinates(store, path, drop_variables=drop, allow_unsafe_codecs=allow_unsafe_codecs)
    hierarchy = load_hierarchy(store, path, peek=early, **load)
    out: dict[str, Dataset] = {}
    for rel in rels(hierarchy):
        datastore = ZarrDaskDataStore(
            hierarchy,
            rel,
            use_zarr_fill_value_as_mask=use_zarr_fill_value_as_mask,
            drop_variables=drop,
            allow_unsafe_codecs=allow_unsafe_codecs,
            prefetch=early.get(rel),
        )
        out[_tree_name(rel)] = _decode(datastore, drop, decoders)
    return out


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
    return _datasets(
        filename_or_obj, lambda _: [""], drop_variables=drop_variables, group=group, storage_options=storage_options,
        use_zarr_fill_value_as_mask=use_zarr_fill_value_as_mask, allow_unsafe_codecs=allow_unsafe_codecs,
        decoders=decoders, zarr_format=zarr_format, consolidated=consolidated,
    )["/"]  # fmt: skip


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
    return _datasets(
        filename_or_obj, Hierarchy.group_paths, drop_variables=drop_variables, group=group,
        storage_options=storage_options, use_zarr_fill_value_as_mask=use_zarr_fill_value_as_mask,
        allow_unsafe_codecs=allow_unsafe_codecs, decoders=decoders, zarr_format=zarr_format,
        consolidated=consolidated, max_depth=None,
    )  # fmt: skip


def open_datatree(filename_or_obj: Any, **kwargs: Any) -> DataTree:
    """The hierarchy below ``group`` as a DataTree (see :func:`open_groups_as_dict`)."""
    from xarray.backends.common import datatree_from_dict_with_io_cleanup

    return datatree_from_dict_with_io_cleanup(open_groups_as_dict(filename_or_obj, **kwargs))
