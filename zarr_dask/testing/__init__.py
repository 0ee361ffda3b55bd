"""Tools for testing and benchmarking code that uses zarr_dask; never imported by zarr_dask's own runtime modules.

* :mod:`zarr_dask.testing.latency`: an fsspec filesystem that delays every request (``latency::memory://``),
  to test and measure remote-store behaviour on one machine. fsspec finds its ``latency`` protocol through
  the ``fsspec.specs`` entry point, so a ``latency::`` URL works without importing it first.

Examples
--------
>>> from zarr_dask.store import open_store
>>> store = open_store("latency::memory://testing-doc", storage_options={"latency": {"seconds": 0.001}})
>>> store.set("k", b"v"); store.get("k")
b'v'
"""
