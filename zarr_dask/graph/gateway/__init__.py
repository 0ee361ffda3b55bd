# mypy: disable-error-code="no-untyped-call"
# (dask's expression classes are untyped; this module is where zarr_dask meets them)
"""The gateway to dask's internals: the only zarr_dask package that imports private dask APIs.

Everything else in zarr_dask builds its graphs through the functions here, so a change in dask touches one
package: :mod:`~zarr_dask.graph.gateway.tasks` (tasks, graphs, results, array modes) and
:mod:`~zarr_dask.graph.gateway.reads` (the read collections). What it offers:

* tasks: :func:`task`, :func:`ref`, :func:`data`, and :func:`fan_in` (a reduction tree of at most 32 inputs
  per task, used by writes and conversions alike);
* graphs and results: :func:`graph`, :func:`delayed_result`, :func:`array_result` (a dask array of tasks
  already built, in whichever array mode dask runs);
* the read collection: :func:`read_collection` -- a lazy layer of ``getter(handle, block_slices)`` tasks
  whose size does not depend on the number of blocks, as a :class:`ZarrArray` (dask's legacy arrays), or
  an expression ``ZarrRead`` that builds its tasks only when computed (``array.query-planning: True``);
* :func:`as_dask` / :func:`lowered`: any array-like as a dask array whose name is the name of its keys;
* the ``dask-array`` package (the ``dask_array`` module, dask's separate expression arrays): when it is
  registered as xarray's chunk manager (``dask_array.xarray.register()``), :func:`array_module` is
  ``dask_array`` and reads, ``to_zarr(compute=False)`` results and read-backs are ``dask_array`` arrays
  (:func:`dask_array_registered`); its arrays are accepted as input in every mode.

Examples
--------
>>> import numpy as np
>>> from zarr_dask.graph import gateway
>>> gateway.is_dask_array(np.zeros(2)), gateway.is_dask_array(gateway.as_dask(np.zeros(2)))
(False, True)
"""

from __future__ import annotations

from zarr_dask.graph.gateway.reads import ZarrArray, read_collection
from zarr_dask.graph.gateway.tasks import (
    FAN_IN,
    array_module,
    array_result,
    as_dask,
    culled,
    dask_array_registered,
    data,
    delayed_result,
    fan_in,
    graph,
    is_dask_array,
    one_block_delayed,
    query_planning,
    ref,
    task,
    value,
)

__all__ = [
    "FAN_IN",
    "ZarrArray",
    "array_module",
    "array_result",
    "as_dask",
    "culled",
    "dask_array_registered",
    "data",
    "delayed_result",
    "one_block_delayed",
    "fan_in",
    "graph",
    "is_dask_array",
    "query_planning",
    "read_collection",
    "ref",
    "task",
    "value",
]

