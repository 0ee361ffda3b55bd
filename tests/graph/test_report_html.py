"""Notebook HTML of the write reports: ``WritePlan``, ``WriteLedger`` and ``DatasetWriteResult`` (the array
and group reprs' style and helpers, zarr_dask/core/html.py)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import dask.array as da
import numpy as np
import xarray as xr

import zarr_dask
from zarr_dask.graph.ledger import LedgerEntry, WriteLedger


def _cells(html: str) -> list[str]:
    root = ET.fromstring(f"<root>{html}</root>")  # well formed
    assert root.find(".//div[@class='zd-repr']") is not None  # the array and group reprs' style
    return [" ".join("".join(td.itertext()).split()) for td in root.iter() if td.tag in ("th", "td")]


def test_write_plan_html_shows_what_repr_shows() -> None:
    store = zarr_dask.MemoryStore()
    zarr_dask.create_array(store, path="t", shape=(10, 8), dtype="f4", chunks=(4, 8))
    plan = zarr_dask.explain_write(da.ones((6, 8), chunks=(3, 8), dtype="f4"), store, component="t",
                                   region=(slice(2, 8), slice(None)))  # fmt: skip
    html = plan._repr_html_()
    cells = _cells(html)
    assert "zarr_dask.WritePlan /t" in html and store.url in html
    pairs = dict(zip(cells[::2], cells[1::2]))
    assert pairs["action"] == "region" and pairs["region"] == "[2:8, 0:8]"
    assert pairs["storage keys (chunks)"] == "2 of shape (4, 8)"
    assert pairs["read-modify-writes"].startswith("1 e.g. t/c/0/0")  # rows 0-4 partly covered, 4-8 whole
    assert pairs["writer tasks"] in repr(plan)


def test_write_ledger_html_lists_the_journaled_writes() -> None:
    entries = (
        LedgerEntry(path="v", run="r1", region=((0, 24), (0, 40)), status="done", tasks=3, tasks_done=3),
        LedgerEntry(path="v", run="r2", region=((24, 48), (0, 40)), status="partial", tasks=3, tasks_done=1),
        LedgerEntry(path="v", run="r0", region=((24, 48), (0, 40)), status="superseded", tasks=3, tasks_done=2,
                    superseded_by="r3"),  # fmt: skip
    )
    ledger = WriteLedger(store="s3://bucket/fan.zarr", path="", entries=entries)
    html = ledger._repr_html_()
    cells = _cells(html)
    assert "zarr_dask.WriteLedger" in html and "s3://bucket/fan.zarr" in html
    assert cells[:4] == ["journaled writes", "1 done, 1 partial, 1 superseded", "complete",
                         "no: 1 unfinished (run them again with resume=True, or publish_ledger(..., force=True))"]  # fmt: skip
    assert ["/v", "[24:48, 0:40]", "partial", "1 of 3 tasks", ""] in [cells[i : i + 5] for i in range(len(cells))]
    assert ["/v", "[24:48, 0:40]", "superseded", "2 of 3 tasks", "by run r3"] in [cells[i : i + 5] for i in range(len(cells))]
    assert "/v [24:48, 0:40] superseded (2 of 3 tasks) by run r3" in repr(ledger)  # the text repr is unchanged
    done = WriteLedger(store="memory://x", path="", entries=entries[:1])
    assert "yes: ready to publish" in done._repr_html_()


def test_dataset_write_result_html_lists_variables_and_actions() -> None:
    ds = xr.Dataset({"t2m": (("time", "x"), np.zeros((2, 3), "f4"))}, coords={"x": [1, 2, 3]})
    result = zarr_dask.to_zarr_dataset(ds, zarr_dask.MemoryStore())
    html = result._repr_html_()
    cells = _cells(html)
    assert "zarr_dask.DatasetWriteResult" in html and result.store in html
    pairs = dict(zip(cells[:6:2], cells[1:6:2]))
    assert pairs["groups"] == "/" and pairs["variables"] == "2 create"
    assert pairs["metadata documents"] == str(len(result.metadata_keys))
    assert cells[6:] == ["variable", "action", "t2m", "create", "x", "create"]
