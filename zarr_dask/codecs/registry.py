"""Name -> codec tables: v3 codec entries (objects or short-hand strings) and v2 ``{"id": ...}`` configs.

v3 names are looked up in :data:`V3_CODECS`; ``numcodecs.<id>`` names and every v2 id go through the
numcodecs allowlist (:data:`zarr_dask.codecs.numcodecs_bridge.ALLOWLIST`), never through numcodecs' own
registry.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from zarr_dask.codecs.base import Codec
from zarr_dask.codecs.bitround import parse_bitround
from zarr_dask.codecs.builtin import (
    VlenCodec,
    parse_blosc,
    parse_bytes,
    parse_crc32c,
    parse_gzip,
    parse_transpose,
    parse_vlen_bytes,
    parse_vlen_utf8,
    parse_zstd,
)
from zarr_dask.codecs.conditional import parse_conditional
from zarr_dask.codecs.n5 import parse_n5_default
from zarr_dask.codecs.numcodecs_bridge import ALLOWLIST, codec_from_numcodecs
from zarr_dask.codecs.packbits import parse_packbits
from zarr_dask.codecs.reshape import parse_reshape
from zarr_dask.codecs.sharding import parse_sharding
from zarr_dask.codecs.value import parse_cast_value, parse_scale_offset
from zarr_dask.codecs.zarr_python_bridge import plugin_codec
from zarr_dask.errors import MetadataError, UnknownCodecError, UnsupportedFeatureError

__all__ = [
    "NOT_IMPLEMENTED",
    "NUMCODECS_PREFIX",
    "V2_CODEC_IDS",
    "V3_CODECS",
    "codec_from_v2",
    "codec_from_v3",
    "split_v3_entry",
]

V3Parser = Callable[[Mapping[str, Any] | None], Codec]

V3_CODECS: dict[str, V3Parser] = {
    "bytes": parse_bytes,
    "endian": parse_bytes,  # the pre-3.0 name of "bytes", still read by zarr-python
    "transpose": parse_transpose,
    "gzip": parse_gzip,
    "zstd": parse_zstd,
    "blosc": parse_blosc,
    "crc32c": parse_crc32c,
    "vlen-utf8": parse_vlen_utf8,
    "vlen-bytes": parse_vlen_bytes,
    "scale_offset": parse_scale_offset,  # zarr-extensions, written by zarr-python >= 3.4
    "cast_value": parse_cast_value,
    "bitround": parse_bitround,  # zarr-extensions (zarrs)
    "packbits": parse_packbits,  # zarr-extensions (zarrs, tensorstore)
    "reshape": parse_reshape,  # zarr-extensions
    "conditional": parse_conditional,  # zarr-extensions
    "n5_default": parse_n5_default,  # zarr-extensions
}
"""v3 core and registered codec names we implement."""


NUMCODECS_PREFIX = "numcodecs."
V2_CODEC_IDS = frozenset(ALLOWLIST)
"""The v2 codec ids we accept (the numcodecs allowlist)."""

_ENTRY_KEYS = frozenset({"name", "configuration", "must_understand"})


def split_v3_entry(entry: Any) -> tuple[str, Mapping[str, Any] | None]:
    """``(name, configuration)`` of a v3 codec entry: a short-hand string or a ``{"name", ...}`` object."""
    if isinstance(entry, str):
        return entry, None
    if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
        raise MetadataError(
            f"codec entry {entry!r} in 'codecs' must be a name string or an object with a 'name' string"
        )
    extra = sorted(set(entry) - _ENTRY_KEYS)
    if extra:
        raise MetadataError(
            f"codec {entry['name']!r} in 'codecs' has unknown key(s) {extra}; allowed: name, configuration, "
            "must_understand"
        )
    if not isinstance(entry.get("must_understand", True), bool):
        raise MetadataError(f"codec {entry['name']!r}: 'must_understand' must be true or false")
    configuration = entry.get("configuration")
    if configuration is not None and not isinstance(configuration, Mapping):
        raise MetadataError(
            f"codec {entry['name']!r}: 'configuration' must be an object, got {configuration!r}"
        )
    return entry["name"], configuration


#: Registered codecs (zarr-extensions) that zarr_dask does not implement, and why (see docs/formats.md).
NOT_IMPLEMENTED = {
    "zfp": (
        "its library zfpy cannot be installed beside numcodecs and NumPy 2 today (zfpy 1.0.1.post0 breaks "
        "'import numcodecs'; zfpy 1.0.0 is built for NumPy 1), and it lacks the registry's 'reversible' and "
        "'expert' modes. Read the data with a tool that bundles zfp (tensorstore does not either), or convert it "
        "with the codec 'numcodecs.zfpy' where that package works"
    ),
}


def codec_from_v3(entry: Any, *, allow_unsafe: bool = False) -> Codec:
    """Build the codec of one v3 ``codecs`` entry.

    Unknown names raise even with ``must_understand: false``: skipping a codec would change the decoded data.

    Raises
    ------
    UnknownCodecError
        The name is not implemented here (the message lists what is).
    UnsafeCodecError
        ``numcodecs.pickle`` & co. without ``allow_unsafe``.
    MetadataError
        A malformed entry or configuration.
    """
    name, configuration = split_v3_entry(entry)
    parser = V3_CODECS.get(name)
    if parser is not None:
        return parser(configuration)
    if name == "sharding_indexed":  # holds nested codec lists, so it needs the unsafe opt-in too
        return parse_sharding(configuration, allow_unsafe=allow_unsafe)
    if name in NOT_IMPLEMENTED:
        raise UnsupportedFeatureError(f"codec {name!r} is registered but not implemented: {NOT_IMPLEMENTED[name]}")
    if name.startswith(NUMCODECS_PREFIX):
        codec_id = name[len(NUMCODECS_PREFIX) :]
        config = dict(configuration or {})
        if "id" in config and config.pop("id") != codec_id:
            raise MetadataError(f"codec {name!r}: configuration 'id' does not match the name")
        return codec_from_numcodecs(
            codec_id, config, name=name, allow_unsafe=allow_unsafe, where=f"codec {name!r}"
        )
    try:  # a zarr-python codec plugin, through zarr-python when it is installed
        return plugin_codec(name, configuration)
    except UnknownCodecError as e:
        raise UnknownCodecError(
            f"{e}; supported: {', '.join(sorted([*V3_CODECS, 'sharding_indexed']))} and numcodecs.<id> for the "
            f"ids {', '.join(sorted(ALLOWLIST))}, and zarr-python's registered codecs when it is installed"
        ) from None


def codec_from_v2(config: Any, *, allow_unsafe: bool = False, where: str = "'filters'") -> Codec:
    """Build the codec of a v2 ``compressor`` or ``filters`` item (``{"id": ..., **numcodecs config}``)."""
    if not isinstance(config, Mapping) or not isinstance(config.get("id"), str):
        raise MetadataError(
            f"{where} item {config!r} must be an object with an 'id' string (a numcodecs config)"
        )
    rest = {k: v for k, v in config.items() if k != "id"}
    codec_id = config["id"]
    if codec_id in ("vlen-utf8", "vlen-bytes") and not rest:
        return VlenCodec("str" if codec_id == "vlen-utf8" else "bytes")
    return codec_from_numcodecs(
        codec_id, rest, name=codec_id, allow_unsafe=allow_unsafe, where=f"{where} ({codec_id!r})"
    )
