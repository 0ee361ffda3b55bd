"""The chunk-aware dask engine: the read planner (:func:`from_zarr`) and the key-ownership write planner
(:func:`to_zarr`, :func:`append`, :func:`explain_write`). The only package that imports dask."""

from __future__ import annotations

from zarr_dask.graph.appending import append
from zarr_dask.graph.handle import ArrayHandle
from zarr_dask.graph.ledger import WriteLedger, publish_ledger, write_ledger
from zarr_dask.graph.plan import WritePlan
from zarr_dask.graph.read import from_zarr
from zarr_dask.graph.write import explain_write, to_zarr

__all__ = [
    "ArrayHandle", "WriteLedger", "WritePlan", "append", "explain_write", "from_zarr", "publish_ledger", "to_zarr",
    "write_ledger",
]  # fmt: skip
