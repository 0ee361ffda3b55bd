"""The Zarr Object Model (ZEP 6): describe, validate, compare and create whole hierarchies.

* :class:`ArraySpec` / :class:`GroupSpec` -- frozen, typed models of Zarr v2/v3 nodes; ZEP 6 JSON
  (``to_json``/``from_json``, members nested), the flat form (``to_flat``/``from_flat``), JSON Schemas,
  ``to_format(3)``;
* :func:`from_store` / ``GroupSpec.to_store`` -- read a hierarchy in few round trips, write one with a
  single concurrent batch, idempotently and without clobbering (:mod:`zarr_dask.zom.io`,
  :mod:`zarr_dask.zom.write`);
* :func:`diff` / ``like`` -- what differs, as a readable report;
* :mod:`zarr_dask.zom.conventions` -- runtime convention checks (``conventions.xarray(spec)``).

pydantic-zarr 0.10 reads our JSON and we read its ``model_dump()``; neither pydantic nor zarr-python is needed.

Examples
--------
>>> from zarr_dask import zom
>>> spec = zom.GroupSpec(members={"x": zom.ArraySpec.build(shape=(4,), dtype="i2", chunks=(2,))})
>>> sorted(spec.members)
['x']
"""

from __future__ import annotations

from zarr_dask.zom import conventions
from zarr_dask.zom.diff import MISSING, Diff, Difference, diff
from zarr_dask.zom.io import from_store
from zarr_dask.zom.model import ArraySpec, GroupSpec, Node, from_json
from zarr_dask.zom.schema import json_schema
from zarr_dask.zom.write import HierarchyConflictError, WriteReport

__all__ = [
    "MISSING",
    "ArraySpec",
    "Diff",
    "Difference",
    "GroupSpec",
    "HierarchyConflictError",
    "Node",
    "WriteReport",
    "conventions",
    "diff",
    "from_json",
    "from_store",
    "json_schema",
]
