"""Writers that stall, plans gone stale, creators that race: nothing another writer committed is destroyed.

Writers run as separate processes (``_fence_worker.py``) on local files and on the moto S3 server. An
appender is stopped with SIGSTOP for longer than its lease's time to live (short here) while another writer
appends, resizes or appends a dataset, then resumed; region writes are stopped or computed late; creators race;
a dataset append is killed between two commits while a reader polls. Every test checks the whole array
against what each writer reported: the committed rows of every writer that succeeded are there exactly once and
unchanged, a writer that was fenced off reports ``FencedWriteError`` and left no committed row changed. The
control runs the same scenario with fencing switched off in the worker and shows that the check catches the
loss. ``make ci`` runs fixed seeds (``make test`` three of them: tests/conftest.py KEEP); ``make test-slow``
(``ZD_SLOW=1``) 100 random moments per scenario.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import dask
import dask.array as da
import numpy as np
import pytest

import zarr_dask
from tests.conftest import CLOUD_KINDS, store_of_kind

WORKER = str(Path(__file__).with_name("_fence_worker.py"))
TTL = 0.6
BASE_ROWS = 10
QUICK_SEEDS = [0, 1]
SLOW_SEEDS = list(range(100, 200))


_LIVE: list[Writer] = []


@pytest.fixture(autouse=True)
def _no_writer_left() -> Any:
    """Every writer process of a test is ended (resumed if stopped, then killed) and its pipes closed."""
    yield
    while _LIVE:
        _LIVE.pop().close()


class Writer:
    """One writer process: started at once, waiting for :meth:`go`."""

    def __init__(self, job: dict[str, Any], ttl: float | None = TTL) -> None:
        env = dict(os.environ)
        if ttl is not None:  # None: the default time to live (60 s), for writers that are never stopped
            env["ZARR_DASK_APPEND_LEASE_TTL"] = str(ttl)
        self.proc = subprocess.Popen(
            [sys.executable, WORKER, json.dumps(job)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
        )
        _LIVE.append(self)
        assert self._line() == "ready"

    def dump_stacks(self) -> None:
        """A writer that hangs prints every thread's stack to stderr (the test's captured output) before it
        is killed (``faulthandler`` on SIGUSR1, see _fence_worker.py)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.send_signal(signal.SIGUSR1)
            time.sleep(1.0)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
        self.proc.communicate()

    def done_within(self, seconds: float) -> bool:
        try:
            self.proc.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            return False
        return True

    def _line(self) -> str:
        assert self.proc.stdout is not None
        return self.proc.stdout.readline().strip()

    def go(self) -> Writer:
        assert self.proc.stdin is not None
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()
        return self

    def wait_paused(self) -> None:
        """Until the worker has stopped itself (SIGSTOP at its hook)."""
        assert self._line() == "paused"
        deadline = time.monotonic() + 30
        while _state(self.proc.pid) != "T":
            assert time.monotonic() < deadline, "the worker did not stop"
            time.sleep(0.01)

    def signal(self, sig: int) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)

    def result(self) -> dict[str, Any]:
        try:
            out, _ = self.proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            self.dump_stacks()
            self.close()
            raise
        lines = [line for line in out.splitlines() if line.startswith("{")]
        if not lines:
            return {"ok": False, "error": f"exit {self.proc.returncode}", "message": out}
        return dict(json.loads(lines[-1]))


def _flocks_of(pid: int) -> list[str]:
    """The ``/proc/locks`` lines of the locks process ``pid`` holds (a diagnostic for a writer stopped while
    holding one)."""
    try:
        with open("/proc/locks") as f:
            return [line.strip() for line in f if f" {pid} " in line]
    except OSError:
        return []


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


