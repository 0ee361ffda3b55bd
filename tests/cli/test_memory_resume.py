"""``--max-memory`` holds for the whole process (peak RSS measured), and ``--resume`` after a killed run
finishes with a correct result. Both run the real command in a subprocess."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import zarr_dask
from tests.cli._helpers import ROOT, chunk_files, run

#: Runs the command as its only child and prints the child's peak RSS in KiB (Linux ru_maxrss).
_MEASURE = (
    "import resource, subprocess, sys; "
    "subprocess.run([sys.executable, '-m', 'zarr_dask.cli', *sys.argv[1:]], check=True, stdout=subprocess.DEVNULL); "
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
)


def _peak_rss_mib(*args: str) -> float:
    out = subprocess.run([sys.executable, "-c", _MEASURE, *args], capture_output=True, text=True, check=True, cwd=ROOT)
    return int(out.stdout.split()[-1]) / 1024


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="peak RSS via ru_maxrss in KiB (Linux)")
def test_max_memory_bounds_peak_rss(tmp_path: Path) -> None:
    values = np.random.default_rng(0).random((64, 512, 512), dtype="f4")  # 64 MiB in 1 MiB maps
    src, tiny = str(tmp_path / "src.zarr"), str(tmp_path / "tiny.zarr")
    zarr_dask.create_array(src, shape=values.shape, dtype="f4", chunks=(1, 512, 512), zarr_format=2, compressors=None)[:] = values
    zarr_dask.create_array(tiny, shape=(64, 4, 4), dtype="f4", chunks=(1, 4, 4), zarr_format=2, compressors=None)[:] = 1
    common = ["--chunks", "0=64,1=32,2=32", "--threads", "2"]  # time series: every source map feeds every target chunk
    baseline = _peak_rss_mib("convert", tiny, str(tmp_path / "t.zarr"), *common, "--max-memory", "24MiB")
    bounded = _peak_rss_mib("convert", src, str(tmp_path / "a.zarr"), *common, "--max-memory", "24MiB")
    unbounded = _peak_rss_mib("convert", src, str(tmp_path / "b.zarr"), *common, "--max-memory", "4GiB")
    np.testing.assert_array_equal(zarr_dask.open_array(str(tmp_path / "a.zarr"))[:], values)
    # the interpreter and libraries are the baseline; the data in flight stays within the budget
    assert bounded - baseline <= 24 * 1.15 + 4, (baseline, bounded, unbounded)
    assert unbounded - baseline >= 60, (baseline, bounded, unbounded)  # the measurement does see the data


def _count(root: Path) -> int:
    return len(chunk_files(root)) if root.exists() else 0


def test_resume_after_killed_run(tmp_path: Path) -> None:
    values = np.random.default_rng(1).integers(0, 1000, (40, 30, 30)).astype("i4")
    src, dst = tmp_path / "src.zarr", tmp_path / "dst.zarr"
    zarr_dask.create_array(str(src), shape=values.shape, dtype="i4", chunks=(1, 30, 30), dimension_names=["t", "y", "x"],
                           zarr_format=2)[:] = values  # fmt: skip
    args = ["convert", f"latency::{src.as_uri()}", str(dst), "--zarr-format", "3", "--chunks", "t=40,y=3,x=3",
            "--max-memory", "64KiB", "--threads", "1", "--src-storage-options", json.dumps({"latency": {"seconds": 0.05}})]  # fmt: skip
    # the latency filesystem registers itself on import: the command runs with it (50 ms per source request)
    code = "import zarr_dask.testing.latency, sys; from zarr_dask.cli import main; sys.exit(main(sys.argv[1:]))"
    proc = subprocess.Popen([sys.executable, "-c", code, *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    staging = dst / "__zarr_dask_staging__"
    while _count(staging) < 20 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    if proc.poll() is not None:
        raise AssertionError(f"the run ended before it was killed: {proc.communicate()}")
    os.kill(proc.pid, signal.SIGKILL)  # part-way through the first (staging) pass
    proc.communicate()
    assert _count(staging) >= 20 and not (dst / "c").exists(), "killed part-way through the staging pass"
    finished = run("convert", str(src), str(dst), "--zarr-format", "3", "--chunks", "t=40,y=3,x=3", "--max-memory",
                   "64KiB", "--threads", "1", "--resume", "--json")  # fmt: skip
    report = json.loads(finished.stdout)
    first = report["arrays"][0]["passes"][0]
    assert 0 < first["pending"] < first["tasks"]  # the work of the killed run was kept, the rest done now
    out = zarr_dask.open_array(str(dst))
    assert out.chunks == (40, 3, 3)
    np.testing.assert_array_equal(out[:], values)
    assert not staging.exists()
    again = json.loads(run("convert", str(src), str(dst), "--zarr-format", "3", "--chunks", "t=40,y=3,x=3",
                           "--max-memory", "64KiB", "--resume", "--json").stdout)  # fmt: skip
    assert again["stats"]["tasks"] == 0  # finished: nothing left to do
