"""Resumable whole-dataset and datatree writes (``resume=True`` without ``region=``, issue 25): a write killed
half way (a task raising on its N-th call, the client process SIGKILLed) and run again keeps the hierarchy its
first run prepared, neither recomputes nor rewrites the writer tasks that finished, and ends byte for byte
equal to a clean run; an older dataset at the same place never leaves a stale key. Clusters of processes:
test_resume_dataset_distributed.py."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Any

import dask
import dask.array as da
import numpy as np
import pytest
import xarray as xr

import zarr_dask
from tests.graph import _resume_job as job
from tests.graph._resume_job import CHUNKS, ENCODING, SHAPE, TREE_ENCODING, Dies
from tests.graph.test_resume import files, identities, kill_once_done, receipts, settled, start_job
from zarr_dask.errors import ContainsGroupError, UnsupportedFeatureError
from zarr_dask.graph.journal import JOURNAL_DIR
from zarr_dask.store import open_store

ROOT = Path(__file__).resolve().parents[2]
FILL_BLOCKS = (1, 6)  # blocks of v whose new data is all fill (NaN): their keys must not be stored


def _base() -> np.ndarray:
    base = np.arange(np.prod(SHAPE), dtype="f8").reshape(SHAPE)
    for b in FILL_BLOCKS:
        base[b * CHUNKS[0] : (b + 1) * CHUNKS[0]] = np.nan
    return base


def _flaky(key: str, fail_at: int) -> da.Array:
    """v's data: fails on the ``fail_at``-th block computed (0: never); ``job.STATE[key]["seen"]`` counts."""
    job.STATE[key] = {"fail_at": fail_at, "seen": []}
    return da.from_array(_base(), chunks=CHUNKS).map_blocks(job.flaky, key, dtype="f8")


def _older(url: str, options: dict[str, Any] | None = None) -> None:
    """An older dataset at ``url``: other values in every key of v (fill blocks included), another variable."""
    old = xr.Dataset({"v": (("t", "x"), np.full(SHAPE, 7.0)), "gone": ("t", np.ones(SHAPE[0]))}, attrs={"old": 1})
    zarr_dask.to_zarr_dataset(old, url, mode="w", encoding={"v": {"chunks": CHUNKS}}, storage_options=options)


def _clean_dataset(tmp_path: Path) -> Path:
    url = tmp_path / "clean.zarr"
    zarr_dask.to_zarr_dataset(job.dataset("", _flaky("clean", 0)), str(url), mode="w", encoding=ENCODING)
    return url


def _seen(key: str) -> list[int]:
    return [b for b in job.STATE[key]["seen"] if b >= 0]  # (not dask's call on an empty block for the meta)


def _resumed_puts(finished: set[int], finished_w: set[int] | None) -> int:
    """The writes of a resumed run of the job's dataset: each missing key of v (not all fill) and of w, a
    receipt per missing writer task, a ``complete`` per array journal, the coordinate t (in memory: written
    again); no key of a finished task, no metadata document. ``finished_w``: None when w's write finished in
    the killed run (its journal complete: not written at all)."""
    missing = set(range(12)) - finished
    w = 0 if finished_w is None else 2 * (3 - len(finished_w)) + 1
    return len(missing - set(FILL_BLOCKS)) + len(missing) + 1 + w + 1


def _finished(array: Path) -> set[int]:
    """The writer tasks (blocks) of the job's array finished by the killed run: all 12 once its journal holds
    ``complete`` (its receipts replaced by that record), else those with a receipt."""
    return set(range(12)) if list(array.glob(f"{JOURNAL_DIR}/*/complete")) else receipts(array)


def _no_journal(root: Path) -> None:
    assert not [p for p in root.rglob("*") if JOURNAL_DIR in str(p) and p.is_file()]