#: the scenarios of writer processes (15-45 s each on an emulator when stopped and resumed, 5-10 s otherwise):
#: ``slow`` on GCS and Azure (tests/conftest.py), so ``make test-slow`` runs them there (with 25 seeds a scenario,
#: 100 runs a store); the default run has them on local files and moto, and the emulators' conditional requests
#: in the in-process suites of test_concurrent_writers.py / test_concurrent_distributed.py
EMULATOR_SLOW = {
    "test_writers_stopped_at_random_moments_lose_nothing",
    "test_a_dataset_append_killed_between_commits_is_invisible_then_completed",
    "test_an_appender_stalled_past_its_lease_cannot_touch_what_the_next_one_committed",
    "test_two_first_appends_to_a_missing_array_both_land",
    "test_two_exclusive_dataset_writes_one_wins",
    "test_a_stalled_region_write_resumed_after_an_append_keeps_the_appended_rows",
}
_CLOUD_SLOW_SEEDS = 25


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3), *CLOUD_KINDS])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, dict[str, Any] | None]:
    if request.param in ("gcs", "azure"):
        params = getattr(request.node, "callspec", None)
        if params is not None and params.params.get("seed", 0) >= SLOW_SEEDS[0] + _CLOUD_SLOW_SEEDS:
            pytest.skip(f"{_CLOUD_SLOW_SEEDS} seeds a scenario on {request.param} (100 runs)")
    url, options = store_of_kind(request, request.param, "fenced.zarr")
    assert isinstance(url, str)
    return url, options


def _base(url: str, options: dict[str, Any] | None) -> np.ndarray:
    base = np.arange(BASE_ROWS * 3, dtype="i4").reshape(BASE_ROWS, 3) % 50
    a = zarr_dask.create_array(url, storage_options=options, shape=base.shape, dtype="i4", chunks=(4, 3), fill_value=-1,
                               overwrite=True)  # fmt: skip
    a[:] = base
    return base


def _check_appends(final: np.ndarray, base: np.ndarray, results: dict[int, tuple[int, dict[str, Any]]]) -> int:
    """Committed data lost or changed: the base rows must be intact, every successful writer's rows (its
    value) present once, contiguous, and nothing else beyond the base. Returns the number of wrong elements."""
    wrong = int((final[: len(base)] != base).sum())
    rest = final[len(base) :]
    ok = {v: rows for v, (rows, r) in results.items() if r["ok"]}
    expected_len = sum(ok.values())
    if len(rest) != expected_len:
        return wrong + abs(len(rest) - expected_len) * 3 + 1
    for v, rows in ok.items():
        where = np.flatnonzero((rest == v).all(axis=1))
        if len(where) != rows or (rows and where[-1] - where[0] != rows - 1):
            wrong += abs(rows - len(where)) * 3 + 1
    known = np.isin(rest, list(ok))
    return wrong + int((~known).sum())


def _run(url: str, options: dict[str, Any] | None, job: dict[str, Any], ttl: float | None = TTL) -> Writer:
    return Writer({"url": url, "options": options, **job}, ttl)


# ----------------------------------------------------------------------------------------- appends
@pytest.mark.parametrize("other", ["append", "resize"])
def test_an_appender_stalled_past_its_lease_cannot_touch_what_the_next_one_committed(
    target: tuple[str, dict[str, Any] | None], other: str
) -> None:
    url, options = target
    base = _base(url, options)
    a = _run(url, options, {"op": "append", "value": 101, "rows": 7, "pause": "write"}).go()
    a.wait_paused()
    time.sleep(TTL * 2.5)  # its lease lapses
    b = _run(url, options, {"op": other, "value": 102, "rows": 5}).go()
    rb = b.result()
    assert rb["ok"], rb
    if other == "resize":  # the resizer fills the rows it added
        zarr_dask.to_zarr(da.full((5, 3), 102, dtype="i4", chunks=2), url, storage_options=options,
                          region=(slice(BASE_ROWS, BASE_ROWS + 5),))  # fmt: skip
    a.signal(signal.SIGCONT)
    ra = a.result()
    assert not ra["ok"] and ra["error"] == "FencedWriteError", ra
    assert "nothing another writer committed was changed" in ra["message"]
    final = zarr_dask.open_array(url, storage_options=options)[:]
    assert _check_appends(final, base, {101: (7, ra), 102: (5, rb)}) == 0


def _control_run(url: str) -> tuple[int, bool]:
    """One run of the control: (wrong elements the check counts, whether the stalled appender's rows landed)."""
    base = _base(url, None)
    a = _run(url, None, {"op": "append", "value": 101, "rows": 7, "pause": "write", "nofence": True}).go()
    a.wait_paused()
    time.sleep(TTL * 2.5)
    rb = _run(url, None, {"op": "append", "value": 102, "rows": 5}).go().result()
    a.signal(signal.SIGCONT)
    ra = a.result()
    assert rb["ok"] and not ra["ok"], ra  # the stalled one fails -- but only after it overwrote the other's rows
    final = zarr_dask.open_array(url)[:]
    return _check_appends(final, base, {101: (7, ra), 102: (5, rb)}), bool((final[BASE_ROWS:] == 101).any())


