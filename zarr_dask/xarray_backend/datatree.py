"""``to_zarr_datatree``: a whole DataTree in one metadata batch and one dask graph.

Beyond xarray's ``DataTree.to_zarr``: ``append_dim`` and ``region`` work (xarray raises
NotImplementedError), ``group=`` places the tree below a group, and the hierarchy is written with one batch
of metadata documents (not one round trip per node) and consolidated once at the end.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import TYPE_CHECKING, Any, Literal

from zarr_dask.graph.progress import check_progress
from zarr_dask.spec.paths import join_path, normalize_path
from zarr_dask.xarray_backend import validation
from zarr_dask.xarray_backend.reading import as_store
from zarr_dask.xarray_backend.to_zarr import (
    DatasetWriteResult,
    check_resume,
    execute_in_turn,
    new_memory_store,
)
from zarr_dask.xarray_backend.write_plan import (
    GroupPlan,
    StoreState,
    WriteOptions,
    check_append_variables,
    plan_group,
)

if TYPE_CHECKING:
    from dask.delayed import Delayed

__all__ = ["to_zarr_datatree"]


def _node_region(ds: Any, region: Any) -> Any:
    """The part of a tree-wide ``region`` that applies to one node (the dimensions it has)."""
    if region is None or (isinstance(region, str) and region == "auto"):
        return region
    if not isinstance(region, Mapping):
        raise TypeError(f"``region`` must be a dict, got {type(region)}")
    node_region = {k: v for k, v in region.items() if k in ds.dims}
    if not node_region:
        raise ValueError(
            f"when setting `region` explicitly in to_zarr(), all variables in the dataset to write must have at "
            f"least one dimension in common with the region's dimensions {list(region)}, but that is not the case "
            f"for some variables here. To drop these variables from this dataset before exporting to zarr, write: "
            f".drop_vars({list(ds.variables)!r})"
        )
    return node_region


def _plans(
    dt: Any, state: StoreState, root: str, opts: WriteOptions, encoding: Mapping[str, Any], inherit: bool
) -> list[GroupPlan]:
    plans = []
    for node in dt.subtree:
        at_root = node is dt
        # region writes drop indexes, but region="auto" locates the data with the (inherited) coordinates
        ds = node.to_dataset(inherit=inherit or at_root or opts.region is not None)
        if opts.region is not None and not ds.drop_vars(list(ds.indexes)).variables:
            continue  # a region write never changes indexes: nothing to write in this node
        append_dim = opts.append_dim if opts.append_dim in ds.dims else None
        rel = "" if at_root else normalize_path(node.relative_to(dt))
        if opts.append_dim is not None and append_dim is None:  # a node without it: nothing stored may hold it
            check_append_variables(state, join_path(root, rel), opts.append_dim, {str(k): v for k, v in ds.variables.items()})
            if opts.mode == "a-":
                ds = ds.drop_vars(list(ds.variables))  # "a-": only variables along append_dim are written
        node_opts = WriteOptions(
            mode=opts.mode,
            append_dim=append_dim,
            region=_node_region(ds, opts.region),
            encoding=dict(encoding.get(node.path, {}) or {}),
            zarr_format=opts.zarr_format,
            write_empty_chunks=opts.write_empty_chunks,
        )
        plans.append(plan_group(state, join_path(root, rel), ds, node_opts))
    return plans


def to_zarr_datatree(
    dt: Any,
    store: Any = None,
    *,
    mode: Literal["w", "w-", "a", "a-", "r+"] | None = None,
    group: str | None = None,
    encoding: Mapping[str, Mapping[str, Any]] | None = None,
    write_inherited_coords: bool = False,
    append_dim: Hashable | None = None,
    region: Mapping[str, slice | Literal["auto"]] | Literal["auto"] | None = None,
    consolidated: bool | None = None,
    zarr_format: Literal[2, 3] | None = None,
    compute: bool = True,
    storage_options: Mapping[str, Any] | None = None,
    write_empty_chunks: bool | None = None,
    safe_chunks: bool = True,
    align_chunks: bool = False,
    resume: bool | str = False,
    progress: bool = False,
) -> DatasetWriteResult | Delayed:
    """Write a DataTree: every node becomes a group (``DataTree.to_zarr`` semantics, see
    :func:`~zarr_dask.to_zarr_dataset` for the shared arguments).

    Parameters
    ----------
    dt
        The tree.
    store
        As :func:`to_zarr_dataset` (None: a new in-memory store, the result's ``memory_store``).
    mode
        As :func:`to_zarr_dataset`; default ``"w-"`` (``"a"`` with ``append_dim``, ``"r+"`` with ``region``).
    group
        Write the tree's root to this group (xarray: not implemented).
    encoding
        ``{node path ("/a/b"): {variable: {...}}}``.
    write_inherited_coords
        Also write coordinates a node inherits from its parents (xarray's option).
    append_dim
        Append along this dimension in every node that has it (xarray: not implemented); nodes without it are
        written as with ``mode="a"``.
    region
        A region applied to every node that has its dimensions (xarray: not implemented).
    resume
        As :func:`to_zarr_dataset`: the whole tree's write resumes (one journal for the tree, under its root
        group), or with ``region=`` each node's region writes.
    progress
        As :func:`to_zarr_dataset`: a progress bar on stderr while the data is written.

    Returns
    -------
    DatasetWriteResult or dask.delayed.Delayed

    Examples
    --------
    >>> import numpy as np, xarray as xr, zarr_dask
    >>> dt = xr.DataTree.from_dict({"/": xr.Dataset(attrs={"title": "t"}),
    ...                             "/obs/a": xr.Dataset({"v": ("x", np.arange(3))})})
    >>> _ = zarr_dask.to_zarr_datatree(dt, "memory://to-zarr-datatree-doc")
    >>> xr.open_datatree("memory://to-zarr-datatree-doc", engine="zarr_dask")["obs/a"].v.values
    array([0, 1, 2])
    """
    del safe_chunks, align_chunks
    check_resume(resume, append_dim, tree=True)
    check_progress(progress, compute)
    mode_ = validation.choose_mode(mode, append_dim, region)
    encoding = dict(encoding or {})
    if set(encoding) - set(dt.groups):
        raise ValueError(f"unexpected encoding group name(s) provided: {set(encoding) - set(dt.groups)}")
    opts = WriteOptions(
        mode=mode_, append_dim=append_dim, region=region, zarr_format=zarr_format, write_empty_chunks=write_empty_chunks
    )
    s = new_memory_store(storage_options) if store is None else as_store(store, storage_options)
    root = normalize_path(group or "")

    def plan(adjust: Callable[[StoreState], StoreState] = lambda state: state) -> tuple[StoreState, list[GroupPlan]]:
        state = adjust(StoreState.load(s, empty=mode_ == "w" and not root))
        plans = _plans(dt, state, root, opts, encoding, write_inherited_coords)
        if not plans:
            raise ValueError(f"nothing to write: no node of the tree has variables along the region's dimensions {region!r}")
        return state, plans

    identity = None
    if resume and region is None:  # the run id's part from the data: every node's own variables
        nodes = [(node.path, node.to_dataset(inherit=False)) for node in dt.subtree]
        identity = (nodes, mode_, zarr_format, write_empty_chunks, consolidated, write_inherited_coords)
    return execute_in_turn(
        s, root, append_dim is not None, plan, consolidated=consolidated, compute=compute, keep_store=store is None,
        resume=resume, identity=identity, progress=progress,
    )  # fmt: skip
