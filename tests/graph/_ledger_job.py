"""A fan-out region job of a dataset, run in a child process that the ledger tests kill.

``python -m tests.graph._ledger_job URL START STOP COUNTER VERSION [STORAGE_OPTIONS_JSON]`` writes rows
``START:STOP`` of the template :func:`template` made, with ``to_zarr_dataset(..., region={"t": ...},
resume=True)``: ``w`` (fast: data in dask, no computation) and ``v`` (each block goes through
:func:`compute`, which hangs on a call the counter's ``.ctl`` orders name, so a test can kill the job after ``w``
finished and while ``v`` is partial). ``VERSION`` 2 is the same job "with a small code fix": ``v`` is computed
with another argument (another dask name, hence another run) and holds other values.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import dask.array as da
import numpy as np

from tests.graph._resume_job import expensive

ROWS, COLS = 96, 40
CHUNK = 8
ENCODING = {"v": {"chunks": (CHUNK, COLS)}, "w": {"chunks": (CHUNK,)}}


def template() -> Any:
    """The template dataset (written with ``compute=False``)."""
    import xarray as xr

    return xr.Dataset({"v": (("t", "x"), da.zeros((ROWS, COLS), chunks=(CHUNK, COLS))),
                       "w": ("t", da.zeros(ROWS, chunks=CHUNK))})  # fmt: skip


def compute(block: np.ndarray, counter: str, version: int, block_info: Any = None) -> np.ndarray:
    """The job's computation of ``v``: :func:`~tests.graph._resume_job.expensive` (one line per call in
    ``counter``), plus 0.5 in version 2 (the "code fix"). The counter's ``.ctl`` orders ``{"hold_at": N}``
    make the N-th call (one only) hang: ``v`` stays partial while the job's other thread finishes the rest."""
    out = expensive(block, counter, block_info)
    control = Path(counter + ".ctl")
    orders = json.loads(control.read_text()) if control.exists() else {}
    hold = int(orders.get("hold_at", 0))
    if block_info and hold and len(Path(counter).read_text().splitlines()) >= hold and _claim(counter + ".held"):
        time.sleep(float(orders.get("hold", 120)))
    return out + (0.5 if version == 2 else 0.0)


def _claim(path: str) -> bool:
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True


def part(start: int, stop: int, counter: str, version: int = 1) -> Any:
    """The job's dataset: rows ``start:stop``."""
    import xarray as xr

    base = da.from_array(np.arange(start * COLS, stop * COLS, dtype="f8").reshape(stop - start, COLS), chunks=(CHUNK, COLS))
    v = base.map_blocks(compute, counter, version, dtype="f8")
    w = da.from_array(np.arange(start, stop, dtype="f8") * 10, chunks=CHUNK)
    return xr.Dataset({"v": (("t", "x"), v), "w": ("t", w)})


def expected(start: int, stop: int, version: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """What ``part(start, stop, ..., version)`` writes: ``(v, w)``."""
    v = np.arange(start * COLS, stop * COLS, dtype="f8").reshape(stop - start, COLS) * 3 + 1
    return v + (0.5 if version == 2 else 0.0), np.arange(start, stop, dtype="f8") * 10


if __name__ == "__main__":
    import dask

    import zarr_dask
    from tests.graph import _ledger_job  # not __main__'s copies: the same dask names in every process

    if os.environ.get("ZD_DASK_ARRAY") == "1":  # the test process's set-up (tests/conftest.py)
        from dask_array.xarray import register

        register()
    url, start, stop, counter, version = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
    options = json.loads(sys.argv[6]) if len(sys.argv) > 6 else None
    with dask.config.set(scheduler="threads", num_workers=2):
        zarr_dask.to_zarr_dataset(_ledger_job.part(start, stop, counter, version), url, region={"t": slice(start, stop)},
                                  resume=True, storage_options=options)  # fmt: skip
