"""The Zarr v3 core and registered codecs: bytes, transpose, gzip, zstd, blosc, crc32c, vlen-utf8, vlen-bytes.

Each ``parse_*`` function takes the (possibly missing) ``configuration`` object of a v3 codec entry and returns
a codec; configurations are checked strictly (unknown keys and wrong types are MetadataErrors naming the
codec, the key and the value). gzip, zstd and blosc run through numcodecs (byte-identical to zarr-python);
crc32c uses the ``crc32c`` package directly.
"""

from __future__ import annotations

import functools
import math
import sys
from collections.abc import Mapping
from typing import Any, Literal, Self

import crc32c as _crc32c
import numpy as np

from zarr_dask.codecs.base import (
    ArrayArrayCodec,
    ArrayBytesCodec,
    BufferLike,
    BytesBytesCodec,
    ChunkSpec,
    Codec,
    as_byte_view,
    has_endianness,
    nbytes_of,
    wrong_size,
)
from zarr_dask.codecs.numcodecs_bridge import NumcodecsBytesBytes, make_numcodecs
from zarr_dask.errors import ChunkDecodeError, ChunkEncodeError, MetadataError
from zarr_dask.spec.ml_types import bits_dtype, low_bits, sub_byte

__all__ = [
    "BloscCodec",
    "BytesCodec",
    "Crc32cCodec",
    "TransposeCodec",
    "VlenCodec",
    "blosc_typesize",
    "parse_blosc",
    "parse_bytes",
    "parse_crc32c",
    "parse_gzip",
    "parse_transpose",
    "parse_vlen_bytes",
    "parse_vlen_utf8",
    "parse_zstd",
]

Endian = Literal["little", "big"]
NATIVE_ENDIAN: Endian = "little" if sys.byteorder == "little" else "big"
_ORDER_CHAR: dict[str, Literal["<", ">"]] = {"little": "<", "big": ">"}


# ---------------------------------------------------------------------------------- configuration helpers
def _config(name: str, configuration: Mapping[str, Any] | None, allowed: set[str]) -> dict[str, Any]:
    if configuration is None:
        return {}
    if not isinstance(configuration, Mapping):
        raise MetadataError(f"codec {name!r}: 'configuration' must be an object, got {configuration!r}")
    unknown = sorted(set(configuration) - allowed)
    if unknown:
        raise MetadataError(
            f"codec {name!r}: unknown configuration key(s) {unknown}; allowed: {sorted(allowed)}"
        )
    return dict(configuration)


def _int(name: str, key: str, value: Any, lo: int, hi: int) -> int:
    if isinstance(value, float) and value.is_integer():  # a JSON number such as 3.0 (the schemas say "number")
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise MetadataError(f"codec {name!r}: {key!r} must be an integer in [{lo}, {hi}], got {value!r}")
    return value


