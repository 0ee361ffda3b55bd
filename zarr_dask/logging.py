"""zarr_dask's logging namespaces and the switch the command line turns on with ``-v``.

Every module logs through ``logging.getLogger(__name__)``, so the namespaces follow the packages:
``zarr_dask.store`` (requests), ``zarr_dask.codecs``, ``zarr_dask.core`` (chunk reads and writes),
``zarr_dask.graph`` (the dask planners), ``zarr_dask.xarray`` (the xarray backend, whose modules live in
``zarr_dask.xarray_backend``), ``zarr_dask.zom`` and ``zarr_dask.convert``. Nothing is printed unless a
handler is configured: by the application, or by :func:`configure`.

Examples
--------
>>> import logging
>>> from zarr_dask.logging import configure, logger_names
>>> logger_names(["store", "xarray"])
['zarr_dask.store', 'zarr_dask.xarray', 'zarr_dask.xarray_backend']
>>> handler = configure(1, ["convert"])
>>> logging.getLogger("zarr_dask.convert").getEffectiveLevel() == logging.INFO
True
>>> configure(0)  # remove the handler again
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from typing import TextIO

__all__ = ["NAMESPACES", "configure", "logger_names"]

#: Short name -> logger name(s).
NAMESPACES: dict[str, tuple[str, ...]] = {
    "store": ("zarr_dask.store",),
    "codecs": ("zarr_dask.codecs",),
    "core": ("zarr_dask.core", "zarr_dask.native"),
    "graph": ("zarr_dask.graph",),
    "xarray": ("zarr_dask.xarray", "zarr_dask.xarray_backend"),
    "zom": ("zarr_dask.zom",),
    "convert": ("zarr_dask.convert",),
    "cli": ("zarr_dask.cli",),
}
_FORMAT = "%(asctime)s %(name)s %(levelname)s: %(message)s"
_handler: logging.Handler | None = None
_configured: list[str] = []


def logger_names(namespaces: Sequence[str] | None = None) -> list[str]:
    """The logger names of ``namespaces`` (short names as in :data:`NAMESPACES`, or full logger names);
    None = all of zarr_dask."""
    if namespaces is None:
        return ["zarr_dask"]
    out: list[str] = []
    for ns in namespaces:
        short = ns.removeprefix("zarr_dask.")
        if short not in NAMESPACES and not ns.startswith("zarr_dask"):
            raise ValueError(f"unknown logging namespace {ns!r}; use one of {', '.join(NAMESPACES)}")
        out += NAMESPACES.get(short, (ns,))
    return sorted(set(out))


def configure(verbosity: int, namespaces: Sequence[str] | None = None, stream: TextIO | None = None) -> logging.Handler | None:
    """Log zarr_dask's ``namespaces`` (None = all) to ``stream`` (stderr): ``verbosity`` 1 = INFO, 2+ = DEBUG,
    0 = undo a previous :func:`configure`. Returns the handler (None when removed)."""
    global _handler
    for name in _configured:
        logger = logging.getLogger(name)
        if _handler is not None:
            logger.removeHandler(_handler)
        logger.setLevel(logging.NOTSET)
    _configured.clear()
    _handler = None
    if verbosity <= 0:
        return None
    _handler = logging.StreamHandler(stream or sys.stderr)
    _handler.setFormatter(logging.Formatter(_FORMAT, datefmt="%H:%M:%S"))
    level = logging.INFO if verbosity == 1 else logging.DEBUG
    for name in logger_names(namespaces):
        logger = logging.getLogger(name)
        logger.setLevel(level)
        logger.addHandler(_handler)
        _configured.append(name)
    return _handler
