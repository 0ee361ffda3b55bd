"""The README says how to install (with the cloud and optional extras pyproject.toml declares) and names every
subcommand of the ``zarr-dask`` command."""

from __future__ import annotations

import argparse
import re
import tomllib
from pathlib import Path

from zarr_dask.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_cloud_extras_install_their_filesystem_at_the_test_floors() -> None:
    extras = _project()["optional-dependencies"]
    test = {re.split(r"[<>=;\[ ]", req)[0]: req for req in extras["test"]}
    for extra, package in [("s3", "s3fs"), ("gcs", "gcsfs"), ("azure", "adlfs"), ("ml", "ml_dtypes")]:
        (req,) = extras[extra]
        assert req.startswith(package + ">=") and test[package].split("#")[0].strip() == req, (extra, req, test[package])


def test_readme_has_the_install_line_and_every_subcommand() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "pip install zarr-dask`" in readme
    for extra in ["s3", "gcs", "azure", "ml"]:
        assert f"[{extra}]" in readme or f"[{extra}," in readme, extra
    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    commands = set(sub.choices)
    assert {"cleanup", "ledger", "convert", "info"} <= commands
    cli = readme[readme.index("The command line:") :].split("\n\n")[0]
    missing = [c for c in sorted(commands) if f"zarr-dask {c}" not in cli and not re.search(rf"[`|]{c}[|` ]", cli)]
    assert not missing, f"the README's CLI list omits {missing}"
