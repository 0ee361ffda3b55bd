"""xarray's Zarr conventions on read: dimension names, hidden attributes, fill values and the encoding dict.

* Dimensions: v3 ``dimension_names``; v2 the ``_ARRAY_DIMENSIONS`` attribute (hidden from ``attrs``), with
  NCZarr's ``_nczarr_array`` / ``_NCZARR_ARRAY`` (``dimrefs``, or ``dimension_references`` in newer
  netCDF-C) in ``.zarray`` or ``.zattrs`` as the fallback; attributes starting ``_nc`` are hidden in v2 (as
  xarray does).
* Fill values (``use_zarr_fill_value_as_mask``, default True for v2 and False for v3): when true the Zarr
  ``fill_value`` becomes the CF ``_FillValue`` that masks data; when false it is kept in
  ``encoding["fill_value"]`` (v3) and a ``_FillValue`` attribute is decoded from xarray's ``FillValueCoder``
  form (floats as base64 of a little-endian float64).
* Encoding: ``chunks`` (the chunk, or inner chunk when sharded), ``preferred_chunks`` (the write unit: the
  shard when sharded), ``shards``, ``compressors`` and ``filters`` (v2: numcodecs objects, as xarray's engine;
  v3: codec JSON, which both engines take back) and (v3) ``serializer`` as codec JSON.
"""

from __future__ import annotations

import base64
import struct
from collections.abc import Mapping
from typing import Any

import numpy as np

from zarr_dask.codecs.numcodecs_bridge import ALLOWLIST
from zarr_dask.codecs.objects import codec_object
from zarr_dask.codecs.registry import NUMCODECS_PREFIX
from zarr_dask.graph.handle import ArrayHandle
from zarr_dask.spec import ArrayMetadataV2, ArrayMetadataV3, RegularDimGrid
from zarr_dask.spec.layout import flat_codecs, sharding_of

__all__ = [
    "DIMENSION_KEY",
    "codec_problem",
    "decode_fill_value_attr",
    "dims_and_attrs",
    "encode_fill_value_attr",
    "read_encoding",
]

DIMENSION_KEY = "_ARRAY_DIMENSIONS"
_NCZARR_KEYS = ("_NCZARR_ARRAY", "_nczarr_array")


def nczarr_dims(raw_zarray: Mapping[str, Any] | None, raw_zattrs: Mapping[str, Any]) -> list[str] | None:
    """Dimension names from NCZarr metadata: the fully qualified ``dimrefs`` (``dimension_references`` in
    newer netCDF-C) of ``_nczarr_array`` / ``_NCZARR_ARRAY``, in ``.zarray`` or ``.zattrs``; the basename is
    the name (as xarray takes it).

    Examples
    --------
    >>> nczarr_dims({"_NCZARR_ARRAY": {"dimrefs": ["/g/time", "/x"]}}, {})
    ['time', 'x']
    >>> nczarr_dims(None, {"_nczarr_array": {"dimension_references": ["/y"]}})
    ['y']
    """
    for doc in (raw_zarray or {}, raw_zattrs):
        for key in _NCZARR_KEYS:
            info = doc.get(key)
            if not isinstance(info, Mapping):
                continue
            refs = info.get("dimrefs", info.get("dimension_references"))
            if isinstance(refs, list):
                return [str(d).rsplit("/", 1)[-1] for d in refs]
    return None


def dims_and_attrs(
    meta: ArrayMetadataV2 | ArrayMetadataV3, raw_zarray: Mapping[str, Any] | None = None
) -> tuple[tuple[str, ...], dict[str, Any]]:
    """``(dimension names, visible attributes)`` of an array, as xarray's zarr engine finds them.

    Raises
    ------
    KeyError
        With xarray's message when the array has no (complete) dimension names.
    """
    attrs = dict(meta.attributes)
    if isinstance(meta, ArrayMetadataV3):
        names = meta.dimension_names or ()
        if len(names) != len(meta.shape) or any(n is None for n in names):
            raise KeyError(
                "Zarr object is missing the `dimension_names` metadata which is "
                "required for xarray to determine variable dimensions."
            )
        return tuple(str(n) for n in names), attrs
    dims = attrs.get(DIMENSION_KEY)
    if dims is None:
        dims = nczarr_dims(raw_zarray, attrs)
        if dims is None:
            raise KeyError(
                f"Zarr object is missing the attribute `{DIMENSION_KEY}` and the NCZarr metadata, "
                "which are required for xarray to determine variable dimensions."
            )
    if not isinstance(dims, list | tuple) or len(dims) != len(meta.shape):
        raise KeyError(
            f"Zarr object has an invalid attribute `{DIMENSION_KEY}` {dims!r} (it needs one name per dimension, "
            f"{len(meta.shape)}), which is required for xarray to determine variable dimensions."
        )
    hidden = {k for k in attrs if k == DIMENSION_KEY or k.lower().startswith("_nc")}
    return tuple(str(d) for d in dims), {k: v for k, v in attrs.items() if k not in hidden}


