"""What writing one Dataset into one group does, decided before anything is written.

:func:`plan_group` turns a Dataset and xarray's ``to_zarr`` arguments into a :class:`GroupPlan`: the group's
new metadata, and per variable the array metadata and where its data goes (create, overwrite in place,
region, append). It validates everything xarray validates, with xarray's messages, against the *current*
state of the store (:class:`StoreState`, read fresh: never trusted from consolidated metadata, so an append
after someone else's append starts from the right shape).
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from zarr_dask.core import nodes
from zarr_dask.errors import (
    ContainsArrayError,
    ContainsGroupError,
    GroupNotFoundError,
    InvalidPathError,
    MetadataError,
    VariableNotFoundError,
    WritePlanError,
    ZarrDaskError,
)
from zarr_dask.graph.target import grown_metadata
from zarr_dask.spec import ArrayMetadata, GroupMetadataV2, GroupMetadataV3
from zarr_dask.spec.paths import join_path, parent_paths, validate_node_name
from zarr_dask.store import Store
from zarr_dask.xarray_backend import validation
from zarr_dask.xarray_backend.encoding import dims_and_attrs
from zarr_dask.xarray_backend.hierarchy import Hierarchy, NodeMeta, load_hierarchy
from zarr_dask.xarray_backend.variables import (
    encode_attrs,
    encode_variable,
    fill_value_and_attrs,
    new_array_metadata,
    zarr_encoding,
)

__all__ = ["GroupPlan", "StoreState", "VarWrite", "check_append_variables", "plan_group"]

ZarrFormat = Literal[2, 3]
Action = Literal["create", "overwrite", "region", "append"]


@dataclass(frozen=True)
class StoreState:
    """The metadata of every node in the store, read fresh (no consolidated metadata), root-relative."""

    store: Store
    zarr_format: ZarrFormat | None
    root: Any  # the root group's metadata, None if the store is empty
    nodes: dict[str, NodeMeta] = field(default_factory=dict)
    has_consolidated: bool = False

    @classmethod
    def load(cls, store: Store, *, empty: bool = False) -> StoreState:
        """Walk the whole store (one listing per group level, one batched read per level).

        ``empty=True`` skips the walk (the store is about to be cleared: ``mode="w"`` at the root)."""
        if empty:
            return cls(store, None, None)
        try:
            h = load_hierarchy(
                store, "", consolidated=False, max_depth=None, detect_consolidated=True, explain_missing=False
            )
        except GroupNotFoundError as e:
            if "holds an array" in e.problem:
                raise
            return cls(store, None, None)
        return cls(store, h.zarr_format, h.group, dict(h.nodes), h.has_consolidated)

    def group(self, path: str) -> Any:
        """The group at ``path`` (None if absent; an array raises)."""
        meta = self.root if not path else self.nodes.get(path)
        if meta is not None and nodes.is_array(meta):
            raise ContainsArrayError(
                "an array is here, not a group; write the dataset to another group=", store=self.store.url, path=path
            )
        return meta

    def arrays(self, path: str) -> dict[str, ArrayMetadata]:
        prefix = path + "/" if path else ""
        return {
            k[len(prefix) :]: v
            for k, v in self.nodes.items()
            if k.startswith(prefix) and "/" not in k[len(prefix) :] and nodes.is_array(v)
        }

    def occupied(self, path: str) -> bool:
        prefix = path + "/" if path else ""
        return self.group(path) is not None or any(k.startswith(prefix) for k in self.nodes)


@dataclass
class VarWrite:
    """One variable's write: its array's final metadata, the (encoded) data and where it goes."""

    name: str
    path: str
    metadata: ArrayMetadata
    data: Any
    region: tuple[slice, ...] | None
    action: Action
    old_metadata: ArrayMetadata | None = None
    write_empty_chunks: bool | None = None


@dataclass
class GroupPlan:
    """Everything one Dataset write does to its group."""

    path: str
    zarr_format: ZarrFormat
    group: GroupMetadataV2 | GroupMetadataV3 | None  # the new group document (None: left as is)
    replace: bool  # mode "w": the group's old content is deleted first
    writes: list[VarWrite] = field(default_factory=list)
    exclusive: bool = False  # mode "w-": the group document is created only if absent, or the write fails


@dataclass(frozen=True, kw_only=True)
class WriteOptions:
    mode: validation.WriteMode
    append_dim: Hashable | None = None
    region: Any = None
    encoding: Mapping[str, Any] = field(default_factory=dict)
    zarr_format: ZarrFormat | None = None
    write_empty_chunks: bool | None = None
    fill_missing: bool = False  # an append: stored variables along append_dim the dataset lacks get missing values


# ------------------------------------------------------------------------------------------ helpers
def _format(state: StoreState, path: str, opts: WriteOptions) -> ZarrFormat:
    existing = state.group(path) if opts.mode != "w" else None
    fmt = existing.zarr_format if existing is not None else state.zarr_format if state.nodes else None
    if fmt is not None and opts.mode != "w":
        if opts.zarr_format is not None and opts.zarr_format != fmt:
            raise MetadataError(
                f"the store holds Zarr v{fmt} but zarr_format={opts.zarr_format} was given; drop zarr_format= or "
                "write with mode='w' to replace the data",
                store=state.store.url,
                path=path,
            )
        return fmt
    return opts.zarr_format or (state.zarr_format if state.zarr_format and path else None) or 3


def _check_mode(state: StoreState, path: str, mode: str) -> None:
    if mode == "w-" and state.occupied(path):
        raise ContainsGroupError(
            "a group (or other nodes) already exists here and mode='w-' refuses to overwrite; use mode='w' to "
            "replace it, or mode='a' to add to it",
            store=state.store.url,
            path=path,
        )
    if mode == "r+" and state.group(path) is None:
        raise GroupNotFoundError(
            "mode='r+' writes into an existing group and there is none here; check the URL and group, or use "
            "mode='a'",
            store=state.store.url,
            path=path,
        )


def _stored_index(state: StoreState, path: str, fmt: ZarrFormat) -> Any:
    """A function dim -> the stored coordinate of ``dim`` (decoded) as a pandas Index, for region="auto"."""

    def index(dim: Any) -> Any:
        import pandas as pd
        from xarray import conventions

        # the group's own coordinate, else the nearest ancestor's (DataTree nodes inherit coordinates)
        where = next((p for p in [path, *reversed(parent_paths(path))] if str(dim) in state.arrays(p)), path)
        var = _existing_variables(state, where, fmt, [str(dim)])[str(dim)]
        decoded = conventions.decode_cf_variable(str(dim), var.compute())
        return pd.Index(decoded.data)

    return index


def _existing_variables(state: StoreState, path: str, fmt: ZarrFormat, names: list[str]) -> dict[str, Any]:
    """The stored (still CF-encoded) variables ``names`` of the group at ``path``."""
    from zarr_dask.xarray_backend.datastore import ZarrDaskDataStore

    arrays = state.arrays(path)
    group = state.group(path)
    h = Hierarchy(store=state.store, path=path, zarr_format=fmt, group=group, nodes=dict(arrays))
    ds = ZarrDaskDataStore(h, drop_variables=[n for n in arrays if n not in names], prefetch_coordinates=False)
    return dict(ds.get_variables())


def _write_empty(enc: Mapping[str, Any], global_value: bool | None) -> bool | None:
    local = enc.get("write_empty_chunks")
    if global_value is not None and local is not None and local != global_value:
        raise ValueError(
            'Differing "write_empty_chunks" values in encoding and parameters'
            f"Got encoding['write_empty_chunks'] = {local} and write_empty_chunks = {global_value}"
        )
    return global_value if global_value is not None else local


def _attr_error(e: ZarrDaskError, what: str) -> TypeError:
    """xarray's message (users match on its start: "Invalid attribute in Dataset.attrs."), then which
    attribute of what, and why."""
    return TypeError(f"Invalid attribute in Dataset.attrs. In {what}: {e}")


# ------------------------------------------------------------------------------------ new variables
def _new_write(name: str, var: Any, path: str, fmt: ZarrFormat, explicit: bool, opts: WriteOptions) -> VarWrite:
    v = encode_variable(var, name, fmt)
    enc = zarr_encoding(v, name, explicit=explicit, zarr_format=fmt)
    fill, attrs = fill_value_and_attrs(v, enc, use_mask=fmt == 2)
    try:
        meta = new_array_metadata(v, enc, zarr_format=fmt, fill_value=fill, attrs=encode_attrs(attrs))
        meta.to_documents()
    except MetadataError as e:
        if "attribute" in e.problem.lower():
            raise _attr_error(e, f"the attributes of variable {name!r}") from None
        raise e.with_context(path=join_path(path, name)) from None
    action: Action = "overwrite" if opts.mode == "w" else "create"
    return VarWrite(name, join_path(path, name), meta, v.data, None, action, None, _write_empty(enc, opts.write_empty_chunks))


# ------------------------------------------------------------------------------- existing variables
def _existing_write(
    name: str, var: Any, stored: Any, meta: ArrayMetadata, path: str, fmt: ZarrFormat, opts: WriteOptions,
    region: dict[Any, slice] | None,
) -> VarWrite:  # fmt: skip
    from xarray import conventions

    decoded, _, _ = conventions.decode_cf_variables({name: stored}, {})
    validation.validate_append_dtype(name, decoded[name].dtype, var)
    v = var.copy(deep=False)
    v.encoding = dict(decoded[name].encoding)
    v = encode_variable(v, name, fmt)
    dims, _ = dims_and_attrs(meta)
    v = validation.validate_existing_dims(name, v, dims, dict(zip(dims, meta.shape, strict=True)), region, opts.append_dim)
    write_empty = _write_empty({}, opts.write_empty_chunks)
    if opts.append_dim is not None and opts.append_dim in v.dims:
        axis = v.dims.index(opts.append_dim)
        added = v.shape[axis]
        chunks = v.chunks[axis] if v.chunks is not None else (added,)
        grown = grown_metadata(meta, axis, added, chunks)
        old = meta.shape[axis]
        sel = tuple(slice(old, old + added) if d == axis else slice(None) for d in range(v.ndim))
        return VarWrite(name, join_path(path, name), grown, v.data, sel, "append", meta, write_empty)
    sel = tuple((region or {}).get(d, slice(None)) for d in v.dims)
    return VarWrite(name, join_path(path, name), meta, v.data, sel, "region", meta, write_empty)


def _group_metadata(fmt: ZarrFormat, attrs: Mapping[str, Any], existing: Any = None) -> GroupMetadataV2 | GroupMetadataV3:
    """The group's new metadata; NCZarr bookkeeping of an existing v2 group (``_nczarr_group``...) is kept."""
    try:
        meta = (GroupMetadataV3 if fmt == 3 else GroupMetadataV2)(attributes=encode_attrs(attrs))
        if isinstance(meta, GroupMetadataV2) and isinstance(existing, GroupMetadataV2) and existing.nczarr:
            meta = dataclasses.replace(meta, nczarr=existing.nczarr)
        meta.to_documents()
    except MetadataError as e:
        raise _attr_error(e, "Dataset.attrs") from None
    return meta


