"""``benchmarks/bench_resume.py`` at a tiny size: every row runs, the results equal the plain write's, the
killed run left finished tasks that the resumed run skipped (the benchmark itself is run by ``make bench``)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "benchmarks"))
import bench_resume  # noqa: E402


def _target(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> Any:
    if kind == "local":
        return bench_resume.local_target(tmp_path)
    return bench_resume.s3_target(request.getfixturevalue("s3_server"), f"bench-resume-{tmp_path.name}".lower().replace("_", "-")[:60])


@pytest.mark.parametrize("what", ["array", "dataset", "append"])
@pytest.mark.parametrize("kind", ["local", pytest.param("s3", marks=pytest.mark.s3)])
def test_rows_run_and_the_resumed_run_skips(
    tmp_path: Path, kind: str, what: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bench_resume, "KIND", what)
    monkeypatch.setattr(bench_resume, "WARM_MIB", 8)  # (3 GiB by default: the benchmark's 1 GiB runs)
    times = bench_resume.measure(0.0625, 1, _target(kind, tmp_path, request))  # 4 blocks of 16 MiB
    assert all(len(times[row]) == 1 and times[row][0] > 0 for row in ("plain", "tracked", "resumed"))
    (skipped,) = times["skipped"][1:]  # the warm-up round's, then the timed round's
    assert 0 < skipped < 1
