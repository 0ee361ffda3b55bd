"""Whole-hierarchy metadata I/O on a store with 20 ms per request (issue 6, ZEP 6 object model).

Workloads, on fsspec's memory filesystem behind :mod:`zarr_dask.testing.latency` (every request waits
ZD_BENCH_LATENCY seconds, default 0.02; batched requests overlap as on S3):

* create a 1,001-node hierarchy (40 groups x 24 arrays, v3): ``GroupSpec.to_store`` vs zarr-python's
  ``create_hierarchy`` (concurrent, zarr >= 3.1) -- and, on a 101-node tree (they are slow), node-by-node
  creation with zarr_dask's ``create_group``/``create_array`` and pydantic-zarr's ``GroupSpec.to_zarr`` (when
  installed: .venv-oracle);
* read it back: ``GroupSpec.from_store`` without and with consolidated metadata vs zarr-python's
  ``Group.members(max_depth=None)`` and pydantic-zarr's ``GroupSpec.from_zarr``.

Prints medians of ZD_BENCH_REPEAT rounds (default 3, contenders interleaved), ratios to ours, and the request
counts of ours (exactly one write per document).

Target: create 1,001 nodes in a few seconds (a handful of round trips, not thousands).

    python benchmarks/bench_zom.py
"""

from __future__ import annotations

import itertools
import os
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fsspec

sys.path.insert(0, str(Path(__file__).parent))
from _common import Table, race  # noqa: E402

import zarr_dask  # noqa: E402
from zarr_dask.testing.latency import LatencyFileSystem, latency_store  # noqa: E402
from zarr_dask.zom import ArraySpec, GroupSpec  # noqa: E402

LATENCY = float(os.environ.get("ZD_BENCH_LATENCY", "0.02"))
REPEAT = int(os.environ.get("ZD_BENCH_REPEAT", "3"))
_ids = itertools.count()


def wide_tree(groups: int, arrays: int) -> GroupSpec:
    array = ArraySpec.build(shape=(1000, 1000), dtype="f4", chunks=(100, 100), dimension_names=["y", "x"])
    return GroupSpec(
        attributes={"title": "bench"},
        members={
            f"g{i}": GroupSpec(attributes={"i": i}, members={f"a{j}": array.replace(attributes={"j": j}) for j in range(arrays)})
            for i in range(groups)
        },
    )


def fresh_url() -> str:
    return f"memory://zom-bench-{next(_ids)}"


def zarr_python_store(url: str) -> Any:
    import zarr

    fs = LatencyFileSystem(fsspec.filesystem("memory"), seconds=LATENCY, asynchronous=True)
    return zarr.storage.FsspecStore(fs, path="/" + url.removeprefix("memory://"))  # memory paths are absolute


def zarr_python_nodes(spec: GroupSpec) -> dict[str, Any]:
    from zarr.core.group import GroupMetadata
    from zarr.core.metadata import ArrayV3Metadata

    nodes: dict[str, Any] = {}
    for path, node in spec.to_flat().items():
        doc = node.to_json()
        if isinstance(node, GroupSpec):
            nodes[path.lstrip("/")] = GroupMetadata(attributes=doc["attributes"], zarr_format=3)
        else:
            nodes[path.lstrip("/")] = ArrayV3Metadata.from_dict(doc)
    return nodes


def node_by_node(spec: GroupSpec, url: str) -> None:
    store = latency_store(url, seconds=LATENCY)
    zarr_dask.create_group(store, attributes=spec.attributes)
    for path, node in spec.to_flat().items():
        if not path:
            continue
        if isinstance(node, GroupSpec):
            zarr_dask.create_group(store, path=path.lstrip("/"), attributes=node.attributes)
        else:
            zarr_dask.create_array(store, path=path.lstrip("/"), shape=node.shape, dtype=node.dtype,
                                   chunks=node.chunk_grid.chunk_shape, dimension_names=node.dimension_names,
                                   attributes=node.attributes)  # fmt: skip


