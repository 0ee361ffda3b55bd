"""The ZEP 6 JSON of a stored hierarchy exactly as its documents are, invalid ones included: what a checker
reads (:func:`zarr_dask.zom.conventions.xarray` of a store), where :func:`~zarr_dask.zom.io.from_store` refuses
a hierarchy with an invalid document. One listing of the store and one batched read of its documents."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from zarr_dask.spec.paths import key_prefix
from zarr_dask.store import open_store

__all__ = ["stored_json"]

_V3, _V2_ARRAY, _V2_GROUP, _V2_ATTRS = "zarr.json", ".zarray", ".zgroup", ".zattrs"


def _load(raw: bytes | None) -> Any:
    """A document's JSON, or its text where it is not JSON (the checker reports it as such)."""
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return bytes(raw).decode("utf-8", "replace")


def _node(raw: Mapping[str, bytes], path: str) -> Any:
    """The ZEP 6 JSON of the node at ``path`` (v2: ``.zarray``/``.zgroup`` with ``.zattrs`` as attributes)."""
    p = key_prefix(path)
    if p + _V3 in raw:
        return _load(raw[p + _V3])
    doc = _load(raw[p + _V2_ARRAY] if p + _V2_ARRAY in raw else raw[p + _V2_GROUP])
    attributes = _load(raw.get(p + _V2_ATTRS))
    return {**doc, "attributes": {} if attributes is None else attributes} if isinstance(doc, dict) else doc


def _is_array(doc: Any) -> bool:
    return isinstance(doc, dict) and (doc.get("node_type") == "array" or (doc.get("zarr_format") == 2 and "shape" in doc))


def stored_json(store: Any, *, storage_options: Mapping[str, Any] | None = None) -> tuple[Any, list[tuple[str, str]]]:
    """``(ZEP 6 JSON of the hierarchy at store's root, [(node path, why readers never see it)])``.

    Every document goes in as stored (text where it is not JSON); directories holding nodes without a
    document of their own are implicit groups; nodes inside an array are left out and listed.

    Examples
    --------
    >>> import zarr_dask
    >>> _ = zarr_dask.create_array("memory://zom-stored-doc", path="g/a", shape=(2,), dtype="u1")
    >>> doc, hidden = stored_json("memory://zom-stored-doc")
    >>> doc["members"]["g"]["members"]["a"]["shape"], hidden
    ([2], [])
    >>> zarr_dask.open_store("memory://zom-stored-doc").delete_prefix("")
    """
    s = open_store(store, storage_options=dict(storage_options) if storage_options else None)
    names = (_V3, _V2_ARRAY, _V2_GROUP, _V2_ATTRS)
    keys = [k for k in s.list_prefix("") if k.rpartition("/")[2] in names]
    raw = s.get_many(keys)
    paths = sorted({k.rpartition("/")[0] for k in keys if k.rpartition("/")[2] != _V2_ATTRS}, key=lambda p: (p.count("/"), p))
    docs = {path: _node(raw, path) for path in paths}
    first = next((d for d in docs.values() if isinstance(d, dict) and d.get("zarr_format") in (2, 3)), {})
    fmt = first.get("zarr_format", 3)
    root = docs.get("", {"zarr_format": fmt, **({"node_type": "group"} if fmt == 3 else {}), "implicit": True})
    hidden: list[tuple[str, str]] = []
    for path in paths:
        if not path:
            continue
        parent, parts = root, path.split("/")
        for name in parts[:-1]:
            if _is_array(parent) or not isinstance(parent, dict):
                break
            members = parent.setdefault("members", {})
            if not isinstance(members, dict):
                break
            parent = members.setdefault(name, {"zarr_format": fmt, **({"node_type": "group"} if fmt == 3 else {}),
                                               "implicit": True})  # fmt: skip
        else:
            if _is_array(parent):
                hidden.append(("/" + path, "a node inside an array: readers never see it; move it out of the array"))
            elif isinstance(parent, dict) and isinstance(parent.setdefault("members", {}), dict):
                parent["members"][parts[-1]] = docs[path]
            continue
        hidden.append(("/" + path, "a node below an array or an unreadable group: readers never see it"))
    return root, hidden
