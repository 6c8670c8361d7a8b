"""examples/bot.py, the documented Python API's example, runs on the shipped example and
files a report that follows the schema (issue 14). It runs in CI with the rest of the tests."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.resources import files
from pathlib import Path

import jsonschema
import pytest
from conftest import needs_iree

ROOT = Path(__file__).resolve().parent.parent
pytestmark = [pytest.mark.e2e, needs_iree]


def test_bot_reduces_the_shipped_example_and_writes_the_report(tmp_path: Path):
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "bot.py"), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    events = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert events[0]["event"] == "start" and events[-1]["event"] == "reduced"
    data = json.loads((tmp_path / "report.json").read_text())
    jsonschema.validate(data, json.loads(files("reducer.schemas").joinpath("report-schema.json").read_text()))
    assert "arith.truncf" in data["title"] and data["status"] == "reduced" and not data["trivial"]
    assert data["sizes"]["before"]["ops"] > 500 and data["sizes"]["after"]["ops"] <= 6
    assert data["sizes"]["after"]["bytes"] == len((tmp_path / "repro.mlir").read_bytes())
    md = (tmp_path / "report.md").read_text()
    assert md.startswith("# ") and "f6E2M3FN" in md and "iree-compile repro.mlir" in md
