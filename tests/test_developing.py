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
