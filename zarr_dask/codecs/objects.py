"""Codec JSON as the codec objects users hand to xarray: numcodecs objects where numcodecs has the codec.

xarray's zarr engine reports ``encoding["compressors"]`` / ``["filters"]`` as codec objects; these are
numcodecs objects for the same codecs (``Blosc``, ``Zstd``, ``GZip``, ``CRC32C``, ``Delta``...), which
zarr_dask also takes back on write. A codec numcodecs does not have (``bytes``, ``transpose``...) or will not
build safely stays a JSON dict, which writes accept too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from zarr_dask.codecs.builtin import BLOSC_SHUFFLES
from zarr_dask.codecs.numcodecs_bridge import ALLOWLIST, make_numcodecs
from zarr_dask.errors import ZarrDaskError

__all__ = ["codec_object"]

_V3_CORE = {"blosc", "gzip", "zstd", "crc32c"}


def _numcodecs_id_and_config(config: Mapping[str, Any]) -> tuple[str, dict[str, Any]] | None:
    if "id" in config:  # v2: the numcodecs config itself
        return str(config["id"]), {k: v for k, v in config.items() if k != "id"}
    name = str(config.get("name", ""))
    params = dict(config.get("configuration") or {})
    if name.startswith("numcodecs."):
        return name[len("numcodecs.") :], params
    if name not in _V3_CORE:
        return None
    if name == "blosc":
        shuffle = params.get("shuffle", "shuffle")
        params["shuffle"] = BLOSC_SHUFFLES.index(shuffle) if shuffle in BLOSC_SHUFFLES else 1
        params.pop("typesize", None)  # numcodecs takes it from the data (and older versions refuse it)
    return name, params


def codec_object(config: Mapping[str, Any]) -> Any:
    """The numcodecs object for a codec's JSON (v2 ``{"id": ...}`` or v3 ``{"name": ..., "configuration"}``),
    or the JSON itself (a dict) when numcodecs has no such codec or it is unsafe to build.

    Examples
    --------
    >>> codec_object({"name": "zstd", "configuration": {"level": 3, "checksum": False}})
    Zstd(level=3)
    >>> codec_object({"name": "bytes", "configuration": {"endian": "little"}})
    {'name': 'bytes', 'configuration': {'endian': 'little'}}
    """
    found = _numcodecs_id_and_config(config)
    if found is None or found[0] not in ALLOWLIST or ALLOWLIST[found[0]].unsafe:
        return dict(config)
    try:
        return make_numcodecs(found[0], found[1], allow_unsafe=False, where="encoding")
    except ZarrDaskError:
        return dict(config)
