"""``zarr-dask convert``: format changes with rechunk and reshard checked equal to the source (the real
command and the Python API), staged copies, selection, modes, dry runs, request counts, refusals."""

from __future__ import annotations

import json
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import zarr_dask
from tests.cli._helpers import assert_same_data, assert_same_datasets, chunk_files, make_hierarchy, run
from zarr_dask.cli import main
from zarr_dask.errors import NodeExistsError, WritePlanError
from zarr_dask.zom import HierarchyConflictError


def test_v2_to_v3_rechunk_reshard_command(tmp_path: Path) -> None:
    src, dst = str(tmp_path / "v2.zarr"), str(tmp_path / "v3.zarr")
    expected = make_hierarchy(src, 2)
    zarr_dask.consolidate_metadata(src)
    out = run("convert", src, dst, "--zarr-format", "3", "--chunks", "time=24,lat=3,lon=5", "--shards", "lat=12,lon=20",
              "--compressor", "zstd:5").stdout  # fmt: skip
    assert out.startswith("converted 5 array(s) and 3 group(s)") and "requests" in out
    assert_same_data(dst, expected)
    assert_same_datasets(src, dst)
    root = zarr_dask.open_group(dst, mode="r")
    assert root.zarr_format == 3 and root.attrs.asdict() == {"title": "cli test", "Conventions": "CF-1.8"}
    assert root.consolidated_metadata is not None  # written at the end
    t2m, sst = root["t2m"], root["surface/sst"]
    assert isinstance(t2m, zarr_dask.Array) and isinstance(sst, zarr_dask.Array)
    assert (t2m.chunks, t2m.shards, t2m.dimension_names) == ((24, 3, 5), (24, 12, 20), ("time", "lat", "lon"))
    assert t2m.codecs[0]["configuration"]["codecs"][1] == {"name": "zstd", "configuration": {"level": 5, "checksum": False}}
    assert sst.attrs["_FillValue"] == -999 and "_ARRAY_DIMENSIONS" not in sst.attrs  # xarray's v3 masking
    lat = root["lat"]
    assert isinstance(lat, zarr_dask.Array) and lat.chunks == (10,) and lat.shards is None  # a dimension coordinate
    assert root["surface/meta"].attrs.asdict() == {"note": "empty"}  # type: ignore[union-attr]


def test_v3_sharded_to_v2_command(tmp_path: Path) -> None:
    src, mid, dst = str(tmp_path / "src.zarr"), str(tmp_path / "v3.zarr"), str(tmp_path / "v2.zarr")
    expected = make_hierarchy(src, 2)
    # v2 -> sharded v3: the v2 fill values become xarray's v3 _FillValue attributes
    zarr_dask.convert(src, mid, zarr_format=3, shards="time=24,lat=12", scheduler="synchronous")
    assert zarr_dask.open_array(mid, path="surface/sst").shards == (24, 12, 20)
    run("convert", mid, dst, "--zarr-format", "2", "--chunks", "time=6", "--compressor", "blosc:zstd:3")
    assert_same_data(dst, expected)
    assert_same_datasets(src, dst)
    assert_same_datasets(mid, dst)
    sst = zarr_dask.open_array(dst, path="surface/sst")
    assert sst.zarr_format == 2 and sst.chunks == (6, 12, 20) and sst.fill_value == -999 and "_FillValue" not in sst.attrs
    assert sst.metadata.compressor["cname"] == "zstd"  # type: ignore[union-attr]


