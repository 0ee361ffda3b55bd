"""The ``zarr-dask`` command: inspect, validate, consolidate and convert Zarr hierarchies.

``zarr-dask COMMAND --help`` describes each command. Errors are printed as one line (``zarr-dask: error:
...``) with a non-zero exit status (1; 2 for a wrong command line; 130 when interrupted); ``-v`` adds the
traceback and turns on INFO logging of every ``zarr_dask`` namespace (``-vv``: DEBUG; ``--log store,graph``
picks namespaces).
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from collections.abc import Sequence
from typing import Any

from zarr_dask import __version__
from zarr_dask.logging import NAMESPACES, configure, logger_names

__all__ = ["build_parser", "human", "main"]

_EPILOG = """examples:
  zarr-dask info s3://bucket/era5.zarr --path t2m --storage-options '{"anon": true}'
  zarr-dask tree data.zarr --details
  zarr-dask validate data.zarr --convention xarray --data
  zarr-dask convert v2.zarr v3.zarr --zarr-format 3 --chunks time=720,lat=30,lon=30 --shards lat=180,lon=360
  zarr-dask convert s3://in/a.zarr out.zarr --max-memory 2GiB --workers 4 --resume
  zarr-dask ledger out.zarr --regions '[[[0, 24]], [[24, 48]]]'
"""


def human(n: float) -> str:
    """``1536`` -> ``"1.5 KiB"``."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"  # pragma: no cover


def json_argument(text: str, what: str, kind: type, form: str, example: str) -> Any:
    """Parse the JSON value of a command-line option that must be a ``kind`` (``form``: "a JSON object"...);
    a ValueError naming the option, an ``example`` and what was given otherwise."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{what} must be {form}, e.g. '{example}': {e}") from None
    if not isinstance(value, kind):
        raise ValueError(f"{what} must be {form}, e.g. '{example}', got {text!r}")
    return value


def storage_options(text: str | None, what: str = "--storage-options") -> dict[str, Any] | None:
    """Parse a JSON object of fsspec options (None when not given)."""
    if not text:
        return None
    return dict(json_argument(text, what, dict, "a JSON object", '{"anon": true}'))


def _common() -> argparse.ArgumentParser:
    """Options every command takes (also after the command name)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-v", "--verbose", action="count", default=argparse.SUPPRESS,
                        help="show tracebacks and log INFO (-vv: DEBUG)")  # fmt: skip
    common.add_argument("--log", default=argparse.SUPPRESS, metavar="NAMESPACES",
                        help=f"comma-separated logging namespaces for -v ({', '.join(NAMESPACES)}; default all)")  # fmt: skip
    return common


def node_arguments(p: argparse.ArgumentParser, repositories: bool = False) -> None:
    """``URL [--path P] [--storage-options JSON]`` (``repositories``: the command also reads ``icechunk:``
    locations, in a read-only session)."""
    where = ", icechunk:PATH[?branch=|tag=|snapshot=]" if repositories else ""
    p.add_argument("url", help=f"store URL or local path (file://, s3://, gs://, memory://, ...{where})")
    p.add_argument("--path", default="", help="node path inside the store (default: the root)")
    p.add_argument("--storage-options", default=None, metavar="JSON", help="fsspec storage options as a JSON object")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``zarr-dask`` command."""
    from zarr_dask.cli import cleanup, convert, ledger, show, validate

    common = _common()
    parser = argparse.ArgumentParser(
        prog="zarr-dask",
        description="Inspect, validate, consolidate and convert Zarr v2/v3 hierarchies (any fsspec URL).",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[common],
    )
    parser.add_argument("--version", action="version", version=f"zarr-dask {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (show, validate, convert, cleanup, ledger):
        module.register(sub, common)
    return parser


def _report(e: BaseException, verbose: int) -> None:
    if verbose:
        traceback.print_exception(e, file=sys.stderr)
    text = str(e) or type(e).__name__
    if not verbose and isinstance(e, KeyError | AttributeError | TypeError | IndexError):
        text = f"{type(e).__name__}: {text}"
    print(f"zarr-dask: error: {text}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # (a command's advice can repeat it)
    verbose = int(getattr(args, "verbose", 0) or 0)
    log = getattr(args, "log", None)
    try:
        namespaces = [n.strip() for n in log.split(",") if n.strip()] if log else None
        logger_names(namespaces)  # unknown names are an error even without -v
        configure(verbose, namespaces)
        return int(args.func(args))
    except KeyboardInterrupt as e:  # (a command may say how to go on: the interrupt's message)
        print(f"zarr-dask: interrupted{f'; {e}' if str(e) else ''}", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `zarr-dask tree x | head`
        return 0
    except Exception as e:  # noqa: BLE001 - the CLI's last resort: every error becomes a message and exit 1
        _report(e, verbose)
        return 1
    finally:
        configure(0)


if __name__ == "__main__":  # pragma: no cover - python -m zarr_dask.cli goes through __main__.py
    raise SystemExit(main())