def _check_append_dim(state: StoreState, path: str, append_dim: Hashable | None, existing: Mapping[str, Any]) -> None:
    if append_dim is None or append_dim in existing:
        return
    dims: dict[str, int] = {}
    for meta in existing.values():
        try:
            names, _ = dims_and_attrs(meta)
        except KeyError:
            continue
        dims.update(zip(names, meta.shape, strict=True))
    if append_dim not in dims:
        raise ValueError(f"append_dim={append_dim!r} does not match any existing dataset dimensions {dims}")


def _stored_dims(meta: ArrayMetadata) -> tuple[str, ...]:
    try:
        return dims_and_attrs(meta)[0]
    except KeyError:  # not an xarray variable: no dimensions to keep in step
        return ()


def check_append_variables(
    state: StoreState, path: str, append_dim: Hashable | None, variables: Mapping[str, Any]
) -> None:
    """An append must grow every stored variable along ``append_dim`` and only those: a stored one the
    dataset lacks would stay shorter, a new one holding ``append_dim`` would be created with only the appended
    rows, and every open of the dataset would then fail ("conflicting sizes for dimension"). Refused before
    anything is written, naming the variables and the fix. (xarray's own engine accepts both and corrupts the
    dataset; a new variable *without* ``append_dim`` is added, as xarray does: it has no length to keep.)"""
    if append_dim is None:
        return
    existing = state.arrays(path)
    dim = str(append_dim)
    stored = {n: m.shape[_stored_dims(m).index(dim)] for n, m in existing.items() if dim in _stored_dims(m)}
    missing = sorted(n for n in stored if n not in variables)
    extra = sorted(n for n, v in variables.items() if n not in existing and append_dim in v.dims)
    if not missing and not extra:
        return
    length = max(stored.values(), default=0)
    parts, fixes = [], []
    if missing:
        names = ", ".join(map(repr, missing))
        parts.append(
            f"the stored variable(s) {names} hold {dim!r} but are missing from the appended dataset (they would "
            f"keep their {length} row(s) while the others grow)"
        )
        like = next((repr(n) for n, v in variables.items() if v.dims == _stored_dims(existing[missing[0]])), "...")
        fixes.append(
            f"pass fill_missing=True to append missing values (NaN, NaT) to {names}, or add them to the dataset "
            f"(e.g. ds[{missing[0]!r}] = xr.full_like(ds[{like}], np.nan))"
        )
    if extra:
        names = ", ".join(map(repr, extra))
        parts.append(
            f"the new variable(s) {names} hold {dim!r} but are not stored (they would be created with only the "
            f"appended rows, not the {length} stored ones)"
        )
        fixes.append(
            f"drop {names} from the appended dataset (ds.drop_vars({extra!r})), or first add them over the stored "
            f"{dim!r} with missing values (to_zarr_dataset(..., mode='a') without append_dim) and append after"
        )
    raise WritePlanError(
        f"append_dim={dim!r} would corrupt the dataset: {'; '.join(parts)}, and every open would then fail with "
        f"\"conflicting sizes for dimension {dim!r}\". Nothing was written. Fix: {'; and '.join(fixes)}",
        store=state.store.url,
        path=path,
    )