def test_reshard_v3_to_v3_api(memory_url: str) -> None:
    expected = make_hierarchy(memory_url + "/src", 3, sharded=True)
    report = zarr_dask.convert(memory_url + "/src", memory_url + "/dst", chunks="time=2", shards="time=8,lat=6",
                               scheduler="synchronous")  # fmt: skip
    assert_same_data(memory_url + "/dst", expected)
    t2m = zarr_dask.open_array(memory_url + "/dst", path="t2m")
    assert (t2m.chunks, t2m.shards) == ((2, 6, 10), (8, 6, 20))
    sst = zarr_dask.open_array(memory_url + "/dst", path="surface/sst")
    assert (sst.chunks, sst.shards) == ((2, 6, 20), (8, 6, 20))  # kept chunks shrink to divide the shards
    assert report.stats["nbytes"] == sum(v.nbytes for v in expected.values())
    # bytes and requests are counted in the tasks: the bytes written are the stored chunk bytes
    stored = zarr_dask.open_store(memory_url + "/dst").list_prefix_sizes("")
    chunk_bytes = sum(n for k, n in stored.items() if not k.endswith("zarr.json"))
    assert report.stats["bytes_written"] == chunk_bytes
    assert report.stats["write_requests"] == sum(1 for k in stored if not k.endswith("zarr.json"))


def test_staged_copy_in_bounded_memory(memory_url: str) -> None:
    src = zarr_dask.create_array(memory_url + "/src", shape=(96, 40, 40), dtype="f4", chunks=(1, 40, 40),
                                 dimension_names=["time", "y", "x"])  # fmt: skip
    values = np.random.default_rng(3).random((96, 40, 40)).astype("f4")
    src[:] = values
    report = zarr_dask.convert(memory_url + "/src", memory_url + "/dst", chunks="time=96,y=4,x=4", max_memory="240KiB",
                               threads=2, scheduler="threads")  # fmt: skip
    (array,) = report.arrays
    assert array.plan.staged and array.plan.intermediate is not None and len(array.passes) == 2
    assert all(s.memory <= 120 * 1024 for s in array.plan.stages)
    assert array.passes[0].target.startswith("__zarr_dask_staging__")
    np.testing.assert_array_equal(zarr_dask.open_array(memory_url + "/dst")[:], values)
    assert not [k for k in zarr_dask.open_store(memory_url + "/dst").list_prefix("") if "staging" in k]  # cleaned up


@pytest.mark.parametrize(
    ("src_chunks", "src_shards", "chunks", "shards", "fmt"),
    [
        ((1, 30, 40), None, (60, 3, 4), None, 2),
        ((1, 30, 40), None, (60, 3, 4), (60, 6, 8), 3),
        ((60, 1, 1), None, (1, 30, 40), None, 3),
        ((1, 30, 40), (20, 30, 40), (60, 3, 4), None, 3),  # a sharded source: shards read partially
    ],
)
def test_staged_layouts_equal_the_source(
    src_chunks: tuple[int, ...], src_shards: Any, chunks: tuple[int, ...], shards: Any, fmt: int
) -> None:
    store = zarr_dask.MemoryStore()
    values = np.random.default_rng(5).random((60, 30, 40)).astype("f4")
    zarr_dask.create_array(store, path="s", shape=values.shape, dtype="f4", chunks=src_chunks, shards=src_shards,
                           zarr_format=fmt)[:] = values  # fmt: skip
    report = zarr_dask.convert(store, store, source_path="s", destination_path="d", zarr_format=3, chunks=chunks,
                               shards=shards, max_memory="200KiB", threads=2)  # fmt: skip
    assert report.arrays[0].plan.staged
    np.testing.assert_array_equal(zarr_dask.open_array(store, path="d")[:], values)
    assert not [k for k in store.list_prefix("") if "staging" in k]


def test_refuses_when_one_unit_cannot_fit(memory_url: str) -> None:
    zarr_dask.create_array(memory_url + "/src", shape=(64, 64), dtype="f8", chunks=(8, 8))
    with pytest.raises(WritePlanError, match=r"one target unit .* needs about .* --max-memory 64.0 KiB .* raise --max-memory"):
        zarr_dask.convert(memory_url + "/src", memory_url + "/dst", shards="0=64,1=64", max_memory="64KiB", threads=1)
    assert zarr_dask.open_store(memory_url + "/dst").list_prefix("") == []  # nothing written


