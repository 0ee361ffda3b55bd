"""docs/developing.md and `make help` describe every make target, with what it takes."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _phony() -> set[str]:
    makefile = (ROOT / "Makefile").read_text()
    line = next(x for x in makefile.splitlines() if x.startswith(".PHONY:"))
    return set(line.split(":", 1)[1].split())


def _rules() -> set[str]:
    return set(re.findall(r"^([a-z][a-z-]*):", (ROOT / "Makefile").read_text(), flags=re.M))


def test_every_target_has_a_rule_and_a_row() -> None:
    phony = _phony()
    assert phony <= _rules(), f"declared without a rule: {phony - _rules()}"
    out = subprocess.run([sys.executable, str(ROOT / "ci" / "make-help")], capture_output=True, text=True, check=True).stdout
    listed = {line.split()[0] for line in out.splitlines() if line.startswith("  ") and not line.startswith("   ")}
    assert listed == phony, f"make help and .PHONY differ: {listed ^ phony}"


def test_every_row_says_how_long() -> None:
    text = (ROOT / "docs" / "developing.md").read_text()
    assert "TIME_" not in text
    table = text[text.index("<!-- make-help -->") : text.index("<!-- /make-help -->")]
    rows = [r for r in table.splitlines() if r.startswith("| `")]
    assert rows and all(r.rstrip(" |").rsplit("|", 1)[1].strip() for r in rows)


def test_the_minimum_versions_leg_pins_every_floor() -> None:
    """ci/requirements-min.txt pins each dependency of pyproject.toml exactly at its floor (`make test-min`)."""
    import tomllib

    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    floors = {}
    for spec in dependencies:
        match = re.fullmatch(r"([A-Za-z0-9_.-]+)(\[[^]]*\])?>=([\w.]+)", spec.replace(" ", ""))
        assert match, f"pyproject.toml: {spec!r} is not 'name>=floor'"
        floors[match.group(1).lower().replace("_", "-")] = match.group(3)
    pins = {}
    for line in (ROOT / "ci" / "requirements-min.txt").read_text().splitlines():
        if match := re.fullmatch(r"([A-Za-z0-9_.-]+)(\[[^]]*\])?==([\w.]+)", line.split("#")[0].strip()):
            pins[match.group(1).lower().replace("_", "-")] = match.group(3)
    wrong = {name: (floor, pins.get(name)) for name, floor in floors.items()
             if pins.get(name) is None or [int(x) for x in pins[name].split(".")] != [int(x) for x in floor.split(".")]
             + [0] * (len(pins[name].split(".")) - len(floor.split(".")))}  # fmt: skip
    assert not wrong, f"floor in pyproject.toml vs pin in ci/requirements-min.txt: {wrong}"


def test_make_ci_runs_every_leg() -> None:
    """`make ci` (what CI runs) runs lint, docs and every test leg but the on-demand `test-slow`."""
    makefile = (ROOT / "Makefile").read_text()
    legs = set(re.search(r"^CI_LEGS = (.*)$", makefile, flags=re.M).group(1).split())
    wanted = {t for t in _phony() if t.startswith("test-") and t != "test-slow"} | {"lint", "docs", "venvs"}
    assert legs == wanted, f"make ci and the legs differ: {legs ^ wanted}"


def test_make_ci_closes_with_one_line_per_leg_and_the_counts(tmp_path: Path) -> None:
    """ci/summary: a line per leg, then 'ci: N passed, N failed' (legs) alone on the last line; a failed leg, one
    that did not run, or one whose pytest run passed nothing fails it."""
    for leg, result, log in (("lint", "PASS 65 60", "All checks passed!"),
                             ("test-main", "PASS 250 400", "==== 2301 passed, 120 skipped in 250.12s (0:04:10) ===="),
                             ("test-dask", "FAIL 12 10", "12 passed, 1 failed in 10.2s"),
                             ("test-min", "PASS 5 4", "5 skipped in 1.0s")):  # fmt: skip
        (tmp_path / f"{leg}.result").write_text(result)
        (tmp_path / f"{leg}.log").write_text(log + "\n")
    run = subprocess.run([sys.executable, str(ROOT / "ci" / "summary"), str(tmp_path), "lint", "test-main", "test-dask",
                          "test-min", "docs"], capture_output=True, text=True, check=False)  # fmt: skip
    lines = run.stdout.splitlines()
    assert run.returncode == 1
    assert lines[-1] == "ci: 2 passed, 3 failed"
    assert re.fullmatch(r"\s+test-main\s+PASS\s+4m10s\s+cpu\s+6m40s\s+2301 passed, 120 skipped", lines[-6])
    assert "did not run" in lines[-3] and "passed no test" in lines[-4]
    for leg in ("lint", "test-main"):
        (tmp_path / f"{leg}.result").write_text("PASS 1 1")
    run = subprocess.run([sys.executable, str(ROOT / "ci" / "summary"), str(tmp_path), "lint", "test-main"],
                         capture_output=True, text=True, check=False)  # fmt: skip
    assert run.returncode == 0 and run.stdout.splitlines()[-1] == "ci: 2 passed, 0 failed"
