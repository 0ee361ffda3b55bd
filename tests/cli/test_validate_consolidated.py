"""``zarr-dask validate`` names every stale, missing and extra consolidated entry with the command that fixes
it; ``zarr-dask consolidate`` does."""

from __future__ import annotations

import json
from pathlib import Path

import dask.array as da
import pytest

import zarr_dask
from zarr_dask.cli import main


def test_validate_reports_stale_entries_with_the_fix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = str(tmp_path / "s.zarr")
    zarr_dask.create_group(url)
    zarr_dask.to_zarr(da.ones(4, chunks=2), url, component="x", chunks=2)
    zarr_dask.to_zarr(da.ones(3, chunks=2), url, component="g/y", chunks=2)
    zarr_dask.consolidate_metadata(url)
    zarr_dask.consolidate_metadata(url, path="g")
    assert main(["validate", url]) == 0
    capsys.readouterr()
    zarr_dask.append(da.ones(2, chunks=2), url, component="x", consolidated=False)
    zarr_dask.append(da.ones(2, chunks=2), url, component="g/y", consolidated=False)
    zarr_dask.to_zarr(da.ones(2, chunks=2), url, component="later", consolidated=False)
    assert main(["validate", url]) == 1
    lines = capsys.readouterr().out.splitlines()
    fix = f"Readers using consolidated metadata see the wrong node; fix: zarr-dask consolidate {url}"
    assert f"ERROR   /later: missing from the consolidated metadata of /: an array of shape (2,), not listed. {fix}" in lines
    assert (f"ERROR   /x: stale entry in the consolidated metadata of /: shape [4] in the consolidated metadata, [6] "
            f"in its own documents. {fix}") in lines  # fmt: skip
    assert f"ERROR   /g/y: stale entry in the consolidated metadata of /g: shape [3] in the consolidated metadata, [5] in its own documents. {fix} --path g" in lines
    assert sum("consolidated metadata of /:" in line for line in lines) == 3  # /later, /x and /g/y (root's copy)
    assert lines[-1].startswith("FAILED") and "4 error(s)" in lines[-1]
    assert main(["validate", url, "--path", "g", "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert [f["path"] for f in report["findings"]] == ["/y"]  # relative to the validated group
    assert main(["consolidate", url]) == 0 and main(["consolidate", url, "--path", "g"]) == 0
    capsys.readouterr()
    assert main(["validate", url]) == 0
