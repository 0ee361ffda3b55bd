"""``benchmarks/bench_resume.py`` at a tiny size: every row runs, the results equal the plain write's, the
killed run left finished tasks that the resumed run skipped (the benchmark itself is run by ``make bench``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "benchmarks"))
import bench_resume  # noqa: E402


@pytest.mark.parametrize("kind", ["array", "dataset"])
def test_rows_run_and_the_resumed_run_skips(tmp_path: Path, kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench_resume, "KIND", kind)
    times = bench_resume.measure(0.0625, 1, tmp_path)  # 4 blocks of 16 MiB
    assert all(len(times[row]) == 1 and times[row][0] > 0 for row in ("plain", "tracked", "resumed"))
    (skipped,) = times["skipped"][1:]  # the warm-up round's, then the timed round's
    assert 0 < skipped < 1
