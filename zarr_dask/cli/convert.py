"""``zarr-dask convert``: copy a hierarchy, changing format, chunks, shards and compressors, in bounded memory."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import logging
import shlex
import sys
from collections.abc import Iterator
from typing import Any, Literal

from zarr_dask.cli import storage_options
from zarr_dask.cli.repository import is_repository_url, repository_session

__all__ = ["register"]

log = logging.getLogger("zarr_dask.cli")

LOST_WORKER_TIMEOUT = "1 day"  # a --workers cluster never closes a lost worker for good (its nanny restarts it)

_DESCRIPTION = """\
Copy the hierarchy (or array) at SRC to DST -- groups, attributes, dimension names and xarray conventions
intact -- changing the Zarr format, the chunks, the shards and the compressors. Every storage key is written
once, by one task; memory stays under --max-memory per process whatever the two chunkings (the copy is
staged through an intermediate array when needed, like rechunker). Consolidated metadata is written at the
end.

--resume finishes an interrupted conversion: keys that are present are complete (local files are written
under a temporary name and renamed; object stores store objects whole), so every task whose keys are all
there is skipped. The target metadata must be what this command would write (same options), else nothing is
done.
"""

_EPILOG = """examples:
  zarr-dask convert v2.zarr v3.zarr --zarr-format 3
  zarr-dask convert in.zarr out.zarr --chunks time=8760,lat=30,lon=30 --shards lat=180,lon=360 --compressor zstd:3
  zarr-dask convert s3://bucket/in.zarr out.zarr --storage-options '{"anon": true}' --include 'fields/*'
  zarr-dask convert in.zarr s3://bucket/out.zarr --workers 4 --max-memory 2GiB --resume
  zarr-dask convert in.zarr out.zarr --chunks auto --dry-run
  zarr-dask convert archive.zarr 'icechunk:/data/repo?branch=main' --zarr-format 3 --shards time=8760
  zarr-dask convert 'icechunk:s3://bucket/repo?tag=v1' copy.zarr --src-storage-options '{"region": "us-east-1"}'