@pytest.mark.parametrize("seed", [3])
def test_dataset_overwrite_killed_then_resumed(tmp_path: Path, seed: int) -> None:
    """mode="w" over an older dataset, killed by a task raising on its N-th call (threads), then the same call
    again: the group is not wiped again, finished tasks are neither recomputed nor rewritten (identities and
    the store's request counters), no key of the older dataset survives, the result equals a clean run's."""
    url = tmp_path / "a.zarr"
    _older(str(url))
    name = f"ds-{seed}"
    v = _flaky(name, random.Random(seed).randint(3, 10))
    with dask.config.set(scheduler="threads", num_workers=2):
        with pytest.raises(Dies):
            zarr_dask.to_zarr_dataset(job.dataset("", v), str(url), mode="w", encoding=ENCODING, resume=True)
        finished, finished_w = settled(lambda: (receipts(url / "v"), receipts(url / "w")))
        assert 0 < len(finished) < 12
        if list((url / "w").glob(f"{JOURNAL_DIR}/*/complete")):
            finished_w = None  # w's write finished: the resumed run does not write it at all
        assert not (url / "gone").exists()  # the first run replaced the older dataset before its journal began
        before, n = identities(url), len(_seen(name))
        store = open_store(str(url))
        zarr_dask.to_zarr_dataset(job.dataset("", v), store, mode="w", encoding=ENCODING, resume=True)
    again = _seen(name)[n:]
    assert sorted(again) == sorted(set(range(12)) - finished)  # finished blocks were not recomputed
    after = identities(url)
    kept = [k for k in before if k.startswith("v/")]
    assert kept and all(after[k] == before[k] for k in kept)  # nor their keys rewritten
    assert store.counters.snapshot()["set"] == _resumed_puts(finished, finished_w)
    assert all(not (url / "v" / "c" / str(b)).exists() for b in FILL_BLOCKS)  # the older data's keys are gone
    _no_journal(url)
    assert files(url) == files(_clean_dataset(tmp_path))


@pytest.mark.parametrize("seed", [1])
def test_datatree_killed_then_resumed(tmp_path: Path, seed: int) -> None:
    """A tree (mode "w-", the default: its first run created it) killed by a task of one of its nodes raising
    on its N-th call, and resumed; one journal for the tree."""
    url = tmp_path / "t.zarr"
    rng = random.Random(seed)
    dies, fail_at = rng.choice(["tree", "tree-b"]), rng.randint(3, 12)

    def make(key: str) -> da.Array:
        return _flaky(key, fail_at if key == dies else 0)

    with dask.config.set(scheduler="sync"), pytest.raises(Dies):
        zarr_dask.to_zarr_datatree(job.tree("tree", make), str(url), encoding=TREE_ENCODING, resume=True)
    assert len(list((url / JOURNAL_DIR).iterdir())) == 1  # the tree's journal, at its root
    ledger = zarr_dask.write_ledger(str(url))  # the dead tree write: partial at its root group
    assert [(e.path, e.region, e.tasks) for e in ledger.entries if e.path == ""] == [("", (), 3)]
    assert not ledger.complete
    done_a, done_b = _finished(url / "a" / "v"), _finished(url / "a" / "b" / "u")
    assert done_a or done_b
    n_a, n_b = len(_seen("tree")), len(_seen("tree-b"))
    with dask.config.set(scheduler="sync"):
        tree = job.tree("tree", lambda key: da.from_array(_base(), chunks=CHUNKS).map_blocks(job.flaky, key, dtype="f8"))
        zarr_dask.to_zarr_datatree(tree, str(url), encoding=TREE_ENCODING, resume=True)
    assert sorted(_seen("tree")[n_a:]) == sorted(set(range(12)) - done_a)
    assert sorted(_seen("tree-b")[n_b:]) == sorted(set(range(12)) - done_b)
    clean = tmp_path / "clean.zarr"
    zarr_dask.to_zarr_datatree(job.tree("c", lambda key: _flaky(key, 0)), str(clean), encoding=TREE_ENCODING)
    _no_journal(url)
    assert files(url) == files(clean)
    assert xr.open_datatree(str(url), engine="zarr_dask")["a/b"].u.shape == SHAPE


