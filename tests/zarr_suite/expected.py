"""What of zarr-python's array tests does not run on zarr_dask.Array, and why.

``SKIPS``: tests of zarr-python's internals, which zarr_dask has no equivalent of (a reason category each);
they are not counted. ``XFAILS``: real, documented differences (strict xfails naming the doc section): a test
on the list that starts passing fails the leg, so the list stays true. Patterns match
``module.py::test_name[params]`` (``*`` matches anything).
"""

from __future__ import annotations

import re
from collections.abc import Callable

# reason categories of the skips
INTERNALS = ("zarr-python internals: its helper functions, private methods, metadata, info and codec objects, "
             "which zarr_dask has no equivalent of")  # fmt: skip
ASYNC = "zarr-python's AsyncArray API: zarr_dask has no async layer"
CREATION = ("zarr-python's creation functions: the test checks their argument checks and the chunks, codecs or "
            "warnings they pick (the array is zarr-python's to make; ours is opened after)")  # fmt: skip
TIME = ("time: the same test runs with the 'fork' start method; 'spawn' and 'forkserver' start fresh "
        "interpreters (seconds each), which the leg's budget leaves out")
ROUTING = "an artifact of the routing: the test counts zarr-python's store requests, and re-opening adds ours"

SKIPS: dict[str, str] = {
    # zarr-python's indexing helpers, tested without an array
    "test_indexing.py::test_normalize_integer_selection": INTERNALS,
    "test_indexing.py::test_replace_ellipsis": INTERNALS,
    "test_indexing.py::test_slice_selection_uints": INTERNALS,
    "test_indexing.py::test_iter_grid*": INTERNALS,
    "test_indexing.py::test_iter_regions*": INTERNALS,
    "test_indexing.py::test_iter_chunk_regions": INTERNALS,  # Array._iter_chunk_regions
    "test_indexing.py::test_get_block_selection_1d": INTERNALS,  # metadata.chunk_grid.get_nchunks
    "test_indexing.py::TestAsync::test_async_invalid_indexer*": ASYNC,
    # private methods and objects of zarr-python's Array
    "test_array.py::test_nchunks[*": INTERNALS,  # AsyncArray.nchunks
    "test_array.py::test_nchunks_initialized*": INTERNALS,  # Array._iter_shard_regions
    "test_array.py::test_chunks_initialized*": INTERNALS,  # Array._iter_shard_keys
    "test_array.py::test_chunk_grid_shape*": INTERNALS,
    "test_array.py::test_iter_chunk_coords*": INTERNALS,
    "test_array.py::test_iter_chunk_regions*": INTERNALS,
    "test_array.py::test_iter_shard_coords*": INTERNALS,
    "test_array.py::test_iter_shard_keys*": INTERNALS,
    "test_array.py::test_iter_shard_regions*": INTERNALS,
    "test_array.py::test_write_empty_chunks_behavior*": INTERNALS,  # Array._nshards_initialized
    "test_array.py::test_resize_growing_skips_chunk_enumeration*": INTERNALS,  # patches RegularChunkGrid
    "test_array.py::TestInfo::test_info_v2[*": INTERNALS,  # zarr-python's ArrayInfo object
    "test_array.py::TestInfo::test_info_v3[*": INTERNALS,
    "test_array.py::TestInfo::test_info_complete[*": INTERNALS,
    "test_array.py::test_roundtrip_numcodecs": INTERNALS,  # metadata.to_dict()
    "test_array.py::test_storage_transformers*": INTERNALS,
    "test_array.py::test_create_array_method_signature": INTERNALS,
    "test_codecs/test_sharding.py::test_open_sharding*": INTERNALS,  # compares metadata objects
    "test_codecs/test_sharding.py::test_invalid_metadata*": INTERNALS,  # ShardingCodec objects
    "test_codecs/test_sharding.py::test_pickle": INTERNALS,
    "test_properties.py::test_array_creates_implicit_groups": INTERNALS,  # zarr-python's Store API
    "test_properties.py::test_array_metadata_meets_spec": INTERNALS,
    "test_properties.py::test_roundtrip_array_metadata_from_json": INTERNALS,
    "test_properties.py::test_roundtrip_array_metadata_from_store": INTERNALS,
    # the async API
    "test_array.py::TestInfo::test_info_*_async*": ASYNC,
    "test_array.py::test_nbytes[async-*": ASYNC,
    "test_array.py::test_nbytes_stored_async*": ASYNC,
    "test_array.py::test_serializable_async_array*": ASYNC,
    "test_array.py::test_with_config[*": ASYNC,  # AsyncArray.with_config (Array.with_config: the next test)
    "test_codecs/test_sharding.py::test_delete_empty_shards*": ASYNC,
    "test_codecs/test_sharding.py::test_sharding_with_empty_inner_chunk*": ASYNC,
    # zarr-python's creation
    "test_array.py::TestCreateArray::test_chunk_key_encoding*": CREATION,
    "test_array.py::TestCreateArray::test_create_array_invalid_v2_arguments*": CREATION,
    "test_array.py::TestCreateArray::test_create_invalid_v2_arguments*": CREATION,
    "test_array.py::TestCreateArray::test_data_ignored_params*": CREATION,
    "test_array.py::TestCreateArray::test_default_filters_compressors*": CREATION,
    "test_array.py::TestCreateArray::test_invalid_v3_arguments*": CREATION,
    "test_array.py::TestCreateArray::test_name*": CREATION,
    "test_array.py::TestCreateArray::test_v2_chunk_encoding*": CREATION,
    "test_array.py::TestCreateArray::test_v2_no_shards*": CREATION,
    "test_array.py::TestCreateArray::test_v3_chunk_encoding*": CREATION,
    "test_array.py::TestCreateArray::test_with_data[*": CREATION,
    "test_array.py::TestCreateArray::test_with_data_invalid_params*": CREATION,
    "test_array.py::TestCreateArray::test_write_empty_chunks_config*": CREATION,
    "test_array.py::test_array_creation_existing_node*": CREATION,
    "test_array.py::test_auto_partition_auto_shards*": CREATION,
    "test_array.py::test_chunk_encoding_no_object_codec_errors*": CREATION,
    "test_array.py::test_create_creates_parents*": CREATION,
    "test_array.py::test_unknown_object_codec_default_*": CREATION,
    "test_array.py::test_creation_from_other_zarr_format*": CREATION,  # from_array copies chunks of zarr.Array
    "test_array.py::test_from_array_F_order": CREATION,  # its warning for a zarr.Array source
    "test_codecs/test_sharding.py::test_invalid_shard_shape*": CREATION,
    "test_array.py::test_create_array_with_data_num_gets*": ROUTING,
    "test_array.py::test_multiprocessing[*spawn]": TIME,
    "test_array.py::test_multiprocessing[*forkserver]": TIME,
}

