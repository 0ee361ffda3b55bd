"""The fan-out ledger against real killed jobs (issue 37 point 5 and the ledger parts of point 6, issue 40
point 3), on local files and moto S3: a dataset job killed after one variable finished is missing; a damaged
``begin`` record is a clear error naming its key; regions are read as ``region=`` reads them; a job killed and
submitted again with a code fix leaves a superseded journal that neither hides a region nor blocks publishing.
The jobs run in child processes (tests/graph/_ledger_job.py) that are SIGKILLed mid-write."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xarray as xr

import zarr_dask
from tests.conftest import store_of_kind
from tests.graph import _ledger_job as job
from zarr_dask.cli import main
from zarr_dask.errors import IndexingError, MetadataError, WritePlanError
from zarr_dask.graph.journal import JOURNAL_DIR
from zarr_dask.store import open_store

ROOT = Path(__file__).resolve().parents[2]
KINDS = ["local", pytest.param("s3", marks=pytest.mark.s3)]
FIRST, SECOND = (0, 48), (48, 96)  # the two jobs' rows


def _run(url: str, rows: tuple[int, int], counter: Path, version: int, options: Any) -> subprocess.Popen[bytes]:
    args = [sys.executable, "-m", "tests.graph._ledger_job", url, str(rows[0]), str(rows[1]), str(counter), str(version)]
    if options:
        args.append(json.dumps(options))
    return subprocess.Popen(args, env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT)


def _journal(store: Any, array: str) -> dict[str, list[str]]:
    """``run -> names`` of the journals under ``array``."""
    top = f"{array}/{JOURNAL_DIR}/"
    out: dict[str, list[str]] = {}
    for key in store.list_prefix(top.rstrip("/")):
        run, name = key[len(top) :].split("/", 1)
        out.setdefault(run, []).append(name)
    return out


def _killed_after_w(
    url: str, options: Any, tmp_path: Path, rows: tuple[int, int], version: int = 1, hold_at: int = 2
) -> None:
    """Run the job of ``rows`` in a child process and SIGKILL it once ``w``'s write finished and ``v``'s is
    partial (one of ``v``'s blocks hangs; the job's other thread finishes the rest)."""
    counter = tmp_path / f"count-{rows[0]}-{version}"
    Path(f"{counter}.ctl").write_text(json.dumps({"sleep": 0.05, "hold_at": hold_at}))
    store = open_store(url, storage_options=options)
    before = set(_journal(store, "w")) | set(_journal(store, "v"))
    child = _run(url, rows, counter, version, options)

    def ready() -> bool:  # every write of w finished (this job's, or the one it found done), v's partial
        w, v = _journal(store, "w"), _journal(store, "v")
        return (bool(set(w) - before) or version == 2) and all("complete" in n for n in w.values()) and any(
            "complete" not in n and any(x.startswith("t/") for x in n) for r, n in v.items() if r not in before
        )

    deadline = time.monotonic() + 120
    while not ready() and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert ready(), (_journal(store, "w"), _journal(store, "v"))


def _finish(url: str, options: Any, tmp_path: Path, rows: tuple[int, int], version: int = 1) -> None:
    counter = tmp_path / f"count-{rows[0]}-{version}"
    Path(f"{counter}.ctl").unlink(missing_ok=True)
    assert _run(url, rows, counter, version, options).wait(timeout=300) == 0


def _template(request: pytest.FixtureRequest, kind: str) -> tuple[str, Any]:
    url, options = store_of_kind(request, kind, "fan.zarr")
    zarr_dask.to_zarr_dataset(job.template(), url, compute=False, encoding=job.ENCODING, storage_options=options)
    return url, options


def _ledger(url: str, options: Any, *args: str) -> int:
    extra = ["--storage-options", json.dumps(options)] if options else []
    return main(["ledger", url, *extra, *args])


def _check_data(url: str, options: Any, versions: dict[tuple[int, int], int]) -> None:
    ds = xr.open_dataset(url, engine="zarr_dask", storage_options=options)
    for rows, version in versions.items():
        v, w = job.expected(*rows, version)
        np.testing.assert_array_equal(ds.v.values[rows[0] : rows[1]], v)
        np.testing.assert_array_equal(ds.w.values[rows[0] : rows[1]], w)


@pytest.mark.parametrize("kind", KINDS)
def test_dataset_job_killed_after_one_variable_is_missing(
    request: pytest.FixtureRequest, kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    url, options = _template(request, kind)
    _finish(url, options, Path(request.getfixturevalue("tmp_path")), FIRST)
    _killed_after_w(url, options, request.getfixturevalue("tmp_path"), SECOND)
    ledger = zarr_dask.write_ledger(url, storage_options=options)
    assert ((48, 96),) in ledger.regions("done", "w") and ledger.regions("partial", "v") == [((48, 96), (0, 40))]
    assignments = [(slice(*FIRST),), (slice(*SECOND),)]
    assert ledger.missing(assignments) == [((48, 96),)]  # w finished it, v did not: not done
    assert ledger.missing([{"t": slice(48, None)}]) == [{"t": (48, 96)}]
    assert ledger.missing(assignments, "w") == []  # one array asked for: its own writes
    assert not ledger.complete
    capsys.readouterr()
    assert _ledger(url, options, "--regions", "[[[0, 48]], [[48, null]]]") == 1
    out = capsys.readouterr().out
    assert "/v [48:96, 0:40] partial" in out and "missing [48:96]" in out and "1 assigned region(s) not done" in out
    with pytest.raises(WritePlanError, match=r"/v region \[\[48, 96\], \[0, 40\]\].*resume=True.*--force"):
        zarr_dask.publish_ledger(url, storage_options=options)
    _finish(url, options, request.getfixturevalue("tmp_path"), SECOND)  # submitted again: resumes
    assert zarr_dask.write_ledger(url, storage_options=options).missing(assignments) == []
    assert _ledger(url, options, "--regions", "[[[0, 48]], [[48, null]]]", "--publish") == 0
    assert zarr_dask.write_ledger(url, storage_options=options).entries == ()
    _check_data(url, options, {FIRST: 1, SECOND: 1})


@pytest.mark.parametrize("kind", KINDS)
def test_job_resubmitted_with_a_fix_supersedes_its_killed_run(
    request: pytest.FixtureRequest, kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    tmp_path = request.getfixturevalue("tmp_path")
    url, options = _template(request, kind)
    _finish(url, options, tmp_path, FIRST)
    _killed_after_w(url, options, tmp_path, SECOND, version=1)
    _finish(url, options, tmp_path, SECOND, version=2)  # the fixed job: another computation, another run
    ledger = zarr_dask.write_ledger(url, storage_options=options)
    (stale,) = [e for e in ledger.entries if e.status == "superseded"]
    (fixed,) = [e for e in ledger.entries if e.path == "v" and e.region[0] == SECOND and e.status == "done"]
    assert (stale.path, stale.region, stale.superseded_by) == ("v", ((48, 96), (0, 40)), fixed.run)
    assert ledger.complete and ledger.unfinished == []
    assert ledger.missing([(slice(*FIRST),), (slice(*SECOND),)]) == []
    capsys.readouterr()
    assert _ledger(url, options, "--regions", "[[[0, 48]], [[48, 96]]]", "--json") == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["missing"] == [] and doc["complete"] is True
    assert {(e["path"], e["status"]) for e in doc["entries"]} >= {("v", "superseded"), ("v", "done"), ("w", "done")}
    assert [e["superseded_by"] for e in doc["entries"] if e["status"] == "superseded"] == [fixed.run]
    assert _ledger(url, options, "--publish") == 0  # not blocked by the stale journal, which it deletes
    assert "published: consolidated metadata written" in capsys.readouterr().out
    assert open_store(url, storage_options=options).list_prefix(f"v/{JOURNAL_DIR}") == []
    _check_data(url, options, {FIRST: 1, SECOND: 2})


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(4))
def test_jobs_killed_at_random_points(tmp_path: Path, seed: int) -> None:
    """Both jobs killed at random blocks of v (after w finished), one of them submitted again with a fix: the
    ledger lists exactly the regions to submit again, and the data ends exact."""
    rng = random.Random(seed)
    url = str(tmp_path / "fan.zarr")
    zarr_dask.to_zarr_dataset(job.template(), url, compute=False, encoding=job.ENCODING)
    for rows in (FIRST, SECOND):
        _killed_after_w(url, None, tmp_path, rows, hold_at=rng.randint(1, 5))
    assignments = [(slice(*FIRST),), (slice(*SECOND),)]
    assert zarr_dask.write_ledger(url).missing(assignments) == [((0, 48),), ((48, 96),)]
    _finish(url, None, tmp_path, FIRST)  # resumed
    assert zarr_dask.write_ledger(url).missing(assignments) == [((48, 96),)]
    _finish(url, None, tmp_path, SECOND, version=2)  # another run: the killed one is superseded
    ledger = zarr_dask.write_ledger(url)
    assert ledger.missing(assignments) == [] and [e.region[0] for e in ledger.entries if e.status == "superseded"] == [SECOND]
    zarr_dask.publish_ledger(url)
    _check_data(url, None, {FIRST: 1, SECOND: 2})


def test_a_later_unfinished_run_is_not_superseded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The other way round: a region done, then a later run over it (a changed job) killed: that region holds
    a mix now, so it is missing, publishing refuses naming it, and --publish --force publishes anyway."""
    url = str(tmp_path / "fan.zarr")
    zarr_dask.to_zarr_dataset(job.template(), url, compute=False, encoding=job.ENCODING)
    _finish(url, None, tmp_path, FIRST)
    _finish(url, None, tmp_path, SECOND)
    _killed_after_w(url, None, tmp_path, SECOND, version=2)
    ledger = zarr_dask.write_ledger(url)
    assert [e.status for e in ledger.entries if e.path == "v" and e.region[0] == SECOND].count("partial") == 1
    assert ledger.missing([(slice(*FIRST),), (slice(*SECOND),)]) == [((48, 96),)]
    capsys.readouterr()
    assert main(["ledger", url]) == 0  # no --regions: a listing
    out = capsys.readouterr().out
    assert "1 journaled write(s) not finished: --publish refuses" in out and "--publish --force" in out
    assert main(["ledger", url, "--publish"]) == 1
    err = capsys.readouterr().err
    assert "1 journaled write(s) are not finished" in err and "/v region [[48, 96], [0, 40]]" in err and "--force" in err
    assert main(["ledger", url, "--publish", "--force"]) == 0
    assert zarr_dask.write_ledger(url).entries == ()


