"""Zarr v2 specs -> Zarr v3 specs that read the *same chunk bytes* (so a store can be migrated by rewriting
its metadata only), or that describe a fresh v3 store (``chunk_key_encoding="default"``).

Per array: ``dtype`` -> ``data_type`` (byte order moves to the ``bytes`` codec), ``order: "F"`` -> a
``transpose`` codec, array filters -> array->array codecs, object codecs (``vlen-utf8``/``vlen-bytes``) -> the
array->bytes codec, byte filters and the compressor -> bytes->bytes codecs (Blosc/Zstd/GZip/CRC32C become the
core codecs, others ``numcodecs.<id>``), ``fill_value`` re-encoded (a null fill becomes the data type's
default, as v3 requires one), a valid ``_ARRAY_DIMENSIONS`` attribute -> ``dimension_names``, and the chunk
keys keep their v2 spelling (``chunk_key_encoding: v2`` with the same separator).
"""

from __future__ import annotations

import copy
import sys
from typing import Any, Literal

import numpy as np

from zarr_dask.codecs import v3_codecs_from_user
from zarr_dask.codecs.registry import codec_from_v2
from zarr_dask.errors import FillValueError, MetadataError
from zarr_dask.spec import ArrayMetadataV2, ArrayMetadataV3, data_type_from_numpy
from zarr_dask.spec.chunk_grid import RegularChunkGrid
from zarr_dask.spec.chunk_keys import DefaultChunkKeyEncoding, V2ChunkKeyEncoding
from zarr_dask.spec.dtypes import DataType

__all__ = ["array_to_format", "array_to_v3"]

KeyEncoding = Literal["v2", "default"]


def array_to_format(
    meta: ArrayMetadataV2 | ArrayMetadataV3, zarr_format: Literal[2, 3], *, chunk_key_encoding: KeyEncoding = "v2"
) -> ArrayMetadataV2 | ArrayMetadataV3:
    """``meta`` in ``zarr_format`` (unchanged if already there; v3 -> v2 is not supported)."""
    if meta.zarr_format == zarr_format:
        return meta
    if isinstance(meta, ArrayMetadataV2) and zarr_format == 3:
        return array_to_v3(meta, chunk_key_encoding=chunk_key_encoding)
    raise MetadataError(
        f"cannot convert a Zarr v{meta.zarr_format} array to v{zarr_format}; only v2 -> v3 is supported"
    )


def array_to_v3(meta: ArrayMetadataV2, *, chunk_key_encoding: KeyEncoding = "v2") -> ArrayMetadataV3:
    """The v3 metadata of a v2 array (see the module docstring).

    Raises
    ------
    MetadataError
        Codecs that have no v3 equivalent in that order (an array filter after a byte codec), a record dtype
        mixing byte orders (v3 has one ``endian`` per array), unknown or unsafe codecs.

    Examples
    --------
    >>> v2 = ArrayMetadataV2.from_json({"zarr_format": 2, "shape": [4, 6], "chunks": [2, 3], "dtype": ">i2",
    ...     "fill_value": None, "order": "F", "filters": None, "compressor": {"id": "zlib", "level": 1}},
    ...     {"_ARRAY_DIMENSIONS": ["y", "x"]})
    >>> v3 = array_to_v3(v2)
    >>> [c["name"] for c in v3.codecs], v3.dimension_names, v3.chunk_key_encoding.encode((1, 2))
    (['transpose', 'bytes', 'numcodecs.zlib'], ('y', 'x'), '1.2')
    >>> v3.codecs[1]["configuration"], v3.attributes
    ({'endian': 'big'}, {})
    """
    aa, ab, bb = _split_codecs(meta)
    object_id = str(ab["id"]) if ab is not None and ab["id"] in ("vlen-utf8", "vlen-bytes") else None
    data_type = data_type_from_numpy(meta.data_type.numpy_dtype, zarr_format=3, object_codec_id=object_id)
    serializer: Any = ab
    if serializer is None:
        endian = _endian(meta.data_type.numpy_dtype)
        serializer = {"name": "bytes", **({"configuration": {"endian": endian}} if endian else {})}
    transpose = []
    if meta.order == "F" and len(meta.shape) > 1:
        transpose = [{"name": "transpose", "configuration": {"order": list(range(len(meta.shape)))[::-1]}}]
    codecs = v3_codecs_from_user(
        data_type=data_type,
        filters=[*transpose, *aa],
        serializer=serializer,
        compressors=bb,
        chunk_shape=meta.chunks,
    )
    attributes = copy.deepcopy(meta.attributes)
    dims = meta.dimension_names
    if dims is not None:
        attributes.pop("_ARRAY_DIMENSIONS", None)
    encoding = (
        V2ChunkKeyEncoding(separator=meta.dimension_separator)
        if chunk_key_encoding == "v2"
        else DefaultChunkKeyEncoding(separator="/")
    )
    return ArrayMetadataV3(
        shape=meta.shape,
        data_type=data_type,
        chunk_grid=RegularChunkGrid(chunk_shape=meta.chunks),
        chunk_key_encoding=encoding,
        fill_value=_fill(meta, data_type),
        codecs=tuple(codecs),
        attributes=attributes,
        dimension_names=dims,
    )


