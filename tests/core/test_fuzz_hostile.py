"""Fuzz: hostile metadata geometry, chunk bytes, shard indexes and vlen payloads, on the memory store and
local files, in a subprocess under an address-space limit (``resource.setrlimit``): only ``zarr_dask.errors``
exceptions, no ``MemoryError`` anywhere, no input over 1 s of CPU time (5 s of wall time, for loaded machines). The worker is ``_fuzz_worker.py``; CI replays a
fixed sequence (the ``ci`` hypothesis profile, ``ZD_HYPOTHESIS_PROFILE=ci``, is inherited)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_AS")

#: Address space of the worker: about 240 MiB after imports, plus room for the 256 MiB chunk limit it sets.
LIMIT = 2 << 30
EXAMPLES = 200  # per strategy (7 strategies): about 14 s


def test_fuzz_hostile_inputs_under_a_memory_limit(tmp_path: Path) -> None:
    worker = Path(__file__).with_name("_fuzz_worker.py")
    env = {**os.environ, "ZARR_DASK_IO_THREADS": "2"}
    proc = subprocess.run(
        [sys.executable, str(worker), str(LIMIT), str(EXAMPLES), str(tmp_path)],
        capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    stats = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"fuzz: {stats['inputs']} inputs, slowest {stats['slowest']:.3f} s of CPU, outcomes {stats['outcomes']}")
    assert stats["failures"] == [], json.dumps(stats["failures"][:3], indent=1)
    assert stats["inputs"] == 7 * EXAMPLES
    assert stats["slowest"] < 1.0
    assert set(stats["outcomes"]) >= {"ok", "MetadataError", "ChunkDecodeError"}


def test_the_memory_limit_is_real(tmp_path: Path) -> None:
    code = (
        "import resource, numpy as np\n"
        f"resource.setrlimit(resource.RLIMIT_AS, ({LIMIT}, {LIMIT}))\n"
        "try:\n    np.ones(3 << 30, dtype='u1')\nexcept MemoryError:\n    print('refused')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "refused"
