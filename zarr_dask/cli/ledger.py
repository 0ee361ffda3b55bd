"""`zarr-dask ledger`: which regions of a target the journaled writes (resume=True) finished.

Lists every journaled write at or below the node: its array, region, status and finished writer tasks.
A write is done, partial (run the same job again with resume=True: it skips what it finished), or
superseded (partial, but a later run finished its region, e.g. the job was submitted again with a code
fix: it does not block publishing, and --publish deletes its journal).

--regions takes the regions the jobs were given, as JSON: a list with one entry per job, each a list of
[start, stop] pairs for the leading dimensions ([[72, null]]: open-ended), or an object by dimension name
({"time": [24, 48]}) as to_zarr_dataset's region=. It prints the regions not done, and the exit status is
then 1 while any is missing. A region is done only when every journaled array it applies to (--array: that
one) finished it and no unfinished write overlaps it.

--publish consolidates the metadata once and deletes the journals; it refuses while a write is partial or a
journal record is damaged, unless --force (the unfinished journals are deleted too). --force also lists a
damaged record instead of failing. --json prints one JSON object instead of the table.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import zarr_dask
from zarr_dask.cli import json_argument, node_arguments, storage_options
from zarr_dask.errors import NodeNotFoundError


def _regions(text: str) -> list[Any]:
    example = '[[[0, 24]], [[24, 48]]]\' or \'[{"time": [0, 24]}]'
    return list(json_argument(text, "--regions", list, "a JSON list of regions, one per job", example))


def _shown(region: Any) -> str:
    def span(b: Any) -> str:
        return f"{b[0]}:{'' if b[1] is None else b[1]}"

    if isinstance(region, dict):
        return "[" + ", ".join(f"{d}={span(b)}" for d, b in region.items()) + "]"
    return "[" + ", ".join(span(b) for b in region) + "]"


def _as_json(region: Any) -> Any:
    return {d: list(b) for d, b in region.items()} if isinstance(region, dict) else [list(b) for b in region]


def _publish(args: argparse.Namespace, options: Any, journals: int) -> str:
    zarr_dask.publish_ledger(args.url, args.path or None, options, force=args.force)
    try:  # an array's ledger (its appends' journals) has no consolidated metadata to write
        zarr_dask.open_array(args.url, path=args.path or "", storage_options=options)
        what = "an array: no consolidated metadata"
    except NodeNotFoundError:
        what = "consolidated metadata written"
    return f"published: {what}, {journals} journal(s) deleted"


def _cmd_ledger(args: argparse.Namespace) -> int:
    options = storage_options(args.storage_options)
    ledger = zarr_dask.write_ledger(args.url, args.path or None, options, strict=not args.force)
    missing = ledger.missing(_regions(args.regions), args.array) if args.regions else None
    published = _publish(args, options, len(ledger.entries)) if args.publish else None
    if args.json:
        doc = ledger.to_json()
        if missing is not None:
            doc["missing"] = [_as_json(r) for r in missing]
        if published is not None:
            doc["published"] = published
        print(json.dumps(doc, indent=2))
    else:
        print(repr(ledger))
        for region in missing or ():
            print(f"missing {_shown(region)}")
        if missing is not None:
            print(f"{len(missing)} assigned region(s) not done")
        unfinished = ledger.unfinished
        if unfinished and published is None:
            print(f"{len(unfinished)} journaled write(s) not finished: --publish refuses until their jobs are run again "
                  "with resume=True (or pass --publish --force)")  # fmt: skip
        if published is not None:
            print(published)
    return 1 if missing else 0


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add ``ledger`` to the ``zarr-dask`` sub-parsers."""
    p = sub.add_parser("ledger", parents=[common], help="show which regions journaled (resume=True) writes finished",
                       description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
                       formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    node_arguments(p)
    p.add_argument("--regions", default=None, metavar="JSON",
                   help='assigned regions, e.g. \'[[[0, 24]], [[24, null]]]\' or \'[{"time": [0, 24]}]\': print '
                   "those not done (exit status 1 while any is)")  # fmt: skip
    p.add_argument("--array", default=None, help="match --regions against this array's writes only")
    p.add_argument("--publish", action="store_true", help="consolidate once and delete the journals")
    p.add_argument("--force", action="store_true",
                   help="publish even while writes are unfinished or records damaged; list damaged records")  # fmt: skip
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_cmd_ledger)
