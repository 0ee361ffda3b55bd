"""The ``zarr-dask`` command, built on the public API only."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import zarr_dask
from zarr_dask.errors import ZarrDaskError


def _open(url: str, path: str, storage_options: str | None) -> Any:
    options = json.loads(storage_options) if storage_options else None
    return zarr_dask.open(url, path=path, mode="r", storage_options=options)


def _cmd_info(args: argparse.Namespace) -> int:
    node = _open(args.url, args.path, args.storage_options)
    if isinstance(node, zarr_dask.Array):
        print(repr(node.info))
    else:
        print(f"Type: Group{' (implicit)' if node.implicit else ''}\nZarr format: {node.zarr_format}")
        print(f"Members: {', '.join(node.keys()) or '-'}")
        print(f"Attributes: {json.dumps(dict(node.attrs))}")
    return 0


def _cmd_tree(args: argparse.Namespace) -> int:
    node = _open(args.url, args.path, args.storage_options)
    if isinstance(node, zarr_dask.Array):
        print(f"{node.name} {node.shape} {node.dtype}")
    else:
        print(node.tree(max_depth=args.depth))
    return 0


def _cmd_consolidate(args: argparse.Namespace) -> int:
    options = json.loads(args.storage_options) if args.storage_options else None
    group = zarr_dask.consolidate_metadata(args.url, path=args.path, storage_options=options)
    n = len(group.consolidated_metadata.nodes) if group.consolidated_metadata else 0
    print(f"consolidated {n} nodes into {group.name}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="zarr-dask", description="Inspect and manage Zarr v2/v3 stores.")
    parser.add_argument("-v", "--verbose", action="store_true", help="show tracebacks on errors")
    parser.add_argument("--version", action="version", version=f"zarr-dask {zarr_dask.__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, func, text in [
        ("info", _cmd_info, "summarise an array or group (shape, chunks, codecs, stored bytes)"),
        ("tree", _cmd_tree, "print the hierarchy with shapes and dtypes (implicit groups marked)"),
        ("consolidate", _cmd_consolidate, "write consolidated metadata for a group"),
    ]:
        p = sub.add_parser(name, help=text, description=text)
        p.add_argument("url", help="store URL or local path (file://, s3://, memory://, ...)")
        p.add_argument("--path", default="", help="node path inside the store (default: the root)")
        p.add_argument("--storage-options", default=None, help="fsspec storage options as JSON")
        if name == "tree":
            p.add_argument("--depth", type=int, default=None, help="maximum depth (default: all)")
        p.set_defaults(func=func)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except (ZarrDaskError, OSError, ValueError) as e:
        if args.verbose:
            raise
        print(f"zarr-dask: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
