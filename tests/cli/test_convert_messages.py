"""What ``zarr-dask convert`` and :func:`zarr_dask.convert` say when a resume is refused or a run is
interrupted (issue 40, point 6): the option that differs, with the values on both sides, spelled as the caller
spells options (``--chunks`` from the command, ``chunks=`` from Python), and how to finish after Ctrl-C."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import zarr_dask
from tests.cli._helpers import ROOT, chunk_files, make_hierarchy, run
from zarr_dask.zom import HierarchyConflictError


def _snapshot(root: Path) -> dict[Path, bytes]:
    return {p.relative_to(root): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_a_refused_command_resume_names_the_flag_that_differs_and_the_stored_value(tmp_path: Path) -> None:
    src, dst = str(tmp_path / "src.zarr"), tmp_path / "dst.zarr"
    make_hierarchy(src, 3)
    run("convert", src, str(dst), "--chunks", "time=6", "--no-progress")
    before = _snapshot(dst)
    proc = run("convert", src, str(dst), "--chunks", "time=12", "--resume", "--no-progress", check=False)
    assert proc.returncode == 1
    err = proc.stderr
    assert str(dst) in err and "cannot resume this conversion" in err and "nothing was written" in err
    assert "--chunks differs: /surface/sst, /t2m are stored with --chunks time=6, these options give --chunks " \
           "time=12" in err  # fmt: skip
    assert "run --resume with the interrupted run's options" in err and "start over with --overwrite" in err
    assert "overwrite=True" not in err and "chunks=" not in err  # the command's flags, not the API's arguments
    assert "chunk_grid.configuration.chunk_shape  [6, 12, 20]" in err  # the table shows what differs
    assert _snapshot(dst) == before
    run("convert", src, str(dst), "--chunks", "time=6", "--resume", "--no-progress")  # as it says


def test_a_refused_api_resume_names_the_arguments(tmp_path: Path) -> None:
    src, dst = str(tmp_path / "src.zarr"), str(tmp_path / "dst.zarr")
    make_hierarchy(src, 3)
    zarr_dask.convert(src, dst, compressors="zstd:1", scheduler="synchronous")
    before = _snapshot(Path(dst))
    with pytest.raises(HierarchyConflictError) as e:
        zarr_dask.convert(src, dst, compressors="zstd:5", shards="time=24", mode="resume", scheduler="synchronous")
    msg = str(e.value)
    assert "shards= differs: /surface/sst is stored with shards='none', these options give " \
           "shards='time=24,lat=12,lon=20'" in msg  # fmt: skip
    assert "compressors= differs" in msg and '"level":1' in msg and '"level":5' in msg
    assert "mode='w'" in msg and "--" not in msg.split("What differs")[0]
    assert e.value.conflicts and _snapshot(Path(dst)) == before
    assert chunk_files(Path(dst))


def test_ctrl_c_says_how_to_finish_and_exits_130(tmp_path: Path) -> None:
    """SIGINT to a real ``zarr-dask convert``: the copy stops (the tasks in its threads stop at their next
    batch, so the process does not finish the conversion on its way out), the command says to run it again with
    ``--resume`` (spelled out, without ``--overwrite``) and exits 130; that command finishes the copy."""
    src, dst = tmp_path / "src.zarr", tmp_path / "out dir" / "dst.zarr"
    source = zarr_dask.create_array(str(src), shape=(400, 100, 100), dtype="f4", chunks=(1, 100, 100),
                                    dimension_names=["time", "y", "x"])  # fmt: skip
    values = np.random.default_rng(0).random((400, 100, 100), dtype="f4")
    source[:] = values
    args = ["convert", str(src), str(dst), "--chunks", "y=25", "--threads", "1", "--no-progress", "--overwrite"]
    env = {**os.environ, "PYTHONFAULTHANDLER": "1"}
    proc = subprocess.Popen(  # SIGINT as a terminal sends it (the test runner's process may ignore it: not inherited)
        [sys.executable, "-m", "zarr_dask.cli", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        cwd=ROOT, env=env, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while len(chunk_files(dst) if dst.exists() else []) < 20:
            assert proc.poll() is None, f"the conversion ended before it was interrupted: {proc.communicate()}"
            assert time.monotonic() < deadline, "the conversion wrote nothing in 120 s"
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, (out, err)
    assert len(chunk_files(dst)) < 1600  # stopped, not finished on the way out
    assert "zarr-dask: interrupted; what was copied so far is kept" in err and "Traceback" not in err
    resume = err.split("to finish the conversion, run ")[1].strip()
    assert resume == shlex.join(["zarr-dask", *[a for a in args if a != "--overwrite"], "--resume"])
    run(*shlex.split(resume)[1:])  # what it says finishes the conversion
    out_array = zarr_dask.open_array(str(dst))
    assert out_array.chunks == (1, 25, 100)
    np.testing.assert_array_equal(out_array[:], values)