# ------------------------------------------------------------------------------------------ fill values
def _b64_float(value: Any) -> str:
    return base64.standard_b64encode(struct.pack("<d", float(value))).decode()


def encode_fill_value_attr(value: Any, dtype: np.dtype[Any], vlen: str | None = None) -> Any:
    """The ``_FillValue`` attribute as xarray's ``FillValueCoder`` writes it (v3 arrays).

    Examples
    --------
    >>> encode_fill_value_attr(float("nan"), np.dtype("f4"))
    'AAAAAAAA+H8='
    >>> encode_fill_value_attr(-999, np.dtype("i2"))
    -999
    """
    if vlen == "str" or dtype.kind == "U":
        return str(value)
    if vlen == "bytes" or dtype.kind == "S":
        if not isinstance(value, bytes):
            raise TypeError(f"Failed to encode fill_value: expected bytes for dtype {dtype}, got {type(value).__name__}")
        return base64.standard_b64encode(value).decode()
    if dtype.kind == "b":
        return bool(value)
    if dtype.kind in "iu":
        if not isinstance(value, int | float | np.integer | np.floating):
            raise TypeError(
                f"Failed to encode fill_value: expected int or float for dtype {dtype}, got {type(value).__name__}"
            )
        return int(value)
    if dtype.kind == "f":
        if not isinstance(value, int | float | np.integer | np.floating):
            raise TypeError(
                f"Failed to encode fill_value: expected int or float for dtype {dtype}, got {type(value).__name__}"
            )
        return _b64_float(value)
    if dtype.kind == "c":
        c = complex(value)
        return [_b64_float(c.real), _b64_float(c.imag)]
    raise ValueError(f"Failed to encode fill_value. Unsupported dtype {dtype}")


def decode_fill_value_attr(value: Any, dtype: np.dtype[Any], vlen: str | None = None) -> Any:
    """Inverse of :func:`encode_fill_value_attr` (a v3 ``_FillValue`` attribute -> the value).

    Raises
    ------
    TypeError
        With xarray's message, for a float ``_FillValue`` stored as a number instead of base64 (as xarray).
    """
    if vlen == "str":
        return str(value)
    if vlen == "bytes":
        if not isinstance(value, str | bytes):
            raise TypeError(f"Failed to decode fill_value: expected str or bytes for dtype {dtype}, got {type(value).__name__}")
        return base64.standard_b64decode(value)
    if dtype.kind == "f":
        if not isinstance(value, str | bytes):
            raise TypeError(
                f"Failed to decode fill_value: expected str or bytes for dtype {dtype}, got {type(value).__name__}"
            )
        return struct.unpack("<d", base64.standard_b64decode(value))[0]
    if dtype.kind == "c":
        if not (isinstance(value, list | tuple) and len(value) == 2):
            raise TypeError(
                f"Failed to decode fill_value: expected a 2-element list for dtype {dtype}, got {type(value).__name__}"
            )
        re, im = (struct.unpack("<d", base64.standard_b64decode(v))[0] for v in value)
        return complex(re, im)
    if dtype.kind == "b":
        return bool(value)
    if dtype.kind in "iu":
        if not isinstance(value, int | float | np.integer | np.floating):
            raise TypeError(
                f"Failed to decode fill_value: expected int or float for dtype {dtype}, got {type(value).__name__}"
            )
        return int(value)
    if dtype.kind == "U":
        return str(value)
    if dtype.kind == "S":
        return base64.standard_b64decode(value)
    raise ValueError(f"Failed to decode fill_value. Unsupported dtype {dtype}")


# --------------------------------------------------------------------------------------------- encoding
def _compact(sizes: tuple[int, ...]) -> int | tuple[int, ...]:
    """One int for a regular dimension (the last block may be shorter), else the tuple (xarray's form)."""
    if not sizes:
        return 0
    if len(set(sizes[:-1])) <= 1 and sizes[-1] <= sizes[0]:
        return sizes[0]
    return sizes


def _dim_sizes(grid: Any, extent: int) -> tuple[int, ...]:
    if isinstance(grid, RegularDimGrid):
        return (grid.chunk_size,)
    return tuple(grid.data_size(i) for i in range(grid.nchunks())) or (0,)


_V3_KINDS = {
    **dict.fromkeys(("bytes", "endian", "vlen-utf8", "vlen-bytes", "sharding_indexed"), "array_bytes"),
    "transpose": "array_array",
    **dict.fromkeys(("gzip", "zstd", "blosc", "crc32c"), "bytes_bytes"),
}


