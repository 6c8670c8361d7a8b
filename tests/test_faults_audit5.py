"""Defects the fifth hostile run (issue 27) found: a FIFO nobody writes blocked the run
past --max-time, a resource section cut off inside a blob crashed MLIR's parser in the
main process (exit 139, its temp dir left), and the mismatch oracle gave a scalar
argument as `f32=-2.0`, which iree-run-module refuses."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import needs_iree
from test_faults import assert_clean, cli, command, error_line
from test_faults_audit import make_case

from reducer import session

#: A file cut off inside its blob's hex string, as a download that stopped.
TRUNCATED = (
    "func.func @main() -> tensor<2xf32> {\n"
    "  %0 = arith.constant dense_resource<w> : tensor<2xf32>\n"
    "  return %0 : tensor<2xf32>\n}\n"
    '{-#\n  dialect_resources: {\n    builtin: {\n      w: "0x0400000000000000'
)


@pytest.fixture
def case(tmp_path: Path) -> Path:
    return make_case(tmp_path)


def test_a_fifo_nobody_writes_stops_at_max_time(case: Path):
    os.mkfifo(case / "in.mlir")
    done = command(case, "in.mlir", "--check", "./check.sh", "-o", "out.mlir", "--max-time", "2")
    assert done.returncode == session.EXIT_STOPPED, done.stderr
    line = error_line(done.stderr)
    assert "--max-time 2 ran out while reading the input 'in.mlir' (nothing came from it)" in line
    assert not (case / "out.mlir").exists()
    assert_clean(case)


def test_a_resource_section_cut_off_is_one_line_not_a_crash(case: Path):
    (case / "cut.mlir").write_text(TRUNCATED)
    for _ in range(3):  # the parser crashed in about half the runs
        done = cli(case, "cut.mlir", "--check", "./check.sh", "-o", "out.mlir")
        assert done.returncode == session.EXIT_BAD_INPUT, done.stderr
        line = error_line(done.stderr)
        assert "'cut.mlir' ends inside its resource section" in line and "line 5" in line
        assert_clean(case)


def test_a_closed_resource_section_is_not_taken_for_a_cut_one(case: Path):
    """The last section is closed; a `{-#` earlier in the file does not count."""
    closed = TRUNCATED + '",\n      v: "0x04000000"\n    }\n  }\n#-}\n'
    assert session.decode_input(closed.encode(), "m.mlir") == closed
    assert session.decode_input(b"// {-# in a comment, not at a line's start\n", "m.mlir")


@pytest.mark.e2e
@needs_iree
def test_scalar_arguments_reach_both_configurations(tmp_path: Path):
    """f32 arguments: both sides now run, and agree (before: 'run failed', INVALID_ARGUMENT)."""
    src = tmp_path / "s.mlir"
    src.write_text(
        "func.func @main(%x: f32, %y: f32, %n: i32) -> (f32, i32) {\n"
        "  %0 = math.atan2 %x, %y : f32\n  return %0, %n : f32, i32\n}\n"
    )
    (tmp_path / "tmp").mkdir()
    done = cli(tmp_path, "s.mlir", "--backends", "llvm-cpu,vmvx", "-o", "out.mlir")
    assert done.returncode == session.EXIT_NOT_INTERESTING, done.stderr
    line = error_line(done.stderr)
    assert "both configurations give the same outputs" in line, line


@pytest.mark.parametrize("length", [251, 260])
def test_an_output_name_too_long_is_said_so(case: Path, length: int):
    """A16/Q01 (weak): the lock's lookup failed with 'File name too long', and the line
    said the lock existed and was not ireereduce's."""
    done = cli(case, "input.mlir", "--check", "./check.sh", "-o", "a" * length)
    assert done.returncode == session.EXIT_USAGE, done.stderr
    line = error_line(done.stderr)
    assert "is too long for its file system" in line and "lock file" not in line, line
    assert_clean(case)


def test_an_output_name_too_long_for_its_state_directory_is_said_first(case: Path):
    """Audit 17 W6: a name that fits '.lock' but not '.resume' was refused only after the
    original's checks, with exit 8. It is now a usage error up front; without a state
    directory the name is fine."""
    name = "a" * 249  # 254 bytes with '.lock', 256 with '.resume'
    done = cli(case, "input.mlir", "--check", "./check.sh", "-o", name)
    assert done.returncode == session.EXIT_USAGE, done.stderr
    line = error_line(done.stderr)
    assert "once '.resume' is added" in line and "--no-state" in line, line
    assert "original" not in done.stderr  # said before any check
    assert_clean(case)
    done = cli(case, "input.mlir", "--check", "./check.sh", "-o", name, "--no-state")
    assert done.returncode == session.EXIT_OK, done.stderr
    assert (case / name).exists()


def test_the_temp_directory_as_state_directory_is_refused_up_front(case: Path):
    """Audit 17 W1: --state-dir naming TMPDIR filled it with the run's own scratch
    directory first, then refused it (exit 8) as holding files ireereduce did not write."""
    done = cli(case, "input.mlir", "--check", "./check.sh", "-o", "out.mlir", "--state-dir", "tmp")  # TMPDIR=tmp
    assert done.returncode == session.EXIT_USAGE, done.stderr
    line = error_line(done.stderr)
    assert "--state-dir tmp is the temp directory (TMPDIR)" in line, line
    assert not (case / "out.mlir").exists()
    assert_clean(case)


@pytest.mark.parametrize("chosen", [("--strategies", "text-lines"), ("--strategies", "inline-parameters")])
def test_strategies_that_find_nothing_to_try_are_said(case: Path, chosen: tuple[str, str]):
    """H45/H46 (weak): exit 0 with nothing tried and no word."""
    done = cli(case, "input.mlir", "--check", "./check.sh", "-o", "out.mlir", *chosen)
    assert done.returncode == session.EXIT_OK, done.stderr
    assert "found nothing to try on this program; it is not known to be minimal" in done.stderr
    assert_clean(case)