def _bool(name: str, key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise MetadataError(f"codec {name!r}: {key!r} must be true or false, got {value!r}")
    return value


def _choice(name: str, key: str, value: Any, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise MetadataError(f"codec {name!r}: {key!r} must be one of {list(choices)}, got {value!r}")
    return str(value)


# -------------------------------------------------------------------------------------------------- bytes
class BytesCodec(ArrayBytesCodec):
    """The ``bytes`` codec: fixed-size elements in C order with the given byte order.

    Parameters
    ----------
    endian
        ``"little"`` / ``"big"``; None only for types without endianness (1-byte, raw bytes) or for v2.
    v2
        The v2 layout: the dtype already carries its byte order and the encoded buffer keeps the element
        type (numcodecs Blosc records its itemsize). Never written as JSON.
    """

    max_ratio = 1

    name = "bytes"

    def __init__(
        self, endian: Endian | None = None, *, v2: bool = False, implied: Endian | None = None
    ) -> None:
        self.endian = endian
        self.v2 = v2
        self._implied = implied  # the byte order assumed when "endian" is missing (legacy struct data)

    def bind(self, spec: ChunkSpec) -> Self:
        dtype = spec.dtype
        if dtype.kind == "O" or spec.data_type.vlen is not None:
            fix = "vlen-bytes" if spec.data_type.vlen == "bytes" else "vlen-utf8"
            how = (
                f"add {{'id': '{fix}'}} to 'filters'"
                if self.v2
                else f"use {{'name': '{fix}'}} as the array->bytes codec"
            )
            raise MetadataError(
                f"the variable-length data type {spec.data_type.name!r} needs an object codec; {how}"
            )
        if self.endian is None and not self.v2 and has_endianness(dtype):
            if dtype.fields is not None:  # zarr-python <= 3.1 writes struct types without endian: little
                return type(self)(None, implied="little")
            raise MetadataError(
                f"codec 'bytes' needs 'endian' ('little' or 'big') for the multi-byte data type "
                f'{spec.data_type.name!r}; add "configuration": {{"endian": "little"}}'
            )
        return self

    def stored_dtype(self, dtype: np.dtype[Any]) -> np.dtype[Any]:
        """The dtype of the stored elements (``dtype`` with the configured byte order).

        ``ml_dtypes`` types lose their identity under ``newbyteorder``: they are stored as the unsigned ints of
        their bit patterns, and the sub-byte ones always (their upper bits are cleared, :func:`low_bits`).
        """
        endian = self.endian or self._implied
        if endian is None or not has_endianness(dtype):
            return bits_dtype(dtype) if sub_byte(dtype) else dtype
        stored = bits_dtype(dtype).newbyteorder(_ORDER_CHAR[endian])
        return dtype if stored.isnative else stored

    def from_stored(self, arr: np.ndarray[Any, Any], dtype: np.dtype[Any]) -> np.ndarray[Any, Any]:
        """A decoded array of ``stored_dtype(dtype)`` that may be changed in place, as ``dtype``."""
        if not arr.dtype.isnative:
            arr = arr.byteswap(inplace=True)
        return low_bits(arr.view(dtype))

    def encoded_size(self, spec: ChunkSpec) -> int | None:
        return math.prod(spec.shape) * spec.dtype.itemsize

    def to_json(self) -> dict[str, Any]:
        if self.endian is None:
            return {"name": "bytes"}
        return {"name": "bytes", "configuration": {"endian": self.endian}}

    def encode(self, chunk: np.ndarray[Any, Any], spec: ChunkSpec) -> BufferLike:
        bits = bits_dtype(spec.dtype)
        if bits != spec.dtype:  # ml_dtypes types: their bit patterns, as unsigned ints
            chunk = low_bits(np.ascontiguousarray(chunk, dtype=spec.dtype)).view(bits)
        flat = np.ascontiguousarray(chunk, dtype=bits_dtype(self.stored_dtype(spec.dtype))).reshape(-1)
        return flat if self.v2 else flat.view(np.uint8)

    def decode(self, data: BufferLike, spec: ChunkSpec) -> np.ndarray[Any, Any]:
        stored = self.stored_dtype(spec.dtype)
        expected = math.prod(spec.shape) * stored.itemsize
        got = nbytes_of(data)
        if got != expected:
            raise wrong_size("bytes", got, expected)
        arr = np.frombuffer(as_byte_view(data), dtype=stored).reshape(spec.shape)
        bits = bits_dtype(spec.dtype)
        arr = arr if stored in (bits, spec.dtype) else arr.astype(bits)
        return arr if arr.dtype == spec.dtype else low_bits(arr.view(spec.dtype))


def parse_bytes(configuration: Mapping[str, Any] | None) -> Codec:
    """``{"name": "bytes", "configuration": {"endian": ...}}`` (also the legacy name ``endian``)."""
    config = _config("bytes", configuration, {"endian"})
    endian = config.get("endian")
    if endian is None:
        return BytesCodec(None)
    return BytesCodec(
        "little" if _choice("bytes", "endian", endian, ("little", "big")) == "little" else "big"
    )


# ---------------------------------------------------------------------------------------------- transpose
class TransposeCodec(ArrayArrayCodec):
    """``transpose``: ``encoded = decoded.transpose(order)`` (views, no copies)."""

    name = "transpose"
    max_ratio = 1

    def __init__(self, order: tuple[int, ...] | Literal["C", "F"]) -> None:
        self.order = order
        self._inverse = tuple(int(i) for i in np.argsort(order)) if isinstance(order, tuple) else ()

    def bind(self, spec: ChunkSpec) -> Self:
        ndim = len(spec.shape)
        if self.order == "C":
            return type(self)(tuple(range(ndim)))
        if self.order == "F":
            return type(self)(tuple(reversed(range(ndim))))
        if sorted(self.order) != list(range(ndim)):
            raise MetadataError(
                f"codec 'transpose': 'order' {list(self.order)} is not a permutation of 0..{ndim - 1} "
                f"for the {ndim}-d chunk shape {list(spec.shape)}"
            )
        return self

    def resolve(self, spec: ChunkSpec) -> ChunkSpec:
        assert isinstance(self.order, tuple), "bind() first"
        shape = tuple(spec.shape[i] for i in self.order)
        return ChunkSpec(shape=shape, data_type=spec.data_type, fill_value=spec.fill_value, order=spec.order)

    def to_json(self) -> dict[str, Any]:
        order = list(self.order) if isinstance(self.order, tuple) else self.order
        return {"name": "transpose", "configuration": {"order": order}}

    def encode(self, chunk: np.ndarray[Any, Any], spec: ChunkSpec) -> np.ndarray[Any, Any]:
        assert isinstance(self.order, tuple), "bind() first"
        return chunk.transpose(self.order)

    def decode(self, chunk: np.ndarray[Any, Any], spec: ChunkSpec) -> np.ndarray[Any, Any]:
        return chunk.transpose(self._inverse)


def parse_transpose(configuration: Mapping[str, Any] | None) -> Codec:
    """``{"name": "transpose", "configuration": {"order": [1, 0]}}`` (``"C"``/``"F"`` accepted on read)."""
    order = _config("transpose", configuration, {"order"}).get("order")
    if order in ("C", "F"):
        return TransposeCodec("C" if order == "C" else "F")
    if not isinstance(order, list | tuple) or any(
        isinstance(i, bool) or not isinstance(i, int) for i in order
    ):
        raise MetadataError(
            f"codec 'transpose': 'order' must be a list of axis indices (a permutation), got {order!r}"
        )
    return TransposeCodec(tuple(order))


# ------------------------------------------------------------------------------------------------- crc32c
class Crc32cCodec(BytesBytesCodec):
    """``crc32c``: append the CRC-32C (Castagnoli) of the input as u32 little-endian; check and strip it."""

    name = "crc32c"
    max_ratio = 1

    def encoded_size(self, nbytes: int) -> int | None:
        return nbytes + 4

    def to_json(self) -> dict[str, Any]:
        return {"name": "crc32c"}

    def encode(self, data: BufferLike) -> BufferLike:
        view = as_byte_view(data)
        return b"".join((view, _crc32c.crc32c(view).to_bytes(4, "little")))

    def decode(self, data: BufferLike, expected: int | None) -> BufferLike:
        view = as_byte_view(data)
        if len(view) < 4:
            raise ChunkDecodeError(
                f"codec 'crc32c': chunk is {len(view)} bytes, too short for the 4-byte checksum"
            )
        payload = view[:-4]
        stored = int.from_bytes(view[-4:], "little")
        actual = _crc32c.crc32c(payload)
        if stored != actual:
            raise ChunkDecodeError(
                f"codec 'crc32c': checksum mismatch (stored {stored:#010x}, computed {actual:#010x}): the chunk is corrupt"
            )
        if expected is not None and len(payload) != expected:
            raise wrong_size("crc32c", len(payload), expected)
        return payload


def parse_crc32c(configuration: Mapping[str, Any] | None) -> Codec:
    """``{"name": "crc32c"}``."""
    _config("crc32c", configuration, set())
    return Crc32cCodec()


# ------------------------------------------------------------------------------------------- compressors
def parse_zstd(configuration: Mapping[str, Any] | None) -> Codec:
    """``{"name": "zstd", "configuration": {"level": 0, "checksum": false}}`` (missing keys: these defaults)."""
    config = _config("zstd", configuration, {"level", "checksum"})
    level = _int("zstd", "level", config.get("level", 0), -131072, 22)
    checksum = _bool("zstd", "checksum", config.get("checksum", False))
    json = {"name": "zstd", "configuration": {"level": level, "checksum": checksum}}
    return NumcodecsBytesBytes("zstd", {"level": level, "checksum": checksum}, json=json)


def parse_gzip(configuration: Mapping[str, Any] | None) -> Codec:
    """``{"name": "gzip", "configuration": {"level": 5}}`` (missing level: 5, as zarr-python)."""
    level = _int("gzip", "level", _config("gzip", configuration, {"level"}).get("level", 5), 0, 9)
    return NumcodecsBytesBytes(
        "gzip", {"level": level}, json={"name": "gzip", "configuration": {"level": level}}
    )


BLOSC_CNAMES = ("lz4", "lz4hc", "blosclz", "zstd", "snappy", "zlib")
BLOSC_SHUFFLES = ("noshuffle", "shuffle", "bitshuffle")


@functools.cache
def _blosc_accepts_typesize() -> bool:
    """numcodecs >= 0.16 takes Blosc's header typesize as a parameter (zarr-python passes it then)."""
    try:
        make_numcodecs("blosc", {"typesize": 1}, allow_unsafe=False, where="probe")
    except MetadataError:
        return False
    return True


def blosc_typesize(spec: ChunkSpec) -> int:
    """The Blosc typesize zarr-python records for ``spec``: its itemsize, 1 for variable-length types."""
    return 1 if spec.dtype.kind == "O" else max(1, min(spec.dtype.itemsize, 255))


class BloscCodec(NumcodecsBytesBytes):
    """The core ``blosc`` codec (string shuffle, explicit typesize); binds missing values to the data type."""

    def __init__(
        self, *, cname: str, clevel: int, shuffle: str | None, typesize: int | None, blocksize: int
    ) -> None:
        self.cname, self.clevel, self.shuffle = cname, clevel, shuffle
        self.typesize, self.blocksize = typesize, blocksize
        config: dict[str, Any] = {
            "cname": cname,
            "clevel": clevel,
            "shuffle": BLOSC_SHUFFLES.index(shuffle or "shuffle"),
            "blocksize": blocksize,
        }
        if typesize is not None and _blosc_accepts_typesize():
            config["typesize"] = typesize
        settings = {
            "typesize": typesize,
            "cname": cname,
            "clevel": clevel,
            "shuffle": shuffle,
            "blocksize": blocksize,
        }
        # unbound (no data type yet): typesize / shuffle may still be open and are left out
        json = {"name": "blosc", "configuration": {k: v for k, v in settings.items() if v is not None}}
        super().__init__("blosc", config, json=json)

    def bind(self, spec: ChunkSpec) -> Self:
        if self.typesize is not None and self.shuffle is not None:
            return self
        typesize = self.typesize or blosc_typesize(spec)
        shuffle = self.shuffle or ("bitshuffle" if typesize == 1 else "shuffle")
        return type(self)(
            cname=self.cname, clevel=self.clevel, shuffle=shuffle, typesize=typesize, blocksize=self.blocksize
        )


def parse_blosc(configuration: Mapping[str, Any] | None) -> Codec:
    """The core ``blosc`` codec; shuffle as a string (v2 ints 0/1/2 and -1 = auto accepted on read)."""
    config = _config("blosc", configuration, {"cname", "clevel", "shuffle", "typesize", "blocksize"})
    cname = _choice("blosc", "cname", config.get("cname", "zstd"), BLOSC_CNAMES)
    clevel = _int("blosc", "clevel", config.get("clevel", 5), 0, 9)
    shuffle = config.get("shuffle")
    if isinstance(shuffle, int) and not isinstance(shuffle, bool) and -1 <= shuffle <= 2:
        shuffle = None if shuffle == -1 else BLOSC_SHUFFLES[shuffle]
    elif shuffle is not None:
        shuffle = _choice("blosc", "shuffle", shuffle, BLOSC_SHUFFLES)
    typesize = config.get("typesize")
    if typesize is not None:
        typesize = _int("blosc", "typesize", typesize, 1, 255)
    blocksize = _int("blosc", "blocksize", config.get("blocksize", 0), 0, 2**31 - 1)
    return BloscCodec(cname=cname, clevel=clevel, shuffle=shuffle, typesize=typesize, blocksize=blocksize)


# ------------------------------------------------------------------------------------------------- vlen
class VlenCodec(ArrayBytesCodec):
    """``vlen-utf8`` / ``vlen-bytes``: u32le count, then u32le length + payload per element (C order)."""

    max_ratio = 2  # 4 stored bytes (at least) per 8-byte object pointer

    def __init__(self, kind: Literal["str", "bytes"]) -> None:
        self.vlen = kind
        self.name = "vlen-utf8" if kind == "str" else "vlen-bytes"
        self._codec = make_numcodecs(self.name, {}, allow_unsafe=False, where="codecs")

    def bind(self, spec: ChunkSpec) -> Self:
        vlen = spec.data_type.vlen
        if spec.dtype.kind != "O" or (vlen is not None and vlen != self.vlen):
            right = {"str": "vlen-utf8", "bytes": "vlen-bytes"}.get(vlen or "", "bytes")
            raise MetadataError(
                f"codec {self.name!r} does not fit the data type {spec.data_type.name!r}; use {right!r} instead"
            )
        return self

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "configuration": {}}

    def encode(self, chunk: np.ndarray[Any, Any], spec: ChunkSpec) -> BufferLike:
        flat = np.asarray(chunk, dtype=object).reshape(-1)
        try:
            out: BufferLike = self._codec.encode(flat)
        except Exception as e:
            want = "str" if self.vlen == "str" else "bytes"
            raise ChunkEncodeError(
                f"codec {self.name!r} needs {want} elements: {type(e).__name__}: {e}"
            ) from e
        return out

    def decode(self, data: BufferLike, spec: ChunkSpec) -> np.ndarray[Any, Any]:
        view = as_byte_view(data)
        n = math.prod(spec.shape)
        count = int.from_bytes(view[:4], "little") if len(view) >= 4 else -1
        if count != n:
            raise ChunkDecodeError(
                f"codec {self.name!r}: chunk holds {count} elements, expected {n} (shape {spec.shape}): corrupt"
            )
        if len(view) < 4 + 4 * n:
            raise ChunkDecodeError(
                f"codec {self.name!r}: {len(view)} bytes cannot hold {n} elements: truncated"
            )
        try:
            out = self._codec.decode(view)
        except MemoryError:
            raise
        except Exception as e:
            raise ChunkDecodeError(
                f"codec {self.name!r}: {type(e).__name__}: {e}; the chunk is corrupt"
            ) from e
        return np.asarray(out, dtype=object).reshape(spec.shape)


def parse_vlen_utf8(configuration: Mapping[str, Any] | None) -> Codec:
    """``{"name": "vlen-utf8", "configuration": {}}``."""
    _config("vlen-utf8", configuration, set())
    return VlenCodec("str")


def parse_vlen_bytes(configuration: Mapping[str, Any] | None) -> Codec:
    """``{"name": "vlen-bytes", "configuration": {}}``."""
    _config("vlen-bytes", configuration, set())
    return VlenCodec("bytes")
