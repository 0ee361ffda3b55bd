"""``convert`` / ``zarr-dask convert`` options that could silently do the wrong thing: ``--chunks`` /
``--shards`` keys naming no dimension (typos), layout changes made without being asked, and the data
summary of staged copies (the data once, with the passes)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import zarr_dask
from tests.cli._helpers import make_hierarchy, run
from zarr_dask._convert import LayoutChange
from zarr_dask.cli import main
from zarr_dask.errors import MetadataError

_THEIRS = "their dimension names are 'time', 'lat', 'lon' and their axes 0 to 2"


@pytest.fixture(scope="module")
def hierarchy(tmp_path_factory: pytest.TempPathFactory) -> str:
    src = str(tmp_path_factory.mktemp("options") / "src.zarr")
    make_hierarchy(src, 3)  # time, lat, lon, t2m (time, lat, lon), surface/sst (time, lat, lon)
    return src


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"chunks": "tim=5"}, f"--chunks 'tim' matches no dimension of the 5 selected arrays: {_THEIRS}"),
        ({"chunks": {"tim": 5}}, "--chunks 'tim' matches no dimension"),
        ({"chunks": "7=5"}, f"--chunks axis 7 matches no dimension of the 5 selected arrays: {_THEIRS}"),
        ({"chunks": {3: 5}}, "--chunks axis 3 matches no dimension"),
        ({"chunks": "Time=5"}, "--chunks 'Time' matches no dimension.*names are case-sensitive"),
        ({"chunks": "time=5,lon_=4"}, "--chunks 'lon_' matches no dimension"),
        ({"shards": "latitude=12"}, "--shards 'latitude' matches no dimension"),
        ({"shards": {"lat": 12, "x": 4}}, "--shards 'x' matches no dimension"),
        ({"chunks": "tim=5,9=1", "shards": "lonn=20"}, "--chunks 'tim', axis 9; --shards 'lonn' match no dimension"),
        ({"chunks": "lat=6", "include": ["surface"], "shards": "time=24,depth=4"},
         "--shards 'depth' matches no dimension of the selected array \\(/surface/sst\\): its dimension names are "
         "'time', 'lat', 'lon' and its axes 0 to 2"),
    ],
)
def test_unknown_dimension_keys_are_refused(hierarchy: str, tmp_path: Path, options: dict[str, Any], message: str) -> None:
    dst = tmp_path / "dst.zarr"
    with pytest.raises(MetadataError, match=message) as info:
        zarr_dask.convert(hierarchy, str(dst), zarr_format=3, scheduler="synchronous", **options)
    assert info.value.store == zarr_dask.open_store(hierarchy).url and "check the spelling" in str(info.value)
    assert not dst.exists()  # refused before anything is written
    with pytest.raises(MetadataError, match=message):  # a dry run too
        zarr_dask.convert(hierarchy, str(dst), zarr_format=3, dry_run=True, **options)


def test_unknown_dimension_keys_fail_the_command(hierarchy: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dst = tmp_path / "dst.zarr"
    proc = run("convert", hierarchy, str(dst), "--chunks", "tim=5", check=False)  # the real command
    assert proc.returncode == 1 and proc.stdout == ""
    assert f"zarr-dask: error: store 'file://{hierarchy}', node '/': --chunks 'tim' matches no dimension" in proc.stderr
    assert _THEIRS in proc.stderr and not dst.exists()
    assert main(["convert", hierarchy, str(dst), "--chunks", "7=5", "--dry-run"]) == 1
    assert f"--chunks axis 7 matches no dimension of the 5 selected arrays: {_THEIRS}" in capsys.readouterr().err


def test_keys_of_some_arrays_and_axes_are_accepted(tmp_path: Path) -> None:
    store = zarr_dask.MemoryStore()
    zarr_dask.create_array(store, path="s/a", shape=(6, 4), dtype="i2", chunks=(6, 4), dimension_names=["time", "x"])
    zarr_dask.create_array(store, path="s/b", shape=(5, 4, 3), dtype="i2", chunks=(5, 4, 3))  # no names
    report = zarr_dask.convert(store, store, source_path="s", destination_path="d", chunks="time=2,2=1",
                               scheduler="synchronous")  # fmt: skip
    assert zarr_dask.open_array(store, path="d/a").chunks == (2, 4)  # 'time' is a/'s only
    assert zarr_dask.open_array(store, path="d/b").chunks == (5, 4, 1)  # axis 2 is b's only
    assert report.changes == []
    with pytest.raises(MetadataError, match="'x ' matches no dimension of the 2 selected arrays: their dimension "
                       "names are 'time', 'x' and their axes 0 to 2"):  # fmt: skip
        zarr_dask.convert(store, store, source_path="s", destination_path="e", chunks={"x ": 2})
    with pytest.raises(MetadataError, match=r"--chunks 'time' matches no dimension of the selected array \(/\): it "
                       "has no dimension names; its axes are 0 to 2"):  # fmt: skip
        zarr_dask.convert(store, store, source_path="s/b", destination_path="f", chunks={"time": 2})


def _sharded_source(store: Any) -> np.ndarray[Any, Any]:
    values = np.arange(42 * 8 * 10, dtype="f4").reshape(42, 8, 10)
    zarr_dask.create_array(store, path="s/t", shape=values.shape, dtype="f4", chunks=(6, 8, 10),
                           dimension_names=["time", "lat", "lon"])[:] = values  # fmt: skip
    return values


def test_inner_chunks_reduced_to_divide_the_shards_are_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = zarr_dask.MemoryStore()
    values = _sharded_source(store)
    report = zarr_dask.convert(store, store, source_path="s", destination_path="d", shards="time=7",
                               scheduler="synchronous")  # fmt: skip
    out = zarr_dask.open_array(store, path="d/t")
    assert (out.chunks, out.shards) == ((1, 8, 10), (7, 8, 10))
    np.testing.assert_array_equal(out[:], values)
    change = LayoutChange(dimension="time", kept=6, shard=7, used=1)
    assert report.changes == [("t", change)] and report.arrays[0].changes == (change,)
    text = ("inner chunks along 'time' reduced from 6 to 1 so that they divide the shards of 7 (6x more chunks); "
            "give --chunks time=N with N dividing 7, or shards that are a multiple of 6")  # fmt: skip
    assert str(change) == text
    assert f"  changed /t: {text}" in report.summary().splitlines()
    assert f"  changed: {text}" in report.plan_text().splitlines()
    assert report.to_json()["arrays"][0]["changes"] == [{"dimension": "time", "kept": 6, "shard": 7, "used": 1}]
    # asked for explicitly: nothing to report; by axis on an array without names: the axis is named
    again = zarr_dask.convert(store, store, source_path="s", destination_path="e", chunks="time=1",
                              shards="time=7", scheduler="synchronous")  # fmt: skip
    assert again.changes == [] and "changed" not in again.summary()
    zarr_dask.create_array(store, path="u", shape=(12,), dtype="i1", chunks=(4,))
    unnamed = zarr_dask.convert(store, store, source_path="u", destination_path="v", shards="0=6", dry_run=True)
    assert [str(c) for _, c in unnamed.changes] == [
        "inner chunks along axis 0 reduced from 4 to 2 so that they divide the shards of 6 (2x more chunks); give "
        "--chunks 0=N with N dividing 6, or shards that are a multiple of 4"
    ]


def test_the_command_prints_layout_changes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src, dst = str(tmp_path / "src.zarr"), str(tmp_path / "dst.zarr")
    _sharded_source(src)
    assert main(["convert", src, dst, "--path", "s", "--shards", "time=7", "--dry-run"]) == 0
    plan = capsys.readouterr().out
    assert "  changed: inner chunks along 'time' reduced from 6 to 1" in plan
    assert "\n  changed /t: inner chunks along 'time' reduced from 6 to 1" in plan  # the dry run's summary
    assert main(["convert", src, dst, "--path", "s", "--shards", "time=7"]) == 0
    summary = capsys.readouterr().out
    assert summary.startswith("converted 1 array(s)") and "  changed /t: inner chunks along 'time'" in summary
    assert main(["convert", src, dst, "--path", "s", "--shards", "time=7", "--overwrite", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["arrays"][0]["changes"] == [{"dimension": "time", "kept": 6, "shard": 7, "used": 1}]


def test_staged_copy_reports_the_data_once_with_its_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src, dst = str(tmp_path / "src.zarr"), str(tmp_path / "dst.zarr")
    values = np.random.default_rng(3).random((96, 40, 40)).astype("f4")  # 600 KiB
    zarr_dask.create_array(src, shape=values.shape, dtype="f4", chunks=(1, 40, 40))[:] = values
    report = zarr_dask.convert(src, dst, chunks="0=96,1=4,2=4", max_memory="240KiB", threads=2)
    assert report.arrays[0].plan.staged and report.passes == 2
    assert report.stats["data_bytes"] == values.nbytes and report.stats["nbytes"] == 2 * values.nbytes
    (line,) = [s for s in report.summary().splitlines() if s.startswith("  data")]
    assert line.startswith("  data    600.0 KiB in 2 passes (")
    assert line.endswith("/s); 1 of 1 array(s) staged through an intermediate array, 1.2 MiB moved in all")
    assert report.to_json()["passes"] == 2
    # the command prints the same; a direct copy makes one pass
    assert main(["convert", src, str(tmp_path / "direct.zarr"), "--chunks", "0=4"]) == 0
    (line,) = [s for s in capsys.readouterr().out.splitlines() if s.startswith("  data")]
    assert line.startswith("  data    600.0 KiB in 1 pass (") and "staged" not in line
