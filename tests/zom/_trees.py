"""Sample hierarchies for the ZOM tests: v2 and v3 trees with the features that must survive round trips."""

from __future__ import annotations

from typing import Any

import numpy as np

from zarr_dask.zom import ArraySpec, GroupSpec

SHARDING_JSON: dict[str, Any] = {
    "zarr_format": 3,
    "node_type": "array",
    "attributes": {"kind": "sharded"},
    "shape": [64, 48],
    "data_type": "uint16",
    "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [32, 24]}},
    "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
    "fill_value": 7,
    "codecs": [
        {
            "name": "sharding_indexed",
            "configuration": {
                "chunk_shape": [8, 8],
                "codecs": [
                    {"name": "bytes", "configuration": {"endian": "little"}},
                    {"name": "zstd", "configuration": {"level": 0, "checksum": False}},
                ],
                "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}],
                "index_location": "end",
            },
        }
    ],
    "storage_transformers": [],
    "dimension_names": ["y", "x"],
}

RECTILINEAR_JSON: dict[str, Any] = {
    "zarr_format": 3,
    "node_type": "array",
    "attributes": {},
    "shape": [10, 12],
    "data_type": "float32",
    "chunk_grid": {"name": "rectilinear", "configuration": {"kind": "inline", "chunk_shapes": [[[3, 2], 4], 6]}},
    "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
    "fill_value": "NaN",
    "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
    "storage_transformers": [],
    "dimension_names": ["time", None],
}


def v3_tree() -> GroupSpec:
    """A v3 hierarchy: nested groups, a sharded array (from JSON), a rectilinear array, strings, attributes."""
    return GroupSpec(
        attributes={"title": "v3 tree", "nested": {"a": [1, 2.5, None]}},
        members={
            "sharded": ArraySpec.from_json(SHARDING_JSON),
            "rect": ArraySpec.from_json(RECTILINEAR_JSON),
            "obs": GroupSpec(
                attributes={"site": "x"},
                members={
                    "temp": ArraySpec.from_array(np.zeros((5, 4), "f8"), chunks=(2, 4), dimension_names=["t", "z"]),
                    "names": ArraySpec.build(shape=(3,), dtype=str, chunks=(2,)),
                    "deep": GroupSpec(members={"leaf": GroupSpec()}),
                },
            ),
            "built_shards": ArraySpec.build(shape=(40, 30), dtype="i4", chunks=(10, 10), shards=(20, 30)),
        },
    )


def v2_tree() -> GroupSpec:
    """A v2 hierarchy: F order, big-endian, filters, records, strings, '/' separator, xarray dimensions."""
    return GroupSpec(
        zarr_format=2,
        attributes={"title": "v2 tree"},
        members={
            "temp": ArraySpec.build(
                zarr_format=2, shape=(6, 4), dtype=">f8", chunks=(3, 2), order="F", dimension_names=["y", "x"]
            ),
            "delta": ArraySpec.build(
                zarr_format=2,
                shape=(10,),
                dtype="<i4",
                chunks=(4,),
                filters=[{"id": "delta", "dtype": "<i4"}],
                compressors={"id": "zlib", "level": 3},
                dimension_separator="/",
            ),
            "sub": GroupSpec(
                zarr_format=2,
                attributes={"a": 1},
                members={
                    "rec": ArraySpec.build(zarr_format=2, shape=(3,), dtype=[("x", "<f4"), ("y", "<i2")]),
                    "text": ArraySpec.build(zarr_format=2, shape=(4,), dtype=str, chunks=(2,)),
                },
            ),
        },
    )


def tree(zarr_format: int) -> GroupSpec:
    return v3_tree() if zarr_format == 3 else v2_tree()


def wide_tree(groups: int, arrays_per_group: int, zarr_format: int = 3) -> GroupSpec:
    """``1 + groups * (1 + arrays_per_group)`` nodes."""
    array = ArraySpec.build(shape=(100, 100), dtype="f4", chunks=(10, 10), zarr_format=zarr_format)  # type: ignore[arg-type]
    members: dict[str, ArraySpec | GroupSpec] = {
        f"g{i}": GroupSpec(
            zarr_format=zarr_format,  # type: ignore[arg-type]
            attributes={"index": i},
            members={f"a{j}": array.replace(attributes={"j": j}) for j in range(arrays_per_group)},
        )
        for i in range(groups)
    }
    return GroupSpec(zarr_format=zarr_format, members=members)  # type: ignore[arg-type]
