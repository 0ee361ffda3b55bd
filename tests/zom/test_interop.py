"""Interop with pydantic-zarr 0.10 (JSON both ways) and zarr-python (hierarchies both ways, migrated stores)."""

from __future__ import annotations

import json
import warnings
from typing import Any

import numpy as np
import pytest

import zarr_dask
from tests.zom._trees import tree, v3_tree
from zarr_dask.spec.json import canonical_json
from zarr_dask.zom import ArraySpec, GroupSpec, from_store

pytestmark = [
    pytest.mark.oracle,
    pytest.mark.filterwarnings("ignore:Consolidated metadata is currently not part:UserWarning"),
]


def _pydantic(fmt: int) -> Any:
    pytest.importorskip("pydantic_zarr", reason="pydantic-zarr 0.10 needs Python >= 3.12 (installed in .venv-oracle)")
    import pydantic_zarr.v2
    import pydantic_zarr.v3

    return pydantic_zarr.v3 if fmt == 3 else pydantic_zarr.v2


def _pydantic_compatible(fmt: int) -> GroupSpec:
    """Our sample tree without what pydantic-zarr cannot model (rectilinear grids; the implicit marker)."""
    spec = tree(fmt).with_explicit_groups()
    if fmt == 2:  # zarr-python writes numcodecs' full configuration: start from it
        delta = spec["delta"]
        assert isinstance(delta, ArraySpec)
        full = delta.replace(filters=({"id": "delta", "dtype": "<i4", "astype": "<i4"},))
        spec = GroupSpec(zarr_format=2, attributes=spec.attributes, members={**(spec.members or {}), "delta": full})
    if fmt == 3:
        members = {k: v for k, v in (spec.members or {}).items() if k != "rect"}
        spec = GroupSpec(attributes=spec.attributes, members=members)
    return spec


@pytest.mark.parametrize("fmt", [2, 3])
def test_pydantic_zarr_reads_our_json_and_we_read_its_dumps(fmt):
    pz = _pydantic(fmt)
    ours = _pydantic_compatible(fmt)
    model = pz.GroupSpec.model_validate(ours.to_json())
    assert GroupSpec.from_json(model.model_dump()) == ours  # python mode (tuples)
    assert GroupSpec.from_json(model.model_dump(mode="json")) == ours
    assert GroupSpec.from_json(model.model_dump_json()) == ours
    assert set(model.to_flat()) == set(ours.to_flat())
    # the same JSON, except that pydantic-zarr keeps "dimension_names": null in nested arrays
    assert canonical_json(_drop_null_dimension_names(model.model_dump(mode="json"))) == canonical_json(ours.to_json())


def _drop_null_dimension_names(doc: Any) -> Any:
    if isinstance(doc, dict):
        return {k: _drop_null_dimension_names(v) for k, v in doc.items() if not (k == "dimension_names" and v is None)}
    return doc


def test_pydantic_zarr_cannot_validate_rectilinear_grids_but_we_can():
    pz = _pydantic(3)
    rect = v3_tree()["rect"]
    with pytest.raises(ValueError, match="chunk_grid"):
        pz.ArraySpec.model_validate(rect.to_json())
    assert ArraySpec.from_json(rect.to_json()) == rect


def test_their_specs_built_with_their_api():
    p3, p2 = _pydantic(3), _pydantic(2)
    v3 = p3.GroupSpec(attributes={"t": 1}, members={
        "a": p3.ArraySpec.from_array(np.zeros((3, 4), "f4"), dimension_names=("y", "x")),
        "g": p3.GroupSpec(attributes={}, members={"b": p3.ArraySpec.from_array(np.arange(5))}),
    })  # fmt: skip
    ours = GroupSpec.from_json(v3.model_dump())
    assert ours["a"].dimension_names == ("y", "x") and ours["g/b"].shape == (5,)
    # their from_array writes {"name": "bytes"} without endian for float32: we read it as little-endian
    assert ours["a"].to_json()["codecs"] == [{"name": "bytes", "configuration": {"endian": "little"}}]
    assert p3.GroupSpec.model_validate(ours.to_json())  # and what we write back is still theirs
    v2 = p2.GroupSpec(attributes={}, members={"x": p2.ArraySpec.from_array(np.arange(10), chunks=(5,))})
    ours2 = GroupSpec.from_json(v2.model_dump())
    assert ours2["x"].to_json()["dimension_separator"] == "/" and ours2["x"].to_json()["chunks"] == [5]
    assert canonical_json(p2.GroupSpec.model_validate(ours2.to_json()).model_dump(mode="json")) == canonical_json(
        v2.model_dump(mode="json")
    )


@pytest.mark.parametrize("fmt", [2, 3])
def test_pydantic_zarr_reads_the_hierarchy_we_wrote(tmp_path, fmt):
    pz = _pydantic(fmt)
    zarr = pytest.importorskip("zarr")
    ours = _pydantic_compatible(fmt)
    ours.to_store(str(tmp_path))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = pz.GroupSpec.from_zarr(zarr.open_group(str(tmp_path), mode="r"))
    assert GroupSpec.from_json(theirs.model_dump()) == ours


@pytest.mark.parametrize("fmt", [2, 3])
def test_we_read_the_hierarchy_pydantic_zarr_wrote(tmp_path, fmt):
    pz = _pydantic(fmt)
    zarr = pytest.importorskip("zarr")
    model = pz.GroupSpec.model_validate(_pydantic_compatible(fmt).to_json())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.to_zarr(zarr.storage.LocalStore(str(tmp_path)), path="")
    assert from_store(str(tmp_path)) == GroupSpec.from_json(model.model_dump())


def test_zarr_python_reads_our_hierarchy_and_sharded_data(tmp_path):
    zarr = pytest.importorskip("zarr")
    spec = _pydantic_compatible(3)
    spec.to_store(str(tmp_path), consolidated=True)
    group = zarr.open_group(str(tmp_path), mode="r+")
    assert dict(group.attrs) == spec.attributes
    for path, node in spec.to_flat().items():
        if not path or not isinstance(node, ArraySpec):
            continue
        theirs = group[path.lstrip("/")]
        assert canonical_json(json.loads(json.dumps(theirs.metadata.to_dict(), default=str))["shape"]) == canonical_json(
            list(node.shape)
        )
    data = np.arange(64 * 48, dtype="u2").reshape(64, 48)
    group["sharded"][...] = data
    np.testing.assert_array_equal(zarr_dask.open_array(str(tmp_path), path="sharded")[...], data)


def test_zarr_python_reads_a_v2_store_migrated_in_place(tmp_path):
    zarr = pytest.importorskip("zarr")
    data = np.arange(24, dtype=">f8").reshape(4, 6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        source = zarr.create_array(str(tmp_path), name="t", shape=data.shape, dtype=data.dtype, chunks=(3, 4),
                                   order="F", zarr_format=2, dimension_names=None)  # fmt: skip
        source[...] = data
        source.attrs["_ARRAY_DIMENSIONS"] = ["y", "x"]
    v3 = from_store(str(tmp_path)).to_format(3)
    store = zarr_dask.open_store(str(tmp_path))
    store.delete_many([k for k in store.list_prefix("") if k.rpartition("/")[2] in (".zarray", ".zgroup", ".zattrs")])
    v3.to_store(str(tmp_path))
    migrated = zarr.open_array(str(tmp_path), path="t", mode="r")
    assert migrated.metadata.zarr_format == 3 and migrated.metadata.dimension_names == ("y", "x")
    np.testing.assert_array_equal(migrated[...], data)