An Icechunk repository is icechunk:PATH or icechunk:s3://bucket/prefix (storage options: icechunk's s3_storage
keywords), with ?branch=, ?tag= or ?snapshot= for a source and ?branch= for a destination (default main); a
destination repository is created if absent and the conversion is committed there as one snapshot.
"""


@contextlib.contextmanager
def _scheduler(args: argparse.Namespace) -> Iterator[Any]:
    """None (dask's threads), or a distributed Client: to --scheduler, or to a LocalCluster of --workers."""
    if args.scheduler is None and args.workers is None:
        yield None
        return
    distributed: Any = importlib.import_module("distributed")
    if args.scheduler is not None:
        with distributed.Client(args.scheduler) as client:
            log.info("connected to the scheduler at %s", args.scheduler)
            yield client
        return
    dask: Any = importlib.import_module("dask")
    # The nannies restart a lost worker (an OOM kill); distributed's SpecCluster also closes a worker's nanny for
    # good when no worker of its name is registered lost-worker-timeout (15 s) after a removal, so a worker lost
    # again while that timer ran out left the job a worker short for good -- or with none, waiting forever. The
    # timeout is read at each removal: it is held while the cluster lives.
    with dask.config.set({"distributed.deploy.lost-worker-timeout": LOST_WORKER_TIMEOUT}):
        cluster = distributed.LocalCluster(n_workers=args.workers, threads_per_worker=args.threads or 1,
                                           processes=True, dashboard_address=":0", silence_logs=logging.ERROR)  # fmt: skip
        with cluster, distributed.Client(cluster) as client:
            log.info("started a LocalCluster of %d worker(s) with %d thread(s) each", args.workers, args.threads or 1)
            yield client


def _for(url: str, options: dict[str, Any] | None) -> dict[str, Any] | None:
    """--storage-options apply to the URLs of a command, not to local paths."""
    return options if "://" in url and not url.startswith("file://") else None


def resume_command(argv: list[str]) -> str:
    """The command line that finishes an interrupted ``convert``: the same, with ``--resume`` (not
    ``--overwrite``: it would delete what was copied).

    Examples
    --------
    >>> resume_command(["convert", "in.zarr", "out dir/x.zarr", "--overwrite", "--chunks", "time=24"])
    "zarr-dask convert in.zarr 'out dir/x.zarr' --chunks time=24 --resume"
    """
    kept = [a for a in argv if a != "--overwrite"]
    return shlex.join(["zarr-dask", *kept, *([] if "--resume" in kept else ["--resume"])])


@contextlib.contextmanager
def _advise_resume(args: argparse.Namespace) -> Iterator[None]:
    """Ctrl-C during a conversion: say how to finish it (what was copied is kept, whole)."""
    try:
        yield
    except KeyboardInterrupt:
        if args.dry_run:
            raise
        if is_repository_url(args.dst):  # the session is committed only when the conversion ends
            raise KeyboardInterrupt(
                "nothing was committed to the repository; run the same command again to convert"
            ) from None
        raise KeyboardInterrupt(
            "what was copied so far is kept (every key written is whole); to finish the conversion, run "
            f"{resume_command(getattr(args, 'argv', []) or ['convert', args.src, args.dst])}"
        ) from None


def _cmd_convert(args: argparse.Namespace) -> int:
    from zarr_dask._convert import convert
    from zarr_dask._convert.resume_check import cli_spelling

    common = storage_options(args.storage_options)
    src_options = storage_options(args.src_storage_options, "--source-storage-options") or _for(args.src, common)
    dst_options = storage_options(args.dst_storage_options, "--destination-storage-options") or _for(args.dst, common)
    mode: Literal["w", "resume", "w-"] = "w" if args.overwrite else "resume" if args.resume else "w-"
    progress = sys.stderr.isatty() if args.progress is None else args.progress
    with contextlib.ExitStack() as stack:
        stack.enter_context(cli_spelling())  # messages name this command's flags
        src, dst = args.src, args.dst
        if is_repository_url(src):
            src, src_options = stack.enter_context(repository_session(src, src_options, write=False, message="")), None
        if is_repository_url(dst):
            message = f"zarr-dask convert {args.src} {args.dst}"
            dst = stack.enter_context(repository_session(dst, dst_options, write=not args.dry_run, message=message))
            dst_options = None
        client = stack.enter_context(_scheduler(args))
        stack.enter_context(_advise_resume(args))
        report = convert(
            src, dst, source_path=args.path, destination_path=args.dst_path, zarr_format=args.zarr_format,
            chunks=args.chunks, shards=args.shards, compressors=args.compressor, include=args.include or (),
            exclude=args.exclude or (), mode=mode, max_memory=args.max_memory,
            threads=args.threads if client is None else None, scheduler=client, temp_store=args.temp,
            storage_options=src_options or {}, destination_storage_options=dst_options or {},
            consolidate=not args.no_consolidate,
            write_empty_chunks=args.write_empty_chunks, dry_run=args.dry_run, progress=progress,
            tune_malloc=True,  # this process (and its workers' tasks) exist to convert
        )  # fmt: skip
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
        return 0
    if args.dry_run or getattr(args, "verbose", 0):
        print(report.plan_text())
    print(report.summary())
    return 0


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add ``convert`` to the ``zarr-dask`` sub-parsers."""
    p = sub.add_parser("convert", parents=[common], help="copy a hierarchy, changing format, chunks, shards, codecs",
                       description=_DESCRIPTION, epilog=_EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("src", help="source URL or path")
    p.add_argument("dst", help="destination URL or path")
    p.add_argument("--source-path", "--path", dest="path", default="",
                   help="node to copy inside SRC (default: the root)")  # fmt: skip
    p.add_argument("--destination-path", "--dst-path", dest="dst_path", default="",
                   help="where it goes inside DST (default: the root)")  # fmt: skip
    what = p.add_argument_group("what changes")
    what.add_argument("--zarr-format", type=int, choices=(2, 3), default=None, help="target Zarr format (default: keep)")
    what.add_argument("--chunks", default="keep", metavar="DIM=N,...|auto",
                      help="target (inner) chunks by dimension name or axis, -1 = whole dimension; unnamed "
                      "dimensions keep their size; 'auto' ~4 MiB chunks (default: keep)")  # fmt: skip
    what.add_argument("--shards", default="keep", metavar="DIM=N,...|auto|none",
                      help="target shards (Zarr v3), multiples of the chunks; unnamed dimensions get one chunk; "
                      "'none' unsharded (default: keep)")  # fmt: skip
    what.add_argument("--compressor", default="keep", metavar="SPEC",
                      help="e.g. zstd:3, gzip:6, blosc:lz4:5, blosc:zstd:3:bitshuffle, lz4, none, or codec JSON")  # fmt: skip
    what.add_argument("--include", action="append", metavar="PATTERN", help="copy only matching nodes (repeatable)")
    what.add_argument("--exclude", action="append", metavar="PATTERN", help="skip matching nodes (repeatable)")
    what.add_argument("--write-empty-chunks", action="store_true", help="store chunks equal to the fill value too")
    how = p.add_argument_group("how it runs")
    where = how.add_mutually_exclusive_group()
    where.add_argument("--scheduler", default=None, metavar="ADDRESS", help="run on this dask.distributed scheduler")
    where.add_argument("--workers", type=int, default=None, metavar="N", help="run on a LocalCluster of N processes")
    how.add_argument("--threads", type=int, default=None,
                     help="tasks at once (default: CPUs; with --workers: threads per worker, default 1)")  # fmt: skip
    how.add_argument("--max-memory", default=None, metavar="SIZE",
                     help="memory for data in flight per process (this one, or each worker), e.g. 2GiB "
                     "(default: half the RAM / half a worker's memory limit)")  # fmt: skip
    how.add_argument("--temp", default=None, metavar="URL", help="where staged copies keep intermediate arrays "
                     "(default: inside DST, removed at the end)")  # fmt: skip
    how.add_argument("--dry-run", action="store_true", help="print the plan; write nothing")
    mode = how.add_mutually_exclusive_group()
    mode.add_argument("--overwrite", action="store_true", help="delete what is at DST first")
    mode.add_argument("--resume", action="store_true", help="finish an interrupted conversion into DST")
    how.add_argument("--no-consolidate", action="store_true", help="do not write consolidated metadata")
    how.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                     help="show a progress bar on stderr (default: when stderr is a terminal)")  # fmt: skip
    how.add_argument("--json", action="store_true", help="print the report as JSON")
    stores = p.add_argument_group("storage")
    stores.add_argument("--storage-options", default=None, metavar="JSON", help="fsspec options for SRC and DST")
    stores.add_argument("--source-storage-options", "--src-storage-options", dest="src_storage_options", default=None,
                        metavar="JSON", help="fsspec options for SRC")  # fmt: skip
    stores.add_argument("--destination-storage-options", "--dst-storage-options", dest="dst_storage_options",
                        default=None, metavar="JSON", help="fsspec options for DST (and --temp)")  # fmt: skip
    p.set_defaults(func=_cmd_convert)
