"""Multiscale pyramids: :func:`pyramid` writes a dataset and its coarser levels in one dask graph, with the
zarr-conventions ``multiscales`` (or OME-Zarr 0.5) metadata; :func:`pyramid_level` picks a level to read.

Each level ``i > 0`` is ``xarray.Dataset.coarsen({dim: factor}, boundary="trim").reduce(...)`` of level
``i - 1``'s dask arrays, so the whole pyramid is one graph and each source block is read once. The formats and
the rules (trimmed edges, window-mean coordinates) are in docs/pyramids.md and docs/formats.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, Literal

from zarr_dask.errors import UnsupportedFeatureError, WritePlanError
from zarr_dask.xarray_backend.pyramid_meta import multiscales_attributes, ome_attributes, spatial_for_level
from zarr_dask.xarray_backend.pyramid_reduce import METHODS, reducer

__all__ = ["pyramid", "pyramid_level"]

Convention = Literal["multiscales", "ome-zarr"]

#: The chunk size along a coarsened dimension when neither ``chunks=`` nor the source gives one.
TILE = 512


def pyramid(
    source: Any,
    url: Any,
    *,
    levels: int | None = None,
    factor: int = 2,
    dims: Sequence[Hashable] = ("y", "x"),
    method: str | Callable[..., Any] = "mean",
    convention: Convention = "multiscales",
    chunks: Mapping[Hashable, int] | None = None,
    shards: Mapping[Hashable, int] | None = None,
    storage_options: Mapping[str, Any] | None = None,
    mode: Literal["w", "w-"] = "w-",
    zarr_format: Literal[2, 3] | None = None,
) -> dict[str, Any]:
    """Write ``source`` and its coarser levels as a multiscale pyramid: level ``i`` in child group ``"i"``.

    Parameters
    ----------
    source
        An xarray Dataset (dask-backed or in memory), or a path/URL opened with ``engine="zarr_dask"``.
    url
        Where the pyramid goes (a path, a URL or anything :func:`~zarr_dask.to_zarr_datatree` takes).
    levels
        How many levels, level 0 included (None: halve until a level fits in one chunk along ``dims``).
    factor
        The window size along each of ``dims`` from one level to the next.
    dims
        The dimensions coarsened; other dimensions (time, band) are kept whole.
    method
        ``"mean"`` (NaN ignored), ``"nearest"`` (the first value of each window), ``"mode"`` (the most
        frequent value, ties: the smallest; for class maps), ``"min"``, ``"max"`` (NaN ignored), or a function
        ``f(array, axis=tuple)`` applied as ``xarray.Dataset.coarsen().reduce(f)`` applies it. Fill values
        never enter a result: decoded ones are NaN, and integer variables with a ``_FillValue`` encoding are
        masked first (the picking methods keep their type and give the fill value back where a window held
        nothing else; ``mean`` gives NaN). Edges that do not divide by ``factor`` are trimmed
        (``boundary="trim"``): a level covers whole windows only. Coordinates of a coarser level are the mean
        of their window's (the window's centre).
    convention
        ``"multiscales"``: the zarr-conventions ``multiscales`` attribute (v1) and its ``zarr_conventions``
        declaration; ``"ome-zarr"``: OME-Zarr 0.5 ``ome.multiscales`` (Zarr v3; one entry per data variable).
    chunks, shards
        ``{dim: size}`` of the storage chunks (and shards) along ``dims`` (default: the source's chunks and
        shards),
        kept in pixels at every level and clipped to a level smaller than them; 512 where the source has no
        chunks (in memory).
    storage_options
        fsspec options of ``url`` (and of ``source`` when it is a URL).
    mode
        ``"w-"`` create (fail if anything exists), ``"w"`` replace.
    zarr_format
        2 or 3 (None: 3; ``"ome-zarr"`` needs 3).

    Returns
    -------
    dict
        The root group's attributes written (the pyramid metadata), once every level has landed.

    Examples
    --------
    >>> import numpy as np, xarray as xr, zarr_dask
    >>> ds = xr.Dataset({"v": (("y", "x"), np.arange(16.0).reshape(4, 4))},
    ...                 coords={"y": np.arange(4.0), "x": np.arange(4.0)})
    >>> meta = zarr_dask.pyramid(ds, "memory://pyramid-doc", levels=2)
    >>> [level["asset"] for level in meta["multiscales"]["layout"]]
    ['0', '1']
    >>> zarr_dask.pyramid_level("memory://pyramid-doc", max_pixels=4).v.values
    array([[ 2.5,  4.5],
           [10.5, 12.5]])
    """
    import xarray as xr

    from zarr_dask.core.api import consolidate_metadata, open_group
    from zarr_dask.xarray_backend.datatree import to_zarr_datatree

    if isinstance(source, xr.DataArray):
        source = source.to_dataset()
    if not isinstance(source, xr.Dataset):
        source = xr.open_dataset(source, engine="zarr_dask", chunks={}, storage_options=storage_options)
    where = str(url)
    dims = tuple(dims)
    _check_arguments(source, where, dims, factor, method, convention, zarr_format, mode)
    base = _base_chunks(source, dims, chunks)
    count = levels if levels is not None else _default_levels(source, dims, factor, base)
    datasets = _levels(source, where, dims, factor, method, count, base)
    tree = xr.DataTree.from_dict({str(i): _with_encoding(ds, dims, base, shards, datasets[0]) for i, ds in
                                  enumerate(datasets)})
    name = method if isinstance(method, str) else getattr(method, "__name__", "custom")
    if convention == "ome-zarr":  # before anything is written: it may refuse the dataset's axes
        attrs = ome_attributes(datasets, dims, factor, name, where)
    else:
        attrs = multiscales_attributes(len(datasets), dims, factor, name, datasets)
    fmt = 3 if convention == "ome-zarr" else zarr_format
    to_zarr_datatree(tree, url, mode=mode, zarr_format=fmt, storage_options=storage_options)
    open_group(url, mode="r+", storage_options=storage_options).attrs.update(attrs)  # levels first, then this
    consolidate_metadata(url, storage_options=storage_options)
    return attrs


def _check_arguments(ds: Any, where: str, dims: tuple[Hashable, ...], factor: int, method: Any,
                     convention: str, zarr_format: int | None, mode: str) -> None:  # fmt: skip
    if mode not in ("w", "w-"):
        raise UnsupportedFeatureError(
            f"mode={mode!r}: a pyramid is written whole, with mode='w-' (create) or 'w' (replace); updating one "
            "after an append to level 0 is not implemented yet: write it again with mode='w'", store=where,
        )  # fmt: skip
    missing = [d for d in dims if d not in ds.dims]
    if missing:
        raise WritePlanError(
            f"the dataset has no dimension {missing[0]!r} to coarsen (its dimensions: {list(ds.dims)}); pass "
            "dims= naming the spatial dimensions, e.g. dims=('lat', 'lon')", store=where,
        )  # fmt: skip
    if not isinstance(factor, int) or isinstance(factor, bool) or factor < 2:
        raise WritePlanError(f"factor must be an integer of at least 2, got {factor!r}", store=where)
    if not callable(method) and method not in METHODS:
        raise WritePlanError(
            f"unknown method {method!r}: use one of {list(METHODS)} or a function f(array, axis=tuple)",
            store=where,
        )  # fmt: skip
    if convention not in ("multiscales", "ome-zarr"):
        raise WritePlanError(f"unknown convention {convention!r}: use 'multiscales' or 'ome-zarr'", store=where)
    if convention == "ome-zarr" and zarr_format == 2:
        raise WritePlanError("OME-Zarr 0.5 is Zarr v3: pass zarr_format=3 (or None)", store=where)


def _base_chunks(ds: Any, dims: tuple[Hashable, ...], chunks: Mapping[Hashable, int] | None) -> dict[Hashable, int]:
    """Level 0's chunk size along each coarsened dimension: ``chunks``, else the source's (encoding, then dask
    blocks), else :data:`TILE` (clipped to the dimension)."""
    found: dict[Hashable, int] = {}
    for var in ds.data_vars.values():
        enc = var.encoding.get("chunks")
        for i, d in enumerate(var.dims):
            if d not in dims:
                continue
            if enc is not None:
                found[d] = min(found.get(d, enc[i]), int(enc[i]))
            elif var.chunks is not None:
                found[d] = min(found.get(d, var.chunks[i][0]), int(var.chunks[i][0]))
    found.update({d: int(v) for d, v in (chunks or {}).items() if d in dims})
    return {d: min(found.get(d, TILE), int(ds.sizes[d])) for d in dims}


def _default_levels(ds: Any, dims: tuple[Hashable, ...], factor: int, base: Mapping[Hashable, int]) -> int:
    """Halve until a level fits in one chunk along every coarsened dimension (or cannot be coarsened again)."""
    count, sizes = 1, {d: int(ds.sizes[d]) for d in dims}
    while any(sizes[d] > base[d] for d in dims) and all(sizes[d] >= factor for d in dims):
        sizes = {d: s // factor for d, s in sizes.items()}
        count += 1
    return count


def _levels(ds: Any, where: str, dims: tuple[Hashable, ...], factor: int, method: Any, count: int,
            base: Mapping[Hashable, int]) -> list[Any]:  # fmt: skip
    """Level 0 and each coarser level computed from the one above it, lazily (one graph)."""
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise WritePlanError(f"levels must be a positive integer, got {count!r}", store=where)
    func = method if callable(method) else reducer(method)
    out = [ds]
    for i in range(1, count):
        prev = out[-1]
        small = [d for d in dims if prev.sizes[d] < factor]
        if small:
            raise WritePlanError(
                f"level {i} cannot be made: level {i - 1} has {prev.sizes[small[0]]} along {small[0]!r}, less "
                f"than factor={factor}; pass levels={i} or fewer", store=where,
            )  # fmt: skip
        level = _coarsen(prev, out[0], dims, factor, func, method)
        out.append(_spatial(_merge_blocks(level, dims, base), dims, factor))
    return out


#: The methods whose result is one of the window's values: integers keep their type (and fill value).
_PICKING = ("nearest", "mode", "min", "max")


def _coarsen(prev: Any, top: Any, dims: tuple[Hashable, ...], factor: int, func: Any, method: Any) -> Any:
    """One level coarser. Integer variables with a ``_FillValue`` in level 0's encoding (not decoded to NaN,
    as an in-memory dataset's are) are masked first, so the fill value never enters a window's result; the
    picking methods then give it back where a window held nothing else, in the integer type."""
    fills = {
        name: top[name].encoding["_FillValue"] for name, var in prev.data_vars.items()
        if var.dtype.kind in "iub" and name in top and top[name].encoding.get("_FillValue") is not None
        and any(d in var.dims for d in dims)
    }  # fmt: skip
    masked = prev.assign({name: prev[name].where(prev[name] != fill) for name, fill in fills.items()})
    level = masked.coarsen(dict.fromkeys(dims, factor), boundary="trim").reduce(func)
    if method in _PICKING:
        level = level.assign({
            name: level[name].fillna(fill).astype(prev[name].dtype) for name, fill in fills.items()
        })  # fmt: skip
    return level


def _spatial(ds: Any, dims: tuple[Hashable, ...], step: int) -> Any:
    """The level with the ``spatial:transform``/``spatial:shape`` attributes it inherited from the level
    ``step`` times finer (its own and its variables') made true for it."""
    ds = ds.copy()  # new attribute dicts: a variable without the coarsened dimensions is shared with the level above
    ds.attrs = spatial_for_level(ds.attrs, ds.sizes, dims, step)
    for var in ds.variables.values():
        if any(k.startswith("spatial:") for k in var.attrs):
            var.attrs = spatial_for_level(var.attrs, dict(zip(var.dims, var.shape, strict=True)), dims, step)
    return ds


def _merge_blocks(ds: Any, dims: tuple[Hashable, ...], base: Mapping[Hashable, int]) -> Any:
    """Merge the halved dask blocks of a coarser level up to its storage chunk (a multiple of it), so the
    number of tasks shrinks with the level."""
    want: dict[Hashable, int] = {}
    for d in dims:
        chunks = ds.chunksizes.get(d)
        if chunks and max(chunks) < base[d]:
            want[d] = min(int(ds.sizes[d]), base[d] * max(1, math.ceil(max(chunks) / base[d])))
    return ds.chunk(want) if want else ds


def _with_encoding(ds: Any, dims: tuple[Hashable, ...], base: Mapping[Hashable, int],
                   shards: Mapping[Hashable, int] | None, top: Any) -> Any:  # fmt: skip
    """The level with each data variable's storage chunks (and shards) along ``dims``: the base chunk in
    pixels, clipped to the level (other dimensions: level 0's chunks, else dask blocks); shards of ``shards``
    (else level 0's) pixels, a whole number of chunks clipped to the level; other encoding (compressors, CF
    keys) as level 0's where the type is kept."""
    ds = ds.copy()
    for name, var in ds.data_vars.items():
        src = top[name]
        enc = {k: v for k, v in src.encoding.items() if k not in ("chunks", "shards", "preferred_chunks")}
        if var.dtype != src.dtype:
            enc = {k: v for k, v in enc.items() if k in ("compressors", "compressor", "filters")}
        sizes = dict(zip(var.dims, var.shape, strict=True))
        old = src.encoding.get("chunks") or (None if src.chunks is None else [c[0] for c in src.chunks])
        chunk = [min(base[d], n) if d in base else min(int(old[i]) if old else n, n) for i, (d, n) in
                 enumerate(sizes.items())]  # fmt: skip
        enc["chunks"] = tuple(max(c, 1) for c in chunk)
        old_shards = src.encoding.get("shards")
        want = dict(shards) if shards else {}
        if old_shards and not want:
            want = {d: int(old_shards[i]) for i, d in enumerate(src.dims) if d in dims}
        if want or old_shards:
            enc["shards"] = tuple(
                c * min(max(1, want[d] // c), math.ceil(n / c)) if d in want
                else int(old_shards[i]) if old_shards and d not in dims else c
                for i, (c, (d, n)) in enumerate(zip(enc["chunks"], sizes.items(), strict=True))
            )  # fmt: skip
        var.encoding = enc
    return ds


def pyramid_level(
    tree_or_url: Any,
    *,
    resolution: float | Mapping[Hashable, float] | None = None,
    max_pixels: int | None = None,
    dims: Sequence[Hashable] = ("y", "x"),
    storage_options: Mapping[str, Any] | None = None,
) -> Any:
    """The level of a pyramid to read: the coarsest whose pixels are no larger than ``resolution``, or the
    finest with at most ``max_pixels`` pixels along ``dims``.

    Parameters
    ----------
    tree_or_url
        A DataTree read from a pyramid, or its path/URL (opened with ``engine="zarr_dask"``).
    resolution
        The pixel size wanted, in the units of the coordinates along ``dims`` (level-0 pixels along a
        dimension without a coordinate; one number, or ``{dim: size}``); the finest level when even it is
        coarser.
    max_pixels
        The most pixels (the product of the sizes along ``dims``); the coarsest level when none is that small.
    dims
        The coarsened dimensions.
    storage_options
        fsspec options of the URL.

    Returns
    -------
    xarray.Dataset
        The level chosen.

    Examples
    --------
    >>> import numpy as np, xarray as xr, zarr_dask
    >>> ds = xr.Dataset({"v": (("y", "x"), np.ones((8, 8)))}, coords={"y": np.arange(8.0), "x": np.arange(8.0)})
    >>> _ = zarr_dask.pyramid(ds, "memory://pyramid-level-doc", levels=3)
    >>> dict(zarr_dask.pyramid_level("memory://pyramid-level-doc", resolution=2.5).sizes)
    {'y': 4, 'x': 4}
    """
    import xarray as xr

    if (resolution is None) == (max_pixels is None):
        raise TypeError("pyramid_level() takes exactly one of resolution= or max_pixels=")
    tree = tree_or_url
    if not isinstance(tree, xr.DataTree):
        tree = xr.open_datatree(tree_or_url, engine="zarr_dask", storage_options=storage_options)
    levels = [tree[name].to_dataset() for name in _level_names(tree)]
    dims = tuple(dims)
    if max_pixels is not None:
        for ds in levels:
            if math.prod(int(ds.sizes[d]) for d in dims) <= max_pixels:
                return ds
        return levels[-1]
    wanted: Mapping[Hashable, Any] = (
        resolution if isinstance(resolution, Mapping) else dict.fromkeys(dims, resolution)
    )
    chosen = levels[0]
    for ds in levels:
        if all(_spacing(ds, levels[0], d) <= float(wanted[d]) for d in dims if d in wanted):
            chosen = ds
    return chosen


def _level_names(tree: Any) -> list[str]:
    """The level groups in the order the metadata lists them (finest first)."""
    attrs = tree.attrs
    if "multiscales" in attrs and isinstance(attrs["multiscales"], Mapping):
        return [str(level["asset"]).split("/")[0] for level in attrs["multiscales"]["layout"]]
    ome = attrs.get("ome", {})
    if "multiscales" in ome:
        return [str(d["path"]).split("/")[0] for d in ome["multiscales"][0]["datasets"]]
    raise WritePlanError(
        "the tree's root has no 'multiscales' (zarr-conventions) or 'ome' (OME-Zarr) attribute: it is not a "
        "pyramid written by zarr_dask.pyramid(); open its levels by name"
    )


def _spacing(ds: Any, top: Any, dim: Hashable) -> float:
    """The pixel size along ``dim``: the step of its coordinate, else the size ratio to level 0 (pixels)."""
    if dim in ds.coords and ds.sizes[dim] > 1:
        c = ds[dim].values
        return float(abs(c[1] - c[0]))
    return float(top.sizes[dim]) / max(int(ds.sizes[dim]), 1)