def test_include_exclude(tmp_path: Path) -> None:
    src = str(tmp_path / "src.zarr")
    make_hierarchy(src, 3)
    zarr_dask.convert(src, str(tmp_path / "a.zarr"), include=["surface"], exclude=["*/meta"], scheduler="synchronous")
    a = zarr_dask.open_group(str(tmp_path / "a.zarr"), mode="r")
    assert sorted(p for p, _ in a.members(max_depth=None)) == ["surface", "surface/sst"]
    zarr_dask.convert(src, str(tmp_path / "b.zarr"), exclude=["t2m", "surface"], scheduler="synchronous")
    assert zarr_dask.open_group(str(tmp_path / "b.zarr"), mode="r").keys() == ["lat", "lon", "time"]


def test_dry_run_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src, dst = str(tmp_path / "src.zarr"), tmp_path / "dst.zarr"
    make_hierarchy(src, 2)
    proc = run("convert", src, str(dst), "--zarr-format", "3", "--chunks", "time=24", "--dry-run")
    assert not dst.exists()
    assert "WritePlan" in proc.stdout and "writer tasks" in proc.stdout and "read-modify-writes        0" in proc.stdout
    assert "/surface/sst  (24, 12, 20) int16" in proc.stdout and proc.stdout.rstrip().endswith("copy task(s) would run")
    assert main(["convert", src, str(dst), "--dry-run", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert not dst.exists() and doc["dry_run"] is True and {a["path"] for a in doc["arrays"]} == {"time", "lat", "lon", "t2m", "surface/sst"}


def test_modes(tmp_path: Path) -> None:
    src, dst = str(tmp_path / "src.zarr"), str(tmp_path / "dst.zarr")
    expected = make_hierarchy(src, 2)
    zarr_dask.convert(src, dst, zarr_format=3, scheduler="synchronous")
    with pytest.raises(NodeExistsError, match="not empty.*--overwrite.*--resume"):
        zarr_dask.convert(src, dst, zarr_format=3)
    again = zarr_dask.convert(src, dst, zarr_format=3, mode="resume")  # all done: nothing copied
    assert again.stats["tasks"] == 0 and sum(p.tasks for a in again.arrays for p in a.passes) > 0
    with pytest.raises(HierarchyConflictError):  # other options than the interrupted run: refused, nothing written
        zarr_dask.convert(src, dst, zarr_format=3, chunks="time=3", mode="resume")
    before = {p.relative_to(dst) for p in chunk_files(Path(dst))}
    zarr_dask.convert(src, dst, zarr_format=3, chunks="time=3", mode="w")
    after = {p.relative_to(dst) for p in chunk_files(Path(dst))}
    assert Path("t2m/c/7/0/0") in after and Path("surface/sst/c/23/0/0") in before - after  # old chunks deleted
    assert_same_data(dst, expected)
    assert zarr_dask.open_array(dst, path="t2m").chunks == (3, 6, 10)


def test_refuses_overlapping_source_and_destination(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = str(tmp_path / "a.zarr")
    zarr_dask.create_array(src, path="x", shape=(4,), dtype="i1")[:] = 1
    uri = (tmp_path / "a.zarr").as_uri()
    for args in ([src, src, "--overwrite"], [src, src, "--dst-path", "copy"], [src, uri, "--path", "x", "--dst-path", "x"]):
        assert main(["convert", *args]) == 1
        assert "overlaps the source" in capsys.readouterr().err, args
    assert (zarr_dask.open_array(src, path="x")[:] == 1).all()  # untouched


def test_single_array_and_paths(memory_url: str) -> None:
    group = zarr_dask.create_group(memory_url + "/src")
    a = group.create_array("deep/a", shape=(7, 9), dtype="u2", chunks=(2, 2), fill_value=3)
    a[:5] = np.arange(45, dtype="u2").reshape(5, 9)
    zarr_dask.convert(memory_url + "/src", memory_url + "/dst", source_path="deep/a", destination_path="x/y",
                      chunks=(7, 9), scheduler="synchronous")  # fmt: skip
    out = zarr_dask.open_array(memory_url + "/dst", path="x/y")
    np.testing.assert_array_equal(out[:], a[:])
    assert out.chunks == (7, 9) and out.fill_value == 3


@st.composite
def copy_cases(draw: Any) -> dict[str, Any]:
    ndim = draw(st.integers(1, 3))
    shape = tuple(draw(st.integers(0 if ndim == 1 else 1, 24)) for _ in range(ndim))
    src_chunks = tuple(draw(st.integers(1, 24)) for _ in range(ndim))
    chunks = tuple(draw(st.integers(1, 8)) for _ in range(ndim))
    shards = tuple(c * draw(st.integers(1, 3)) for c in chunks) if draw(st.booleans()) else None
    return {"shape": shape, "src_chunks": src_chunks, "chunks": chunks, "shards": shards,
            "src_format": draw(st.sampled_from([2, 3])), "budget": max(256, int(4 * np.prod(shape) * draw(st.sampled_from([0.1, 0.3, 0.6, 4.0])))),
            "threads": draw(st.integers(1, 2)), "seed": draw(st.integers(0, 1000))}  # fmt: skip


@settings(deadline=None, max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(case=copy_cases())
def test_any_rechunk_equals_the_source(case: dict[str, Any]) -> None:
    store = zarr_dask.MemoryStore()
    values = np.random.default_rng(case["seed"]).integers(0, 5, case["shape"]).astype("i4")
    src = zarr_dask.create_array(store, path="src", shape=case["shape"], dtype="i4", chunks=case["src_chunks"],
                                 zarr_format=case["src_format"], fill_value=0)  # fmt: skip
    src[...] = values
    chunks = dict(enumerate(case["chunks"]))
    shards = dict(enumerate(case["shards"])) if case["shards"] else None
    try:
        report = zarr_dask.convert(store, store, source_path="src", destination_path="dst", zarr_format=3, chunks=chunks,
                                   shards=shards, max_memory=case["budget"], threads=case["threads"], scheduler="threads")  # fmt: skip
    except WritePlanError as e:
        assert "raise --max-memory" in str(e)
        event("refused: over budget")
        return
    event("staged" if any(a.plan.staged for a in report.arrays) else "direct")
    np.testing.assert_array_equal(zarr_dask.open_array(store, path="dst")[...], values)
    for a in report.arrays:
        assert all(p.memory <= case["budget"] // case["threads"] for p in a.passes)
        wp = a.passes[-1].write_plan
        assert wp is None or (wp.aligned and wp.read_modify_writes == 0 and wp.tasks == a.passes[-1].tasks)


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize(
    ("dtype", "values", "src_format"),
    [
        (str, np.array(["a", "bb", "ccc", "", "eeeee"], dtype=object), 2),
        (bytes, np.array([b"x", b"yy", b"", b"z", b"\x00"], dtype=object), 3),
        ("U4", np.array(["ab", "cd", "ef", "", "g"]), 2),
        ("M8[s]", np.array(["2000-01-01", "NaT", "2001-01-01", "NaT", "1970-01-01"], dtype="M8[s]"), 2),
        (">f8", np.arange(5.0), 2),
        ("c8", np.arange(5) * (1 + 2j), 3),
        ("?", np.array([True, False, True, True, False]), 3),
    ],
    ids=["vlen-str", "vlen-bytes", "fixed-str", "datetime", "big-endian", "complex", "bool"],
)
def test_data_types_both_ways(dtype: Any, values: Any, src_format: int, zarr_format: int) -> None:
    store = zarr_dask.MemoryStore()
    src = zarr_dask.create_array(store, path="s", shape=(5,), dtype=dtype, chunks=(2,), zarr_format=src_format)
    src[:] = values
    zarr_dask.convert(store, store, source_path="s", destination_path="d", zarr_format=zarr_format, chunks=(3,),
                      scheduler="synchronous")  # fmt: skip
    out = zarr_dask.open_array(store, path="d")
    assert out.zarr_format == zarr_format and out.chunks == (3,)
    np.testing.assert_array_equal(out[:], src[:])


def test_progress_bar_and_storage_options_for_urls_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = str(tmp_path / "a.zarr")
    zarr_dask.create_array(src, shape=(40, 40), dtype="i4", chunks=(10, 10))[:] = 7
    # --storage-options go to the memory:// destination only, not to the local source path
    dst = "memory://progress-" + tmp_path.name
    assert main(["convert", src, dst, "--progress", "--threads", "1", "--storage-options", "{}"]) == 0
    err = capsys.readouterr().err
    assert "Completed" in err and "100%" in err  # dask's progress bar on stderr
    assert (zarr_dask.open_array(dst)[:] == 7).all()


def test_distributed_needs_shared_storage(memory_url: str) -> None:
    class FakeClient:  # anything that is not a string is taken for a distributed.Client
        def scheduler_info(self) -> dict[str, Any]:
            return {"workers": {"w": {"nthreads": 2, "memory_limit": 2**30}}}

    store = zarr_dask.MemoryStore()
    zarr_dask.create_array(store, shape=(4,), dtype="i1")
    with pytest.raises(TypeError, match="lives in this process"):
        zarr_dask.convert(store, memory_url, scheduler=FakeClient())


def test_few_big_tasks_use_several_threads_each(memory_url: str) -> None:
    values = np.random.default_rng(9).random((48, 64, 64)).astype("f4")  # one source chunk per time step
    zarr_dask.create_array(memory_url + "/s", shape=values.shape, dtype="f4", chunks=(1, 64, 64))[:] = values
    report = zarr_dask.convert(memory_url + "/s", memory_url + "/d", chunks=(48, 8, 8), max_memory="64MiB", threads=2)
    (stage,) = report.arrays[0].plan.stages
    assert report.arrays[0].passes[0].tasks == 1 and stage.workers == 2  # one box: read and written by 2 threads
    assert stage.memory <= 32 * 2**20
    np.testing.assert_array_equal(zarr_dask.open_array(memory_url + "/d")[:], values)


@pytest.mark.parametrize("chunks", ["keep", (15, 50), {"0": 7}])
def test_rectilinear_grids(chunks: Any) -> None:
    store = zarr_dask.MemoryStore()
    values = np.arange(60 * 50, dtype="i4").reshape(60, 50)
    src = zarr_dask.create_array(store, path="s", shape=(60, 50), dtype="i4", chunks=((10, 20, 30), (25, 25)))
    src[:] = values
    zarr_dask.convert(store, store, source_path="s", destination_path="d", chunks=chunks, max_memory=20_000, threads=1)
    out = zarr_dask.open_array(store, path="d")
    np.testing.assert_array_equal(out[:], values)
    if chunks == "keep":
        assert out.write_chunk_sizes == ((10, 20, 30), (25, 25))  # the rectilinear grid is kept
    else:
        assert out.chunks == ((15, 50) if isinstance(chunks, tuple) else (7, 25))


@pytest.mark.parametrize("tune", [False, True])
def test_malloc_is_tuned_only_when_asked(tmp_path: Path, tune: bool) -> None:
    """glibc's mmap threshold is process-wide and lasting: a library call must leave the user's process alone;
    the command (tune_malloc=True) sets it. In a fresh process, so other tests cannot have set it."""
    code = (
        "import sys, numpy as np, zarr_dask\n"
        "from zarr_dask._convert import tasks\n"
        "a = zarr_dask.create_array(sys.argv[1] + '/s', shape=(64, 64), dtype='f4', chunks=(8, 8))\n"
        "a[...] = np.ones((64, 64), 'f4')\n"
        "zarr_dask.convert(sys.argv[1] + '/s', sys.argv[1] + '/d', chunks=(32, 32), threads=1,"
        " scheduler='synchronous', tune_malloc=sys.argv[2] == 'True')\n"
        "print(tasks._TUNED)\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path), str(tune)], capture_output=True, text=True,
                         check=True)  # fmt: skip
    assert out.stdout.strip() == str(tune and platform.libc_ver()[0] == "glibc")
