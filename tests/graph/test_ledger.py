"""The fan-out ledger (issue 25): a template, independent region jobs with resume=True, one of them killed,
one never run: the ledger lists exactly what is missing; re-running the killed job finishes it; publishing
consolidates once and removes the journals. Also the ``zarr-dask ledger`` command."""

from __future__ import annotations

from pathlib import Path

import dask
import dask.array as da
import numpy as np
import pytest

import zarr_dask
from tests.graph import _resume_job as job
from tests.graph._resume_job import Dies
from zarr_dask.cli import main
from zarr_dask.errors import WritePlanError
from zarr_dask.graph.journal import JOURNAL_DIR

REGIONS = [(slice(i, i + 24),) for i in range(0, 96, 24)]


def _job(url: str, region: tuple[slice, ...], key: str) -> None:
    rows = region[0].stop - region[0].start
    part = da.from_array(np.arange(rows * 40, dtype="f8").reshape(rows, 40) + region[0].start, chunks=(8, 40))
    with dask.config.set(scheduler="sync"):
        zarr_dask.to_zarr(part.map_blocks(job.flaky, key, dtype="f8"), url, component="v", region=region, resume=True)


def test_ledger_lists_what_a_killed_job_did_not_finish(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = str(tmp_path / "fan.zarr")
    zarr_dask.create_group(url)
    zarr_dask.to_zarr(da.zeros(job.SHAPE, chunks=job.CHUNKS), url, component="v", compute=False)  # the template
    for i in range(len(REGIONS)):
        job.STATE[f"fan-{i}"] = {"fail_at": 3 if i == 1 else 0, "seen": []}
    _job(url, REGIONS[0], "fan-0")
    with pytest.raises(Dies):
        _job(url, REGIONS[1], "fan-1")  # killed after its first task
    _job(url, REGIONS[3], "fan-3")  # REGIONS[2]: never run
    ledger = zarr_dask.write_ledger(url)
    assert ledger.regions("done") == [((0, 24), (0, 40)), ((72, 96), (0, 40))]
    assert ledger.regions("partial") == [((24, 48), (0, 40))]
    (partial,) = [e for e in ledger.entries if e.status == "partial"]
    assert (partial.path, partial.tasks) == ("v", 3) and 0 < partial.tasks_done < 3
    assert ledger.missing(REGIONS) == [((24, 48),), ((48, 72),)]
    with pytest.raises(WritePlanError, match="not finished"):
        zarr_dask.publish_ledger(url)
    assert main(["ledger", url, "--regions", "[[[0, 24]], [[24, 48]], [[48, 72]], [[72, 96]]]"]) == 1
    out = capsys.readouterr().out
    assert f"/v [24:48, 0:40] partial ({partial.tasks_done} of 3 tasks)" in out and "missing [48:72]" in out
    _job(url, REGIONS[1], "fan-1")  # re-submitted: resumes (its finished tasks are not run again)
    blocks = [b for b in job.STATE["fan-1"]["seen"] if b >= 0]  # not dask's meta call
    assert len(blocks) == 2 + 3 - partial.tasks_done  # the first run's two blocks (one failed), then the rest
    _job(url, REGIONS[2], "fan-2")
    assert zarr_dask.write_ledger(url).missing(REGIONS) == []
    assert main(["ledger", url, "--publish"]) == 0
    assert not list(Path(url).glob(f"v/{JOURNAL_DIR}"))
    assert zarr_dask.write_ledger(url).entries == ()
    got = zarr_dask.open_group(url)["v"][:]
    want = np.concatenate([np.arange(24 * 40).reshape(24, 40) + r[0].start for r in REGIONS]) * 3 + 1
    np.testing.assert_array_equal(got, want)
    assert "consolidated_metadata" in (Path(url) / "zarr.json").read_text()