def _missing_values(
    state: StoreState, path: str, fmt: ZarrFormat, append_dim: Hashable, variables: Mapping[str, Any], rows: int
) -> dict[str, Any]:
    """``fill_missing=True``: the stored variables along ``append_dim`` that ``variables`` lack, as lazy
    variables of missing values (NaN, NaT) over the ``rows`` appended (chunks all missing are not stored).
    A variable whose type has no missing value (integers without ``_FillValue``, booleans, text) is refused."""
    from xarray import Variable, conventions

    from zarr_dask.graph.gateway import array_module

    dim = str(append_dim)
    existing = state.arrays(path)
    names = [n for n, m in existing.items() if n not in variables and dim in _stored_dims(m)]
    if not names:
        return {}
    decoded, _, _ = conventions.decode_cf_variables(_existing_variables(state, path, fmt, names), {})
    out = {}
    for name in names:
        stored = decoded[name]
        kind = stored.dtype.kind
        if kind not in "fcmM":
            raise WritePlanError(
                f"fill_missing=True cannot append missing values to {name!r}: its type {stored.dtype} has none "
                "(no _FillValue); add the variable to the dataset with the values to append",
                store=state.store.url,
                path=path,
            )
        shape = tuple(rows if d == dim else n for d, n in zip(stored.dims, stored.shape, strict=True))
        value = np.datetime64("NaT") if kind == "M" else np.timedelta64("NaT") if kind == "m" else np.nan
        data = array_module().full(shape, value, dtype=stored.dtype, chunks="auto")
        out[name] = Variable(stored.dims, data, dict(stored.attrs))
    return out