def test_lazy_append_mode_resumes_and_keeps_other_variables(tmp_path: Path) -> None:
    """compute=False, mode="a" into a group holding another variable: the journal begins when the Delayed is
    made; the resumed run skips what finished, the other variable is kept, the result equals a clean run's."""
    url, clean = tmp_path / "a.zarr", tmp_path / "clean.zarr"
    other = xr.Dataset({"other": ("z", np.arange(5))}, attrs={"before": "yes"})
    for u in (url, clean):
        zarr_dask.to_zarr_dataset(other, str(u))
    v = _flaky("lazy", 5)
    with dask.config.set(scheduler="sync"):
        lazy = zarr_dask.to_zarr_dataset(job.dataset("", v), str(url), mode="a", encoding=ENCODING, resume=True,
                                         compute=False)  # fmt: skip
        with pytest.raises(Dies):
            lazy.compute()  # type: ignore[union-attr]
        finished, n = receipts(url / "v"), len(_seen("lazy"))
        assert finished
        again = zarr_dask.to_zarr_dataset(job.dataset("", v), str(url), mode="a", encoding=ENCODING, resume=True,
                                          compute=False)  # fmt: skip
        result = again.compute()  # type: ignore[union-attr]
    assert sorted(_seen("lazy")[n:]) == sorted(set(range(12)) - finished)
    assert result.metadata_keys == ()  # the hierarchy was prepared by the first run
    zarr_dask.to_zarr_dataset(job.dataset("", _flaky("lazy-clean", 0)), str(clean), mode="a", encoding=ENCODING)
    _no_journal(url)
    assert files(url) == files(clean)


@pytest.mark.parametrize("mode", ["w", "w-", "a"])
def test_v2_subgroup_resumes_and_keeps_its_neighbours(tmp_path: Path, mode: str) -> None:
    """Zarr v2, consolidated, the dataset in a nested group beside another one (kept); the nested group's
    parent created by the first run (mode "w-", "a") is not in the way of the resumed run."""
    url, clean = tmp_path / "a.zarr", tmp_path / "clean.zarr"
    for u in (url, clean):
        zarr_dask.to_zarr_dataset(xr.Dataset({"n": ("z", np.arange(3))}), str(u), group="other", zarr_format=2)
    key = f"v2{mode}"
    v = _flaky(key, 4)
    with dask.config.set(scheduler="sync"), pytest.raises(Dies):
        zarr_dask.to_zarr_dataset(job.dataset("", v), str(url), group="g/h", mode=mode, encoding=ENCODING, resume=True)
    finished, n = receipts(url / "g" / "h" / "v"), len(_seen(key))
    assert finished
    with dask.config.set(scheduler="sync"):
        zarr_dask.to_zarr_dataset(job.dataset("", v), str(url), group="g/h", mode=mode, encoding=ENCODING, resume=True)
    assert sorted(_seen(key)[n:]) == sorted(set(range(12)) - finished)
    zarr_dask.to_zarr_dataset(job.dataset("", _flaky(key + "c", 0)), str(clean), group="g/h", mode=mode, encoding=ENCODING)
    _no_journal(url)
    assert files(url) == files(clean)
    assert ".zmetadata" in files(url) and "g/h/v/.zarray" in files(url)


def test_r_plus_into_a_template_resumes(tmp_path: Path) -> None:
    """mode="r+" (every variable exists: a template written with compute=False) killed and resumed."""
    url, clean = tmp_path / "a.zarr", tmp_path / "clean.zarr"
    template = job.dataset("", da.zeros(SHAPE, chunks=CHUNKS))
    for u in (url, clean):
        zarr_dask.to_zarr_dataset(template, str(u), encoding=ENCODING, compute=False)
    v = _flaky("r+", 5)
    with dask.config.set(scheduler="sync"), pytest.raises(Dies):
        zarr_dask.to_zarr_dataset(job.dataset("", v), str(url), mode="r+", resume=True)
    finished, n = _finished(url / "v"), len(_seen("r+"))
    assert finished
    with dask.config.set(scheduler="sync"):
        zarr_dask.to_zarr_dataset(job.dataset("", v), str(url), mode="r+", resume=True)
    assert sorted(_seen("r+")[n:]) == sorted(set(range(12)) - finished)
    zarr_dask.to_zarr_dataset(job.dataset("", _flaky("r+c", 0)), str(clean), mode="r+")
    _no_journal(url)
    assert files(url) == files(clean)


