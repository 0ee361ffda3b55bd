"""User codec arguments (as zarr-python's ``create_array`` takes them) -> the codec JSON to write.

Accepted for every argument: ``"auto"`` (zarr-python's defaults), ``None`` / ``[]`` (none), a numcodecs object,
a zarr-python v3 codec object (anything with ``to_dict()``), a v3 dict ``{"name": ...}``, a v2 dict
``{"id": ...}``, a short name (``"zstd"``), or a list of those. numcodecs objects and v2 dicts become the v3
core codec where one exists (Zstd -> ``zstd``, GZip -> ``gzip``, Blosc -> ``blosc``, CRC32C -> ``crc32c``),
else ``numcodecs.<id>``; v3 dicts become v2 ids the other way round.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from zarr_dask.codecs.base import ArrayArrayCodec, ChunkSpec, Codec, has_endianness
from zarr_dask.codecs.builtin import BLOSC_SHUFFLES, BloscCodec, BytesCodec, TransposeCodec, VlenCodec
from zarr_dask.codecs.n5 import N5DefaultCodec
from zarr_dask.codecs.numcodecs_bridge import check_allowed, make_numcodecs, numcodecs_config
from zarr_dask.codecs.pipeline import pipeline_from_v2, pipeline_from_v3
from zarr_dask.codecs.registry import NUMCODECS_PREFIX, codec_from_v3
from zarr_dask.codecs.reshape import ReshapeCodec
from zarr_dask.codecs.sharding import ShardingCodec
from zarr_dask.codecs.value import check_fill
from zarr_dask.errors import MetadataError
from zarr_dask.spec.dtypes import DataType

__all__ = ["V2_DEFAULT_COMPRESSOR", "V3_DEFAULT_COMPRESSOR", "v2_codecs_from_user", "v3_codecs_from_user"]

V3_DEFAULT_COMPRESSOR: dict[str, Any] = {"name": "zstd", "configuration": {"level": 0, "checksum": False}}
"""zarr-python's default v3 compressor."""
V2_DEFAULT_COMPRESSOR: dict[str, Any] = {
    "id": "blosc",
    "cname": "lz4",
    "clevel": 5,
    "shuffle": 1,
    "blocksize": 0,
}
"""zarr-python's default v2 compressor (all data types)."""

_ROLE_KIND = {"filters": "array_array", "serializer": "array_bytes", "compressors": "bytes_bytes"}
_KIND_ROLE = {v: k for k, v in _ROLE_KIND.items()}


def _items(value: Any, auto: list[Any]) -> list[Any]:
    if isinstance(value, str) and value == "auto":
        return list(auto)
    if value is None:
        return []
    if isinstance(value, list | tuple):
        return list(value)
    return [value]


def _is_object(data_type: DataType) -> bool:
    return data_type.vlen is not None or data_type.numpy_dtype.kind == "O"


def _vlen_id(data_type: DataType) -> str:
    return "vlen-bytes" if data_type.vlen == "bytes" else "vlen-utf8"


# ------------------------------------------------------------------------------------------------ v2 -> v3
def _core_blosc(rest: dict[str, Any]) -> dict[str, Any] | None:
    if not set(rest) <= {"cname", "clevel", "shuffle", "blocksize", "typesize"}:
        return None
    return {"name": "blosc", "configuration": dict(rest)}


_V2_TO_V3: dict[str, Callable[[dict[str, Any]], dict[str, Any] | None]] = {
    "zstd": lambda r: (
        {"name": "zstd", "configuration": {"level": r.get("level", 0), "checksum": r.get("checksum", False)}}
        if set(r) <= {"level", "checksum"}
        else None
    ),
    "gzip": lambda r: (
        {"name": "gzip", "configuration": {"level": r.get("level", 1)}} if set(r) <= {"level"} else None
    ),
    "blosc": _core_blosc,
    "crc32c": lambda r: (
        {"name": "crc32c"} if r.get("location", "end") == "end" and set(r) <= {"location"} else None
    ),
    "vlen-utf8": lambda r: None if r else {"name": "vlen-utf8", "configuration": {}},
    "vlen-bytes": lambda r: None if r else {"name": "vlen-bytes", "configuration": {}},
}


