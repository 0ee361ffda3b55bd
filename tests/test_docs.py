"""The documentation runs: every python code block of the README and of docs/*.md (executed in a temporary
directory, in order, one namespace per file). Docstring examples: tests/test_docstrings.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.dask_modes import DASK_ARRAY, expr_gap

ROOT = Path(__file__).resolve().parents[1]
#: guides whose examples need an optional package: they run where it is installed (icechunk: the oracle leg)
NEEDS = {"icechunk.md": ("icechunk", pytest.mark.icechunk)}
#: guides whose examples meet a gap of dask's expression arrays (strict xfails under query planning only)
EXPR_GAPS = {"pyramids.md": "np_reshape"}
DOC_FILES = [
    pytest.param(p, marks=NEEDS[p.name][1]) if p.name in NEEDS
    else pytest.param(p, marks=expr_gap(EXPR_GAPS[p.name], raises=AssertionError))
    if p.name in EXPR_GAPS and not DASK_ARRAY  # (dask-array's own expressions have what dask's lack)
    else p
    for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


@pytest.mark.parametrize("path", DOC_FILES, ids=lambda p: p.name)
def test_markdown_code_blocks_run(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if path.name in NEEDS:
        pytest.importorskip(NEEDS[path.name][0])
    blocks = BLOCK.findall(path.read_text())
    if not blocks:
        pytest.skip(f"{path.name} has no python code blocks")
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": f"docs_{path.stem}"}
    for i, code in enumerate(blocks):
        if DASK_ARRAY:  # as the dask-array package's users write them (make test-dask-array)
            code = code.replace("import dask.array as da", "import dask_array as da")
        try:
            exec(compile(code, f"{path.name}[block {i}]", "exec"), namespace)
        except Exception as e:  # pragma: no cover - the message is the point
            raise AssertionError(f"{path.name} code block {i} failed: {e!r}\n{code}") from e