def test_changed_meanwhile_starts_over(tmp_path: Path) -> None:
    """Someone changed the hierarchy between the two runs: mode="w" starts over (everything computed and
    written again, nothing of the first run kept), mode="w-" refuses (the group is no longer this write's)."""
    for mode in ("w", "w-"):
        url = tmp_path / f"{mode}.zarr"
        key = f"changed{mode}"
        v = _flaky(key, 6)
        with dask.config.set(scheduler="sync"), pytest.raises(Dies):
            zarr_dask.to_zarr_dataset(job.dataset("", v), str(url), mode=mode, encoding=ENCODING, resume=True)
        doc = json.loads((url / "v" / "zarr.json").read_text())
        doc["attributes"]["units"] = "degC"  # another writer's change
        (url / "v" / "zarr.json").write_text(json.dumps(doc))
        n = len(_seen(key))
        with dask.config.set(scheduler="sync"):
            if mode == "w-":
                with pytest.raises(ContainsGroupError):
                    zarr_dask.to_zarr_dataset(job.dataset("", v), str(url), mode=mode, encoding=ENCODING, resume=True)
                continue
            zarr_dask.to_zarr_dataset(job.dataset("", v), str(url), mode=mode, encoding=ENCODING, resume=True)
        assert sorted(_seen(key)[n:]) == list(range(12))  # started over
        _no_journal(url)
        assert files(url) == files(_clean_dataset(tmp_path))


def test_resume_refusals(tmp_path: Path) -> None:
    ds = xr.Dataset({"v": ("t", da.zeros(4, chunks=2))})
    url = str(tmp_path / "x.zarr")
    zarr_dask.to_zarr_dataset(ds, url)
    with pytest.raises(UnsupportedFeatureError, match="append_dim= write of a datatree"):  # (a dataset's resumes:
        zarr_dask.to_zarr_datatree(xr.DataTree(ds), url, append_dim="t", resume=True)  # test_resume_dataset_append.py)
    with pytest.raises(TypeError, match="resume must be"):
        zarr_dask.to_zarr_dataset(ds, url, mode="w", resume=3)  # type: ignore[arg-type]


@pytest.mark.s3
def test_s3_dataset_overwrite_resumes(s3_bucket_url: str, s3_storage_options: dict[str, Any]) -> None:
    """moto S3: a killed mode="w" over an older dataset, resumed: finished keys are not put again (their
    objects' times, the store's request counters); every key and its bytes equal a clean run's."""
    import s3fs

    fs = s3fs.S3FileSystem(**s3_storage_options)
    root = s3_bucket_url.removeprefix("s3://")
    clean_url = s3_bucket_url.replace("root.zarr", "clean.zarr")

    def objects(prefix: str) -> dict[str, Any]:
        fs.invalidate_cache()
        return {p.removeprefix(prefix + "/"): i["LastModified"] for p, i in fs.find(prefix, detail=True).items()}

    def done(var: str = "v") -> set[int]:
        return {int(k.rsplit("/", 1)[-1].split(".")[0]) for k in objects(root) if k.startswith(f"{var}/") and "/t/" in k}

    _older(s3_bucket_url, s3_storage_options)
    v = _flaky("s3", 7)
    with dask.config.set(scheduler="threads", num_workers=2), pytest.raises(Dies):
        zarr_dask.to_zarr_dataset(job.dataset("", v), s3_bucket_url, mode="w", encoding=ENCODING, resume=True,
                                  storage_options=s3_storage_options)  # fmt: skip
    finished, finished_w = settled(lambda: (done(), done("w")))
    assert 0 < len(finished) < 12
    if [k for k in objects(root) if k.startswith(f"w/{JOURNAL_DIR}/") and k.endswith("/complete")]:
        finished_w = None  # w's write finished: the resumed run does not write it at all
    before, n = objects(root), len(_seen("s3"))
    time.sleep(1.1)  # S3 times have a resolution of one second
    store = open_store(s3_bucket_url, storage_options=s3_storage_options)
    with dask.config.set(scheduler="threads", num_workers=2):
        zarr_dask.to_zarr_dataset(job.dataset("", v), store, mode="w", encoding=ENCODING, resume=True)
    assert sorted(_seen("s3")[n:]) == sorted(set(range(12)) - finished)
    after = objects(root)
    assert all(after[f"v/c/{b}/0"] == before[f"v/c/{b}/0"] for b in finished - set(FILL_BLOCKS))
    assert store.counters.snapshot()["set"] == _resumed_puts(finished, finished_w)
    zarr_dask.to_zarr_dataset(job.dataset("", _flaky("s3-clean", 0)), clean_url, mode="w", encoding=ENCODING,
                              storage_options=s3_storage_options)  # fmt: skip
    assert not [k for k in after if JOURNAL_DIR in k]
    got = fs.cat([f"{root}/{k}" for k in sorted(after)])
    want = fs.cat([f"{clean_url.removeprefix('s3://')}/{k}" for k in sorted(objects(clean_url.removeprefix("s3://")))])
    assert {k.removeprefix(root + "/"): v for k, v in got.items()} == {
        k.removeprefix(clean_url.removeprefix("s3://") + "/"): v for k, v in want.items()
    }


