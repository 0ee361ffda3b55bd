"""Cloud reads through obstore vs fsspec: S3 (moto), GCS (fake-gcs-server) and Azure (Azurite), one run.

What decides ``remote_transport=auto`` for a cloud (``zarr_dask/store/obstore_reads.py``): the same reader,
``zarr_dask.from_zarr(url).compute()``, with the knob at ``obstore`` and at ``fsspec``, interleaved rounds
(``race``), on a ``ZD_BENCH_MIB`` MiB (default 64) float32 array in 1 MiB chunks and in 16 MiB shards of 1 MiB
inner chunks (the data and codecs of ``bench_remote.py``).

* ``s3``: moto in its own process behind ``bench_remote``'s gate, which adds ``ZD_BENCH_LATENCY`` (default
  0.02 s) to every request and counts requests and the most in flight.
* ``gcs`` / ``azure``: the emulators of the tests (``tests/emulators.py``) as they are, without added latency
  and without request counts (the tests compare request counts of the two transports there).

A transport obstore cannot serve on a store is reported as skipped with the reason.

    ZD_BENCH_REPEAT=3 python benchmarks/bench_cloud_reads.py            # every cloud (~2-4 minutes)
    ZD_BENCH_ONLY=s3 python benchmarks/bench_cloud_reads.py             # some: s3, gcs, azure
"""

from __future__ import annotations

import contextlib
import os
import statistics
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import dask
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(ROOT))
os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")  # gcsfs stalls 60 s per call otherwise
os.environ.setdefault("ZD_BENCH_MIB", "64")

import bench_remote as br  # noqa: E402
from _common import Table, race  # noqa: E402

import zarr_dask  # noqa: E402

REPEAT = int(os.environ.get("ZD_BENCH_REPEAT", "3"))
ONLY = {w for w in os.environ.get("ZD_BENCH_ONLY", "").split(",") if w}
TRANSPORTS = ("obstore", "fsspec")


@contextlib.contextmanager
def cloud(kind: str) -> Iterator[tuple[str, dict[str, Any], Callable[[], dict[str, int]] | None]]:
    """``(url of a fresh bucket, storage_options, stats or None)`` of one cloud, its server stopped after."""
    bucket = f"zd-bench-{uuid.uuid4().hex[:8]}"
    if kind == "s3":
        import s3fs

        with br.child_server(br._serve_s3, br.LATENCY) as endpoint:
            options = {"key": "bench", "secret": "bench", "client_kwargs": {"endpoint_url": endpoint,
                       "region_name": "us-east-1"}, "use_listings_cache": False}  # fmt: skip
            s3fs.S3FileSystem(**options).call_s3("create_bucket", Bucket=bucket)
            yield f"s3://{bucket}", options, lambda: br.take_stats(endpoint)
    elif kind == "gcs":
        import gcsfs

        from tests.emulators import fake_gcs_server

        with fake_gcs_server() as endpoint:
            options = {"endpoint_url": endpoint, "token": "anon", "project": "zd-bench"}
            gcsfs.GCSFileSystem(**options).mkdir(bucket)
            yield f"gs://{bucket}", options, None
    else:
        import adlfs

        from tests.emulators import azurite

        with azurite() as connection_string:
            options = {"connection_string": connection_string}
            adlfs.AzureBlobFileSystem(**options).mkdir(bucket)
            yield f"az://{bucket}", options, None


def workload(table: Table, kind: str, base: str, options: dict[str, Any], stats: Any, data: np.ndarray,
             sharded: bool, skipped: dict[str, str]) -> None:  # fmt: skip
    label = f"read {kind} {'shards' if sharded else 'chunks'}"
    url = f"{base}/{'shards' if sharded else 'chunks'}.zarr"
    extra = {"shards": (br.SHARD, br.SHARD)} if sharded else {}
    arr = zarr_dask.create_array(url, shape=data.shape, dtype="f4", chunks=(br.CHUNK, br.CHUNK), compressors=br.ZSTD0,
                                 storage_options=options, **extra)  # fmt: skip
    arr[:] = data

    def read(transport: str) -> Any:
        with dask.config.set({"zarr_dask.remote-transport": transport}):
            return zarr_dask.from_zarr(url, storage_options={**options, "skip_instance_cache": True}).compute()

    runnable: dict[str, Callable[[], Any]] = {}
    counts: dict[str, str] = {}
    for transport in TRANSPORTS:
        try:
            if stats:
                stats()
            br.check(f"{label}/{transport}", read(transport), data)  # the warm-up, checked and counted
            counts[transport] = "{requests} requests, max {max_in_flight} in flight".format(**stats()) if stats else ""
            runnable[transport] = lambda t=transport: read(t)
        except Exception as e:  # noqa: BLE001 - a transport that cannot read this store: reported, skipped
            skipped[f"{label} / {transport}"] = f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"
    for transport, t in race(runnable, repeat=REPEAT, warmup=False).items():
        table.add(label, transport, t, counts[transport])


def main() -> None:
    dask.config.set(scheduler="threads", num_workers=br.THREADS)
    for name, value in {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
                        "AWS_DEFAULT_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true",
                        "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}.items():  # fmt: skip
        os.environ.setdefault(name, value)
    data = br.make_data()
    print(f"bench_cloud_reads: {data.nbytes / 2**20:.0f} MiB float32, S3 {br.LATENCY * 1000:g} ms per request, "
          f"{REPEAT} rounds; obstore {br._version('obstore')}", flush=True)  # fmt: skip
    table, skipped = Table("cloud reads"), {}
    for kind in ("s3", "gcs", "azure"):
        if ONLY and kind not in ONLY:
            continue
        with cloud(kind) as (base, options, stats):
            for sharded in (False, True):
                workload(table, kind, base, options, stats, data, sharded, skipped)
    print("\n| workload | obstore | fsspec | obstore / fsspec |\n|---|---|---|---|")
    meds = {(w, c): statistics.median(t) for w, c, t, _ in table.rows}
    for w in dict.fromkeys(w for w, _ in meds):
        o, f = meds.get((w, "obstore")), meds.get((w, "fsspec"))
        ratio = f"{o / f:.2f}x" if o and f else "n/a"
        print(f"| {w} | {f'{o:.3f}' if o else 'skipped'} | {f'{f:.3f}' if f else 'skipped'} | {ratio} |")
    for what, why in skipped.items():
        print(f"  skipped {what}: {why}")


if __name__ == "__main__":
    main()
