"""``zarr-dask validate`` reports what it was asked to find, node by node, and never fails on it: a document
the model refuses (v3 ``dimension_names`` of the wrong length, bad fill values, codecs, grids...) is an error of
that node, the convention check still runs on the other nodes, and a v3 group whose consolidated metadata holds
a bad entry is still a group (the consolidated metadata is the error, with the command that rebuilds it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import zarr_dask
from zarr_dask.cli import main
from zarr_dask.cli.validate import validate


def _hierarchy(tmp_path: Path, fmt: int = 3) -> str:
    url = str(tmp_path / "h.zarr")
    zarr_dask.create_group(url, zarr_format=fmt)
    names: dict[str, Any] = {"dimension_names": ["y", "x"]} if fmt == 3 else {"attributes": {"_ARRAY_DIMENSIONS": ["y", "x"]}}
    zarr_dask.create_array(url, path="bad", shape=(4, 4), chunks=(2, 2), dtype="f4", zarr_format=fmt, **names)[:] = 1
    zarr_dask.create_array(url, path="nodims", shape=(3,), dtype="f4", zarr_format=fmt)  # xarray cannot name it
    return url


def _edit(path: Path, change: Any) -> None:
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))


V3_BREAKAGES = {
    "dimension_names": (lambda d: d.__setitem__("dimension_names", ["y"]), "dimension_names ['y'] has 1 entries but the array has 2"),
    "fill_value": (lambda d: d.__setitem__("fill_value", "abc"), "fill_value 'abc' is not valid for data type float32"),
    "codec": (lambda d: d.__setitem__("codecs", [{"name": "nope"}]), "unknown codec 'nope'"),
    "codec_config": (lambda d: d.__setitem__("codecs", [{"name": "bytes", "configuration": {"endian": "middle"}}]), "'endian'"),
    "chunk_grid": (lambda d: d.__setitem__("chunk_grid", {"name": "regular", "configuration": {"chunk_shape": [2]}}), "regular chunk grid has 1"),
    "grid_name": (lambda d: d.__setitem__("chunk_grid", {"name": "weird", "configuration": {}}), "chunk_grid 'weird'"),
    "data_type": (lambda d: d.__setitem__("data_type", "float99"), "'float99'"),
    "shards": (lambda d: d.__setitem__("codecs", [{"name": "sharding_indexed", "configuration": {"chunk_shape": [3, 3],
               "codecs": [{"name": "bytes"}], "index_codecs": [{"name": "bytes"}]}}]), "not a multiple of the inner chunk size 3"),  # fmt: skip
    "key_encoding": (lambda d: d.__setitem__("chunk_key_encoding", {"name": "default", "configuration": {"separator": "-"}}), "separator"),
    "storage_transformers": (lambda d: d.__setitem__("storage_transformers", [{"name": "x"}]), "storage transformers"),
    "not_an_object": (lambda d: d.clear(), "node_type None"),
}


@pytest.mark.parametrize("case", sorted(V3_BREAKAGES))
def test_every_document_error_is_a_finding_of_its_node_and_conventions_still_run(tmp_path: Path, case: str) -> None:
    url = _hierarchy(tmp_path)
    mutate, words = V3_BREAKAGES[case]
    _edit(tmp_path / "h.zarr" / "bad" / "zarr.json", mutate)
    for data in (False, True):
        findings, counts = validate(url, convention="xarray", data=data)
        by_path = {(f.path, f.severity): f.message for f in findings}
        assert set(by_path) == {("/bad", "error"), ("/nodims", "error")}, findings
        assert words in by_path[("/bad", "error")]
        assert "no dimension_names" in by_path[("/nodims", "error")]  # the convention check ran on the rest
        assert counts["nodes"] == 2 + (case in ("codec", "codec_config"))  # documents that parse; codecs fail at open


def test_the_command_prints_the_wrong_length_dimension_names_and_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = _hierarchy(tmp_path)
    _edit(tmp_path / "h.zarr" / "bad" / "zarr.json", lambda d: d.__setitem__("dimension_names", ["y"]))
    assert main(["validate", url, "--convention", "xarray"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == ("ERROR   /bad: invalid array zarr.json: dimension_names ['y'] has 1 entries but the array has 2 "
                        "dimensions; give one name (or null) per dimension")  # fmt: skip
    assert lines[1].startswith("ERROR   /nodims: the array has no dimension_names")
    assert lines[-1] == "FAILED: 2 node(s), 1 array(s); 2 error(s), 0 warning(s)"
    assert main(["validate", url, "--path", "bad", "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert [(f["path"], f["severity"]) for f in report["findings"]] == [("/", "error")]


def test_v2_dimension_count_is_a_convention_finding(tmp_path: Path) -> None:
    url = _hierarchy(tmp_path, fmt=2)
    (tmp_path / "h.zarr" / "bad" / ".zattrs").write_text(json.dumps({"_ARRAY_DIMENSIONS": ["y"]}))
    findings, _ = validate(url, convention="xarray")
    assert [(f.path, f.severity) for f in findings] == [("/bad", "error"), ("/nodims", "error")]
    assert "_ARRAY_DIMENSIONS ['y'] names 1 dimension(s) but the array has 2" in findings[0].message


def test_a_bad_consolidated_entry_leaves_the_group_a_group(tmp_path: Path) -> None:
    url = _hierarchy(tmp_path)
    zarr_dask.consolidate_metadata(url)
    _edit(tmp_path / "h.zarr" / "zarr.json", lambda d: d["consolidated_metadata"]["metadata"]["bad"].__setitem__("dimension_names", ["y"]))
    findings, counts = validate(url, convention="xarray")
    assert counts == {"nodes": 3, "arrays": 2}
    (root,) = [f for f in findings if f.path == "/"]
    assert root.message.startswith("the consolidated metadata does not parse: invalid group zarr.json: consolidated "
                                   "metadata entry 'bad': invalid array zarr.json: dimension_names ['y'] has 1 entries")  # fmt: skip
    assert root.message.endswith(f"rebuild it with 'zarr-dask consolidate {url}'")
    assert [f.path for f in findings] == ["/", "/nodims"]
    assert main(["consolidate", url]) == 0
    assert [f.path for f in validate(url, convention="xarray")[0]] == ["/nodims"]


def test_an_unpublished_journal_is_named_as_such_with_the_ledger_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 40 item 7: a resumable region write's journal is zarr_dask's record, not "foreign files"."""
    import dask.array as da

    from zarr_dask.cli import validate as validate_module
    from zarr_dask.graph import journal

    assert validate_module.JOURNAL_DIR == journal.JOURNAL_DIR
    url = str(tmp_path / "j.zarr")
    zarr_dask.create_array(url, path="a", shape=(8, 4), chunks=(2, 4), dtype="f4", dimension_names=["y", "x"])
    zarr_dask.to_zarr(da.ones((4, 4), chunks=2), url, component="a", region=(slice(0, 4), slice(None)), resume=True)
    (tmp_path / "j.zarr" / "a" / "stray").write_bytes(b"x")
    findings, _ = validate(url)
    messages = [f.message for f in findings if f.path == "/a" and f.severity == "warning"]
    assert len(messages) == 2, findings
    journal_text, stray = messages
    assert journal_text.startswith("the journal(s) of 1 resumable write(s) (resume=True) not published yet (1 done, 0 partial")
    assert f"'zarr-dask ledger {url} --path a' lists them; 'zarr-dask ledger {url} --path a --publish' deletes them" in journal_text
    assert "foreign" not in journal_text and "not data" in journal_text
    assert stray == "1 key(s) that are not chunks of this array (e.g. 'stray'): left over after a resize, or foreign files"
    (tmp_path / "j.zarr" / "a" / "stray").unlink()
    assert main(["ledger", url, "--path", "a", "--publish"]) == 0  # the command the warning names works
    capsys.readouterr()
    assert validate(url)[0] == []


def test_append_records_are_named(tmp_path: Path) -> None:
    from zarr_dask.core.commit import INCOMPLETE_NAME
    from zarr_dask.core.lease import LEASE_NAME

    url = _hierarchy(tmp_path)
    (tmp_path / "h.zarr" / "bad" / LEASE_NAME).write_bytes(b"{}")
    (tmp_path / "h.zarr" / "bad" / INCOMPLETE_NAME).write_bytes(b"{}")
    texts = sorted(f.message for f in validate(url)[0] if f.path == "/bad")
    assert texts[0].startswith("an append lease (an append is running")
    assert texts[1].startswith("the record of an append whose rows landed") and f"'zarr-dask consolidate {url}'" in texts[1]