def create_contenders(spec: GroupSpec, small: bool) -> dict[str, Callable[[str], Any]]:
    """Writers of ``spec`` to a fresh ``memory://`` URL (each behind the latency filesystem)."""
    contenders: dict[str, Callable[[str], Any]] = {
        "zarr_dask to_store": lambda url: spec.to_store(latency_store(url, seconds=LATENCY))
    }
    try:
        import zarr

        if hasattr(zarr, "create_hierarchy"):
            nodes = zarr_python_nodes(spec)
            contenders["zarr-python create_hierarchy"] = lambda url: list(
                zarr.create_hierarchy(store=zarr_python_store(url), nodes=nodes)
            )
    except ImportError:
        pass
    if small:
        contenders["zarr_dask node by node"] = lambda url: node_by_node(spec, url)
        try:
            import pydantic_zarr.v3 as pz

            model = pz.GroupSpec.model_validate(spec.to_json())
            contenders["pydantic-zarr to_zarr"] = lambda url: model.to_zarr(zarr_python_store(url), path="")
        except ImportError:
            pass
    for name, write in contenders.items():  # every contender must build the same hierarchy
        url = fresh_url()
        write(url)
        assert GroupSpec.from_store(latency_store(url, seconds=0)) == spec, f"{name} wrote another hierarchy"
    return contenders


def read_contenders(spec: GroupSpec) -> tuple[dict[str, Callable[[], Any]], str, str]:
    plain, consolidated = fresh_url(), fresh_url()
    spec.to_store(latency_store(plain, seconds=0))
    spec.to_store(latency_store(consolidated, seconds=0), consolidated=True)
    contenders: dict[str, Callable[[], Any]] = {
        "zarr_dask from_store": lambda: GroupSpec.from_store(latency_store(plain, seconds=LATENCY)),
        "zarr_dask consolidated": lambda: GroupSpec.from_store(latency_store(consolidated, seconds=LATENCY)),
    }
    try:
        import zarr

        def zarr_python_members() -> None:
            group = zarr.open_group(zarr_python_store(plain), mode="r", use_consolidated=False)
            found = group.members(max_depth=None)
            assert len(found) == len(spec.to_flat()) - 1, f"zarr-python found {len(found)} members"

        contenders["zarr-python members()"] = zarr_python_members
        import pydantic_zarr.v3 as pz

        def pydantic_from_zarr() -> None:
            model = pz.GroupSpec.from_zarr(zarr.open_group(zarr_python_store(plain), mode="r", use_consolidated=False))
            assert len(model.to_flat()) == len(spec.to_flat())

        contenders["pydantic-zarr from_zarr"] = pydantic_from_zarr
    except ImportError:
        pass
    return contenders, plain, consolidated


def request_counts(spec: GroupSpec) -> str:
    store = latency_store(fresh_url(), seconds=LATENCY)
    report = spec.to_store(store)
    counts = store.counters.snapshot()
    again = store.counters.snapshot()
    spec.to_store(store)
    rerun = {k: store.counters.snapshot()[k] - again[k] for k in ("get", "set")}
    return (f"{len(spec.to_flat())} nodes: {counts['set']} writes for {len(report.written)} documents, "
            f"{counts['get']} document probes (1 batch); re-run: {rerun['set']} writes")  # fmt: skip


def main() -> None:
    warnings.simplefilter("ignore")
    big, small = wide_tree(40, 24), wide_tree(4, 24)
    print(f"latency {LATENCY * 1000:.0f} ms per request, {REPEAT} rounds; {request_counts(big)}")
    table = Table("ZOM metadata I/O")
    for label, spec, is_small in (("create 1001 nodes", big, False), ("create 101 nodes", small, True)):
        writers = create_contenders(spec, is_small)
        times = race({name: (lambda w=w: w(fresh_url())) for name, w in writers.items()}, repeat=REPEAT)
        for name, t in times.items():
            table.add(label, name, t)
        for name in times:
            if name != "zarr_dask to_store":
                print(f"    {name}: {table.ratio(label, name, 'zarr_dask to_store'):.1f}x ours")
    contenders, _, _ = read_contenders(big)
    times = race(contenders, repeat=REPEAT)
    for name, t in times.items():
        table.add("read 1001 nodes", name, t)
    for name in times:
        if name != "zarr_dask from_store":
            print(f"    {name}: {table.ratio('read 1001 nodes', name, 'zarr_dask from_store'):.2f}x ours (listing)")
    fsspec.filesystem("memory").store.clear()


if __name__ == "__main__":
    main()
