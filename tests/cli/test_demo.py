"""``make demo`` (``python -m zarr_dask.demo``) end to end, on the small sample: it writes the v2 archive with
zarr_dask's xarray writer, converts it with the real command, checks the result with xarray and prints the
summary."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli._helpers import ROOT


@pytest.mark.parametrize("query_planning", [False, True], ids=["legacy", "query-planning"])
def test_demo_runs_and_prints_the_summary(tmp_path: Path, query_planning: bool) -> None:
    """In both of dask's array modes (``DASK_ARRAY__QUERY_PLANNING``)."""
    env = {**os.environ, "DASK_ARRAY__QUERY_PLANNING": str(query_planning)}
    out = subprocess.run([sys.executable, "-m", "zarr_dask.demo", str(tmp_path / "demo"), "--small"], cwd=ROOT,
                         capture_output=True, text=True, timeout=300, env=env)  # fmt: skip
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "$ zarr-dask convert " in text and "--zarr-format 3" in text
    assert "converted 5 array(s) and 1 group(s)" in text and "requests" in text
    assert "engine='zarr_dask') of both: identical" in text
    assert "t2m (72, 91, 180) float32 chunks=(72, 10, 20) shards=(72, 30, 60)" in text
    assert text.rstrip().splitlines()[-1].startswith("demo OK in ")
    assert (tmp_path / "demo" / "climate-v3.zarr" / "zarr.json").exists()
