"""xarray zarr-backend tests that fail on purpose with zarr_dask: the deliberate differences documented in
docs/xarray.md ("Differences from engine='zarr'"). Keys are test ids below the module (``Class::test[params]``),
``*`` matching anything; each entry says why. They are strict xfails: one that starts passing fails the run.
"""

from __future__ import annotations

_ANY = "*::"  # any test class

# Writes are safe whatever the chunking: every storage key has one writer task, partial chunks are merged
# by compare-and-swap. xarray refuses these writes (or asks for safe_chunks=False); zarr_dask does them.
_SAFE_CHUNKS = "zarr_dask writes any dask chunking safely (one writer per chunk/shard): no safe_chunks error"

# zarr_dask reads and writes without zarr-python: tests that mock or count zarr-python's internal calls
# (zarr.AsyncArray.getitem, store method calls) see none.
_NO_ZARR_PYTHON = "zarr_dask does not go through zarr-python: mocked zarr-python internals are never called"

_WRITE: dict[str, str] = {
    _ANY + "test_chunk_encoding_with_dask[*": _SAFE_CHUNKS,
    _ANY + "test_shard_encoding_with_dask[*": _SAFE_CHUNKS,
    "TestZarrRegionAuto::test_zarr_safe_chunk_region[*": _SAFE_CHUNKS,
    "TestZarrRegionAuto::test_zarr_safe_chunk_append_dim[*": _SAFE_CHUNKS,
    "TestZarrRegionAuto::test_zarr_region_chunk_partial[*": _SAFE_CHUNKS,
    "TestZarrRegionAuto::test_zarr_region_chunk_partial_offset[*": _SAFE_CHUNKS,
    "TestZarrRegionAuto::test_zarr_append_chunk_partial[*": _SAFE_CHUNKS,
    # Zarr v3 text is the spec'd variable-length string type (xarray: fixed_length_utf32, unstable in
    # zarr-python): longer strings are appended whole, there is nothing to truncate and nothing to refuse.
    _ANY + "test_append_string_length_mismatch_raises[3-U]": "v3 text is variable-length: longer strings fit",
    # A `shards` encoding that is not a multiple of the chunks, set on the variable (not in encoding=), is taken
    # as carried over from another store and dropped with a StaleEncodingWarning; xarray raises.
    _ANY + "test_shard_encoding[3]": "shards from variable.encoding that do not fit are dropped with a warning",
    _ANY + "test_avoid_excess_metadata_calls[*": _NO_ZARR_PYTHON,
}

_READ: dict[str, str] = {
    _ANY + "test_indexing[*": _NO_ZARR_PYTHON,
    _ANY + "test_concurrent_load_multiple_objects[*": _NO_ZARR_PYTHON,
    _ANY + "test_async_load_multiple_variables[*": _NO_ZARR_PYTHON,
    # v3 codecs are reported as codec JSON, which both engines take back on write (xarray: zarr-python codec
    # objects, which need zarr-python at run time); v2 ones are numcodecs objects, as xarray's.
    _ANY + "test_compressor_encoding[3]": "v3 codecs in encoding are JSON dicts (xarray: zarr-python objects)",
    "TestZarrDatatreeIO::test_zarr_encoding[zarr_format=3]": "v3 codecs in encoding are JSON dicts",
    # v3 variable-length strings decode to object arrays of str (xarray: NumPy StringDType, zarr-python's choice)
    "test_roundtrip_stringdtype_zarr_v3": "v3 strings read as object arrays of str (values equal)",
    # An explicit use_zarr_fill_value_as_mask=False is honoured; xarray's engine drops it in open_dataset and
    # open_zarr (v2 data is always masked with the fill_value there).
    _ANY + "test_zarr_fill_value_setting[2-*": "use_zarr_fill_value_as_mask=False is honoured (xarray ignores it)",
}


# xarray's own xfails that pass with zarr_dask: their xfail marker is dropped, so they run as plain tests (and a
# regression fails the run).
_FIXED: dict[str, str] = {
    # xarray: "upstream zarr read-only changes have broken this test"; zarr_dask writes and reads a
    # zarr-python ZipStore through the ZipFile it holds open
    "TestZarrDatatreeIO::test_to_zarr_zip_store[*": "zarr-python ZipStore written and read through its ZipFile",
}


def fixed_upstream_xfails(route: str) -> dict[str, str]:
    """xarray's xfails that pass on ``route``: where zarr_dask reads (xarray's engine cannot reopen a writable
    ZipStore read-only, the cause of xarray's xfail, so on the "write" route it still fails)."""
    return dict(_FIXED) if route in ("both", "read") else {}


def expected_failures(route: str) -> dict[str, str]:
    """The expected failures of ``route`` ("both", "write" or "read")."""
    out: dict[str, str] = {}
    if route in ("both", "write"):
        out.update(_WRITE)
    if route in ("both", "read"):
        out.update(_READ)
    return out
