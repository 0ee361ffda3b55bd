"""``zarr-dask cleanup``: remove the temporary files that killed writers left in a local store.

Local writes go through ``.<name>.<random>.zd-tmp`` files renamed into place; a writer killed between the
two leaves its file behind (never a torn value). Files older than ``--max-age`` seconds (default one hour)
are removed; a live writer's file is always younger. Writes already remove those of the directories they
write to: this command sweeps a whole store, e.g. after a crashed job.
"""

from __future__ import annotations

import argparse
from typing import Any

import zarr_dask
from zarr_dask.errors import UnsupportedFeatureError


def _cmd_cleanup(args: argparse.Namespace) -> int:
    store = zarr_dask.open_store(args.url)
    if not isinstance(store, zarr_dask.LocalStore):
        raise UnsupportedFeatureError(
            "only local stores hold temporary files (object stores write each value in one request); give a "
            "local path or file:// URL",
            store=store.url,
        )
    removed = store.remove_stale_temp_files(args.max_age)
    for path in removed:
        print(f"removed {path}")
    print(f"{len(removed)} stale temporary file(s) removed from {store.url}")
    return 0


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add ``cleanup`` to the ``zarr-dask`` sub-parsers."""
    p = sub.add_parser("cleanup", parents=[common], help="remove temporary files left by killed writers",
                       description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
                       formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("url", help="local store path or file:// URL")
    p.add_argument("--max-age", type=float, default=None, metavar="SECONDS",
                   help="remove temporary files older than this (default 3600, or ZARR_DASK_TEMP_MAX_AGE)")  # fmt: skip
    p.set_defaults(func=_cmd_cleanup)
