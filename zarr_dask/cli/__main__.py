"""``python -m zarr_dask.cli``: the ``zarr-dask`` command."""

from zarr_dask.cli import main

raise SystemExit(main())
