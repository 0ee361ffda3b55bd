"""Metadata as people read it, shared by ``Array.info``, ``Group.info``, the HTML reprs and ``zarr-dask info``:
a codec chain as one line (name and configuration, as zarr-python's ``info`` shows it), and attributes with
xarray's ``_FillValue`` decoded (v3 arrays store a float one as base64 of its 8 bytes).

Examples
--------
>>> codecs_text([{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "zstd", "configuration": {"level": 3}}])
'bytes(endian=little) > zstd(level=3)'
>>> import numpy as np
>>> shown_attributes({"_FillValue": "AAAAAAAA+H8=", "units": "K"}, np.dtype("f4"), 3)
{'_FillValue': 'NaN', 'units': 'K'}
"""

from __future__ import annotations

import base64
import binascii
import math
import struct
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["codecs_text", "info_text", "shown_attributes"]


def _codec(c: Any) -> str:
    if not isinstance(c, Mapping):
        return str(c)
    name = c.get("name") or c.get("id")
    conf = {k: v for k, v in (c.get("configuration") or {k: v for k, v in c.items() if k not in ("id", "name")}).items()}
    if name == "sharding_indexed":
        inner = " > ".join(_codec(x) for x in conf.get("codecs", []))
        index = " > ".join(_codec(x) for x in conf.get("index_codecs", []))
        return f"sharding_indexed(chunks {tuple(conf.get('chunk_shape', []))}: {inner}; index at {conf.get('index_location', 'end')}: {index})"
    args = ", ".join(f"{k}={v}" for k, v in conf.items())
    return f"{name}({args})" if args else str(name)


def codecs_text(codecs: Any) -> str:
    """Codec JSON (v3 list, or v2 ``{"compressor", "filters"}``) as one readable line.

    Examples
    --------
    >>> codecs_text({"compressor": {"id": "blosc", "cname": "lz4"}, "filters": None})
    'blosc(cname=lz4)'
    """
    if isinstance(codecs, Mapping):
        chain = [*(codecs.get("filters") or []), *([codecs["compressor"]] if codecs.get("compressor") else [])]
        return " > ".join(_codec(c) for c in chain) or "none"
    return " > ".join(_codec(c) for c in codecs) or "none"


def _spelled(x: float) -> float | str:
    """A float as Zarr spells it in JSON (NaN and the infinities as strings), so it stays valid JSON."""
    if math.isfinite(x):
        return x
    return "NaN" if math.isnan(x) else ("Infinity" if x > 0 else "-Infinity")


def _b64_double(value: Any) -> float | str:
    if not isinstance(value, str):
        raise TypeError(value)
    return _spelled(struct.unpack("<d", base64.b64decode(value, validate=True))[0])


def _fill_value(value: Any, dtype: np.dtype[Any]) -> Any:
    """xarray's encoded ``_FillValue`` (v3) as its value; anything that is not such an encoding as it is."""
    try:
        if dtype.kind == "f":
            return _b64_double(value)
        if dtype.kind == "c" and isinstance(value, list | tuple) and len(value) == 2:
            return [_b64_double(v) for v in value]
        if dtype.kind == "S" and isinstance(value, str):
            return repr(base64.b64decode(value, validate=True))
    except (TypeError, ValueError, binascii.Error, struct.error):
        pass
    return value


def shown_attributes(attributes: Mapping[str, Any], dtype: np.dtype[Any], zarr_format: int) -> dict[str, Any]:
    """``attributes`` with a v3 ``_FillValue`` decoded (JSON-safe: NaN as ``"NaN"``), for display only."""
    out = dict(attributes)
    if zarr_format == 3 and "_FillValue" in out:
        out["_FillValue"] = _fill_value(out["_FillValue"], dtype)
    return out


def info_text(rows: list[tuple[str, Any]]) -> str:
    """The rows of an ``info`` summary, aligned as zarr-python aligns them."""
    return "\n".join(f"{k:<20}: {v}" for k, v in rows)