def test_the_check_catches_the_loss_when_fencing_is_switched_off(tmp_path: Path) -> None:
    """The control: the same stalled appender, fencing switched off in its process: it writes its planned rows
    over the rows the other appender committed, and the check above sees it. (On a heavily loaded machine one
    run in many showed no loss -- a timing the scenario does not pin down -- so the control may take three.)"""
    runs = []
    for attempt in range(3):
        runs.append(_control_run(str(tmp_path / f"control-{attempt}.zarr")))
        if runs[-1][0] > 0:
            break
    assert any(wrong > 0 and landed for wrong, landed in runs), runs


def _random_pause_case(url: str, options: dict[str, Any] | None, seed: int, scenario: str) -> int:
    """Writer A (an append, a dataset append or a region write) is stopped at a random moment for longer than
    its lease lives while B appends (or resizes and fills the new rows), then resumed. Returns the wrong
    elements (0: nothing anyone committed was lost or changed)."""
    if scenario == "dataset":
        return _random_dataset_case(url, options, seed)
    rng = np.random.default_rng(seed)
    base = _base(url, options)
    rows_a, rows_b = int(rng.integers(20, 200)), int(rng.integers(1, 9))
    if scenario == "region":
        first = {"op": "region", "value": 7, "rows": 4, "start": BASE_ROWS - 4}
    else:
        first = {"op": "append", "value": 101, "rows": rows_a}
    a = _run(url, options, first)
    b = _run(url, options, {"op": "resize" if scenario == "resize" else "append", "value": 102, "rows": rows_b})
    a.go()
    time.sleep(float(rng.uniform(0.0, 0.25)))  # somewhere in its write: planning, writing or committing
    a.signal(signal.SIGSTOP)
    time.sleep(TTL * 2.5)
    b.go()
    if not b.done_within(15):  # B waits for something A holds while stopped (a local lock): the pause ends
        a.signal(signal.SIGCONT)
    rb = b.result()
    if scenario == "resize" and rb["ok"]:  # the resizer fills the rows it added
        n = rb["shape"][0]
        zarr_dask.to_zarr(da.full((rows_b, 3), 102, dtype="i4", chunks=2), url, storage_options=options,
                          region=(slice(n - rows_b, n),))  # fmt: skip
    a.signal(signal.SIGCONT)
    ra = a.result()
    for r in (ra, rb):
        assert r["ok"] or r["error"] in ("FencedWriteError", "WriteConflictError"), r
    final = zarr_dask.open_array(url, storage_options=options)[:]
    if scenario == "region":
        assert ra["ok"], ra
        base[BASE_ROWS - 4 :] = 7
        return _check_appends(final, base, {102: (rows_b, rb)})
    return _check_appends(final, base, {101: (rows_a, ra), 102: (rows_b, rb)})


def _random_dataset_case(url: str, options: dict[str, Any] | None, seed: int) -> int:
    """Two dataset appends, the first stopped at a random moment past its lease: every variable and the time
    coordinate agree, and hold the base rows and each successful append's rows exactly once."""
    import xarray as xr

    rng = np.random.default_rng(seed)
    assert _run(url, options, {"op": "xr_create", "value": 1, "rows": 4, "start": 0}).go().result()["ok"]
    rows_a, rows_b = int(rng.integers(20, 200)), int(rng.integers(1, 9))
    a = _run(url, options, {"op": "xr_append", "value": 2, "rows": rows_a, "start": 1000})
    b = _run(url, options, {"op": "xr_append", "value": 3, "rows": rows_b, "start": 5000})
    a.go()
    time.sleep(float(rng.uniform(0.0, 0.25)))
    a.signal(signal.SIGSTOP)
    time.sleep(TTL * 2.5)
    b.go()
    if not b.done_within(15):  # B waits for something A holds while stopped (a local lock): the pause ends
        a.signal(signal.SIGCONT)
    rb = b.result()
    a.signal(signal.SIGCONT)
    ra = a.result()
    for r in (ra, rb):
        assert r["ok"] or r["error"] in ("FencedWriteError", "WriteConflictError"), r
    with xr.open_dataset(url, engine="zarr_dask", storage_options=options) as ds:
        t, va, vb = ds["time"].values, ds["a"].values[:, 0], ds["b"].values
    wrong = int(len({len(t), len(va), len(vb)}) != 1)
    expected = {1: (np.arange(4), True), 2: (np.arange(1000, 1000 + rows_a), ra["ok"]), 3: (np.arange(5000, 5000 + rows_b), rb["ok"])}
    for value, (times, landed) in expected.items():
        where = np.flatnonzero(va == value)
        if not landed:
            wrong += len(where)
            continue
        wrong += int(len(where) != len(times)) or int((t[where] != times).sum() + (vb[where] != value).sum())
    return wrong + int(len(t) != sum(len(x) for x, ok in expected.values() if ok))


