"""The API reference (docs/api.rst, built by ``make docs``): every public name is in it with an example, and the
Sphinx build of the guides and the reference passes with warnings as errors."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
from pathlib import Path

import pytest

import zarr_dask
from zarr_dask import errors, zom

ROOT = Path(__file__).resolve().parents[1]
API = ROOT / "docs" / "api.rst"
DIRECTIVE = re.compile(r"^\.\. (?:auto)?(?:function|class|data|module)::\s+(\S+)", re.M)
STORES = ("Store", "FsspecStore", "LocalStore", "MemoryStore", "open_store")


def _documented() -> set[str]:
    return {name.removeprefix("zarr_dask.") for name in DIRECTIVE.findall(API.read_text())}


def test_every_public_name_is_in_the_reference() -> None:
    documented = _documented()
    missing = [name for name in zarr_dask.__all__ if name not in documented]
    assert not missing, f"add these to docs/api.rst: {missing}"
    assert {"errors", "zom", *STORES} <= documented


def test_every_public_name_shows_an_example() -> None:
    """What the reference shows comes from the docstrings: each public function and class has an Examples
    section (run by tests/test_docstrings.py), and so have the errors and zom modules."""
    lacking = []
    for name in zarr_dask.__all__:
        if name == "__version__":
            continue
        doc = inspect.getdoc(getattr(zarr_dask, name)) or ""
        if ">>>" not in doc:
            lacking.append(name)
    for error in errors.__all__:
        assert inspect.getdoc(getattr(errors, error)), f"zarr_dask.errors.{error} has no docstring"
    assert not lacking, f"give these docstrings an Examples section: {lacking}"


def test_the_reference_builds_with_warnings_as_errors(tmp_path: Path) -> None:
    pytest.importorskip("sphinx", reason="the docs extra (pip install -e '.[docs]') builds the reference")
    pytest.importorskip("myst_parser", reason="the docs extra (pip install -e '.[docs]') builds the reference")
    out = tmp_path / "html"
    run = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-E", "-b", "html", str(ROOT / "docs"), str(out)],
        capture_output=True, text=True, check=False, cwd=ROOT,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    html = (out / "api.html").read_text()
    anchors = set(re.findall(r'id="([^"]+)"', html))
    names = [f"zarr_dask.{n}" for n in zarr_dask.__all__ if n not in ("errors", "zom", "config")]
    names += [f"zarr_dask.errors.{n}" for n in errors.__all__]
    names += [f"zarr_dask.zom.{n}" for n in ("diff", "from_store", "from_json", "json_schema", "Diff")]
    names += [f"zarr_dask.config.{n}" for n in ("get", "parse_size", "Knob")]
    names += ["module-zarr_dask.errors", "module-zarr_dask.zom", "module-zarr_dask.config"]
    assert not [n for n in names if n not in anchors], "missing from the built reference"
    for guide in sorted((ROOT / "docs").glob("*.md")):
        assert (out / f"{guide.stem}.html").is_file(), f"docs/{guide.name} is not in the built docs"
    text = re.sub(r"<[^>]+>", "", html)  # examples are highlighted token by token
    assert "Examples" in text and '&gt;&gt;&gt; a = zarr_dask.open_array("memory://doc-open-array", mode="r")' in text
    assert zom.GroupSpec.__doc__ and "GroupSpec" in text
