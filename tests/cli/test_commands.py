"""info, tree, spec, validate and consolidate: the real command (subprocess) on v2 and v3 hierarchies, their
output and exit status, one-line errors, --help everywhere."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import zarr_dask
from tests.cli._helpers import make_hierarchy, run
from zarr_dask.cli import main
from zarr_dask.core import nodes
from zarr_dask.core.create import build_array_metadata
from zarr_dask.store import open_store

COMMANDS = ["info", "tree", "spec", "validate", "consolidate", "convert"]


@pytest.fixture(params=[2, 3], ids=["v2", "v3"])
def hierarchy(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, int, dict[str, Any]]:
    url = str(tmp_path / f"h{request.param}.zarr")
    return url, request.param, make_hierarchy(url, request.param, sharded=True)


def test_info_group_and_array(hierarchy: tuple[str, int, dict[str, Any]], capsys: pytest.CaptureFixture[str]) -> None:
    url, fmt, _ = hierarchy
    out = run("info", url).stdout
    assert "Type               : Group" in out and f"Zarr format        : {fmt}" in out
    assert "Members            : lat, lon, surface, t2m, time" in out and "Compression ratio" in out
    assert main(["info", url, "--path", "t2m", "--json"]) == 0
    arr = json.loads(capsys.readouterr().out)
    assert arr["shape"] == [24, 12, 20] and arr["chunks"] == [4, 6, 10] and arr["dimension_names"] == ["time", "lat", "lon"]
    assert arr["fill_value"] == "NaN" and arr["attributes"]["units"] == "K"
    assert arr["shards"] == ([12, 12, 20] if fmt == 3 else None)
    assert arr["chunks_initialized"] == arr["nchunks"] == 6 * 2 * 2
    assert arr["units_initialized"] == (2 if fmt == 3 else 24)
    assert 0 < arr["nbytes_stored"] < arr["nbytes"] * 2
    assert main(["info", url, "--path", "surface/sst"]) == 0
    text = capsys.readouterr().out
    assert "Fill value         : -999" in text and "Chunks initialized : 24/24" in text and "Dimension names    : time, lat, lon" in text


def test_info_no_scan_lists_nothing(hierarchy: tuple[str, int, dict[str, Any]], capsys: pytest.CaptureFixture[str]) -> None:
    url, _, _ = hierarchy
    assert main(["info", url, "--path", "t2m", "--no-scan", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert "nbytes_stored" not in info and "chunks_initialized" not in info
    assert main(["info", url, "--path", "t2m", "--no-scan"]) == 0
    assert "not scanned (--no-scan)" in capsys.readouterr().out


def test_tree_marks_implicit_groups(tmp_path: Path) -> None:
    url = str(tmp_path / "implicit.zarr")
    make_hierarchy(url, 3)
    shutil.rmtree(tmp_path / "implicit.zarr" / "surface" / "meta")
    (tmp_path / "implicit.zarr" / "surface" / "zarr.json").unlink()  # /surface becomes an implicit group
    out = run("tree", url).stdout.splitlines()
    assert out[0] == "/"
    assert "├── surface (implicit group)" in out and "│   └── sst (24, 12, 20) int16" in out
    details = run("tree", url, "--details", "--depth", "1").stdout
    assert "t2m (24, 12, 20) float32 chunks=(4, 6, 10) dims=(time, lat, lon)" in details and "sst" not in details


def test_spec_is_zom_json(hierarchy: tuple[str, int, dict[str, Any]]) -> None:
    url, fmt, _ = hierarchy
    doc = json.loads(run("spec", url).stdout)
    spec = zarr_dask.zom.from_json(doc)
    assert spec == zarr_dask.zom.from_store(url)
    assert doc["zarr_format"] == fmt and doc["members"]["surface"]["members"]["meta"]["attributes"] == {"note": "empty"}
    flat = json.loads(run("spec", url, "--flat", "--zarr-format", "3").stdout)
    assert flat["/t2m"]["zarr_format"] == 3 and flat["/t2m"]["dimension_names"] == ["time", "lat", "lon"]


def test_validate_clean_hierarchy(hierarchy: tuple[str, int, dict[str, Any]]) -> None:
    url, _, _ = hierarchy
    out = run("validate", url, "--convention", "xarray", "--data").stdout
    assert out.startswith("OK: 8 node(s), 5 array(s); decoded") and "0 error(s)" in out


def test_validate_warns_of_a_fill_value_that_masks_coordinates(tmp_path: Path) -> None:
    """v2 coordinates written with the default fill_value 0.0 read back with NaN at 0 in xarray: a warning."""
    import xarray as xr

    url = str(tmp_path / "v2.zarr")
    root = zarr_dask.create_group(url, zarr_format=2)
    root.create_array("lat", shape=(3,), dtype="f8", dimension_names=["lat"])[:] = np.arange(3.0)
    root.create_array("lon", shape=(3,), dtype="f8", fill_value=np.nan, dimension_names=["lon"])[:] = np.arange(3.0)
    assert np.isnan(xr.open_dataset(url, engine="zarr_dask", consolidated=False).lat.values[0])  # the trap itself
    proc = run("validate", url)
    lines = proc.stdout.splitlines()
    assert any(line.startswith("WARNING /lat: its fill_value 0.0 equals 1 of its values") for line in lines), lines
    assert not any("/lon" in line for line in lines) and "0 error(s), 1 warning(s)" in lines[-1]


def test_validate_finds_problems(tmp_path: Path) -> None:
    url = str(tmp_path / "bad.zarr")
    make_hierarchy(url, 3, sharded=True)
    root = tmp_path / "bad.zarr"
    zarr_dask.create_array(url, path="nodims", shape=(3,), dtype="f4")  # no dimension names: xarray cannot open
    shard = root / "t2m" / "c" / "1" / "0" / "0"
    shard.write_bytes(shard.read_bytes()[:-3] + b"xyz")  # corrupt the shard index (crc32c)
    chunk = root / "surface" / "sst" / "c" / "3" / "0" / "0"
    chunk.write_bytes(chunk.read_bytes()[:10])  # truncated chunk
    (root / "time" / "c" / "9").write_bytes(b"stray")  # a key outside the grid
    proc = run("validate", url, "--convention", "xarray", "--data", check=False)
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()
    assert any(line.startswith("ERROR   /nodims:") and "dimension_names" in line for line in lines)
    assert any(line.startswith("ERROR   /t2m: key 't2m/c/1/0/0'") for line in lines)
    assert any(line.startswith("ERROR   /surface/sst: key 'surface/sst/c/3/0/0'") for line in lines)
    assert any(line.startswith("WARNING /time: 1 key(s) that are not chunks") for line in lines)
    assert lines[-1].startswith("FAILED") and "3 error(s), 1 warning(s)" in lines[-1]
    # without --data the chunks are not read
    proc = run("validate", url, check=False)
    assert proc.returncode == 0 and "0 error(s), 1 warning(s)" in proc.stdout


def test_validate_metadata_problems(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = str(tmp_path / "meta.zarr")
    make_hierarchy(url, 2)
    zarr_dask.consolidate_metadata(url)
    (tmp_path / "meta.zarr" / "lat" / ".zarray").write_text('{"zarr_format": 2, "shape": [12]')  # broken JSON
    later = build_array_metadata(shape=(2,), dtype="i1", zarr_format=2)
    nodes.write_node(open_store(url), "later", later)  # as a tool that leaves .zmetadata alone: not listed
    assert main(["validate", url, "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    messages = {f["path"]: f["message"] for f in report["findings"]}
    assert report["ok"] is False and "JSON" in messages["/lat"] or "json" in messages["/lat"].lower()
    assert messages["/later"].startswith("missing from the consolidated metadata of /: an array of shape (2,)")
    assert messages["/later"].endswith(f"fix: zarr-dask consolidate {url}")


def test_consolidate_v2_and_v3(hierarchy: tuple[str, int, dict[str, Any]]) -> None:
    url, fmt, _ = hierarchy
    out = run("consolidate", url).stdout
    assert out.startswith("consolidated the metadata of 7 node(s) below /")
    group = zarr_dask.open_group(url, mode="r")
    assert group.consolidated_metadata is not None and "surface/sst" in group.consolidated_metadata.nodes
    assert (Path(url) / (".zmetadata" if fmt == 2 else "zarr.json")).exists()


@pytest.mark.parametrize("command", [None, *COMMANDS])
def test_help_everywhere(command: str | None, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([command, "--help"] if command else ["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: zarr-dask") and ("examples:" in out or command not in ("convert", None))


def test_errors_are_one_line_with_non_zero_exit(tmp_path: Path) -> None:
    proc = run("info", str(tmp_path / "missing.zarr"), check=False)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("zarr-dask: error: ")
    assert "missing.zarr" in proc.stderr and "Traceback" not in proc.stderr
    verbose = run("info", str(tmp_path / "missing.zarr"), "-v", check=False)
    assert verbose.returncode == 1 and "Traceback (most recent call last)" in verbose.stderr
    usage = run("convert", "a", check=False)
    assert usage.returncode == 2 and "the following arguments are required: dst" in usage.stderr
    bad = run("info", str(tmp_path), "--storage-options", "{oops", check=False)
    assert bad.returncode == 1 and "--storage-options must be a JSON object" in bad.stderr


def test_verbose_logs_namespaces(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = str(tmp_path / "a.zarr")
    zarr_dask.create_array(url, shape=(10,), dtype="i2", chunks=(5,))[:] = np.arange(10)
    assert main(["convert", url, str(tmp_path / "b.zarr")]) == 0
    assert "zarr_dask.convert" not in capsys.readouterr().err
    assert main(["convert", url, str(tmp_path / "c.zarr"), "-v", "--log", "convert"]) == 0
    err = capsys.readouterr().err
    assert "zarr_dask.convert INFO: /: direct copy" in err
    assert main(["info", url, "--log", "nope"]) == 1
    assert capsys.readouterr().err.startswith("zarr-dask: error: unknown logging namespace 'nope'")