def _name(entry: Any) -> str:
    return entry if isinstance(entry, str) else str(entry.get("name", "")) if isinstance(entry, Mapping) else ""


def _kind(name: str) -> str | None:
    """The kind of a v3 codec from its name alone (None: unknown), without building it."""
    if name in _V3_KINDS:
        return _V3_KINDS[name]
    if name.startswith(NUMCODECS_PREFIX) and name[len(NUMCODECS_PREFIX) :] in ALLOWLIST:
        return ALLOWLIST[name[len(NUMCODECS_PREFIX) :]].kind
    return None


def _v3_codec_problem(codecs: Any, allow_unsafe: bool) -> str | None:
    for entry in codecs:
        name = _name(entry)
        if _kind(name) is None:
            return f"unknown codec {name!r} (zarr_dask reads {', '.join(sorted(_V3_KINDS))} and numcodecs.<id>)"
        if name.startswith(NUMCODECS_PREFIX) and ALLOWLIST[name[len(NUMCODECS_PREFIX) :]].unsafe and not allow_unsafe:
            return f"codec {name!r} can run code on decode; open with allow_unsafe_codecs=True if you trust the data"
        if name == "sharding_indexed" and isinstance(entry, Mapping):
            config = entry.get("configuration") or {}
            inner = [*config.get("codecs", ()), *config.get("index_codecs", ())]
            problem = _v3_codec_problem(inner, allow_unsafe)
            if problem is not None:
                return problem
    return None


def codec_problem(meta: ArrayMetadataV2 | ArrayMetadataV3, *, allow_unsafe: bool = False) -> str | None:
    """Why the array's codecs cannot be read here (unknown, or unsafe without the opt-in), from the names
    alone -- nothing is built, so checking every array of a large dataset at open costs next to nothing."""
    if isinstance(meta, ArrayMetadataV3):
        return _v3_codec_problem(meta.codecs, allow_unsafe)
    for config in [*(meta.filters or ()), *([meta.compressor] if meta.compressor else [])]:
        codec_id = str(config.get("id"))
        entry = ALLOWLIST.get(codec_id)
        if entry is None:
            return f"unknown codec id {codec_id!r} (zarr_dask reads the numcodecs ids {', '.join(sorted(ALLOWLIST))})"
        if entry.unsafe and not allow_unsafe:
            return f"codec {codec_id!r} can run code on decode; open with allow_unsafe_codecs=True if you trust the data"
    return None


def _split_codecs(codecs: tuple[Any, ...]) -> tuple[tuple[Any, ...], Any, tuple[Any, ...]]:
    """v3 codecs -> (filters, serializer, compressors): array->array codecs come before the one array->bytes
    codec, bytes->bytes codecs after it (the order the spec requires)."""
    kinds = [_kind(_name(e)) for e in codecs]
    at = next((i for i, k in enumerate(kinds) if k == "array_bytes"), None)
    if at is None:
        return (), None, tuple(codecs)
    return tuple(codecs[:at]), codecs[at], tuple(codecs[at + 1 :])


def read_encoding(handle: ArrayHandle, dims: tuple[str, ...]) -> dict[str, Any]:
    """The variable encoding xarray's zarr engine reports (v2 compressors and filters as numcodecs objects,
    v3 codecs as JSON dicts), with ``preferred_chunks``
    set to the write unit (the shard when sharded), so ``chunks={}`` gives shard-aligned dask blocks."""
    meta = handle.metadata
    grids, shape = handle.io.grids, handle.shape
    units = tuple(_compact(_dim_sizes(g, n)) for g, n in zip(grids, shape, strict=True))
    sharding = sharding_of(meta)
    inner = sharding is not None and sharding.leading
    chunks: tuple[Any, ...] = sharding.inner_chunk_shape if sharding is not None and inner else units
    encoding: dict[str, Any] = {
        "chunks": chunks,
        "preferred_chunks": dict(zip(dims, units, strict=True)),
        "shards": units if sharding is not None else None,
    }
    if isinstance(meta, ArrayMetadataV2):
        encoding["compressors"] = () if meta.compressor is None else (codec_object(meta.compressor),)
        encoding["filters"] = tuple(codec_object(f) for f in meta.filters or ())
        return encoding
    codecs = tuple(flat_codecs(meta.codecs))
    filters, serializer, compressors = _split_codecs(codecs)
    # v3 codecs stay JSON (xarray's engine reports zarr-python objects, which need zarr-python; both engines
    # take the JSON back on write, and zarr-python refuses numcodecs objects in a v3 chain)
    encoding.update({"compressors": compressors, "filters": filters, "serializer": serializer})
    return encoding