def _stored_name(name: Hashable) -> str:
    """The array name of a variable: xarray stores a variable named None as ``__values__`` (and reads it back
    as None)."""
    return "__values__" if name is None else str(name)


def _check_variable_name(name: str, fmt: ZarrFormat, store: Store, path: str) -> None:
    """A variable is stored as the array of its name: refuse, before anything is written, a name that would
    nest it (``/``) or that the format cannot hold (a metadata document's name, ``.``, ``..``, control
    characters). xarray's own ``__`` names (``__xarray_dataarray_variable__``) are allowed in v3 too: xarray
    writes and reads them."""
    if "/" in name:
        raise InvalidPathError(
            f"variable {name!r} contains '/', which Zarr reads as a group path: it would be stored as an array "
            f"{name.rsplit('/', 1)[1]!r} in a subgroup, and reading the dataset back would not find it; rename "
            "the variable (groups are written with to_zarr_datatree)",
            store=store.url,
            path=path,
        )
    try:
        validate_node_name(name, fmt, allow_reserved=True)
    except InvalidPathError as e:
        raise InvalidPathError(
            f"variable {name!r} cannot be stored as an array of that name: {e.problem}", store=store.url, path=path
        ) from None


def _check_encoding_names(names: set[str], variables: Mapping[str, Any], url: str, path: str) -> None:
    """Every variable ``encoding`` names is one of the dataset's (else a KeyError, as xarray's, that says so)."""
    if unknown := sorted(names - set(variables)):
        close = [m for n in unknown for m in difflib.get_close_matches(n, list(variables), n=1)]
        hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
        raise VariableNotFoundError(
            f"encoding names variable(s) {', '.join(map(repr, unknown))} that the dataset does not have (it has "
            f"{', '.join(map(repr, sorted(variables)))}){hint} Fix the encoding's keys",
            store=url,
            path=path,
        )


