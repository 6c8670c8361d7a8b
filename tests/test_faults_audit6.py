"""Defects the sixth hostile run (issue 27) found: an output name with a backslash ended
a finished run in "internal error" (the name was read as a regular expression template),
and a crash reproducer's result written as bytecode got its text resource appended after
the bytecode ("internal error: BytecodeError", an output nothing reads)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_faults import assert_clean, cli, error_line
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


@pytest.mark.parametrize(
    "args",
    [
        ("repro.mlir", "-o", "out.mlirbc"),
        ("repro.mlir", "--emit-bytecode", "-o", "out.mlir"),
        ("input.mlir", "--compile", "iree-compile {input} -o /dev/null", "--pass-level", "-o", "out.mlirbc"),
        ("repro.mlir", "--check", "./check.sh", "-o", "out.mlirbc"),  # the review: its trailer after bytecode
    ],
    ids=["reproducer-mlirbc", "reproducer-emit-bytecode", "pass-level-mlirbc", "reproducer-with-check-mlirbc"],
)
def test_a_crash_reproducer_result_as_bytecode_is_refused_before_any_check(case: Path, args: tuple[str, ...]):
    from test_replay import LOCAL

    (case / "repro.mlir").write_text(LOCAL)
    done = cli(case, *args)
    assert done.returncode == session.EXIT_USAGE, done.stderr
    line = error_line(done.stderr)
    assert "writes a crash reproducer as text" in line and "give -o NAME.mlir" in line
    assert not (case / "out.mlirbc").exists() and not (case / "out.mlir").exists()
    assert_clean(case)
