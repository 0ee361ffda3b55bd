"""``icechunk:`` locations in ``zarr-dask info``, ``tree``, ``spec`` and ``validate`` (issue 40 item 7: only
``convert`` took them): each reads a read-only session of the branch, tag or snapshot."""

from __future__ import annotations

import json

import numpy as np
import pytest

import zarr_dask
from zarr_dask.cli import main

icechunk = pytest.importorskip("icechunk")

pytestmark = pytest.mark.icechunk


@pytest.fixture
def repo_url(tmp_path):
    path = tmp_path / "repo"
    repo = icechunk.Repository.create(icechunk.local_filesystem_storage(str(path)))
    session = repo.writable_session("main")
    zarr_dask.create_group(session, attributes={"title": "ice"})
    t = zarr_dask.create_array(session, path="t", shape=(6,), chunks=(3,), dtype="i4", dimension_names=["t"])
    t[:] = np.arange(6)
    v = zarr_dask.create_array(session, path="g/v", shape=(6, 4), chunks=(3, 2), shards=(6, 4), dtype="f4",
                               dimension_names=["t", "x"])  # fmt: skip
    v[:] = 1.0
    repo.create_tag("v1", session.commit("first"))
    session = repo.writable_session("main")
    zarr_dask.create_array(session, path="later", shape=(2,), dtype="u1", dimension_names=["y"])
    session.commit("second")
    return f"icechunk:{path}"


def test_info_tree_spec_and_validate_read_a_repository(repo_url, capsys):
    assert main(["info", repo_url]) == 0
    out = capsys.readouterr().out
    assert "Type               : Group" in out and "Members            : g, later, t" in out
    assert main(["info", repo_url, "--path", "g/v"]) == 0
    out = capsys.readouterr().out
    assert "Shape              : (6, 4)" in out and "Chunks initialized : 4/4 (1/1 shards)" in out
    assert main(["tree", repo_url]) == 0
    assert capsys.readouterr().out.splitlines()[1:] == ["├── g", "│   └── v (6, 4) float32", "├── later (2,) uint8",
                                                        "└── t (6,) int32"]  # fmt: skip
    assert main(["spec", repo_url, "--flat"]) == 0
    assert sorted(json.loads(capsys.readouterr().out)) == ["", "/g", "/g/v", "/later", "/t"]
    assert main(["validate", repo_url, "--convention", "xarray", "--data"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("OK: 5 node(s), 3 array(s); decoded 3 stored chunk(s)/shard(s)")


def test_a_tag_and_a_missing_repository(repo_url, tmp_path, capsys):
    assert main(["tree", f"{repo_url}?tag=v1"]) == 0
    assert "later" not in capsys.readouterr().out  # the tagged snapshot has no 'later'
    assert main(["validate", f"{repo_url}?tag=v1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["counts"] == {"nodes": 4, "arrays": 2}
    assert main(["info", f"{repo_url}?branch=nope"]) == 1
    assert "nope" in capsys.readouterr().err
