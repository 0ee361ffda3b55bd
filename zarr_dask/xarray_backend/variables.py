"""Variables -> Zarr arrays on write: CF encoding, the encoding dict, fill values and new array metadata.

CF encoding is xarray's own (``encode_zarr_variable``: ``scale_factor``/``add_offset``, times as int64 with
``units``/``calendar``, ``_FillValue``...). What differs from xarray's zarr engine, on purpose:

* text is written as the spec'd variable-length ``string`` type in Zarr v3 (xarray writes NumPy ``<U`` as
  ``fixed_length_utf32``, which zarr-python warns is unstable); v2 keeps ``<U``;
* a v2 array without ``_FillValue`` gets ``fill_value: null``, never a default ``0`` that would mask real
  zeros when read back;
* stale encodings carried over from a source store (``chunks`` of another rank, rectilinear edges that no
  longer cover the shape, ``shards`` that are not whole chunks, v3-only keys for a v2 target) are dropped with
  a :class:`StaleEncodingWarning` instead of failing the write; explicit ``encoding=`` entries are checked
  strictly, with xarray's "unexpected encoding parameters" error;
* irregular dask chunks are fine: the write planner gives every storage key one writer. By default the array
  gets regular chunks (the largest dask block); per-dimension edge tuples in ``encoding["chunks"]`` ask for
  a rectilinear grid (v3).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import warnings
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np

from zarr_dask.core.create import build_array_metadata
from zarr_dask.spec import ArrayMetadata, ArrayMetadataV2
from zarr_dask.spec.ml_types import ML_NAMES, cast_values, ml_dtype
from zarr_dask.xarray_backend.encoding import encode_fill_value_attr

__all__ = [
    "StaleEncodingWarning",
    "encode_attrs",
    "encode_variable",
    "fill_value_and_attrs",
    "new_array_metadata",
    "zarr_encoding",
]

ZarrFormat = Literal[2, 3]
_VALID = frozenset(
    {"chunks", "shards", "compressors", "filters", "serializer", "cache_metadata", "write_empty_chunks", "chunk_key_encoding"}
)
_SAFE_TO_DROP = frozenset({"source", "original_shape", "preferred_chunks"})
_V3_ONLY = ("shards", "serializer")


class StaleEncodingWarning(UserWarning):
    """An encoding carried over from a source (e.g. ``chunks`` of the store it was read from) did not fit the
    data being written and was dropped."""


def _stale(name: Any, key: str, value: Any, why: str) -> None:
    warnings.warn(
        f"variable {name!r}: dropped the encoding {key}={value!r} ({why}); it was probably carried over from the "
        f"store the data was read from. Set encoding={{{name!r}: {{{key!r}: ...}}}} to choose explicitly, or "
        f"`del ds[{name!r}].encoding[{key!r}]` to silence this warning",
        StaleEncodingWarning,
        stacklevel=5,
    )


def _chunk_spec_problem(value: Any, shape: tuple[int, ...]) -> str | None:
    """Why ``value`` cannot be the chunks/shards of an array of ``shape`` (None if it can)."""
    if isinstance(value, int | np.integer) or value is None or (isinstance(value, str) and value == "auto"):
        return None
    if isinstance(value, Mapping):
        return None
    if not isinstance(value, Sequence) or len(value) != len(shape):
        return f"it has {len(value) if isinstance(value, Sequence) else '?'} entries for {len(shape)} dimensions"
    for c, n in zip(value, shape, strict=True):
        if isinstance(c, Sequence):
            if any(int(e) <= 0 for e in c) or sum(int(e) for e in c) < n:
                return f"the edges {tuple(c)} do not cover a dimension of length {n}"
        elif int(c) < -1 or int(c) == 0:
            return f"chunk size {c} is not positive"
    return None


def _shard_problem(shards: Any, chunks: Any) -> str | None:
    if isinstance(shards, Sequence) and isinstance(chunks, Sequence) and not isinstance(shards, str):
        for s, c in zip(shards, chunks, strict=False):
            if isinstance(s, int | np.integer) and isinstance(c, int | np.integer) and s > 0 and s % c:
                return f"shard size {s} is not a multiple of the chunk size {c}"
    return None


def _drop_stale(name: Any, enc: dict[str, Any], shape: tuple[int, ...], zarr_format: ZarrFormat) -> None:
    for key in ("chunks", "shards"):
        problem = _chunk_spec_problem(enc.get(key), shape)
        if problem is not None:
            _stale(name, key, enc.pop(key), problem)
    problem = _shard_problem(enc.get("shards"), enc.get("chunks"))
    if problem is not None:
        _stale(name, "shards", enc.pop("shards"), problem)
    if zarr_format == 2:
        for key in _V3_ONLY:
            value = enc.pop(key, None)
            if value is not None:
                _stale(name, key, value, "Zarr v2 has no such setting")


def zarr_encoding(var: Any, name: Any, *, explicit: bool, zarr_format: ZarrFormat) -> dict[str, Any]:
    """The Zarr part of an (already CF-encoded) variable's encoding.

    Parameters
    ----------
    var
        The encoded variable.
    name
        Its name (for messages).
    explicit
        The encoding came from ``to_zarr_dataset(encoding=...)``: unknown keys raise xarray's ValueError and
        nothing is dropped. Otherwise unknown keys are dropped silently (as xarray does) and stale values with
        a :class:`StaleEncodingWarning`.
    zarr_format
        The target format (``fill_value`` is a valid key for v3 only).

    Raises
    ------
    ValueError
        ``unexpected encoding parameters for zarr backend: [...]`` (xarray's message) for explicit encodings.
    """
    # ``_FillValue`` moved to the attributes during CF encoding; ``_FillValue: None`` (no fill value) stays
    enc = {k: v for k, v in var.encoding.items() if k not in _SAFE_TO_DROP and not (k == "_FillValue" and v is None)}
    valid = _VALID | ({"fill_value"} if zarr_format == 3 else set())
    invalid = [k for k in enc if k not in valid]
    if explicit and invalid:
        msg = " Use `_FillValue` to set the Zarr array `fill_value`" if "fill_value" in invalid and zarr_format == 2 else ""
        raise ValueError(f"unexpected encoding parameters for zarr backend:  {invalid!r}." + msg)
    for k in invalid:
        del enc[k]
    if isinstance(enc.get("chunks"), tuple | list | dict) and not enc["chunks"]:
        del enc["chunks"]  # chunks=() or {}: none given, as xarray reads it (the dask blocks, or automatic chunks)
    if not explicit:
        _drop_stale(name, enc, tuple(var.shape), zarr_format)
    if isinstance(enc.get("shards"), int | np.integer):
        enc["shards"] = (int(enc["shards"]),) * var.ndim
    return enc


def encode_variable(var: Any, name: Any, zarr_format: ZarrFormat) -> Any:
    """xarray's CF encoding for Zarr; v3 text becomes variable-length ``string`` (object dtype); an encoding
    ``dtype`` naming a complex ML data type (``"complex_float16"``, ``"complex_bfloat16"``...), which xarray does
    not know, is cast here, part by part (:func:`~zarr_dask.spec.ml_types.cast_values`)."""
    from xarray.backends.zarr import encode_zarr_variable

    ml_name = var.encoding.get("dtype")
    if zarr_format == 3 and isinstance(ml_name, str) and ml_name in ML_NAMES and ml_name.startswith("complex_"):
        var = var.copy(deep=False)
        var.encoding = {k: v for k, v in var.encoding.items() if k != "dtype"}
        var = _ml_cast(encode_variable(var, name, zarr_format), ml_dtype(ml_name))
        return var

    if "zarr_format" in inspect.signature(encode_zarr_variable).parameters:  # xarray >= 2026.9
        var = encode_zarr_variable(var, name=name, zarr_format=zarr_format)
    else:
        var = encode_zarr_variable(var, name=name)
    if zarr_format == 3 and var.dtype.kind == "U":
        var = var.copy(deep=False)
        var.data = var.data.astype(object)
    return var


def _ml_cast(var: Any, dtype: np.dtype[Any]) -> Any:
    """``var`` with its data cast to ``dtype`` (lazily for dask data)."""
    var = var.copy(deep=False)
    data = var.data
    if hasattr(data, "map_blocks") and hasattr(data, "dask"):
        var.data = data.map_blocks(functools.partial(cast_values, dtype=dtype), dtype=dtype)
    else:
        var.data = cast_values(np.asarray(data), dtype)
    return var


def encode_attrs(attrs: Mapping[str, Any]) -> dict[str, Any]:
    """Attributes as JSON-ready values (ndarray -> list, NumPy scalar -> Python scalar), as xarray does."""
    out = {}
    for k, v in attrs.items():
        if isinstance(v, np.ndarray):
            v = v.tolist()
        elif isinstance(v, np.generic):
            v = v.item()
        out[k] = v
    return out


def fill_value_and_attrs(
    var: Any, enc: dict[str, Any], *, use_mask: bool
) -> tuple[Any, dict[str, Any]]:
    """``(zarr fill_value, attributes)`` of a new array from an encoded variable (xarray's rules).

    With ``use_mask`` (Zarr v2) the CF ``_FillValue`` *is* the Zarr ``fill_value``. Without (v3) the
    ``fill_value`` comes from ``encoding["fill_value"]`` (NaN for floats by default) and ``_FillValue`` stays
    an attribute in xarray's ``FillValueCoder`` form.
    """
    attrs = dict(var.attrs)
    if use_mask:
        fill = attrs.pop("_FillValue", None)
    else:
        fill = enc.pop("fill_value", None)
        if fill is None and var.dtype.kind == "f":
            fill = np.nan
        if "_FillValue" in attrs:
            fv = attrs.pop("_FillValue")
            if fv is not None:
                vlen = "str" if var.dtype.kind == "O" and not isinstance(fv, bytes) else None
                attrs["_FillValue"] = encode_fill_value_attr(fv, var.dtype, vlen)
    if var.encoding.get("_FillValue") is not None:
        raise ValueError("Zarr does not support _FillValue in encoding.")
    return fill, attrs


def _default_chunks(var: Any) -> Any:
    """Chunks of a new array without ``encoding["chunks"]``: the dask blocks (the largest block along an
    irregular dimension; the planner gathers blocks per key), or zarr_dask's automatic choice for NumPy data."""
    if var.chunks is None:
        return "auto"
    return tuple(max(max(c, default=1), 1) for c in var.chunks)


def new_array_metadata(
    var: Any,
    enc: Mapping[str, Any],
    *,
    zarr_format: ZarrFormat,
    fill_value: Any,
    attrs: Mapping[str, Any],
) -> ArrayMetadata:
    """The metadata of a new array for an encoded variable (nothing is written here)."""
    chunks = enc.get("chunks")
    if chunks is None or (isinstance(chunks, str) and chunks == "auto"):
        chunks = _default_chunks(var)
    if var.size == 0:
        chunks = tuple(max(c, 1) for c in var.shape) if var.ndim else ()
    kwargs: dict[str, Any] = {
        "chunks": chunks,
        "compressors": enc.get("compressors", "auto"),
        "filters": enc.get("filters"),
        "attributes": attrs,
        "dimension_names": tuple(str(d) for d in var.dims),
        "zarr_format": zarr_format,
        "fill_value": fill_value,
    }
    if enc.get("serializer") is not None:
        kwargs["serializer"] = enc["serializer"]
    if enc.get("shards") is not None:
        kwargs["shards"] = enc["shards"]
    if enc.get("chunk_key_encoding") is not None:
        kwargs["chunk_key_encoding"] = enc["chunk_key_encoding"]
    meta = build_array_metadata(shape=var.shape, dtype=var.dtype, **kwargs)
    if isinstance(meta, ArrayMetadataV2) and fill_value is None:
        meta = dataclasses.replace(meta, fill_value=None)  # no fill: never mask real zeros on read
    return meta
