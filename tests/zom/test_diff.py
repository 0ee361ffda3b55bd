"""diff / like: one row per node and field, readable, with exclusions and unknown members."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import zarr_dask
from tests.zom._trees import v3_tree
from zarr_dask.errors import MetadataError
from zarr_dask.zom import MISSING, ArraySpec, Diff, Difference, GroupSpec, diff


def _changed() -> GroupSpec:
    base = v3_tree()
    obs = base["obs"]
    assert isinstance(obs, GroupSpec) and obs.members is not None
    temp = obs.members["temp"]
    assert isinstance(temp, ArraySpec)
    members = {**obs.members, "temp": temp.replace(shape=(6, 4), attributes={"units": "K"})}
    members.pop("names")
    members["extra"] = GroupSpec()
    new_obs = GroupSpec(attributes={"site": "y"}, members=members)
    return GroupSpec(attributes=base.attributes, members={**(base.members or {}), "obs": new_obs})


def test_diff_lists_every_difference_with_path_field_and_values():
    d = diff(v3_tree(), _changed())
    rows = {(x.path, x.field): (x.left, x.right) for x in d}
    assert rows == {
        ("/obs", "attributes.site"): ("x", "y"),
        ("/obs/temp", "attributes.units"): (MISSING, "K"),
        ("/obs/temp", "shape"): ([5, 4], [6, 4]),
        ("/obs/names", "node"): ("array", MISSING),
        ("/obs/extra", "node"): (MISSING, "group"),
    }
    text = str(d)
    assert text.splitlines()[0].split() == ["path", "field", "left", "right"]
    assert '/obs/temp   shape' in text and "(missing)" in text
    assert d.table("existing", "new").splitlines()[0].split() == ["path", "field", "existing", "new"]


def test_like_and_exclusions():
    a, b = v3_tree(), _changed()
    assert v3_tree().like(v3_tree()) and not a.like(b)
    assert len(diff(a, b, exclude={"attributes"})) == 3
    assert len(diff(a, b, exclude={"attributes.site"})) == 4
    assert not diff(a, b, exclude={"attributes", "shape", "node"})
    assert a.like(b, exclude={"attributes", "shape", "node"})
    assert a.diff(b, exclude={"members"}) == Diff(())  # the roots alone agree


def test_kind_format_and_implicit_changes():
    array = ArraySpec.from_array(np.zeros(3))
    d = diff(GroupSpec(members={"x": array}), GroupSpec(members={"x": GroupSpec(members={"y": array})}))
    assert [(x.path, x.field, x.left, x.right) for x in d] == [("/x", "node", "array", "group")]  # nothing below
    d = diff(GroupSpec(), GroupSpec(zarr_format=2))
    assert [(x.field, x.left, x.right) for x in d] == [("zarr_format", 3, 2)]
    d = diff(GroupSpec(members={"g": GroupSpec(implicit=True, members={"y": array})}),
             GroupSpec(members={"g": GroupSpec(members={"y": array.replace(attributes={"a": 1})})}))  # fmt: skip
    assert [(x.path, x.field) for x in d] == [("/g", "node"), ("/g/y", "attributes.a")]


def test_unknown_members_are_not_compared():
    full = v3_tree()
    shallow = GroupSpec(attributes=full.attributes, members=None)
    assert not diff(full, shallow)
    assert not diff(shallow, full)


def test_compare_with_zarr_dask_nodes(memory_url):
    spec = v3_tree()
    spec.to_store(memory_url)
    group = zarr_dask.open_group(memory_url)
    assert spec.like(group)
    assert spec["rect"].like(group["rect"])
    assert not spec["rect"].like(group["obs/temp"])
    with pytest.raises(MetadataError, match="cannot compare"):
        diff(spec, 3)


def test_diff_report_as_json_and_pickle():
    d = diff(v3_tree(), _changed())
    doc = d.to_json()
    assert {"path": "/obs/names", "field": "node", "left": "array", "right": None, "right_missing": True} in doc
    again = pickle.loads(pickle.dumps(d))
    assert again == d and again[3].right is MISSING
    assert str(Diff()) == "no differences" and not Diff()
    long = Difference(path="/", field="attributes.x", left="y" * 100, right=1)
    assert "..." in str(long) and len(str(long)) < 100


def test_the_table_shows_the_part_of_a_field_that_differs_not_a_cut_off_prefix():
    """Issue 40: a resumed conversion with other chunks showed ``{"name": "regular", "configuration":
    {"chunk_...`` on both sides. The table narrows JSON objects (and lists of one length) to what differs;
    another codec (another ``name``) is shown whole; ``to_json`` and the differences keep whole fields."""
    a = ArraySpec.from_array(np.zeros((40, 20), "f4"), chunks=(10, 20), compressors=[{"name": "zstd", "configuration": {"level": 0}}])
    b = ArraySpec.from_array(np.zeros((40, 20), "f4"), chunks=(20, 20), compressors=[{"name": "zstd", "configuration": {"level": 5}}])
    d = diff(a, b)
    lines = str(d).splitlines()
    assert [line.split() for line in lines[1:]] == [
        ["/", "chunk_grid.configuration.chunk_shape", "[10,", "20]", "[20,", "20]"],
        ["/", "codecs[1].configuration.level", "0", "5"],
    ]
    assert {x.field for x in d} == {"chunk_grid", "codecs"} and d.to_json()[0]["field"] == "chunk_grid"
    other = ArraySpec.from_array(np.zeros((40, 20), "f4"), chunks=(10, 20), compressors=[{"name": "gzip", "configuration": {"level": 1}}])
    assert 'codecs[1]  {"name": "zstd"' in str(diff(a, other))
