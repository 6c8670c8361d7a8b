"""Defects the sixth hostile run (issue 27) found: an output name with a backslash ended
a finished run in "internal error" (the name was read as a regular expression template)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_faults import assert_clean, cli
from test_faults_audit import make_case

from reducer import session


@pytest.fixture
def case(tmp_path: Path) -> Path:
    return make_case(tmp_path)


@pytest.mark.parametrize("name", ["o\\x.mlir", "o\\1.mlir"])
def test_an_output_name_with_a_backslash_is_written_and_reported(case: Path, name: str):
    done = cli(case, "input.mlir", "--check", "./check.sh", "-o", name, "--report", "report.md")
    assert done.returncode == session.EXIT_OK, done.stderr
    assert "internal error" not in done.stderr
    assert "math.exp" in (case / name).read_text()
    assert name in (case / "report.md").read_text()
    assert_clean(case)
