"""``zarr-dask ledger``: which regions of a target the journaled writes (``resume=True``) finished.

Lists every journaled write at or below the node: its array, region, status (done, or partial: run the same
write again with resume=True) and finished writer tasks. ``--regions`` (JSON, a list of regions of
[start, stop] pairs for the leading dimensions) also prints the assigned regions not done yet; the exit
status is then 1 while any is missing. ``--publish`` consolidates the metadata once and deletes the
journals (refused while a write is partial).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import zarr_dask
from zarr_dask.cli import node_arguments, storage_options
from zarr_dask.errors import NodeNotFoundError


def _cmd_ledger(args: argparse.Namespace) -> int:
    options = storage_options(args.storage_options)
    ledger = zarr_dask.write_ledger(args.url, args.path or None, options)
    print(repr(ledger))
    status = 0
    if args.regions:
        missing = ledger.missing(json.loads(args.regions), args.array)
        for region in missing:
            print("missing [" + ", ".join(f"{a}:{b}" for a, b in region) + "]")
        print(f"{len(missing)} assigned region(s) not done")
        status = 1 if missing else 0
    if args.publish:
        zarr_dask.publish_ledger(args.url, args.path or None, options)
        try:  # an array's ledger (its appends' journals) has no consolidated metadata to write
            zarr_dask.open_array(args.url, path=args.path or "", storage_options=options)
            what = "an array: no consolidated metadata"
        except NodeNotFoundError:
            what = "consolidated metadata written"
        print(f"published: {what}, {len(ledger.entries)} journal(s) deleted")
    return status


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add ``ledger`` to the ``zarr-dask`` sub-parsers."""
    p = sub.add_parser("ledger", parents=[common], help="show which regions journaled (resume=True) writes finished",
                       description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
                       formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    node_arguments(p)
    p.add_argument("--regions", default=None, metavar="JSON",
                   help='assigned regions, e.g. \'[[[0, 24]], [[24, 48]]]\': print those not done')  # fmt: skip
    p.add_argument("--array", default=None, help="match --regions against this array's writes only")
    p.add_argument("--publish", action="store_true", help="consolidate once and delete the journals")
    p.set_defaults(func=_cmd_ledger)
