"""Chunk key encodings: chunk grid coordinates <-> store keys (relative to the array's key prefix).

* ``default`` (v3): ``"c"`` followed by ``separator + index`` per dimension: ``c/1/2`` (``"c"`` for 0-d).
* ``v2`` (v2 arrays, and v3 arrays converted from v2): indices joined by the separator: ``1.2``
  (``"0"`` for 0-d).

Keys are built from integers only, never from strings found in metadata.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, SupportsIndex

from zarr_dask.errors import IndexingError, MetadataError, UnknownExtensionError
from zarr_dask.spec.json import parse_named_config

__all__ = [
    "ChunkKeyEncoding",
    "DefaultChunkKeyEncoding",
    "Separator",
    "V2ChunkKeyEncoding",
    "parse_chunk_key_encoding",
]

Separator = Literal[".", "/"]
_DECIMAL = re.compile(r"0|[1-9][0-9]*")


def _check_separator(value: Any, what: str) -> None:
    if value not in (".", "/") or not isinstance(value, str):
        raise MetadataError(f"{what} separator must be '.' or '/', got {value!r}")


def _coord_strings(coords: Sequence[SupportsIndex]) -> list[str]:
    out = []
    for c in coords:
        if isinstance(c, bool):
            raise IndexingError(f"chunk coordinates must be integers, got {tuple(coords)!r}")
        try:
            i = operator.index(c)
        except TypeError:
            raise IndexingError(f"chunk coordinates must be integers, got {coords!r}") from None
        if i < 0:
            raise IndexingError(f"chunk coordinates must not be negative, got {coords!r}")
        out.append(str(i))
    return out


def _decode_parts(parts: list[str], key: str, what: str) -> tuple[int, ...]:
    for part in parts:
        if not _DECIMAL.fullmatch(part):
            raise MetadataError(
                f"{key!r} is not a chunk key of the {what} encoding: {part!r} is not a decimal index"
            )
    return tuple(int(p) for p in parts)


def _check_ndim(coords: tuple[int, ...], ndim: int | None, key: str) -> tuple[int, ...]:
    if ndim is not None and len(coords) != ndim:
        raise MetadataError(f"chunk key {key!r} has {len(coords)} indices, the array has {ndim} dimensions")
    return coords


@dataclass(frozen=True, kw_only=True)
class ChunkKeyEncoding:
    """Base class: ``encode(coords) -> key``, ``decode(key) -> coords``, ``to_json()``."""

    name: ClassVar[str]
    separator: Separator

    def __post_init__(self) -> None:
        _check_separator(self.separator, f"{self.name} chunk key encoding")

    def encode(self, coords: Sequence[SupportsIndex]) -> str:
        """The store key of the chunk at grid coordinates ``coords``."""
        raise NotImplementedError

    def decode(self, key: str, ndim: int | None = None) -> tuple[int, ...]:
        """Grid coordinates of the chunk stored under ``key`` (MetadataError if ``key`` is not such a key)."""
        raise NotImplementedError

    def to_json(self) -> dict[str, Any]:
        """The ``chunk_key_encoding`` JSON object as zarr-python writes it."""
        return {"name": self.name, "configuration": {"separator": self.separator}}


@dataclass(frozen=True, kw_only=True)
class DefaultChunkKeyEncoding(ChunkKeyEncoding):
    """The v3 ``default`` encoding: ``c/1/2`` (separator ``/``, the default) or ``c.1.2``.

    Examples
    --------
    >>> enc = DefaultChunkKeyEncoding()
    >>> enc.encode((1, 23))
    'c/1/23'
    >>> enc.decode("c/1/23")
    (1, 23)
    >>> enc.encode(())
    'c'
    """

    name: ClassVar[str] = "default"
    separator: Separator = "/"

    def encode(self, coords: Sequence[SupportsIndex]) -> str:
        sep = self.separator
        return "c" + "".join(sep + s for s in _coord_strings(coords))

    def decode(self, key: str, ndim: int | None = None) -> tuple[int, ...]:
        if not isinstance(key, str):
            raise MetadataError(f"a chunk key must be a string, got {key!r}")
        if key == "c":
            return _check_ndim((), ndim, key)
        if not key.startswith("c" + self.separator):
            raise MetadataError(
                f"{key!r} is not a chunk key of the default encoding (expected 'c{self.separator}<i>...')"
            )
        parts = key[2:].split(self.separator)
        return _check_ndim(_decode_parts(parts, key, "default"), ndim, key)


@dataclass(frozen=True, kw_only=True)
class V2ChunkKeyEncoding(ChunkKeyEncoding):
    """The ``v2`` encoding (Zarr v2 ``dimension_separator``): ``1.2`` (separator ``.``, the default) or ``1/2``.

    Examples
    --------
    >>> enc = V2ChunkKeyEncoding()
    >>> enc.encode((1, 2))
    '1.2'
    >>> enc.encode(())
    '0'
    >>> enc.decode("0", ndim=0)
    ()
    """

    name: ClassVar[str] = "v2"
    separator: Separator = "."

    def encode(self, coords: Sequence[SupportsIndex]) -> str:
        return self.separator.join(_coord_strings(coords)) or "0"

    def decode(self, key: str, ndim: int | None = None) -> tuple[int, ...]:
        if not isinstance(key, str):
            raise MetadataError(f"a chunk key must be a string, got {key!r}")
        if ndim == 0:
            if key != "0":
                raise MetadataError(f"{key!r} is not the chunk key of a 0-d array (which is '0')")
            return ()
        return _check_ndim(_decode_parts(key.split(self.separator), key, "v2"), ndim, key)


_ENCODINGS: dict[str, type[ChunkKeyEncoding]] = {"default": DefaultChunkKeyEncoding, "v2": V2ChunkKeyEncoding}


def parse_chunk_key_encoding(obj: Any) -> DefaultChunkKeyEncoding | V2ChunkKeyEncoding:
    """Parse the v3 ``chunk_key_encoding`` JSON value (object or short-hand name).

    A missing ``configuration`` or ``separator`` gives the encoding's default separator (``/`` for
    ``default``, ``.`` for ``v2``).

    Raises
    ------
    MetadataError
        For a malformed value or separator.
    UnknownExtensionError
        For an encoding other than ``default`` / ``v2``.

    Examples
    --------
    >>> parse_chunk_key_encoding({"name": "default", "configuration": {"separator": "."}})
    DefaultChunkKeyEncoding(separator='.')
    >>> parse_chunk_key_encoding("v2")
    V2ChunkKeyEncoding(separator='.')
    """
    name, config = parse_named_config(obj, "chunk_key_encoding")
    cls = _ENCODINGS.get(name)
    if cls is None:
        raise UnknownExtensionError(
            f"chunk_key_encoding {name!r} is an extension zarr_dask does not support (supported: 'default', "
            "'v2'); the array cannot be opened"
        )
    config = config or {}
    extra = sorted(set(config) - {"separator"})
    if extra:
        raise MetadataError(
            f"chunk_key_encoding {name!r} configuration has unexpected key(s) {extra}; only 'separator' is allowed"
        )
    if "separator" not in config:
        return DefaultChunkKeyEncoding() if cls is DefaultChunkKeyEncoding else V2ChunkKeyEncoding()
    _check_separator(config["separator"], f"chunk_key_encoding {name!r}")
    sep: Separator = config["separator"]
    return (
        DefaultChunkKeyEncoding(separator=sep)
        if cls is DefaultChunkKeyEncoding
        else V2ChunkKeyEncoding(separator=sep)
    )
