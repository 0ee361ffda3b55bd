"""Run every benchmark script in turn (``make bench``), each in its own process, and print their tables.

The ``ZD_BENCH_*`` environment variables reach every script (``ZD_BENCH_GIB``, ``ZD_BENCH_REPEAT``,
``ZD_BENCH_DIR``...). A full run takes about 30 minutes on 2 cores; ``ZD_BENCH_GIB=0.125 ZD_BENCH_REPEAT=3``
gives a quick look. Pass script names to run some only::

    python benchmarks/run_all.py bench_dask bench_sharding
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).parent
SCRIPTS = [
    "bench_core", "bench_sharding", "bench_dask", "bench_xarray", "bench_zom", "bench_convert", "bench_concurrent_writes",
    "bench_remote", "bench_cloud_reads", "bench_memory", "bench_icechunk", "bench_resume",
]


def main(argv: list[str]) -> int:
    wanted = [a.removesuffix(".py") for a in argv] or SCRIPTS
    unknown = sorted(set(wanted) - set(SCRIPTS))
    if unknown:
        print(f"unknown benchmark(s) {', '.join(unknown)}; choose from {', '.join(SCRIPTS)}", file=sys.stderr)
        return 2
    failed = []
    for name in wanted:
        print(f"\n=== {name} ===", flush=True)
        t0 = time.perf_counter()
        code = subprocess.call([sys.executable, str(HERE / f"{name}.py")])
        print(f"=== {name}: {'ok' if code == 0 else f'exit {code}'} in {time.perf_counter() - t0:.0f} s", flush=True)
        if code:
            failed.append(name)
    if failed:
        print(f"\nfailed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