def _v2_config_to_v3(config: Mapping[str, Any]) -> dict[str, Any]:
    codec_id = str(config["id"])
    rest = {k: v for k, v in config.items() if k != "id"}
    translate = _V2_TO_V3.get(codec_id)
    core = translate(rest) if translate is not None else None
    return core if core is not None else {"name": NUMCODECS_PREFIX + codec_id, "configuration": rest}


def _to_v3_entry(obj: Any, role: str) -> Any:
    if isinstance(obj, str):
        return obj
    if isinstance(obj, Mapping):
        if "name" in obj:
            return dict(obj)
        if isinstance(obj.get("id"), str):
            return _v2_config_to_v3(obj)
    elif hasattr(obj, "get_config") and hasattr(obj, "codec_id"):
        return _v2_config_to_v3(numcodecs_config(obj))
    elif hasattr(obj, "to_dict"):
        return obj.to_dict()
    raise MetadataError(
        f"{role}: {obj!r} is not a codec; pass a numcodecs codec, a {{'name': ...}} or {{'id': ...}} dict, or a "
        "codec name such as 'zstd'"
    )


def _auto_serializer(spec: ChunkSpec) -> dict[str, Any]:
    """zarr-python's default array->bytes codec for the data type reaching it (after any array->array codec)."""
    if _is_object(spec.data_type):
        return VlenCodec("bytes" if spec.data_type.vlen == "bytes" else "str").to_json()
    return BytesCodec("little" if has_endianness(spec.dtype) else None).to_json()


#: codecs whose configuration depends on the chunk's rank and shape (the placeholder spec of
#: :func:`_canonical` has neither): written as given, then checked with the chunk shape when it is known
_SHAPED = (TransposeCodec, ShardingCodec, ReshapeCodec, N5DefaultCodec)


def _canonical(
    entries: list[tuple[Any, str]], data_type: DataType, allow_unsafe: bool, fill_value: Any = None
) -> list[dict[str, Any]]:
    """Parse, check kinds against roles, bind to the data type and write each codec as zarr-python does; a
    value codec that cannot carry ``fill_value`` (0-d array) through is refused, as zarr-python does."""
    fill = np.zeros((), dtype=data_type.numpy_dtype) if fill_value is None else fill_value
    spec = ChunkSpec(shape=(1,), data_type=data_type, fill_value=fill)
    out: list[dict[str, Any]] = []
    for entry, role in entries:
        if entry is _AUTO:
            entry = _auto_serializer(spec)
        codec: Codec = codec_from_v3(entry, allow_unsafe=allow_unsafe)
        if codec.kind != _ROLE_KIND[role]:
            raise MetadataError(
                f"{role}: codec {codec.name!r} is a {codec.kind.replace('_', '->')} codec; pass it as "
                f"{_KIND_ROLE[codec.kind]!r} instead"
            )
        if isinstance(codec, _SHAPED):  # need the chunk shape: written as given (checked with it below)
            out.append(codec.to_json())
            continue
        codec = codec.bind(spec)
        out.append(codec.to_json())
        if isinstance(codec, ArrayArrayCodec):
            if fill_value is not None:
                check_fill(codec, spec)
            spec = codec.resolve(spec)
    return out


_AUTO = object()  # the serializer zarr-python picks for the data type after the filters


