"""numcodecs behind our own allowlist: v2 ``{"id": ...}`` configs and v3 ``numcodecs.<id>`` codecs.

numcodecs' ``get_codec`` resolves ids through entry points (it imports whatever plugin claims the id), so it
is never called: ids are looked up in :data:`ALLOWLIST`, which names the class to import. Codecs that build
Python objects of attacker-chosen shape or run code on decode are marked ``unsafe``.

Decoding is bounded: every bytes->bytes decode is told the exact expected size when the chain makes it
known, and the decompressors of :mod:`zarr_dask.codecs.bounded` check container headers (Blosc ``nbytes``,
zstd frame content size, LZ4 size prefix) or stream with a ``max_length`` before allocating.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Self

import numpy as np

from zarr_dask.codecs.base import (
    UNKNOWN_RATIO,
    ArrayArrayCodec,
    ArrayBytesCodec,
    BufferLike,
    BytesBytesCodec,
    ChunkSpec,
    Codec,
    derived_spec,
    nbytes_of,
    wrong_size,
)
from zarr_dask.codecs.bounded import INTO, STREAM, decompress_function, zstd_content_size
from zarr_dask.errors import (
    ChunkDecodeError,
    ChunkEncodeError,
    MetadataError,
    UnknownCodecError,
    UnsafeCodecError,
)

__all__ = [
    "ALLOWLIST",
    "NumcodecsArrayArray",
    "NumcodecsArrayBytes",
    "NumcodecsBytesBytes",
    "NumcodecsEntry",
    "allowlist_entry",
    "check_allowed",
    "codec_from_numcodecs",
    "make_numcodecs",
    "numcodecs_config",
    "zstd_content_size",
]

NumcodecsKind = Literal["array_array", "array_bytes", "bytes_bytes"]


@dataclass(frozen=True)
class NumcodecsEntry:
    """One allowed numcodecs id: where its class lives, what kind of codec it is, whether it is unsafe."""

    target: str
    kind: NumcodecsKind
    unsafe: bool = False
    package: str | None = None
    """Extra package the codec needs (named in the error when it is missing)."""


_BB: NumcodecsKind = "bytes_bytes"
_AA: NumcodecsKind = "array_array"
_AB: NumcodecsKind = "array_bytes"
ALLOWLIST: dict[str, NumcodecsEntry] = {
    "blosc": NumcodecsEntry("numcodecs.blosc:Blosc", _BB),
    "zstd": NumcodecsEntry("numcodecs.zstd:Zstd", _BB),
    "gzip": NumcodecsEntry("numcodecs.gzip:GZip", _BB),
    "zlib": NumcodecsEntry("numcodecs.zlib:Zlib", _BB),
    "lz4": NumcodecsEntry("numcodecs.lz4:LZ4", _BB),
    "bz2": NumcodecsEntry("numcodecs.bz2:BZ2", _BB),
    "lzma": NumcodecsEntry("numcodecs.lzma:LZMA", _BB),
    "shuffle": NumcodecsEntry("numcodecs.shuffle:Shuffle", _BB),
    "crc32": NumcodecsEntry("numcodecs.checksum32:CRC32", _BB),
    "crc32c": NumcodecsEntry("numcodecs.checksum32:CRC32C", _BB, package="google-crc32c"),
    "adler32": NumcodecsEntry("numcodecs.checksum32:Adler32", _BB),
    "fletcher32": NumcodecsEntry("numcodecs.fletcher32:Fletcher32", _BB),
    "jenkins_lookup3": NumcodecsEntry("numcodecs.checksum32:JenkinsLookup3", _BB),
    "base64": NumcodecsEntry("numcodecs.base64:Base64", _BB),
    "delta": NumcodecsEntry("numcodecs.delta:Delta", _AA),
    "bitround": NumcodecsEntry("numcodecs.bitround:BitRound", _AA),
    "fixedscaleoffset": NumcodecsEntry("numcodecs.fixedscaleoffset:FixedScaleOffset", _AA),
    "quantize": NumcodecsEntry("numcodecs.quantize:Quantize", _AA),
    "packbits": NumcodecsEntry("numcodecs.packbits:PackBits", _AA),
    "astype": NumcodecsEntry("numcodecs.astype:AsType", _AA),
    "categorize": NumcodecsEntry("numcodecs.categorize:Categorize", _AA),
    "pcodec": NumcodecsEntry("numcodecs.pcodec:PCodec", _AB, package="pcodec"),
    "zfpy": NumcodecsEntry("numcodecs.zfpy:ZFPY", _AB, package="zfpy"),
    "vlen-utf8": NumcodecsEntry("numcodecs.vlen:VLenUTF8", _AB),
    "vlen-bytes": NumcodecsEntry("numcodecs.vlen:VLenBytes", _AB),
    "vlen-array": NumcodecsEntry("numcodecs.vlen:VLenArray", _AB, unsafe=True),
    "json2": NumcodecsEntry("numcodecs.json:JSON", _AB, unsafe=True),
    "msgpack2": NumcodecsEntry("numcodecs.msgpacks:MsgPack", _AB, unsafe=True, package="msgpack"),
    "pickle": NumcodecsEntry("numcodecs.pickles:Pickle", _AB, unsafe=True),
}
"""numcodecs ids we instantiate (v2 ``id`` == the v3 name without ``numcodecs.``)."""

UNSAFE_IDS = frozenset(k for k, v in ALLOWLIST.items() if v.unsafe)


def allowlist_entry(codec_id: str, where: str) -> NumcodecsEntry:
    """The :data:`ALLOWLIST` entry of ``codec_id``; UnknownCodecError naming the known ids otherwise."""
    entry = ALLOWLIST.get(codec_id)
    if entry is None:
        raise UnknownCodecError(
            f"unknown codec id {codec_id!r} in {where}; known numcodecs ids: {', '.join(sorted(ALLOWLIST))}"
        )
    return entry


def _numcodecs_class(codec_id: str, where: str) -> Any:
    entry = ALLOWLIST[codec_id]
    module_name, _, class_name = entry.target.partition(":")
    hint = f"; install it with 'pip install {entry.package}'" if entry.package else ""
    try:
        return getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError) as e:
        raise UnknownCodecError(
            f"codec {codec_id!r} in {where} is not available in this environment ({e}){hint}"
        ) from None


def check_allowed(codec_id: str, *, allow_unsafe: bool, where: str) -> NumcodecsEntry:
    """The allowlist entry of ``codec_id``; UnknownCodecError / UnsafeCodecError when it may not be used."""
    entry = allowlist_entry(codec_id, where)
    if entry.unsafe and not allow_unsafe:
        raise UnsafeCodecError(
            f"codec {codec_id!r} in {where} builds arbitrary Python objects (or runs code) when decoding "
            "untrusted data; pass allow_unsafe_codecs=True only if you trust this store"
        )
    return entry


def make_numcodecs(codec_id: str, config: Mapping[str, Any], *, allow_unsafe: bool, where: str) -> Any:
    """Instantiate the numcodecs codec ``codec_id`` from ``config`` (without ``id``), through the allowlist.

    Raises
    ------
    UnknownCodecError
        ``codec_id`` is not in :data:`ALLOWLIST` or its package is missing.
    UnsafeCodecError
        ``codec_id`` is unsafe and ``allow_unsafe`` is False.
    MetadataError
        The configuration is rejected by numcodecs.
    """
    check_allowed(codec_id, allow_unsafe=allow_unsafe, where=where)
    cls = _numcodecs_class(codec_id, where)
    try:
        return cls.from_config(dict(config))
    except Exception as e:  # noqa: BLE001 - numcodecs raises TypeError/ValueError/KeyError on bad configs
        raise MetadataError(
            f"invalid configuration {dict(config)!r} for codec {codec_id!r} in {where}: {type(e).__name__}: {e}"
        ) from None


def numcodecs_config(obj: Any) -> dict[str, Any]:
    """``obj.get_config()`` of a numcodecs codec object (``id`` included)."""
    config = obj.get_config()
    if not isinstance(config, dict) or not isinstance(config.get("id"), str):
        raise MetadataError(f"{obj!r}.get_config() did not return a dict with an 'id'")
    return dict(config)


def encoded_sample(codec_id: str) -> tuple[bytes, bytes]:
    """A small float64 sample and its encoding by numcodecs' ``codec_id`` (default settings): what the native
    reader decodes once, after binding a codec, to check it decodes exactly what numcodecs does."""
    raw = np.linspace(-1.0, 1.0, 515).tobytes()
    codec = make_numcodecs(codec_id, {}, allow_unsafe=False, where="codecs")
    return raw, bytes(codec.encode(raw))



_PLUS4 = frozenset({"crc32", "crc32c", "adler32", "fletcher32"})
#: Most bytes one encoded byte can decode to, per compressor, with room to spare (measured on 64 MiB of zeros:
#: zstd 32,498x, blosc-zstd 18,315x, lz4 254x, gzip/zlib 1,028x, lzma 6,781x); checksums and shuffles 1x.
_MAX_RATIO: dict[str, int] = {
    "zstd": 1 << 16, "blosc": 1 << 16, "lz4": 1 << 9, "gzip": 1 << 11, "zlib": 1 << 11, "lzma": 1 << 16,
    "shuffle": 1, **dict.fromkeys(_PLUS4, 1),
}  # fmt: skip


class NumcodecsBytesBytes(BytesBytesCodec):
    """A numcodecs bytes->bytes codec (compressor, checksum, shuffle) with bounded decoding.

    Parameters
    ----------
    codec_id
        The numcodecs id (``"zstd"``).
    config
        The numcodecs configuration without ``id``.
    json
        The v3 JSON this codec is written as (core ``zstd``/``gzip``/``blosc`` or ``numcodecs.<id>``).
    name
        The name used in messages (default: ``json["name"]``; v2 codecs use their id).
    allow_unsafe, where
        Passed to :func:`make_numcodecs`.
    """

    def __init__(
        self,
        codec_id: str,
        config: Mapping[str, Any],
        *,
        json: dict[str, Any],
        name: str | None = None,
        allow_unsafe: bool = False,
        where: str = "codecs",
    ) -> None:
        self.codec_id = codec_id
        self.config = dict(config)
        self.name = name or str(json["name"])
        self._json = json
        self._codec = make_numcodecs(codec_id, self.config, allow_unsafe=allow_unsafe, where=where)
        self._into = INTO.get(codec_id)
        self._decompress = decompress_function(codec_id, self._codec) if self._into is not None else None
        self._stream = STREAM.get(codec_id)
        self._allow_unsafe, self._where = allow_unsafe, where
        self.decodes_into = self._into is not None
        self.max_ratio = _MAX_RATIO.get(codec_id, UNKNOWN_RATIO)

    def bind(self, spec: ChunkSpec) -> Self:
        # v3 numcodecs.shuffle without elementsize takes the itemsize (zarr-python's evolve_from_array_spec)
        if (
            self.codec_id != "shuffle"
            or not self.name.startswith("numcodecs.")
            or "elementsize" in self.config
        ):
            return self
        config = {**self.config, "elementsize": max(1, spec.dtype.itemsize)}
        json = {"name": self._json["name"], "configuration": config}
        return type(self)(
            self.codec_id,
            config,
            json=json,
            name=self.name,
            allow_unsafe=self._allow_unsafe,
            where=self._where,
        )

    def to_json(self) -> dict[str, Any]:
        return dict(self._json)

    def encoded_size(self, nbytes: int) -> int | None:
        if self.codec_id in _PLUS4 and self.config.get("location", "end") in ("end", "start"):
            return nbytes + 4
        if self.codec_id == "shuffle":
            return nbytes
        return None

    def encode(self, data: BufferLike) -> BufferLike:
        try:
            out: BufferLike = self._codec.encode(data)
        except Exception as e:
            raise ChunkEncodeError(f"codec {self.name!r} failed to encode: {type(e).__name__}: {e}") from e
        return out

    def decode(self, data: BufferLike, expected: int | None) -> BufferLike:
        if expected is not None and self._into is not None:
            out = np.empty(expected, dtype=np.uint8)
            self.decode_into(data, out)
            return out
        try:
            if self._stream is not None:
                return self._stream(self._codec, data, expected)
            got: BufferLike = self._codec.decode(data)
        except (ChunkDecodeError, MemoryError):
            raise
        except Exception as e:
            raise ChunkDecodeError(
                f"codec {self.name!r}: {type(e).__name__}: {e}; the chunk is truncated or corrupt"
            ) from e
        if expected is not None and nbytes_of(got) != expected:
            raise wrong_size(self.name, nbytes_of(got), expected)
        return got

    def decode_into(self, data: BufferLike, out: np.ndarray[Any, Any]) -> None:
        if self._into is None:
            super().decode_into(data, out)
            return
        try:
            self._into(self._decompress, data, out)  # type: ignore[arg-type]
        except (ChunkDecodeError, MemoryError):
            raise
        except Exception as e:
            raise ChunkDecodeError(
                f"codec {self.name!r}: {type(e).__name__}: {e}; the chunk is truncated or corrupt"
            ) from e


# ----------------------------------------------------------------------------------- array->array codecs
def _dtype(value: Any, default: np.dtype[Any]) -> np.dtype[Any]:
    return default if value is None else np.dtype(value)


def _packbits_out(config: Mapping[str, Any], spec: ChunkSpec) -> ChunkSpec:
    if spec.dtype != np.dtype(bool):
        raise MetadataError(
            f"codec 'packbits' needs a bool input, got {spec.dtype}; remove it or use a bool array"
        )
    return derived_spec(spec, shape=(1 + math.ceil(spec.size / 8),), dtype=np.dtype(np.uint8))


_AA_OUT: dict[str, Callable[[Mapping[str, Any], ChunkSpec], ChunkSpec]] = {
    "delta": lambda c, s: derived_spec(s, dtype=_dtype(c.get("astype"), _dtype(c.get("dtype"), s.dtype))),
    "fixedscaleoffset": lambda c, s: derived_spec(
        s, dtype=_dtype(c.get("astype"), _dtype(c.get("dtype"), s.dtype))
    ),
    "quantize": lambda c, s: derived_spec(s, dtype=_dtype(c.get("astype"), _dtype(c.get("dtype"), s.dtype))),
    "astype": lambda c, s: derived_spec(s, dtype=np.dtype(c["encode_dtype"])),
    "categorize": lambda c, s: derived_spec(s, dtype=_dtype(c.get("astype"), np.dtype("u1"))),
    "packbits": _packbits_out,
}

_AA_FILL_DTYPE: dict[str, str] = {
    "delta": "dtype",
    "fixedscaleoffset": "dtype",
    "quantize": "dtype",
    "astype": "decode_dtype",
}
"""Configuration keys that default to the input dtype when missing (zarr-python's evolve_from_array_spec)."""


def _fit(
    arr: np.ndarray[Any, Any], spec: ChunkSpec, name: str, error: type[Exception]
) -> np.ndarray[Any, Any]:
    """``arr`` reshaped to ``spec.shape`` with ``spec.dtype`` (view when the itemsize matches)."""
    if arr.size != spec.size:
        raise error(
            f"codec {name!r}: got {arr.size} elements, expected {spec.size} (shape {spec.shape}): corrupt"
        )
    if arr.dtype != spec.dtype:
        if arr.dtype.itemsize == spec.dtype.itemsize and arr.dtype.kind != "O" and spec.dtype.kind != "O":
            arr = np.ascontiguousarray(arr).view(spec.dtype)
        else:
            arr = arr.astype(spec.dtype)
    return arr.reshape(spec.shape)


class NumcodecsArrayArray(ArrayArrayCodec):
    """A numcodecs filter used as an array->array codec (``numcodecs.delta``, v2 ``filters``)."""

    def __init__(
        self,
        codec_id: str,
        config: Mapping[str, Any],
        *,
        name: str,
        allow_unsafe: bool = False,
        where: str = "codecs",
    ) -> None:
        self.codec_id = codec_id
        self.config = dict(config)
        self.name = name
        self._allow_unsafe = allow_unsafe
        self._where = where
        check_allowed(codec_id, allow_unsafe=allow_unsafe, where=where)
        key = _AA_FILL_DTYPE.get(codec_id)
        # a missing dtype is filled in by bind() (zarr-python's evolve_from_array_spec); instantiate then
        pending = name.startswith("numcodecs.") and key is not None and self.config.get(key) is None
        self._codec: Any = (
            None if pending else make_numcodecs(codec_id, self.config, allow_unsafe=allow_unsafe, where=where)
        )

    def bind(self, spec: ChunkSpec) -> Self:
        key = _AA_FILL_DTYPE.get(self.codec_id)
        if self._codec is not None or key is None:
            return self
        config = {**self.config, key: spec.dtype.str}
        return type(self)(
            self.codec_id, config, name=self.name, allow_unsafe=self._allow_unsafe, where=self._where
        )

    def resolve(self, spec: ChunkSpec) -> ChunkSpec:
        out = _AA_OUT.get(self.codec_id)
        if out is None:
            return spec
        try:
            return out(self.config, spec)
        except TypeError as e:
            raise MetadataError(
                f"codec {self.name!r}: invalid dtype in configuration {self.config!r}: {e}"
            ) from None

    def to_json(self) -> dict[str, Any]:
        return {"name": f"numcodecs.{self.codec_id}", "configuration": dict(self.config)}

    def encode(self, chunk: np.ndarray[Any, Any], spec: ChunkSpec) -> np.ndarray[Any, Any]:
        try:
            # numcodecs filters flatten in memory order ("A"): hand them C order, as the spec's layout demands
            out = np.asarray(self._codec.encode(np.ascontiguousarray(chunk)))
        except Exception as e:
            raise ChunkEncodeError(f"codec {self.name!r} failed to encode: {type(e).__name__}: {e}") from e
        return _fit(out, self.resolve(spec), self.name, ChunkEncodeError)

    def decode(self, chunk: np.ndarray[Any, Any], spec: ChunkSpec) -> np.ndarray[Any, Any]:
        try:
            out = np.asarray(self._codec.decode(np.ascontiguousarray(chunk)))
        except (ChunkDecodeError, MemoryError):
            raise
        except Exception as e:
            raise ChunkDecodeError(
                f"codec {self.name!r}: {type(e).__name__}: {e}; the chunk is corrupt"
            ) from e
        return _fit(out, spec, self.name, ChunkDecodeError)


class NumcodecsArrayBytes(ArrayBytesCodec):
    """A numcodecs codec used as the array->bytes codec (``numcodecs.pcodec``, v2 object codecs)."""

    def __init__(
        self,
        codec_id: str,
        config: Mapping[str, Any],
        *,
        name: str,
        allow_unsafe: bool = False,
        where: str = "codecs",
    ) -> None:
        self.codec_id = codec_id
        self.config = dict(config)
        self.name = name
        self._codec = make_numcodecs(codec_id, self.config, allow_unsafe=allow_unsafe, where=where)

    def to_json(self) -> dict[str, Any]:
        return {"name": f"numcodecs.{self.codec_id}", "configuration": dict(self.config)}

    def encode(self, chunk: np.ndarray[Any, Any], spec: ChunkSpec) -> BufferLike:
        try:
            out: BufferLike = self._codec.encode(np.ascontiguousarray(chunk))
        except Exception as e:
            raise ChunkEncodeError(f"codec {self.name!r} failed to encode: {type(e).__name__}: {e}") from e
        return out

    def decode(self, data: BufferLike, spec: ChunkSpec) -> np.ndarray[Any, Any]:
        try:
            out = self._codec.decode(data)
        except (ChunkDecodeError, MemoryError):
            raise
        except Exception as e:
            if type(e).__name__ == "UnsafeDecodeError":  # numcodecs >= 0.16.6 has its own process-wide lock
                raise UnsafeCodecError(
                    f"codec {self.name!r}: numcodecs refuses to unpickle unless the process opts in too: "
                    "set NUMCODECS_ALLOW_UNSAFE_PICKLE_DECODE=1 (or numcodecs.pickles.ALLOW_UNSAFE_PICKLE_DECODE = "
                    "True) in addition to allow_unsafe_codecs=True, only if you trust this store"
                ) from e
            raise ChunkDecodeError(
                f"codec {self.name!r}: {type(e).__name__}: {e}; the chunk is corrupt"
            ) from e
        if not isinstance(out, np.ndarray):
            raise ChunkDecodeError(
                f"codec {self.name!r} decoded to a {type(out).__name__}, not an array: corrupt"
            )
        return _fit(out, spec, self.name, ChunkDecodeError)


def codec_from_numcodecs(
    codec_id: str, config: Mapping[str, Any], *, name: str, allow_unsafe: bool, where: str
) -> Codec:
    """The codec wrapper for numcodecs ``codec_id`` (kind from :data:`ALLOWLIST`), written as ``name``."""
    kind = allowlist_entry(codec_id, where).kind
    if kind == "bytes_bytes":
        json = {"name": f"numcodecs.{codec_id}", "configuration": dict(config)}
        return NumcodecsBytesBytes(
            codec_id, config, json=json, name=name, allow_unsafe=allow_unsafe, where=where
        )
    if kind == "array_array":
        return NumcodecsArrayArray(codec_id, config, name=name, allow_unsafe=allow_unsafe, where=where)
    return NumcodecsArrayBytes(codec_id, config, name=name, allow_unsafe=allow_unsafe, where=where)
