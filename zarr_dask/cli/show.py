"""``zarr-dask info``, ``tree``, ``spec`` and ``consolidate``.

Codecs show as one line (:func:`zarr_dask.core.describe.codecs_text`, shared with ``Array.info``):

>>> codecs_text({"compressor": {"id": "zstd", "level": 3}, "filters": [{"id": "delta", "dtype": "<f4"}]})
'delta(dtype=<f4) > zstd(level=3)'
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import zarr_dask
from zarr_dask.cli import human, node_arguments, storage_options
from zarr_dask.cli.repository import readable
from zarr_dask.core.describe import codecs_text, shown_attributes

__all__ = ["array_info", "codecs_text", "group_info", "register"]


@contextmanager
def _open(args: argparse.Namespace) -> Iterator[zarr_dask.Array | zarr_dask.Group]:
    """The node the command reads (an ``icechunk:`` URL: in a read-only session of the repository)."""
    with readable(args.url, storage_options(args.storage_options)) as (source, options):
        yield zarr_dask.open(source, path=args.path, mode="r", storage_options=options)


def _scan(array: zarr_dask.Array) -> dict[str, int]:
    """One listing: stored bytes and the storage units (and inner chunks) that are initialized. A stored shard
    counts the inner chunks that lie inside the array, so the count never exceeds ``nchunks`` (the Array's
    ``nchunks_initialized`` counts edge shards whole, as zarr-python does)."""
    meta = array.metadata
    prefix = f"{array.path}/" if array.path else ""
    sizes = array.store.list_prefix_sizes(prefix)
    grids = meta.chunk_grid.dim_grids(array.shape)
    units = chunks = 0
    for key in sizes:
        try:
            coords = meta.chunk_key_encoding.decode(key[len(prefix) :])
        except zarr_dask.errors.ZarrDaskError:
            continue
        if len(coords) != len(grids) or not all(0 <= c < g.nchunks() for c, g in zip(coords, grids, strict=True)):
            continue
        units += 1
        # the inner chunks of a stored shard that lie inside the array (an edge shard's others hold nothing)
        inner = array.chunks if array.shards is not None else None
        chunks += 1 if inner is None else math.prod(-(-g.data_size(c) // n) for g, c, n in zip(grids, coords, inner, strict=True))
    return {"nbytes_stored": sum(sizes.values()), "units_initialized": units, "chunks_initialized": chunks,
            "units": math.prod(g.nchunks() for g in grids)}  # fmt: skip


def _json_scalar(value: Any) -> Any:
    """A fill value as JSON: NaN/Infinity spelled as Zarr does, bytes as text, numpy scalars as Python."""
    value = value.item() if hasattr(value, "item") else value
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, bytes):
        return value.decode("latin-1")
    if isinstance(value, complex):
        return [_json_scalar(value.real), _json_scalar(value.imag)]
    return value


def array_info(array: zarr_dask.Array, scan: bool = True) -> dict[str, Any]:
    """What ``zarr-dask info`` shows for an array, as a JSON-able dict."""
    fill = array.fill_value
    info: dict[str, Any] = {
        "type": "array",
        "zarr_format": array.zarr_format,
        "store": array.store.url,
        "path": array.name,
        "shape": list(array.shape),
        "dtype": array.metadata.data_type.label,
        "chunks": list(array.chunks),
        "shards": list(array.shards) if array.shards is not None else None,
        "chunk_key_encoding": array.metadata.chunk_key_encoding.to_json(),
        "codecs": array.codecs,
        "fill_value": _json_scalar(fill),
        "dimension_names": list(array.dimension_names) if array.dimension_names is not None else None,
        "attributes": shown_attributes(array.attrs.asdict(), array.dtype, array.zarr_format),
        "nbytes": array.nbytes,
        "nchunks": array.nchunks,
    }
    if scan:
        info.update(_scan(array))
    return info


def group_info(group: zarr_dask.Group, scan: bool = True) -> dict[str, Any]:
    """What ``zarr-dask info`` shows for a group, as a JSON-able dict."""
    members = group.members(max_depth=None)
    arrays = [node for _, node in members if isinstance(node, zarr_dask.Array)]
    info: dict[str, Any] = {
        "type": "group",
        "zarr_format": group.zarr_format,
        "store": group.store.url,
        "path": group.name,
        "implicit": group.implicit,
        "consolidated": group.consolidated_metadata is not None,
        "members": group.keys(),
        "arrays": len(arrays),
        "groups": sum(1 for _, node in members if isinstance(node, zarr_dask.Group)),
        "attributes": group.attrs.asdict(),
        "nbytes": sum(a.nbytes for a in arrays),
    }
    if scan:
        prefix = f"{group.path}/" if group.path else ""
        info["nbytes_stored"] = sum(group.store.list_prefix_sizes(prefix).values())
    return info


def _ratio(info: Mapping[str, Any]) -> str:
    stored = info.get("nbytes_stored")
    return f"{info['nbytes'] / stored:.2f}" if stored else "-"


def _rows(info: Mapping[str, Any]) -> list[tuple[str, Any]]:
    if info["type"] == "group":
        kind = "Group" + (" (implicit: no metadata document)" if info["implicit"] else "")
        rows: list[tuple[str, Any]] = [("Type", kind), ("Zarr format", info["zarr_format"]), ("Store", info["store"]),
                ("Path", info["path"]), ("Consolidated", "yes" if info["consolidated"] else "no"),
                ("Members", ", ".join(info["members"]) or "-"),
                ("Below", f"{info['arrays']} array(s), {info['groups']} group(s)"),
                ("Attributes", json.dumps(info["attributes"])), ("No. bytes (arrays)", human(info["nbytes"]))]  # fmt: skip
    else:
        ke = info["chunk_key_encoding"]
        rows = [("Type", "Array"), ("Zarr format", info["zarr_format"]), ("Store", info["store"]), ("Path", info["path"]),
                ("Shape", tuple(info["shape"])), ("Data type", info["dtype"]), ("Chunk shape", tuple(info["chunks"])),
                ("Shard shape", tuple(info["shards"]) if info["shards"] else "-"),
                ("Chunk keys", f"{ke['name']} (separator {ke['configuration']['separator']!r})"),
                ("Codecs", codecs_text(info["codecs"])), ("Fill value", info["fill_value"]),
                ("Dimension names", ", ".join(str(n) for n in info["dimension_names"]) if info["dimension_names"] else "-"),
                ("Attributes", json.dumps(info["attributes"])), ("No. bytes", f"{info['nbytes']} ({human(info['nbytes'])})")]  # fmt: skip
    if "nbytes_stored" in info:
        rows += [("No. bytes stored", f"{info['nbytes_stored']} ({human(info['nbytes_stored'])})"),
                 ("Compression ratio", _ratio(info))]  # fmt: skip
        if info["type"] == "array":
            shards = f" ({info['units_initialized']}/{info['units']} shards)" if info["shards"] else ""
            rows.append(("Chunks initialized", f"{info['chunks_initialized']}/{info['nchunks']}{shards}"))
    else:
        rows.append(("No. bytes stored", "not scanned (--no-scan)"))
    return rows


def _cmd_info(args: argparse.Namespace) -> int:
    scan = not args.no_scan
    with _open(args) as node:
        info = array_info(node, scan) if isinstance(node, zarr_dask.Array) else group_info(node, scan)
    if args.json:
        print(json.dumps(info, indent=2, default=str))
    else:
        print("\n".join(f"{k:<19}: {v}" for k, v in _rows(info)))
    return 0


def _label(name: str, node: Any, details: bool) -> str:
    if isinstance(node, zarr_dask.Group):
        return name + (" (implicit group)" if node.implicit else "")
    label = f"{name} {node.shape} {node.metadata.data_type.label}"
    if details:
        label += f" chunks={node.chunks}"
        if node.shards is not None:
            label += f" shards={node.shards}"
        if node.dimension_names:
            label += f" dims=({', '.join(str(n) for n in node.dimension_names)})"
        label += f" [{codecs_text(node.codecs)}]"
    return label


def tree_text(group: zarr_dask.Group, depth: int | None = None, details: bool = False) -> str:
    """The hierarchy as an indented tree (implicit groups marked; ``details``: chunks, shards, codecs)."""
    members = dict(group.members(max_depth=depth))
    children: dict[str, list[str]] = {}
    for rel in sorted(members):
        children.setdefault(rel.rpartition("/")[0], []).append(rel)
    lines = [group.name + (" (implicit group)" if group.implicit else "")]

    def walk(parent: str, indent: str) -> None:
        kids = children.get(parent, [])
        for i, rel in enumerate(kids):
            last = i == len(kids) - 1
            lines.append(indent + ("└── " if last else "├── ") + _label(rel.rsplit("/", 1)[-1], members[rel], details))
            walk(rel, indent + ("    " if last else "│   "))

    walk("", "")
    return "\n".join(lines)


def _cmd_tree(args: argparse.Namespace) -> int:
    with _open(args) as node:
        text = _label(node.name, node, args.details) if isinstance(node, zarr_dask.Array) else tree_text(node, args.depth, args.details)
    print(text)
    return 0


def _cmd_spec(args: argparse.Namespace) -> int:
    from zarr_dask.zom import from_store

    with readable(args.url, storage_options(args.storage_options)) as (source, options):
        spec = from_store(source, path=args.path, depth=args.depth, storage_options=options)
    if args.zarr_format is not None:
        spec = spec.to_format(args.zarr_format, chunk_key_encoding="default")
    doc: Any = spec.to_json()
    if args.flat and hasattr(spec, "to_flat"):
        doc = {path: node.to_json() for path, node in spec.to_flat().items()}
    print(json.dumps(doc, indent=2))
    return 0


def _cmd_consolidate(args: argparse.Namespace) -> int:
    group = zarr_dask.consolidate_metadata(args.url, path=args.path, storage_options=storage_options(args.storage_options))
    n = len(group.consolidated_metadata.nodes) if group.consolidated_metadata else 0
    where = ".zmetadata" if group.zarr_format == 2 else "zarr.json (consolidated_metadata)"
    print(f"consolidated the metadata of {n} node(s) below {group.name} into {where}")
    return 0


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add the commands to the ``zarr-dask`` sub-parsers."""
    p = sub.add_parser("info", parents=[common], help="summarise an array or group",
                       description="Summarise an array (format, shape, dtype, chunks, shards, codecs, fill value, "
                       "dimension names, stored bytes, compression ratio, initialized chunks) or a group.")  # fmt: skip
    node_arguments(p, repositories=True)
    p.add_argument("--no-scan", action="store_true", help="do not list the stored keys (no stored bytes / chunk counts)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_cmd_info)
    p = sub.add_parser("tree", parents=[common], help="print the hierarchy",
                       description="Print the hierarchy with shapes and data types (implicit groups marked).")  # fmt: skip
    node_arguments(p, repositories=True)
    p.add_argument("--depth", type=int, default=None, help="levels to show (default: all)")
    p.add_argument("--details", action="store_true", help="also show chunks, shards, dimension names and codecs")
    p.set_defaults(func=_cmd_tree)
    p = sub.add_parser("spec", parents=[common], help="print the hierarchy as ZOM (ZEP 6) JSON",
                       description="Print the Zarr Object Model (ZEP 6, pydantic-zarr) JSON of a hierarchy.")  # fmt: skip
    node_arguments(p, repositories=True)
    p.add_argument("--depth", type=int, default=None, help="levels of members to read (default: all)")
    p.add_argument("--flat", action="store_true", help="the flat form: {'/a/b': node, ...}")
    p.add_argument("--zarr-format", type=int, choices=(3,), default=None,
                   help="show the metadata converted to Zarr v3 (what 'convert --zarr-format 3' starts from)")  # fmt: skip
    p.set_defaults(func=_cmd_spec)
    p = sub.add_parser("consolidate", parents=[common], help="write consolidated metadata for a group",
                       description="Gather the metadata of every node below a group into its consolidated "
                       "metadata (v2 .zmetadata, v3 zarr.json), so readers open it in one request.")  # fmt: skip
    node_arguments(p)
    p.set_defaults(func=_cmd_consolidate)