def plan_group(state: StoreState, path: str, ds: Any, opts: WriteOptions) -> GroupPlan:
    """Validate a Dataset write into the group at ``path`` and work out every document and data write."""
    from xarray import conventions

    validation.validate_dataset_names(ds)
    _check_mode(state, path, opts.mode)
    fmt = _format(state, path, opts)
    existing = state.arrays(path) if opts.mode != "w" else {}
    ds, region = validation.validate_region(
        ds, opts.region, opts.mode, opts.append_dim,
        lambda d, r: validation.auto_region(d, r, _stored_index(state, path, fmt)),
    )  # fmt: skip
    validation.validate_encoding_for_existing(opts.encoding, set(existing), opts.mode)
    encoded, attrs = conventions.encode_dataset_coordinates(ds)
    variables = {_stored_name(k): v for k, v in encoded.items()}
    explicit = {_stored_name(k) for k in opts.encoding}
    _check_encoding_names(explicit, variables, state.store.url, path)
    for k, enc in opts.encoding.items():
        variables[_stored_name(k)] = variables[_stored_name(k)].copy(deep=False)  # keep the caller's as they are
        variables[_stored_name(k)].encoding = enc  # (xarray: "encoding must be castable to a dictionary")
    if opts.fill_missing and opts.append_dim is not None and opts.append_dim in ds.dims:
        variables.update(_missing_values(state, path, fmt, opts.append_dim, variables, ds.sizes[opts.append_dim]))
    names = list(variables)
    for name in names:
        _check_variable_name(name, fmt, state.store, path)
    old = [n for n in names if n in existing]
    if opts.mode == "r+" and (new_names := [k for k in names if k not in existing]):
        raise ValueError(
            f"dataset contains non-pre-existing variables {new_names!r}, "
            "which is not allowed in ``xarray.Dataset.to_zarr()`` with "
            "``mode='r+'``. To allow writing new variables, set ``mode='a'``."
        )
    _check_append_dim(state, path, opts.append_dim, existing)
    check_append_variables(state, path, opts.append_dim, variables)
    if region is not None and (missing := [n for n in names if n not in existing]):
        raise ValueError(
            f"variables {missing!r} do not exist in the store, and a region write can only write into existing "
            "variables; write them first (without region=), or drop them from the dataset"
        )
    plan = GroupPlan(
        path=path,
        zarr_format=fmt,
        group=None if opts.mode == "r+" else _group_metadata(fmt, attrs, None if opts.mode == "w" else state.group(path)),
        replace=opts.mode == "w",
        exclusive=opts.mode == "w-",
    )
    for name in names:
        if name not in old:
            plan.writes.append(_new_write(name, variables[name], path, fmt, name in explicit, opts))
    stored = _existing_variables(state, path, fmt, old) if old else {}
    for name in old:
        if opts.mode == "a-" and opts.append_dim is not None and opts.append_dim not in variables[name].dims:
            continue
        plan.writes.append(
            _existing_write(name, variables[name], stored[name], existing[name], path, fmt, opts, region)
        )
    return plan

