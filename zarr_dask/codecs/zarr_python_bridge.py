"""zarr-python codec plugins our registry does not know, used through zarr-python when it is installed.

A v3 ``codecs`` entry whose name is neither ours nor ``numcodecs.<id>`` is looked up in zarr-python's codec
registry (the ``zarr.codecs`` entry-point group and codecs registered with ``zarr.registry.register_codec``)
and wrapped in a codec of the same kind: its synchronous ``_encode_sync`` / ``_decode_sync`` when it has them,
else its coroutines run by zarr-python. Nothing is imported unless such a name is met. Without zarr-python, or
without the plugin, the error names what to install (zarr-python's own list of the packages known to provide
the codec, when it has one).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from functools import cache
from typing import Any

import numpy as np

from zarr_dask.codecs.base import (
    ArrayArrayCodec,
    ArrayBytesCodec,
    BufferLike,
    BytesBytesCodec,
    ChunkSpec,
    Codec,
    as_byte_view,
)
from zarr_dask.errors import UnknownCodecError
from zarr_dask.spec.dtypes import parse_data_type

__all__ = ["plugin_codec"]


def plugin_codec(name: str, configuration: Mapping[str, Any] | None) -> Codec:
    """The zarr-python codec ``name`` wrapped as ours.

    Raises
    ------
    UnknownCodecError
        zarr-python is not installed, or no installed package provides the codec (the message names what to
        install).
    """
    if importlib.util.find_spec("zarr") is None:
        raise UnknownCodecError(
            f"unknown codec {name!r} in 'codecs': it is not one of zarr_dask's codecs; if it is a zarr-python "
            "codec plugin, install zarr-python (pip install zarr) and the package that provides the codec (it "
            "registers it in the 'zarr.codecs' entry-point group)"
        )
    from zarr.registry import get_codec_class

    try:
        cls = get_codec_class(name)
    except Exception as e:  # noqa: BLE001 - a plugin's lookup may raise anything: reported as an unknown codec
        raise UnknownCodecError(
            f"unknown codec {name!r} in 'codecs': neither zarr_dask nor zarr-python's codec registry has it; "
            "install the package that provides it (a zarr-python codec plugin registers itself in the "
            f"'zarr.codecs' entry-point group). zarr-python says: {e}"
        ) from None
    codec = cls.from_dict({"name": name, "configuration": dict(configuration or {})})
    kind = _kind(codec)
    wrapper = {"array_array": _ArrayArray, "array_bytes": _ArrayBytes, "bytes_bytes": _BytesBytes}[kind]
    return wrapper(name, codec)


def _kind(codec: Any) -> str:
    from zarr.abc.codec import ArrayArrayCodec as AA
    from zarr.abc.codec import ArrayBytesCodec as AB

    if isinstance(codec, AA):
        return "array_array"
    return "array_bytes" if isinstance(codec, AB) else "bytes_bytes"


@cache
def _prototype() -> Any:
    from zarr.core.buffer import default_buffer_prototype

    return default_buffer_prototype()


def _spec(spec: ChunkSpec) -> Any:
    from zarr.core.array_spec import ArrayConfig, ArraySpec
    from zarr.core.dtype import get_data_type_from_native_dtype

    zdtype = get_data_type_from_native_dtype(spec.dtype)
    config = ArrayConfig.from_dict({"order": spec.order, "write_empty_chunks": True})
    return ArraySpec(spec.shape, zdtype, spec.fill_value[()], config, _prototype())


def _call(codec: Any, direction: str, data: Any, spec: Any) -> Any:
    sync = getattr(codec, f"_{direction}_sync", None)
    if sync is not None:
        return sync(data, spec)
    from zarr.core.sync import sync as run

    return run(getattr(codec, f"_{direction}_single")(data, spec))


class _Bridged(Codec):
    """A zarr-python codec object seen as ours."""

    def __init__(self, name: str, codec: Any) -> None:
        self.name = name
        self.codec = codec

    def to_json(self) -> dict[str, Any]:
        return dict(self.codec.to_dict())

    def __repr__(self) -> str:
        return f"zarr-python codec {self.name!r} ({type(self.codec).__name__})"


def _bytes_spec(nbytes: int) -> Any:
    """The spec a bytes-to-bytes codec is handed: its input as a 1-d ``uint8`` chunk (such codecs use its
    buffer prototype, not its shape)."""
    uint8 = parse_data_type("uint8", zarr_format=3)
    return _spec(ChunkSpec(shape=(nbytes,), data_type=uint8, fill_value=np.zeros((), "u1")))


class _BytesBytes(_Bridged, BytesBytesCodec):
    def encode(self, data: BufferLike) -> BufferLike:
        view = as_byte_view(data)
        out = _call(self.codec, "encode", _prototype().buffer.from_bytes(bytes(view)), _bytes_spec(len(view)))
        return bytes(out.to_bytes())

    def decode(self, data: BufferLike, expected: int | None) -> BufferLike:
        view = as_byte_view(data)
        out = _call(self.codec, "decode", _prototype().buffer.from_bytes(bytes(view)), _bytes_spec(expected or 0))
        return bytes(out.to_bytes())

    def encoded_size(self, nbytes: int) -> int | None:
        return None


class _ArrayArray(_Bridged, ArrayArrayCodec):
    def resolve(self, spec: ChunkSpec) -> ChunkSpec:
        return spec

    def encode(self, chunk: np.ndarray[Any, Any], spec: ChunkSpec) -> np.ndarray[Any, Any]:
        out = _call(self.codec, "encode", _prototype().nd_buffer.from_numpy_array(chunk), _spec(spec))
        return np.asarray(out.as_numpy_array())

    def decode(self, chunk: np.ndarray[Any, Any], spec: ChunkSpec) -> np.ndarray[Any, Any]:
        out = _call(self.codec, "decode", _prototype().nd_buffer.from_numpy_array(chunk), _spec(spec))
        return np.asarray(out.as_numpy_array())


class _ArrayBytes(_Bridged, ArrayBytesCodec):
    def encoded_size(self, spec: ChunkSpec) -> int | None:
        return None

    def encode(self, chunk: np.ndarray[Any, Any], spec: ChunkSpec) -> BufferLike:
        out = _call(self.codec, "encode", _prototype().nd_buffer.from_numpy_array(chunk), _spec(spec))
        return bytes(out.to_bytes())

    def decode(self, data: BufferLike, spec: ChunkSpec) -> np.ndarray[Any, Any]:
        buffer = _prototype().buffer.from_bytes(bytes(as_byte_view(data)))
        out = _call(self.codec, "decode", buffer, _spec(spec))
        return np.asarray(out.as_numpy_array()).reshape(spec.shape)
