"""``icechunk:`` locations on the reading commands (issue 40 item 7); the repository reads themselves are tested in
tests/icechunk/test_cli_reads.py (icechunk needs Python >= 3.12)."""

from __future__ import annotations

import importlib.util

import pytest

from zarr_dask.cli import build_parser, main


@pytest.mark.parametrize("command", ["info", "tree", "spec", "validate"])
def test_the_reading_commands_take_icechunk_locations(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args([command, "--help"])
    assert "icechunk:PATH[?branch=|tag=|snapshot=]" in capsys.readouterr().out
    if importlib.util.find_spec("icechunk") is None:  # here, a clear error instead of "nothing found"
        assert main([command, "icechunk:/nowhere/repo"]) == 1
        err = capsys.readouterr().err
        assert "'icechunk:/nowhere/repo' is an Icechunk repository, but icechunk is not installed" in err
        assert "pip install 'zarr-dask[icechunk]'" in err
