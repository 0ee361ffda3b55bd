"""xarray backend: ``engine="zarr_dask"`` plus :func:`to_zarr_dataset` / :func:`to_zarr_datatree`.

This package is the only place in zarr_dask that imports xarray. Importing it is cheap (the reading and
writing code loads when first used); it registers the ``ds.zarr_dask`` / ``dt.zarr_dask`` accessors.
"""

from zarr_dask.xarray_backend.accessor import register as _register

_register()
