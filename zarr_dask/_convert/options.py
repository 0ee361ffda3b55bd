"""Parsing the user-facing option strings of a conversion (shared by :func:`zarr_dask.convert` and the CLI).

* sizes: ``"2GiB"``, ``"512MB"``, ``"1e9"``, ``1073741824``;
* per-dimension sizes: ``"time=24,lat=-1"`` (by dimension name), ``"0=24,2=100"`` (by axis), ``"auto"``;
* compressors: ``"zstd:3"``, ``"gzip:6"``, ``"blosc:lz4:5"``, ``"blosc:zstd:3:bitshuffle"``, ``"lz4"``,
  ``"none"``, or a codec as JSON (``'{"name": "zstd", "configuration": {"level": 5}}'``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from zarr_dask import config
from zarr_dask.errors import MetadataError

__all__ = ["parse_compressor", "parse_dim_sizes", "parse_size"]

def parse_size(value: Any) -> int:
    """A byte count from an int or a string with an optional unit (``KB`` = 1000, ``KiB`` = 1024).

    Examples
    --------
    >>> parse_size("2GiB"), parse_size("512 MB"), parse_size(1024), parse_size("1.5k")
    (2147483648, 512000000, 1024, 1500)
    """
    try:
        n = config.parse_size(value)
    except (ValueError, TypeError):
        raise MetadataError(
            f"cannot read the size {value!r}; write a number of bytes with an optional unit, e.g. '2GiB', "
            "'500MB', '1073741824'"
        ) from None
    if n <= 0:
        raise MetadataError(f"a memory size must be positive, got {value!r}")
    return n


def parse_dim_sizes(value: Any, what: str = "chunks") -> Any:
    """``"time=24,lat=-1"`` -> ``{"time": 24, "lat": -1}``; axis numbers become ints (``"0=24"`` -> ``{0: 24}``).

    ``"auto"`` and ``"none"`` (-> None) are returned as they are; a mapping is checked and returned; a
    comma-separated list of integers (``"24,90,180"``) becomes a tuple (one size per dimension).

    Examples
    --------
    >>> parse_dim_sizes("time=720, lat=30,2=-1")
    {'time': 720, 'lat': 30, 2: -1}
    >>> parse_dim_sizes("24,90,180"), parse_dim_sizes("auto"), parse_dim_sizes("none", "shards")
    ((24, 90, 180), 'auto', None)
    """
    if value is None or isinstance(value, tuple | list):
        return None if value is None else tuple(int(v) for v in value)
    if isinstance(value, Mapping):
        return {_dim_key(k): _dim_size(v, k, what) for k, v in value.items()}
    text = str(value).strip()
    if text.lower() in ("auto", "keep"):
        return text.lower()
    if text.lower() == "none":
        return None
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if parts and all("=" not in p for p in parts):
        return tuple(_dim_size(p, i, what) for i, p in enumerate(parts))
    out: dict[str | int, int] = {}
    for part in parts:
        name, sep, size = part.partition("=")
        if not sep or not name.strip():
            raise MetadataError(
                f"cannot read --{what} {value!r}: write dim=size pairs separated by commas, e.g. "
                "'time=720,lat=90' (axis numbers work too: '0=720'), or 'auto'"
            )
        out[_dim_key(name.strip())] = _dim_size(size, name, what)
    return out


def _dim_key(name: Any) -> str | int:
    text = str(name)
    return int(text) if text.isdigit() else text


def _dim_size(size: Any, name: Any, what: str) -> int:
    try:
        n = int(str(size).strip())
    except ValueError:
        raise MetadataError(f"--{what}: the size of {name!r} must be an integer (-1 = the whole dimension), got {size!r}") from None
    if n == 0 or n < -1:
        raise MetadataError(f"--{what}: the size of {name!r} must be positive (or -1 = the whole dimension), got {n}")
    return n


_BLOSC_SHUFFLES = {"noshuffle": 0, "shuffle": 1, "bitshuffle": 2}


def parse_compressor(value: Any) -> Any:
    """A compressor argument for :func:`zarr_dask.create_array` from ``"name[:option[:option...]]"``.

    Returns None for ``"none"``, ``"keep"``/``"auto"`` unchanged, a list with one codec dict otherwise (v2 ``{"id": ...}`` form, which both
    Zarr formats accept), or the parsed JSON for JSON input. Anything that is not a string is returned as is.

    Examples
    --------
    >>> parse_compressor("zstd:3")
    [{'id': 'zstd', 'level': 3}]
    >>> parse_compressor("blosc:lz4:5:bitshuffle")
    [{'id': 'blosc', 'cname': 'lz4', 'clevel': 5, 'shuffle': 2}]
    >>> parse_compressor("none") is None
    True
    """
    if not isinstance(value, str):
        return value
    text = value.strip()
    if text.lower() in ("keep", "auto"):
        return text.lower()
    if text.startswith(("{", "[")):
        try:
            parsed = json.loads(text)
        except json.JSONDecodeError as e:
            raise MetadataError(f"--compressor {value!r} is not valid JSON: {e}") from None
        return parsed if isinstance(parsed, list) else [parsed]
    name, *opts = [p.strip() for p in text.split(":")]
    name = name.lower()
    if name in ("none", "null", ""):
        return None
    try:
        if name in ("zstd", "gzip", "zlib", "bz2", "lzma"):
            key = "level" if name != "lzma" else "preset"
            return [{"id": name, **({key: int(opts[0])} if opts else {})}]
        if name == "blosc":
            conf: dict[str, Any] = {"id": "blosc", "cname": opts[0] if opts else "lz4", "clevel": int(opts[1]) if len(opts) > 1 else 5}
            conf["shuffle"] = _BLOSC_SHUFFLES[opts[2].lower()] if len(opts) > 2 else 1
            return [conf]
        if name == "lz4":
            return [{"id": "lz4", **({"acceleration": int(opts[0])} if opts else {})}]
    except (ValueError, KeyError, IndexError):
        pass
    else:
        if not opts:
            return [{"id": name}]
    raise MetadataError(
        f"cannot read --compressor {value!r}; use e.g. 'zstd:3', 'gzip:6', 'blosc:lz4:5', "
        "'blosc:zstd:3:bitshuffle', 'lz4', 'none', or a codec as JSON"
    )
