"""Argument checks of ``Dataset.to_zarr``, with xarray's exceptions and messages (xarray 2026.9).

Re-implemented here (xarray's are private functions of ``xarray.backends.zarr`` / ``writers``) so that a user
switching engines gets the same errors; where xarray's rule loses data silently (fixed-length strings
appended longer) the check is stricter and says how to fix it.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any, Literal

import numpy as np

from zarr_dask.errors import InvalidModeError

__all__ = [
    "WriteMode",
    "choose_mode",
    "validate_append_dtype",
    "validate_dataset_names",
    "validate_encoding_for_existing",
    "validate_existing_dims",
    "validate_region",
]

WriteMode = Literal["w", "w-", "a", "a-", "r+"]


def choose_mode(mode: str | None, append_dim: Hashable | None, region: Any) -> WriteMode:
    """xarray's default mode: ``"a"`` with ``append_dim``, ``"r+"`` with ``region``, else ``"w-"``.

    Examples
    --------
    >>> choose_mode(None, "time", None), choose_mode(None, None, {"x": slice(0, 2)}), choose_mode(None, None, None)
    ('a', 'r+', 'w-')
    """
    if mode is None:
        mode = "a" if append_dim is not None else "r+" if region is not None else "w-"
    if mode not in ["a", "a-"] and append_dim is not None:
        raise ValueError("cannot set append_dim unless mode='a' or mode=None")
    if mode not in ["a", "a-", "r+"] and region is not None:
        raise ValueError("cannot set region unless mode='a', mode='a-', mode='r+' or mode=None")
    if mode not in ["w", "w-", "a", "a-", "r+"]:
        raise InvalidModeError(
            f"The only supported options for mode are 'w', 'w-', 'a', 'a-', and 'r+', but mode={mode!r}"
        )
    return mode  # type: ignore[return-value]


def validate_dataset_names(dataset: Any) -> None:
    """Variable names must be non-empty strings (xarray's ``_validate_dataset_names``)."""
    for name in dataset.variables:
        if isinstance(name, str):
            if not name:
                raise ValueError(
                    f"Invalid name {name!r} for DataArray or Dataset key: string must be length 1 or greater for "
                    "serialization to netCDF or zarr files"
                )
        elif name is not None:
            raise TypeError(
                f"Invalid name {name!r} for DataArray or Dataset key: must be either a string or None for "
                "serialization to netCDF or zarr files"
            )


def validate_encoding_for_existing(encoding: Mapping[str, Any], existing: set[str], mode: str) -> None:
    """An encoding for a variable that already exists cannot be applied in modes a / a- / r+."""
    if encoding and mode in ["a", "a-", "r+"]:
        for name in sorted(existing):
            if name in encoding:
                raise ValueError(f"variable {name!r} already exists, but encoding was provided")


def _check_region_entries(ds: Any, region: dict[Any, Any]) -> None:
    for k, v in region.items():
        if k not in ds.dims:
            raise ValueError(
                f"all keys in ``region`` are not in Dataset dimensions, got {list(region)} and {list(ds.dims)}"
            )
        if not isinstance(v, slice):
            raise TypeError(f"all values in ``region`` must be slice objects, got region={region}")
        if v.step not in {1, None}:
            raise ValueError(f"step on all slices in ``region`` must be 1 or None, got region={region}")


def validate_region(
    ds: Any,
    region: Any,
    mode: str,
    append_dim: Hashable | None,
    auto_detect: Any,
) -> tuple[Any, dict[Any, slice] | None]:
    """Check ``region`` (xarray's rules) and resolve ``"auto"`` entries; returns ``(dataset, region)`` where
    the dataset has its indexes dropped (a region write never changes coordinates).

    ``auto_detect(ds, {dim: "auto", ...})`` replaces ``"auto"`` by slices (it reads the stored coordinates).
    """
    if region is None:
        return ds, None
    if isinstance(region, str) and region == "auto":
        region = dict.fromkeys(ds.dims, "auto")
    if not isinstance(region, dict):
        raise TypeError(f"``region`` must be a dict, got {type(region)}")
    region = dict(region)
    if any(isinstance(v, str) and v == "auto" for v in region.values()):
        if mode not in ["r+", "a"]:
            raise ValueError(f"``mode`` must be 'r+' or 'a' when using ``region='auto'``, got {mode!r}")
        region = auto_detect(ds, region)
    _check_region_entries(ds, region)
    non_matching = [k for k, v in ds.variables.items() if not set(region).intersection(v.dims)]
    if region and non_matching:
        raise ValueError(
            f"when setting `region` explicitly in to_zarr(), all "
            f"variables in the dataset to write must have at least "
            f"one dimension in common with the region's dimensions "
            f"{list(region.keys())}, but that is not "
            f"the case for some variables here. To drop these variables "
            f"from this dataset before exporting to zarr, write: "
            f".drop_vars({non_matching!r})"
        )
    if append_dim is not None and append_dim in region:
        raise ValueError(
            f"cannot list the same dimension in both ``append_dim`` and "
            f"``region`` with to_zarr(), got {append_dim} in both"
        )
    return ds.drop_vars(ds.indexes), region


def auto_region(ds: Any, region: dict[Any, Any], stored_index: Any) -> dict[Any, Any]:
    """Resolve ``"auto"`` region entries by looking the dataset's coordinate values up in the stored ones.

    ``stored_index(dim)`` returns the stored (decoded) coordinate values of ``dim`` as a pandas Index.
    """
    for dim, val in list(region.items()):
        if not (isinstance(val, str) and val == "auto"):
            continue
        if dim not in ds._variables:
            region[dim] = slice(0, ds.sizes[dim])
            continue
        idxs = stored_index(dim).get_indexer(ds[dim].data)
        if (idxs == -1).any():
            raise KeyError(
                f"Not all values of coordinate '{dim}' in the new array were"
                " found in the original store. Writing to a zarr region slice"
                " requires that no dimensions or metadata are changed by the write."
            )
        if (np.diff(idxs) != 1).any():
            raise ValueError(
                f"The auto-detected region of coordinate '{dim}' for writing new data"
                " to the original store had non-contiguous indices. Writing to a zarr"
                " region slice requires that the new data constitute a contiguous subset"
                " of the original store."
            )
        region[dim] = slice(int(idxs[0]), int(idxs[-1]) + 1)
    return region


def validate_append_dtype(name: str, existing_dtype: np.dtype[Any], new: Any) -> None:
    """Data appended to / written into an existing variable must fit its stored dtype.

    As xarray: numbers, times, booleans and objects pass (they are cast like NumPy casts). Fixed-length
    strings may be shorter than the stored length (they are padded); longer ones would be truncated, so they
    raise with xarray's message and the fix.
    """
    dtype = new.dtype
    easy = (
        np.issubdtype(dtype, np.number)
        or np.issubdtype(dtype, np.datetime64)
        or np.issubdtype(dtype, np.bool_)
        or dtype.kind == "O"
        or (dtype.kind in ("S", "U") and existing_dtype.kind == "O")
    )
    if easy:
        return
    if dtype.kind == existing_dtype.kind and dtype.kind in "SU" and dtype.itemsize <= existing_dtype.itemsize:
        return
    if dtype != existing_dtype:
        raise ValueError(
            f"Mismatched dtypes for variable {name} between Zarr store on disk "
            f"and dataset to append. Store has dtype {existing_dtype} but "
            f"dataset to append has dtype {dtype}."
            + (
                " Longer strings would be truncated: rewrite the variable with a longer (or variable-length) "
                f"string type, e.g. encoding={{{name!r}: {{'dtype': str}}}} with mode='w'."
                if dtype.kind in "SU"
                else ""
            )
        )


def validate_existing_dims(
    name: str, new_var: Any, existing_dims: tuple[Any, ...], existing_sizes: Mapping[Any, int], region: Any,
    append_dim: Hashable | None,
) -> Any:  # fmt: skip
    """Dimensions of a variable written into an existing array must match (transposed if needed)."""
    if new_var.dims != existing_dims:
        if set(existing_dims) == set(new_var.dims):
            new_var = new_var.transpose(*existing_dims)
        else:
            raise ValueError(
                f"variable {name!r} already exists with different "
                f"dimension names {existing_dims} != "
                f"{new_var.dims}, but changing variable "
                f"dimensions is not supported by to_zarr()."
            )
    sizes = {}
    for dim, size in existing_sizes.items():
        if region is not None and dim in region:
            start, stop, _ = region[dim].indices(size)
            size = stop - start
        if dim != append_dim:
            sizes[dim] = size
    new_sizes = {dim: size for dim, size in new_var.sizes.items() if dim != append_dim}
    if sizes != new_sizes:
        raise ValueError(
            f"variable {name!r} already exists with different "
            f"dimension sizes: {sizes} != {new_sizes}. "
            f"to_zarr() only supports changing dimension sizes when "
            f"explicitly appending, but append_dim={append_dim!r}. "
            f"If you are attempting to write to a subset of the "
            f"existing store without changing dimension sizes, "
            f"consider using the region argument in to_zarr()."
        )
    return new_var