SCENARIOS = ["append", "resize", "region", "dataset"]


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("seed", QUICK_SEEDS[:1])
def test_writers_stopped_at_random_moments_lose_nothing(
    target: tuple[str, dict[str, Any] | None], seed: int, scenario: str
) -> None:
    assert _random_pause_case(*target, seed, scenario) == 0


@pytest.mark.slow
@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("seed", SLOW_SEEDS)
def test_writers_stopped_at_random_moments_lose_nothing_many(
    target: tuple[str, dict[str, Any] | None], seed: int, scenario: str
) -> None:
    assert _random_pause_case(*target, seed, scenario) == 0


# ----------------------------------------------------------------------------------- region writes
def test_a_lazy_region_write_computed_after_an_append_keeps_the_appended_rows(
    target: tuple[str, dict[str, Any] | None],
) -> None:
    url, options = target
    zarr_dask.to_zarr(da.ones((9, 2), chunks=(4, 2)), url, storage_options=options, chunks=(4, 2))
    w = zarr_dask.to_zarr(da.full((3, 2), 2.0, chunks=3), url, storage_options=options, region=(slice(6, 9),), compute=False)
    zarr_dask.append(da.full((4, 2), 3.0, chunks=4), url, storage_options=options)
    w.compute()
    got = zarr_dask.open_array(url, storage_options=options)[:, 0]
    np.testing.assert_array_equal(got, [1] * 6 + [2] * 3 + [3] * 4)


def test_a_stalled_region_write_resumed_after_an_append_keeps_the_appended_rows(
    target: tuple[str, dict[str, Any] | None],
) -> None:
    url, options = target
    base = _base(url, options)
    r = _run(url, options, {"op": "region", "value": 7, "rows": 4, "start": BASE_ROWS - 4, "pause": "write"}).go()
    r.wait_paused()
    appended = threading.Thread(
        target=zarr_dask.append, args=(da.full((5, 3), 102, dtype="i4", chunks=5), url), kwargs={"storage_options": options}
    )
    appended.start()
    appended.join(90)
    if appended.is_alive():  # the stopped writer holds a lock the append waits for: resume it, then say which
        held = _flocks_of(r.proc.pid)
        r.signal(signal.SIGUSR1)  # pending while it is stopped: its stacks print (captured stderr) as it resumes,
        r.signal(signal.SIGCONT)  # before it goes on, so they show the thread that holds the lock
        appended.join(60)
        pytest.fail(f"the append waited for the stopped region writer (its flock'd inodes: {held})")
    r.signal(signal.SIGCONT)
    assert r.result()["ok"]
    expected = np.concatenate([base, np.full((5, 3), 102, "i4")])
    expected[BASE_ROWS - 4 : BASE_ROWS] = 7
    np.testing.assert_array_equal(zarr_dask.open_array(url, storage_options=options)[:], expected)


# -------------------------------------------------------------------------------------- creation
def test_two_first_appends_to_a_missing_array_both_land(target: tuple[str, dict[str, Any] | None]) -> None:
    """Neither writer stalls, so both must land: with the default lease time to live. With ``TTL`` (0.6 s,
    renewed every 0.2 s) a holder whose renewal waited 0.4 s for a CPU on a loaded machine was rightly fenced
    off (at load 11 on 2 cores: 9 of 16 runs through fsspec, 2 of 16 through obstore)."""
    url, options = target
    writers = [_run(url, options, {"op": "append", "value": v, "rows": n}, ttl=None) for v, n in ((1, 7), (2, 5))]
    results = [w.go() for w in writers]
    r1, r2 = (w.result() for w in results)
    assert r1["ok"] and r2["ok"], (r1, r2)
    final = zarr_dask.open_array(url, storage_options=options)[:]
    assert _check_appends(final, final[:0], {1: (7, r1), 2: (5, r2)}) == 0