_DOC = "docs/index.md, 'Differences from zarr-python': "
XFAILS: dict[str, str] = {
    # zarr_dask selects as NumPy does where zarr-python raises IndexError
    "test_indexing.py::test_get_basic_selection_1d": _DOC + "negative steps",
    "test_indexing.py::test_get_basic_selection_2d": _DOC + "negative steps",
    "test_indexing.py::test_get_orthogonal_selection_1d_int": _DOC + "negative steps",
    "test_indexing.py::test_get_orthogonal_selection_2d": _DOC + "negative steps",
    "test_indexing.py::test_fancy_indexing_doesnt_mix_with_implicit_slicing": _DOC + "`...` with an index array",
    "test_array.py::test_resize_2d*": _DOC + "shrinking resets the cut part of edge chunks",
    "test_indexing.py::test_zero_sized_chunks*": _DOC + "no chunk side of 0",
    "test_array.py::TestCreateArray::test_default_endianness[zarr3-big*": _DOC + "reads come in the machine's byte order",
    "test_array.py::test_array_repr*": _DOC + "texts (repr)",
}


def _matcher(pattern: str) -> Callable[[str], bool]:
    regex = re.compile(".*".join(re.escape(part) for part in pattern.split("*")) + "$")
    return lambda name: regex.match(name) is not None


def categories() -> list[tuple[Callable[[str], bool], tuple[str, str]]]:
    """The rules, the documented differences first: ``(matcher, ("skip" | "xfail", reason))``."""
    return [(_matcher(p), ("xfail", r)) for p, r in XFAILS.items()] + [
        (_matcher(p), ("skip", r)) for p, r in SKIPS.items()
    ]
