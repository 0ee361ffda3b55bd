"""Notebook HTML of arrays, groups and ZOM specs; option parsing; the copy planner's memory model (the
docstring examples run in tests/test_docstrings.py)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import zarr_dask
from tests.cli._helpers import make_hierarchy
from zarr_dask._convert.options import parse_compressor, parse_dim_sizes, parse_size
from zarr_dask._convert.plan import Layout, plan_copy, task_memory
from zarr_dask.core.html import array_html, group_html, spec_html
from zarr_dask.errors import MetadataError, WritePlanError


def _well_formed(html: str) -> ET.Element:
    return ET.fromstring(f"<root>{html}</root>")


def test_group_html_is_a_tree(memory_url: str) -> None:
    make_hierarchy(memory_url, 3, sharded=True)
    group = zarr_dask.open_group(memory_url)
    html = group._repr_html_()
    root = _well_formed(html)
    items = [" ".join("".join(li.itertext()).split()) for li in root.iter("li")]
    assert any(i.startswith("📄 t2m (time, lat, lon) (24, 12, 20) float32 chunks (4, 6, 10) shards (12, 12, 20)") for i in items)
    assert any(i.startswith("📁 surface") and "sst" in i for i in items)
    assert "Zarr v3" in html and "Conventions" in html and memory_url in html


def test_array_and_spec_html(memory_url: str) -> None:
    a = zarr_dask.create_array(memory_url, shape=(100, 80), dtype="f4", chunks=(10, 20), shards=(50, 80),
                               dimension_names=["y", "x"], attributes={"units": "<K>"})  # fmt: skip
    root = _well_formed(array_html(a))
    text = " ".join(root.itertext())
    assert "(50, 80) (20 chunks per shard, 15.6 KiB each, 2 shards in all)" in text and "<K>" in text and "sharding_indexed(bytes, zstd)" in text
    lines = root.findall(".//line")
    assert len(lines) == 1 + 9 + 3  # one shard boundary; inner chunk lines 9 across rows and 3 across columns
    spec = zarr_dask.zom.from_store(memory_url)
    assert "zarr_dask.zom.ArraySpec" in spec_html(spec)
    group = zarr_dask.zom.GroupSpec(members={"a": spec, "g": zarr_dask.zom.GroupSpec(members=None)})
    html = spec_html(group)
    _well_formed(html)
    assert "zarr_dask.zom.GroupSpec" in html and "(members not read)" in html
    # the notebook hooks show the same
    assert a._repr_html_() == array_html(a)
    assert spec._repr_html_() == spec_html(spec) and group._repr_html_() == html


def test_array_html_says_chunks_per_shard_and_draws_every_dimension() -> None:
    a = zarr_dask.create_array(zarr_dask.MemoryStore(), shape=(240, 360, 720), dtype="f4", chunks=(24, 36, 36),
                               shards=(120, 180, 180), dimension_names=["time", "lat", "lon"])  # fmt: skip
    root = _well_formed(array_html(a))
    text = " ".join(root.itertext())
    assert "(120, 180, 180) (125 chunks per shard, 14.8 MiB each, 16 shards in all)" in text
    assert "of 125" not in text
    labels = [t.text for t in root.iter("text")]
    assert labels == ["time: 240", "lat: 360 × lon: 720"]  # the leading dimension too, not only the last two
    bar = root.findall(".//g")[0]
    assert len([ln for ln in bar.iter("line") if ln.get("stroke") == "#246"]) == 1  # the shard boundary in time
    anonymous = zarr_dask.create_array(zarr_dask.MemoryStore(), shape=(4, 5, 6, 7), dtype="i1", chunks=(2, 5, 6, 7))
    assert [t.text for t in _well_formed(array_html(anonymous)).iter("text")] == ["dim 0: 4", "dim 1: 5", "dim 2: 6 × dim 3: 7"]


@pytest.mark.parametrize("shape", [(), (0,), (5,), (3, 0, 2), (10**6, 10**6)])
def test_html_of_odd_shapes(shape: tuple[int, ...]) -> None:
    a = zarr_dask.create_array(zarr_dask.MemoryStore(), shape=shape, dtype="i2", chunks=tuple(max(1, min(n, 1000)) for n in shape))
    _well_formed(array_html(a))
    _well_formed(group_html(zarr_dask.create_group(zarr_dask.MemoryStore())))


def test_option_parsing() -> None:
    assert parse_size("1.5GiB") == 3 * 2**29 and parse_size("10kb") == 10_000
    assert parse_dim_sizes({"time": "24", 0: -1}) == {"time": 24, 0: -1}
    assert parse_compressor("gzip") == [{"id": "gzip"}] and parse_compressor('{"id": "zlib"}') == [{"id": "zlib"}]
    for bad, func in [("2 parsecs", parse_size), (0, parse_size), ("time=0", parse_dim_sizes), ("time=x", parse_dim_sizes),
                      ("=3", parse_dim_sizes), ("zstd:fast", parse_compressor), ("{oops", parse_compressor)]:  # fmt: skip
        with pytest.raises(MetadataError):
            func(bad)


def test_planner_refusals_name_the_numbers() -> None:
    big = Layout(unit=(1000, 1000), chunk=(100, 100))
    small = Layout(unit=(100, 100), chunk=(100, 100))
    with pytest.raises(WritePlanError, match=r"one target unit \(shard or chunk\) \(1000, 1000\) needs about 15\.3 MiB .* "
                       r"leaves 4\.0 MiB per task; raise --max-memory to at least 30\.7 MiB"):  # fmt: skip
        plan_copy((4000, 4000), 4, small, big, max_memory=8 * 2**20, threads=2)
    assert plan_copy((4000, 4000), 4, small, big, max_memory=31 * 2**20, threads=2).stages  # the advice works


@settings(deadline=None, max_examples=200)
@given(
    shape=st.lists(st.integers(1, 5000), min_size=1, max_size=3),
    data=st.data(),
    budget=st.integers(2**16, 2**28),
    threads=st.integers(1, 4),
)
def test_plans_respect_the_budget(shape: list[int], data: st.DataObject, budget: int, threads: int) -> None:
    src = tuple(data.draw(st.integers(1, n)) for n in shape)
    dst = tuple(data.draw(st.integers(1, n)) for n in shape)
    try:
        plan = plan_copy(shape, 4, Layout(unit=src, chunk=src), Layout(unit=dst, chunk=dst), max_memory=budget, threads=threads)
    except WritePlanError:
        least = tuple(map(min, src, dst))
        one_unit = task_memory(dst, Layout(unit=least, chunk=least), Layout(unit=dst, chunk=dst), 4, budget // threads)[0]
        one_chunk = task_memory(src, Layout(unit=src, chunk=src), Layout(unit=src, chunk=src), 4, budget // threads)[0]
        box = tuple(min(d, n) for d, n in zip(dst, shape))  # one target unit read straight from the source
        unit_direct = task_memory(box, Layout(unit=src, chunk=src), Layout(unit=dst, chunk=dst), 4, budget // threads)[0]
        assert one_unit > budget // threads or one_chunk > budget // threads or unit_direct > budget // threads
        return
    assert plan.task_budget == budget // threads
    for stage in plan.stages:
        assert stage.memory <= budget // threads
        # boxes are whole target units (or the whole dimension)
        assert all(b % u == 0 or b == n for b, u, n in zip(stage.box, stage.target.unit, shape))
    assert plan.stages[-1].target.unit == dst and plan.stages[0].source.chunk == src
    if plan.staged:
        mid = plan.intermediate
        assert mid is not None and all(min(s, d) <= m <= max(s, d, 1) for s, d, m in zip(src, dst, mid))


def test_box_counts_follow_the_target_grid(memory_url: str) -> None:
    values = np.arange(7 * 9, dtype="i2").reshape(7, 9)
    zarr_dask.create_array(memory_url + "/s", shape=(7, 9), dtype="i2", chunks=(1, 9))[:] = values
    # 200 bytes per task: a box of one target chunk (2, 9) fits, two do not
    report = zarr_dask.convert(memory_url + "/s", memory_url + "/d", chunks=(2, 9), max_memory=200, threads=1,
                               scheduler="synchronous")  # fmt: skip
    (p,) = report.arrays[0].passes
    assert p.box == (2, 9) and p.tasks == 4 and p.memory <= 200
    assert p.write_plan is not None and (p.write_plan.tasks, p.write_plan.keys, p.write_plan.aligned) == (4, 4, True)
    assert report.stats["tasks"] == 4 and report.stats["read_requests"] == 7
    np.testing.assert_array_equal(zarr_dask.open_array(memory_url + "/d")[:], values)


def test_grids_that_no_intermediate_helps_are_copied_by_target_units() -> None:
    """Found by hypothesis: source chunks of 684 and target chunks of 683 over 688 elements, 16,416 bytes per
    task. A box covering whole source chunks (688) needs 4 bytes too many and no intermediate grid helps,
    but a box of one target unit fits."""
    src, dst = Layout(unit=(684,), chunk=(684,)), Layout(unit=(683,), chunk=(683,))
    plan = plan_copy((688,), 4, src, dst, max_memory=65664, threads=4)
    (stage,) = plan.stages
    assert stage.box == (683,) and stage.memory <= 65664 // 4 and not plan.staged


def test_fill_value_attribute_shows_decoded_not_base64(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    import xarray as xr

    from zarr_dask.cli import main

    store = str(tmp_path / "fill.zarr")
    ds = xr.Dataset({"t": ("x", np.array([1.0, np.nan], "f4")), "m": ("x", np.array([1.0, 2.0], "f8"))})
    ds.t.encoding["_FillValue"] = np.float32(-9999.0)
    zarr_dask.to_zarr_dataset(ds, store)
    t, m = zarr_dask.open_array(store, path="t"), zarr_dask.open_array(store, path="m")
    assert t.attrs["_FillValue"] == "AAAAAICHw8A="  # stored as xarray stores it
    assert "_FillValue&quot;: -9999.0" in array_html(t) and "AAAAAICHw8A=" not in array_html(t)
    assert "_FillValue&quot;: &quot;NaN&quot;" in array_html(m)  # xarray's default float fill
    assert main(["info", store, "--path", "t"]) == 0
    text = capsys.readouterr().out
    assert '"_FillValue": -9999.0' in text and "AAAAAICHw8A=" not in text