def test_two_exclusive_dataset_writes_one_wins(target: tuple[str, dict[str, Any] | None]) -> None:
    xr = pytest.importorskip("xarray")
    url, options = target
    writers = [_run(url, options, {"op": "xr_create", "value": v, "rows": 4}) for v in (1, 2)]
    for w in writers:
        w.go()
    results = [w.result() for w in writers]
    won = [r for r in results if r["ok"]]
    lost = [r for r in results if not r["ok"]]
    assert len(won) == 1 and len(lost) == 1, results
    assert lost[0]["error"] in ("ContainsGroupError", "ContainsArrayError"), lost
    winner = 1 if results[0]["ok"] else 2
    ds = xr.open_dataset(url, engine="zarr_dask", storage_options=options)
    assert (ds["a"].values == winner).all() and (ds["b"].values == winner).all()


# ---------------------------------------------------------------------------------- dataset appends
def _dataset_consistent(url: str, options: dict[str, Any] | None, engine: str = "zarr_dask") -> int:
    import xarray as xr

    with xr.open_dataset(url, engine=engine, storage_options=options) as ds:
        sizes = {ds[name].shape[0] for name in ("a", "b", "time")}
        assert len(sizes) == 1, f"variables disagree on the length of time: {sizes}"
        return sizes.pop()


@pytest.mark.parametrize("completer", ["append", "consolidate"])
def test_a_dataset_append_killed_between_commits_is_invisible_then_completed(
    target: tuple[str, dict[str, Any] | None], completer: str
) -> None:
    pytest.importorskip("xarray")
    url, options = target
    first = _run(url, options, {"op": "xr_create", "value": 1, "rows": 4, "start": 0}).go().result()
    assert first["ok"], first
    killed = _run(url, options, {"op": "xr_append", "value": 2, "rows": 3, "start": 4, "die_after_commits": 1}).go()
    assert not killed.result()["ok"]  # died after the first array's document
    assert _dataset_consistent(url, options) == 4  # readers see the dataset as before the killed append
    if importlib.util.find_spec("zarr") is not None:  # xarray's own engine too (zarr-python: not in test-min)
        assert _dataset_consistent(url, options, engine="zarr") == 4
    time.sleep(TTL * 2)  # its lease lapses; the next append (or consolidate) completes the killed one first
    if completer == "consolidate":
        with dask.config.set({"zarr_dask.append_lease_ttl": TTL}):
            zarr_dask.consolidate_metadata(url, storage_options=options)
        assert _dataset_consistent(url, options) == 7
    job = {"op": "xr_append", "value": 3, "rows": 2, "start": 7}
    after = _run(url, options, job).go().result()
    if completer == "append":  # it completed the killed append and refused to go on, in case it was its re-run
        assert not after["ok"] and "interrupted between its commits" in after["message"], after
        assert "shape [4] -> [7]" in after["message"]
        assert _dataset_consistent(url, options) == 7
        after = _run(url, options, job).go().result()
    assert after["ok"], after
    import xarray as xr

    with xr.open_dataset(url, engine="zarr_dask", storage_options=options) as ds:
        np.testing.assert_array_equal(ds["time"].values, np.arange(9))
        np.testing.assert_array_equal(ds["b"].values, [1] * 4 + [2] * 3 + [3] * 2)
        np.testing.assert_array_equal(ds["a"].values[:, 0], [1] * 4 + [2] * 3 + [3] * 2)


def test_a_reader_polling_during_dataset_appends_never_sees_variables_disagree(tmp_path: Path) -> None:
    pytest.importorskip("xarray")
    url = str(tmp_path / "polled.zarr")
    assert _run(url, None, {"op": "xr_create", "value": 0, "rows": 3, "start": 0}).go().result()["ok"]
    seen: list[int] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            try:
                seen.append(_dataset_consistent(url, None))
            except BaseException as exc:
                errors.append(exc)
                return

    reader = threading.Thread(target=poll)
    reader.start()
    try:
        start = 3
        for v in range(1, 5):
            assert _run(url, None, {"op": "xr_append", "value": v, "rows": 2, "start": start}).go().result()["ok"]
            start += 2
    finally:
        stop.set()
        reader.join()
    assert not errors, errors[0]
    assert seen and seen == sorted(seen) and set(seen) <= {3, 5, 7, 9, 11}
