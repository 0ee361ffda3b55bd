"""The xarray ``BackendEntrypoint`` for ``engine="zarr_dask"`` (registered in the ``xarray.backends``
entry-point group).

This module is imported whenever xarray lists its engines, so it imports nothing heavy: the reading code
loads inside the methods.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal

from xarray.backends.common import BackendEntrypoint

if TYPE_CHECKING:
    from xarray import Dataset, DataTree

__all__ = ["ZarrDaskBackendEntrypoint"]

_METADATA_DOCS = ("zarr.json", ".zgroup", ".zarray", ".zmetadata")
_URL_SCHEME = "://"


def _has_metadata(url: str) -> bool:
    """True if ``url`` holds a Zarr metadata document at its root (one batched read; failures are False)."""
    try:
        from zarr_dask.store import open_store

        store = open_store(url, read_only=True)
        return bool(store.get_many(list(_METADATA_DOCS)))
    except Exception:  # noqa: BLE001 - a guess must never raise: unknown protocol, no network, no credentials...
        return False


class ZarrDaskBackendEntrypoint(BackendEntrypoint):
    """Open Zarr v2/v3 groups as Datasets and hierarchies as DataTrees with zarr_dask.

    ``xr.open_dataset(url, engine="zarr_dask", chunks={})`` reads everything xarray's own zarr engine reads
    (``dimension_names`` / ``_ARRAY_DIMENSIONS`` / NCZarr, CF decoding, consolidated metadata when present)
    with one consolidated read, or one listing plus one batched read of the member documents.
    ``chunks={}`` gives dask blocks of whole write units (shards when sharded).

    Examples
    --------
    >>> import numpy as np, xarray as xr, zarr_dask
    >>> ds = xr.Dataset({"t": ("x", np.arange(4.0))}, coords={"x": [10, 20, 30, 40]})
    >>> _ = zarr_dask.to_zarr_dataset(ds, "memory://entrypoint-doc")
    >>> xr.open_dataset("memory://entrypoint-doc", engine="zarr_dask").t.values
    array([0., 1., 2., 3.])
    """

    description = "Open Zarr v2/v3 stores (.zarr) with zarr_dask: fast opens, shard-aligned dask chunks"
    url = "https://github.com/zarr-dask/zarr_dask/blob/main/docs/xarray.md"
    supports_groups = True

    def guess_can_open(self, filename_or_obj: Any) -> bool:
        """True for ``*.zarr`` paths and URLs, and for local paths or URLs holding Zarr metadata."""
        if not isinstance(filename_or_obj, str | os.PathLike):
            return False
        text = os.fspath(filename_or_obj).rstrip("/")
        if not isinstance(text, str):
            return False
        if os.path.splitext(text)[1] == ".zarr":
            return True
        local = text[len("file://") :] if text.startswith("file://") else text
        if _URL_SCHEME not in local:
            return any(os.path.isfile(os.path.join(local, doc)) for doc in _METADATA_DOCS)
        return _has_metadata(text)

    def open_dataset(
        self,
        filename_or_obj: Any,
        *,
        mask_and_scale: bool = True,
        decode_times: Any = True,
        concat_characters: bool = True,
        decode_coords: bool | Literal["coordinates", "all"] = True,
        drop_variables: str | Iterable[str] | None = None,
        use_cftime: bool | None = None,
        decode_timedelta: Any = None,
        group: str | None = None,
        consolidated: bool | None = None,
        storage_options: Mapping[str, Any] | None = None,
        zarr_format: Literal[2, 3] | None = None,
        use_zarr_fill_value_as_mask: bool | None = None,
        allow_unsafe_codecs: bool = False,
        mode: Literal["r"] = "r",
        cache_members: bool = True,
    ) -> Dataset:
        """Open the group ``group`` of a Zarr store as a Dataset.

        Parameters
        ----------
        filename_or_obj
            A path, a URL (``"s3://bucket/data.zarr"``), a zarr_dask Store, an fsspec mapper, or a zarr-python
            ``LocalStore`` / ``FsspecStore``.
        mask_and_scale, decode_times, concat_characters, decode_coords, drop_variables, use_cftime, decode_timedelta
            xarray's CF decoding options (same defaults as xarray).
        group
            The group to open (default: the root).
        consolidated
            None (default): use consolidated metadata when present, else list the group with xarray's
            RuntimeWarning; True: require it; False: never read it (list and read the members at once).
        storage_options
            fsspec options for URLs (credentials, endpoint...).
        zarr_format
            2 or 3; None detects it.
        use_zarr_fill_value_as_mask
            Mask data equal to the Zarr ``fill_value`` (as CF ``_FillValue``). None: True for v2, False for v3.
        allow_unsafe_codecs
            Allow codecs that can run code on decode (pickle & co.); off by default.
        mode, cache_members
            Accepted as xarray's zarr engine accepts them (reading never writes; metadata is read once).

        Returns
        -------
        xarray.Dataset
            Lazy variables; arrays without dimension names (or with unknown codecs) are left out with a
            ``SkippedVariableWarning``.

        Raises
        ------
        FileNotFoundError
            Nothing is at the URL / group.
        KeyError
            The group has arrays but none of them can be opened (xarray's message).
        """
        import logging

        from zarr_dask.xarray_backend.reading import open_dataset

        del mode, cache_members
        logging.getLogger("zarr_dask.xarray").debug("open_dataset %s group=%s", filename_or_obj, group)
        return open_dataset(
            filename_or_obj,
            drop_variables=drop_variables,
            group=group,
            consolidated=consolidated,
            storage_options=storage_options,
            zarr_format=zarr_format,
            use_zarr_fill_value_as_mask=use_zarr_fill_value_as_mask,
            allow_unsafe_codecs=allow_unsafe_codecs,
            mask_and_scale=mask_and_scale,
            decode_times=decode_times,
            concat_characters=concat_characters,
            decode_coords=decode_coords,
            use_cftime=use_cftime,
            decode_timedelta=decode_timedelta,
        )

    def open_groups_as_dict(
        self,
        filename_or_obj: Any,
        *,
        mask_and_scale: bool = True,
        decode_times: Any = True,
        concat_characters: bool = True,
        decode_coords: bool | Literal["coordinates", "all"] = True,
        drop_variables: str | Iterable[str] | None = None,
        use_cftime: bool | None = None,
        decode_timedelta: Any = None,
        group: str | None = None,
        consolidated: bool | None = None,
        storage_options: Mapping[str, Any] | None = None,
        zarr_format: Literal[2, 3] | None = None,
        use_zarr_fill_value_as_mask: bool | None = None,
        allow_unsafe_codecs: bool = False,
        mode: Literal["r"] = "r",
        cache_members: bool = True,
    ) -> dict[str, Dataset]:
        """Every group below ``group`` (implicit groups included) as ``{"/path": Dataset}``; the options are
        those of :meth:`open_dataset`. The hierarchy's metadata is read once for all groups."""
        from zarr_dask.xarray_backend.reading import open_groups_as_dict

        del mode, cache_members
        return open_groups_as_dict(
            filename_or_obj,
            drop_variables=drop_variables,
            group=group,
            consolidated=consolidated,
            storage_options=storage_options,
            zarr_format=zarr_format,
            use_zarr_fill_value_as_mask=use_zarr_fill_value_as_mask,
            allow_unsafe_codecs=allow_unsafe_codecs,
            mask_and_scale=mask_and_scale,
            decode_times=decode_times,
            concat_characters=concat_characters,
            decode_coords=decode_coords,
            use_cftime=use_cftime,
            decode_timedelta=decode_timedelta,
        )

    def open_datatree(
        self, filename_or_obj: Any, **kwargs: Any
    ) -> DataTree:
        """The hierarchy below ``group`` as a DataTree; the options are those of :meth:`open_dataset`."""
        from xarray.backends.common import datatree_from_dict_with_io_cleanup

        return datatree_from_dict_with_io_cleanup(self.open_groups_as_dict(filename_or_obj, **kwargs))