def v3_codecs_from_user(
    *,
    data_type: DataType,
    filters: Any = None,
    serializer: Any = "auto",
    compressors: Any = "auto",
    allow_unsafe_codecs: bool = False,
    chunk_shape: tuple[int, ...] | None = None,
    fill_value: np.ndarray[Any, Any] | None = None,
) -> list[dict[str, Any]]:
    """The v3 ``codecs`` list for ``create_array``-style arguments.

    Parameters
    ----------
    data_type
        The new array's data type (v3).
    filters, serializer, compressors
        Array->array codecs, the array->bytes codec and bytes->bytes codecs: ``"auto"``, None, a numcodecs
        object, a dict (v3 or v2 form), a name, or a list of those (``serializer``: a single one).
    allow_unsafe_codecs
        Allow ``numcodecs.pickle`` & co.
    chunk_shape
        The chunk (shard) shape, when known: shape-dependent codecs (``transpose`` short-hands,
        ``sharding_indexed`` and its inner codecs) are then checked and written in their final form too.
    fill_value
        The array's fill value (0-d array), when known: value codecs (``scale_offset``, ``cast_value``) that
        cannot carry it through are refused.

    Returns
    -------
    list of dict
        The codec objects exactly as zarr-python writes them.

    Raises
    ------
    MetadataError, UnknownCodecError, UnsafeCodecError
        A codec of the wrong kind for its argument (e.g. a compressor in ``filters``), unknown or refused
        codecs, bad configurations.

    Examples
    --------
    >>> import numpy as np
    >>> from zarr_dask.spec.dtypes import DataType
    >>> dt = DataType(name="int32", numpy_dtype=np.dtype("int32"), zarr_format=3)
    >>> v3_codecs_from_user(data_type=dt)
    [{'name': 'bytes', 'configuration': {'endian': 'little'}}, {'name': 'zstd', 'configuration': {'level': 0, 'checksum': False}}]
    """
    if serializer is None or (isinstance(serializer, list | tuple) and len(serializer) != 1):
        raise MetadataError(f"serializer must be one array->bytes codec (or 'auto'), got {serializer!r}")
    if isinstance(serializer, list | tuple):
        serializer = serializer[0]
    auto = isinstance(serializer, str) and serializer == "auto"
    entries = [(_to_v3_entry(f, "filters"), "filters") for f in _items(filters, [])]
    entries.append((_AUTO if auto else _to_v3_entry(serializer, "serializer"), "serializer"))
    entries += [
        (_to_v3_entry(c, "compressors"), "compressors") for c in _items(compressors, [V3_DEFAULT_COMPRESSOR])
    ]
    codecs = _canonical(entries, data_type, allow_unsafe_codecs, fill_value)
    if chunk_shape is None:
        return codecs
    pipeline = pipeline_from_v3(
        codecs, data_type=data_type, chunk_shape=tuple(chunk_shape), allow_unsafe_codecs=allow_unsafe_codecs
    )
    result: list[dict[str, Any]] = pipeline.to_json()
    return result


# ------------------------------------------------------------------------------------------------ v3 -> v2
def _v3_codec_to_v2(codec: Codec) -> dict[str, Any]:
    json = codec.to_json()
    conf = dict(json.get("configuration") or {})
    if isinstance(codec, BloscCodec):
        shuffle = -1 if codec.shuffle is None else BLOSC_SHUFFLES.index(codec.shuffle)
        return {
            "id": "blosc",
            "cname": codec.cname,
            "clevel": codec.clevel,
            "shuffle": shuffle,
            "blocksize": codec.blocksize,
        }
    if codec.name in ("zstd", "gzip"):
        return {"id": codec.name, **conf}
    if codec.name in ("crc32c", "vlen-utf8", "vlen-bytes"):
        return {"id": codec.name}
    if codec.name.startswith(NUMCODECS_PREFIX):
        return {"id": codec.name[len(NUMCODECS_PREFIX) :], **conf}
    raise MetadataError(
        f"codec {codec.name!r} has no Zarr v2 equivalent (v2 stores the byte order in the dtype and uses "
        "order='F' instead of transpose); remove it or create a v3 array"
    )


def v2_canonical(config: dict[str, Any]) -> dict[str, Any]:
    """A v2 codec config as zarr-python 3.4 writes it: zstd without ``"checksum": false`` (numcodecs'
    default, which tensorstore refuses as an extra member; ``true`` stays, the data needs it).

    Examples
    --------
    >>> v2_canonical({"id": "zstd", "level": 3, "checksum": False}), v2_canonical({"id": "gzip", "level": 1})
    ({'id': 'zstd', 'level': 3}, {'id': 'gzip', 'level': 1})
    """
    if config.get("id") == "zstd" and config.get("checksum") is False:
        return {k: v for k, v in config.items() if k != "checksum"}
    return config