@pytest.mark.parametrize("kind", KINDS)
def test_damaged_begin_record_is_a_clear_error(
    request: pytest.FixtureRequest, kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    tmp_path = request.getfixturevalue("tmp_path")
    url, options = _template(request, kind)
    _finish(url, options, tmp_path, FIRST)
    _killed_after_w(url, options, tmp_path, SECOND)
    store = open_store(url, storage_options=options)
    (run,) = [r for r, names in _journal(store, "v").items() if "complete" not in names]
    key = f"v/{JOURNAL_DIR}/{run}/begin"
    for tampered in (b'{"region": [[48, 96]], "tasks": 6}', b"[1, 2]", b'{"region": [[96, 48], [0, 40]]}', b"null"):
        store.set(key, tampered)  # JSON, but not a begin record of this 2-d array
        with pytest.raises(MetadataError, match=r"is not a begin record .* one \[start, stop\] pair per dimension"):
            zarr_dask.write_ledger(url, storage_options=options)
    store.set(key, b"\x00garbage{")
    for call in (zarr_dask.write_ledger, zarr_dask.publish_ledger):
        with pytest.raises(MetadataError) as info:
            call(url, storage_options=options)
        text = str(info.value)
        assert key in text and "garbage" in text  # the thing and the value
        assert "run the job that wrote it again with resume=True" in text and "force=True" in text  # the fixes
    capsys.readouterr()
    assert _ledger(url, options, "--regions", "[[[0, 48]], [[48, 96]]]") == 1
    assert key in capsys.readouterr().err
    ledger = zarr_dask.write_ledger(url, storage_options=options, strict=False)  # listed: its array is not done
    assert [(e.path, e.status) for e in ledger.unfinished] == [("v", "damaged")]
    assert ledger.missing([(slice(*FIRST),)]) == [((0, 48),)] and ledger.missing([(slice(*FIRST),)], "w") == []
    assert _ledger(url, options, "--force") == 0
    assert f"damaged (0 of 0 tasks): unreadable record {key}" in capsys.readouterr().out
    _finish(url, options, tmp_path, SECOND)  # the job again, as to_zarr treats the damaged record: absent
    assert zarr_dask.write_ledger(url, storage_options=options).missing([(slice(*FIRST),), (slice(*SECOND),)]) == []
    zarr_dask.publish_ledger(url, storage_options=options)
    _check_data(url, options, {FIRST: 1, SECOND: 1})


def test_regions_are_read_as_region_reads_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = str(tmp_path / "fan.zarr")
    zarr_dask.to_zarr_dataset(job.template(), url, compute=False, encoding=job.ENCODING)
    _finish(url, None, tmp_path, SECOND)
    ledger = zarr_dask.write_ledger(url)
    assert ledger.missing([(slice(72, None),)]) == []  # open-ended (it raised TypeError)
    assert ledger.missing([(slice(-48, None),), (slice(None, 48),)]) == [((0, 48),)]  # negative, open start
    assert ledger.missing([[[48, None]], [[0, 24]]]) == [((0, 24),)]  # pairs (JSON), open-ended
    assert ledger.missing([slice(48, 96)]) == []  # one slice, as region= takes it
    assert ledger.missing([{"t": slice(48, None)}, {"t": [0, 48]}]) == [{"t": (0, 48)}]  # by dimension
    assert ledger.missing([(slice(48, 96), slice(0, 20))], "v") == []  # more axes: arrays that have them
    with pytest.raises(IndexingError, match=r"'auto'.*pass the slices each job was given"):
        ledger.missing(["auto"])
    with pytest.raises(IndexingError, match=r"'auto'.*pass the slices"):
        ledger.missing([{"t": "auto"}])
    with pytest.raises(IndexingError, match=r"slice\(200, 300, None\),\) selects no element of the journaled array "
                       r"/v \(shape \(96, 40\): it reads as \[\[96, 96\], \[0, 40\]\]\); check the regions"):
        ledger.missing([(slice(200, 300),)])
    with pytest.raises(IndexingError, match=r"step 1"):
        ledger.missing([(slice(0, 48, 2),)])
    with pytest.raises(IndexingError, match=r"names dimension\(s\) \['time'\].*\{'v': \['t', 'x'\], 'w': \['t'\]\}"):
        ledger.missing([{"time": slice(0, 48)}])
    with pytest.raises(IndexingError, match=r"'oops' is neither a slice nor a \[start, stop\] pair.*\[\[72, null\]\]"):
        ledger.missing([("oops",)])
    fresh = str(tmp_path / "fresh.zarr")  # nothing journaled: every region missing, as given
    zarr_dask.to_zarr_dataset(job.template(), fresh, compute=False, encoding=job.ENCODING)
    assert zarr_dask.write_ledger(fresh).missing([(slice(72, None),), {"t": [0, 8]}]) == [((72, None),), {"t": (0, 8)}]
    assert main(["ledger", url, "--regions", '[{"t": [0, 48]}, {"t": [48, null]}]']) == 1
    out = capsys.readouterr().out
    assert "missing [t=0:48]" in out and "1 assigned region(s) not done" in out
    assert main(["ledger", url, "--regions", "[[0, 48]]"]) == 1  # not a list of regions of pairs
    assert "neither a slice nor a [start, stop] pair" in capsys.readouterr().err


def test_help_is_plain_text(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["ledger", "--help"])
    out = capsys.readouterr().out
    assert "--force" in out and "--json" in out and "superseded" in out
    assert "``" not in out and ":func:" not in out and ":class:" not in out