def _split_codecs(meta: ArrayMetadataV2) -> tuple[list[dict[str, Any]], dict[str, Any] | None, list[dict[str, Any]]]:
    """v2 filters + compressor -> (array->array, array->bytes or None, bytes->bytes) in order."""
    chain = [*(meta.filters or ()), *([meta.compressor] if meta.compressor is not None else [])]
    aa: list[dict[str, Any]] = []
    ab: dict[str, Any] | None = None
    bb: list[dict[str, Any]] = []
    for config in chain:
        kind = codec_from_v2(config, where="v2 filters/compressor").kind
        if kind == "bytes_bytes":
            bb.append(dict(config))
            continue
        if ab is not None or bb:
            raise MetadataError(
                f"the v2 codec {config['id']!r} works on arrays but comes after a byte codec "
                f"({(ab or bb[-1])['id']!r}); Zarr v3 has no such codec order, so the array cannot be converted "
                "without rewriting its chunks"
            )
        if kind == "array_bytes":
            ab = dict(config)
        else:
            aa.append(dict(config))
    return aa, ab, bb


def _byte_orders(dtype: np.dtype[Any]) -> set[str]:
    if dtype.fields is not None:
        return set().union(*(_byte_orders(f[0]) for f in dtype.fields.values()))
    if dtype.subdtype is not None:
        return _byte_orders(dtype.subdtype[0])
    if dtype.itemsize <= 1 or dtype.byteorder == "|" or dtype.kind in "OSV":
        return set()
    if dtype.kind == "U" or dtype.byteorder in "<>":
        order = dtype.byteorder if dtype.byteorder in "<>" else "="
    else:
        order = "="
    return {{"=": "<" if sys.byteorder == "little" else ">"}.get(order, order)}


def _endian(dtype: np.dtype[Any]) -> str | None:
    orders = _byte_orders(dtype)
    if len(orders) > 1:
        raise MetadataError(
            f"the v2 dtype {dtype} mixes little- and big-endian fields, but a v3 array has one byte order; "
            "convert the data (not only the metadata) to a single byte order"
        )
    if not orders:
        return None
    return "big" if orders == {">"} else "little"


def _fill(meta: ArrayMetadataV2, data_type: DataType) -> np.ndarray[Any, Any]:
    if meta.fill_value is None:
        return data_type.default_fill_value()
    try:
        fill = np.asarray(meta.fill_value).astype(data_type.numpy_dtype)
    except (TypeError, ValueError) as e:
        raise FillValueError(
            f"the v2 fill_value {meta.fill_value!r} cannot be represented as {data_type.name}: {e}"
        ) from None
    return fill.reshape(())