def _to_v2_config(obj: Any, role: str, allow_unsafe: bool) -> dict[str, Any]:
    return v2_canonical(_v2_config(obj, role, allow_unsafe))


def _v2_config(obj: Any, role: str, allow_unsafe: bool) -> dict[str, Any]:
    if isinstance(obj, str):
        codec_id = obj[len(NUMCODECS_PREFIX) :] if obj.startswith(NUMCODECS_PREFIX) else obj
        if codec_id in ("bytes", "transpose", "endian"):
            return _v3_codec_to_v2(codec_from_v3(codec_id))
        return numcodecs_config(make_numcodecs(codec_id, {}, allow_unsafe=allow_unsafe, where=role))
    if isinstance(obj, Mapping) and isinstance(obj.get("id"), str):
        check_allowed(obj["id"], allow_unsafe=allow_unsafe, where=role)
        return dict(obj)
    if not isinstance(obj, Mapping) and hasattr(obj, "get_config") and hasattr(obj, "codec_id"):
        config = numcodecs_config(obj)
        check_allowed(config["id"], allow_unsafe=allow_unsafe, where=role)
        return config
    return _v3_codec_to_v2(codec_from_v3(_to_v3_entry(obj, role), allow_unsafe=allow_unsafe))


def v2_codecs_from_user(
    *,
    data_type: DataType,
    filters: Any = None,
    compressors: Any = "auto",
    allow_unsafe_codecs: bool = False,
) -> tuple[dict[str, Any] | None, list[dict[str, Any]] | None]:
    """The v2 ``(compressor, filters)`` for ``create_array``-style arguments.

    ``compressors="auto"`` is Blosc(lz4, 5, shuffle, blocksize 0); variable-length types get the
    ``vlen-utf8`` / ``vlen-bytes`` filter first unless an object codec is already given. v2 has one
    compressor: a list of several is an error.

    Parameters
    ----------
    data_type
        The new array's (v2) data type.
    filters, compressors
        ``"auto"``, None, a numcodecs object, a dict (v2 ``{"id"}`` or v3 ``{"name"}``), a name, or a list.
    allow_unsafe_codecs
        Allow ``pickle`` & co.

    Returns
    -------
    tuple
        ``(compressor, filters)`` for ``.zarray``: a numcodecs config or None, a list or None.

    Raises
    ------
    MetadataError, UnknownCodecError, UnsafeCodecError
        Misplaced, unknown or refused codecs; codecs without a v2 form (``bytes``, ``transpose``).

    Examples
    --------
    >>> import numpy as np
    >>> from zarr_dask.spec.dtypes import DataType
    >>> dt = DataType(name="|O", numpy_dtype=np.dtype(object), vlen="str", zarr_format=2)
    >>> v2_codecs_from_user(data_type=dt, compressors="zstd")
    ({'id': 'zstd', 'level': 0}, [{'id': 'vlen-utf8'}])
    """
    comps = _items(compressors, [V2_DEFAULT_COMPRESSOR])
    if len(comps) > 1:
        raise MetadataError(
            f"Zarr v2 arrays have a single compressor, got {len(comps)}: {comps!r}; pass one (other byte codecs "
            "can go into filters) or create a v3 array"
        )
    compressor = _to_v2_config(comps[0], "compressors", allow_unsafe_codecs) if comps else None
    flist = [_to_v2_config(f, "filters", allow_unsafe_codecs) for f in _items(filters, [])]
    if _is_object(data_type):
        object_ids = {"vlen-utf8", "vlen-bytes", "vlen-array", "json2", "msgpack2", "pickle", "categorize"}
        if not any(c["id"] in object_ids for c in [*flist, *([compressor] if compressor else [])]):
            flist.insert(0, {"id": _vlen_id(data_type)})
    pipeline_from_v2(
        compressor=compressor,
        filters=flist or None,
        data_type=data_type,
        order="C",
        allow_unsafe_codecs=allow_unsafe_codecs,
    )
    return compressor, flist or None
