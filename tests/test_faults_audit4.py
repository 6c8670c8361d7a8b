"""Defects the fourth hostile run (issue 27) found: a symlink in a loop replaced by the
output, stdout on a full disk blamed on the temp dir under --print-diff, and
`ulimit -f 0` ending in a traceback while logging started."""

from __future__ import annotations

import resource
import subprocess
from pathlib import Path

import pytest
from test_faults import assert_clean, cli, command, error_line
from test_faults_audit import make_case

from reducer import session


@pytest.fixture
def case(tmp_path: Path) -> Path:
    return make_case(tmp_path)


@pytest.mark.parametrize("flag", ["-o", "--report", "--stats-json"])
def test_a_symlink_in_a_loop_is_refused_and_stays_a_link(case: Path, flag: str):
    (case / "loop1").symlink_to("loop2")
    (case / "loop2").symlink_to("loop1")
    done = cli(case, "input.mlir", "--check", "./check.sh", flag, "loop1")
    assert done.returncode == session.EXIT_USAGE, done.stderr
    assert "loop1" in error_line(done.stderr)
    assert (case / "loop1").is_symlink() and (case / "loop2").is_symlink()
    assert_clean(case)


def test_print_diff_to_a_full_stdout_ends_the_diffs_not_the_run(case: Path):
    with open("/dev/full", "w") as full:
        args = ("input.mlir", "--check", "./check.sh", "-o", "out.mlir", "--print-diff")
        done = command(case, *args, stdout=full, stderr=subprocess.PIPE)
    assert done.returncode == session.EXIT_OK, done.stderr
    assert "--print-diff: stdout cannot be written" in done.stderr and "temporary directory" not in done.stderr
    assert "math.exp" in (case / "out.mlir").read_text()
    assert_clean(case)


def test_no_file_size_at_all_is_one_line(case: Path):
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (0, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))

    done = command(case, "input.mlir", "--check", "./check.sh", "-o", "out.mlir", preexec_fn=limit)
    assert done.returncode == session.EXIT_CANNOT_WRITE, done.stderr
    assert "ulimit -f" in error_line(done.stderr)
    assert not (case / "out.mlir").exists()
    assert_clean(case)


def test_a_file_put_at_the_output_after_a_kill_is_kept_on_resume(case: Path):
    """R21: kill -9 after the first commit, a file of the user's at the output, a rerun:
    it continued the run and replaced the file (exit 0)."""
    from test_faults import _killed_run

    _killed_run(case)
    mine = "func.func @mine() {\n  return\n}\n"
    (case / "input.reduced.mlir").write_text(mine)
    done = cli(case, "input.mlir", "--check", "check.sh", "-j", "1")
    assert done.returncode == session.EXIT_USAGE, done.stderr
    assert "journal does not record (a file put there after the kill" in error_line(done.stderr)
    assert (case / "input.reduced.mlir").read_text() == mine


def test_a_killed_run_still_continues_from_its_own_output(case: Path):
    from test_faults import _killed_run

    _killed_run(case)
    done = cli(case, "input.mlir", "--check", "check.sh", "-j", "1")
    assert done.returncode == session.EXIT_OK, done.stderr
    assert "continuing the interrupted run" in done.stderr
