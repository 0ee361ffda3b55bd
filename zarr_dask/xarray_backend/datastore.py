"""The xarray data store of one Zarr group: variables (lazy), attributes and dimensions, read side.

A :class:`ZarrDaskDataStore` is built from a :class:`~zarr_dask.xarray_backend.hierarchy.Hierarchy` (the
metadata, already loaded with a few batched requests) and one group in it. xarray's
``StoreBackendEntrypoint`` turns it into a Dataset with xarray's own CF decoding.

An array that cannot become a variable (no dimension names, an unknown or refused codec, unparseable
documents) is skipped with a :class:`SkippedVariableWarning` naming it; only when the group has arrays and
none of them can be opened does the open fail, with xarray's ``KeyError``.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping
from typing import Any

from xarray.backends.common import AbstractDataStore
from xarray.core import indexing
from xarray.core.utils import FrozenDict
from xarray.core.variable import Variable

from zarr_dask.core import nodes
from zarr_dask.errors import UnknownCodecError, ZarrDaskError
from zarr_dask.graph.handle import ArrayHandle
from zarr_dask.spec import ArrayMetadataV2, ArrayMetadataV3
from zarr_dask.spec import json as zjson
from zarr_dask.spec.paths import join_path, key_prefix
from zarr_dask.xarray_backend.backend_array import ZarrDaskBackendArray
from zarr_dask.xarray_backend.encoding import (
    codec_problem,
    decode_fill_value_attr,
    dims_and_attrs,
    read_encoding,
)
from zarr_dask.xarray_backend.hierarchy import Hierarchy
from zarr_dask.xarray_backend.prefetch import PREFETCH_LIMIT, CoordinatePrefetch, prefetch_bytes

__all__ = ["SkippedVariableWarning", "ZarrDaskDataStore"]

ArrayMeta = ArrayMetadataV2 | ArrayMetadataV3


class SkippedVariableWarning(UserWarning):
    """An array of the group could not be opened as a variable and was left out of the dataset."""


class ZarrDaskDataStore(AbstractDataStore):
    """The variables and attributes of one group of a :class:`Hierarchy`, for xarray.

    Parameters
    ----------
    hierarchy
        The loaded metadata.
    group
        The group's path relative to ``hierarchy.path`` (``""``: the hierarchy's own group).
    use_zarr_fill_value_as_mask
        None: True for Zarr v2, False for v3 (xarray's defaults).
    drop_variables
        Names not to open at all (no warning for them either).
    allow_unsafe_codecs
        Allow pickle & co. (off by default).
    prefetch_coordinates
        Read all dimension coordinates with one batched call, in the background, as soon as the variables are
        built (xarray loads them for its indexes). Writers that only need encodings turn it off.
    prefetch
        A read of the dimension coordinates already under way (started while the metadata was loaded, see
        :class:`~zarr_dask.xarray_backend.prefetch.EarlyCoordinates`); used instead of starting one.
    """

    __slots__ = ("_arrays", "_early", "_group", "_hierarchy", "_mask", "_path", "_prefetch", "_unsafe", "_variables")

    def __init__(
        self,
        hierarchy: Hierarchy,
        group: str = "",
        *,
        use_zarr_fill_value_as_mask: bool | None = None,
        drop_variables: Iterable[str] = (),
        allow_unsafe_codecs: bool = False,
        prefetch_coordinates: bool = True,
        prefetch: CoordinatePrefetch | None = None,
    ) -> None:
        self._hierarchy = hierarchy
        self._prefetch = prefetch_coordinates
        self._early = prefetch if prefetch_coordinates else None
        self._group = group
        self._path = join_path(hierarchy.path, group)
        self._mask = hierarchy.zarr_format == 2 if use_zarr_fill_value_as_mask is None else bool(use_zarr_fill_value_as_mask)
        self._unsafe = allow_unsafe_codecs
        dropped = set(drop_variables)
        self._arrays: dict[str, ArrayMeta] = {
            name: meta
            for name, meta in sorted(hierarchy.children(group).items())
            if nodes.is_array(meta) and name not in dropped
        }
        self._variables: dict[str, Variable] | None = None

    @property
    def path(self) -> str:
        """The group's path in the store."""
        return self._path

    @property
    def store(self) -> Any:
        return self._hierarchy.store

    @property
    def prefetched_names(self) -> frozenset[str]:
        """Variables whose values come from a coordinate prefetch (empty before the variables are built)."""
        if self._variables is None:
            return frozenset()
        return frozenset(
            name for name, var in self._variables.items() if getattr(_backend_array(var), "prefetch", None)
        )

    # ------------------------------------------------------------------ xarray's data store interface
    def get_attrs(self) -> dict[str, Any]:
        attrs = self._hierarchy.group_at(self._group).attributes
        return {k: v for k, v in attrs.items() if not k.lower().startswith("_nc")}

    def get_variables(self) -> Mapping[str, Variable]:
        if self._variables is None:
            self._variables = self._open_variables()
        return FrozenDict(self._variables)

    def get_dimensions(self) -> dict[str, int]:
        dims: dict[str, int] = {}
        for name, var in self.get_variables().items():
            for d, s in zip(var.dims, var.shape, strict=True):
                if d in dims and dims[d] != s:
                    raise ValueError(f"found conflicting lengths for dimension {d} ({s} != {dims[d]})")
                dims[str(d)] = s
            del name
        return dims

    def get_encoding(self) -> dict[str, Any]:
        return {}

    def close(self) -> None:
        pass

    # ------------------------------------------------------------------ building variables
    def _skip(self, name: str, reason: str) -> None:
        warnings.warn(
            f"store {self.store.url!r}, node {'/' + join_path(self.path, name)!r}: the array {name!r} was not "
            f"opened as a variable: {reason}",
            SkippedVariableWarning,
            stacklevel=8,
        )

    def _raw_zarrays(self, names: list[str]) -> dict[str, dict[str, Any]]:
        """The raw ``.zarray`` documents of v2 arrays (for NCZarr dimension names), one batched read."""
        keys = {name: key_prefix(join_path(self.path, name)) + ".zarray" for name in names}
        got = self.store.get_many(list(keys.values())) if keys else {}
        out = {}
        for name, key in keys.items():
            try:
                out[name] = zjson.loads_object(got[key], key) if key in got else {}
            except ZarrDaskError:
                out[name] = {}
        return out

    def _group_skipped(self) -> dict[str, Exception]:
        """Children of this group whose documents could not be parsed when the hierarchy was loaded."""
        prefix = self._group + "/" if self._group else ""
        return {
            rel[len(prefix) :]: err
            for rel, err in self._hierarchy.skipped.items()
            if rel.startswith(prefix) and "/" not in rel[len(prefix) :]
        }

    def _dimensions(self, errors: dict[str, Exception]) -> dict[str, tuple[tuple[str, ...], dict[str, Any]]]:
        """Dimension names and visible attributes per array. NCZarr's ``.zarray`` keys are in the metadata;
        only when consolidated metadata dropped them (zarr-python does) are the ``.zarray`` documents of the
        arrays without dimension names read, in one batch."""
        found: dict[str, tuple[tuple[str, ...], dict[str, Any]]] = {}
        missing = []
        for name, meta in self._arrays.items():
            try:
                found[name] = dims_and_attrs(meta, meta.nczarr if isinstance(meta, ArrayMetadataV2) else None)
            except KeyError:
                missing.append(name)
        reread = [n for n in missing if isinstance(m := self._arrays[n], ArrayMetadataV2) and not m.nczarr]
        raws = self._raw_zarrays(reread if self._hierarchy.consolidated else [])
        for name in missing:
            try:
                found[name] = dims_and_attrs(self._arrays[name], raws.get(name))
            except KeyError as e:
                errors[name] = e
        return found

    def _open_variables(self) -> dict[str, Variable]:
        errors: dict[str, Exception] = dict(self._group_skipped())
        found = self._dimensions(errors)
        handles: dict[str, ArrayHandle] = {}
        for name in found:
            try:
                handles[name] = self._handle(name)
            except ZarrDaskError as e:
                errors[name] = e
        prefetch = self._early
        if prefetch is None and self._prefetch:
            prefetch = _prefetch(handles, {n: found[n][0] for n in handles})
        variables: dict[str, Variable] = {}
        for name, handle in handles.items():
            try:
                variables[name] = self._variable(name, handle, *found[name], prefetch)
            except (ZarrDaskError, TypeError, ValueError) as e:
                errors[name] = e
        if errors and not variables:
            raise next(iter(errors.values()))  # nothing could be opened: xarray's error (KeyError for dims)
        for name, err in errors.items():
            self._skip(name, _reason(err))
        return variables

    def _handle(self, name: str) -> ArrayHandle:
        """The array's handle; unknown or refused codecs are found here from their names (nothing is built
        until data is read), so such an array is skipped at open."""
        meta = self._arrays[name]
        problem = codec_problem(meta, allow_unsafe=self._unsafe)
        if problem is not None:
            raise UnknownCodecError(problem, store=self.store.url, path=join_path(self.path, name))
        path = f"{self._path}/{name}" if self._path else name  # both already checked by the hierarchy
        return ArrayHandle(self.store, path, meta, allow_unsafe_codecs=self._unsafe)

    def _variable(
        self,
        name: str,
        handle: ArrayHandle,
        dims: tuple[str, ...],
        attrs: dict[str, Any],
        prefetch: CoordinatePrefetch | None,
    ) -> Variable:
        shared = prefetch if prefetch is not None and dims == (name,) and prefetch.holds(handle) else None
        array = ZarrDaskBackendArray(handle, name=name, prefetch=shared)
        encoding = read_encoding(handle, dims)
        meta = handle.metadata
        fill = None if meta.fill_value is None else meta.fill_value[()]
        vlen = meta.data_type.vlen
        if self._mask:
            if fill is not None:
                attrs["_FillValue"] = fill
        else:
            if meta.zarr_format == 3:
                encoding["fill_value"] = fill
            if "_FillValue" in attrs:
                attrs["_FillValue"] = decode_fill_value_attr(attrs["_FillValue"], handle.dtype, vlen)
        return Variable(dims, indexing.LazilyIndexedArray(array), attrs, encoding)


def _reason(err: Exception) -> str:
    """Why an array was skipped, without the store and node the warning names already."""
    if isinstance(err, ZarrDaskError):
        return err.problem
    return str(err.args[0]) if isinstance(err, KeyError) and err.args else str(err)


def _backend_array(var: Variable) -> Any:
    data = var._data
    return data.array if isinstance(data, indexing.LazilyIndexedArray) else None


def _prefetch(handles: Mapping[str, ArrayHandle], dims: Mapping[str, tuple[str, ...]]) -> CoordinatePrefetch | None:
    """Dimension coordinates (1-d, named after their dimension) to read together, if small enough."""
    coords = {n: h for n, h in handles.items() if dims[n] == (n,)}
    if len(coords) < 2 or prefetch_bytes(coords.values()) > PREFETCH_LIMIT:
        return None
    prefetch = CoordinatePrefetch(coords.values())
    prefetch.start()
    return prefetch