def _kill_client_and_resume(tmp_path: Path, kind: str, wait_for: int) -> None:
    """Run the job's dataset (or tree) write with mode="w" over an older dataset in a child process, SIGKILL
    it once ``wait_for`` writer tasks of v finished, run the same write here: nothing finished is recomputed or
    rewritten, the store equals a clean run's."""
    url, counter = tmp_path / "a.zarr", tmp_path / "count"
    v_dir = url / "a" / "v" if kind == "tree" else url / "v"
    _older(str(url))
    finished = kill_once_done(start_job(url, counter, kind), lambda: receipts(v_dir), wait_for)
    before, computed = identities(url), len(job.calls(str(counter)))
    with dask.config.set(scheduler="threads", num_workers=2):
        if kind == "tree":
            zarr_dask.to_zarr_datatree(job.tree(str(counter)), str(url), mode="w", encoding=TREE_ENCODING, resume=True)
        else:
            zarr_dask.to_zarr_dataset(job.dataset(str(counter)), str(url), mode="w", encoding=ENCODING, resume=True)
    again = job.calls(str(counter))[computed:]
    assert not set(again) & finished  # finished blocks were not recomputed
    assert set(again) >= set(range(12)) - finished
    after = identities(url)
    prefix = str(v_dir.relative_to(url))
    assert all(after[f"{prefix}/c/{i}/0"] == before[f"{prefix}/c/{i}/0"] for i in finished)  # nor rewritten
    clean, count = tmp_path / "clean.zarr", str(tmp_path / "clean-count")
    if kind == "tree":
        zarr_dask.to_zarr_datatree(job.tree(count), str(clean), encoding=TREE_ENCODING)
    else:
        zarr_dask.to_zarr_dataset(job.dataset(count), str(clean), encoding=ENCODING)
    assert files(url) == files(clean)


def test_client_process_killed_then_dataset_resumed(tmp_path: Path) -> None:
    _kill_client_and_resume(tmp_path, "dataset", wait_for=4)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["dataset", "tree"])
@pytest.mark.parametrize("seed", range(4))
def test_client_process_killed_at_random_points(tmp_path: Path, kind: str, seed: int) -> None:
    _kill_client_and_resume(tmp_path, kind, wait_for=random.Random(seed).randint(1, 10))


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(4, 12))
def test_dataset_killed_at_random_points(tmp_path: Path, seed: int) -> None:
    test_dataset_overwrite_killed_then_resumed(tmp_path, seed)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(2, 10))
def test_datatree_killed_at_random_points(tmp_path: Path, seed: int) -> None:
    test_datatree_killed_then_resumed(tmp_path, seed)


def test_a_resume_that_finds_only_other_runs_says_it_starts_over(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Another computation than the killed run's (another dask name) makes another run: the resume finds only other runs' journals and
    says at INFO that it starts from the beginning, and how to name a run (issue 40: it said nothing, even at
    INFO; another encoding is the same run with another plan, said since before)."""
    url = tmp_path / "o.zarr"
    v = _flaky("options", 6)
    with dask.config.set(scheduler="sync"), pytest.raises(Dies):
        zarr_dask.to_zarr_dataset(job.dataset("", v), str(url), mode="w", encoding=ENCODING, resume=True)
    with dask.config.set(scheduler="sync"), caplog.at_level("INFO", logger="zarr_dask"):
        other = _flaky("options-again", 0)  # the same values, another computation: another dask name
        zarr_dask.to_zarr_dataset(job.dataset("", other), str(url), mode="w", encoding=ENCODING, resume=True)
    said = [r.getMessage() for r in caplog.records if "only of other run(s)" in r.getMessage()]
    assert len(said) == 1 and url.name in said[0] and "starts from the beginning" in said[0]
    assert "resume='<name>'" in said[0]
    assert files(url) == files(_clean_dataset(tmp_path))
