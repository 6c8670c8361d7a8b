"""The twenty-third hostile run's defects: exit 11's "restore" wrote the best program
through an output link re-pointed during the run; a hard link planted as a state file
was written through; notes that start with the .npy magic were taken for an array; an
input named .ireereduce-stderr was the check's stderr capture too."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import make_script
from test_faults import BIG, _killed_run, assert_clean, cli, env, error_line, wait_for
from test_faults_audit import make_case
from test_faults_audit18 import MISMATCH

from reducer import session
from reducer.session import files


def _run_through_a_link(case: Path, jobs: str) -> subprocess.Popen[str]:
    """A reduction of BIG with -o link.mlir, a link to res/a.mlir, once that is written."""
    (case / "tmp").mkdir()
    (case / "res").mkdir()
    (case / "input.mlir").write_text(BIG)
    make_script(case / "slow.sh", 'sleep 0.3\ngrep -q math.exp "$1"')
    os.symlink("res/a.mlir", case / "link.mlir")
    run = subprocess.Popen(
        [sys.executable, "-m", "reducer.cli", "input.mlir", "-c", "./slow.sh", "-o", "link.mlir", "-j", jobs],
        cwd=case,
        env=env(case),
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_for((case / "res" / "a.mlir").exists)
    return run


def _repoint(case: Path) -> None:
    os.unlink(case / "link.mlir")
    os.symlink("res/b.mlir", case / "link.mlir")


def test_an_output_link_repointed_during_the_run_is_not_written_through(tmp_path: Path):
    """D1: -o link.mlir led to res/a.mlir; the user pointed it at res/b.mlir, notes of
    theirs, during the run, and exit 11 "restored" the best program into them."""
    run = _run_through_a_link(tmp_path, "2")
    (tmp_path / "res" / "b.mlir").write_text("my precious notes\n")
    _repoint(tmp_path)
    _, stderr = run.communicate(timeout=120)
    assert run.returncode == session.EXIT_CHECK_CHANGED_FILES, stderr
    line = error_line(stderr)
    assert f"it leads to {tmp_path / 'res' / 'b.mlir'} now, which the run left alone" in line
    assert "is saved in link.saved.mlir instead" in line
    assert (tmp_path / "res" / "b.mlir").read_text() == "my precious notes\n"
    assert "math.exp" in (tmp_path / "link.saved.mlir").read_text()
    assert_clean(tmp_path)


def test_a_commit_writes_nothing_through_an_output_link_repointed_unseen(tmp_path: Path):
    """Review 24: a link re-pointed to a copy of what the run wrote (same size and time,
    so the check of the user's files saw nothing) took the next improvement through it."""
    run = _run_through_a_link(tmp_path, "1")
    shutil.copy2(tmp_path / "res" / "a.mlir", tmp_path / "res" / "b.mlir")  # the user's copy
    copy = (tmp_path / "res" / "b.mlir").read_bytes()
    _repoint(tmp_path)
    _, stderr = run.communicate(timeout=120)
    assert run.returncode == session.EXIT_CHECK_CHANGED_FILES, stderr
    assert "which the run left alone" in error_line(stderr)
    assert (tmp_path / "res" / "b.mlir").read_bytes() == copy
    assert_clean(tmp_path)


def test_a_state_file_hard_linked_to_a_users_file_is_refused_unwritten(tmp_path: Path):
    """D2: verdicts.jsonl, a second name for the user's notes, was cut back to its last
    good line and appended to on resume: the notes lost, or emptied."""
    case = make_case(tmp_path)
    state = _killed_run(case)
    notes = case / "notes.txt"
    notes.write_bytes(b"my diary\n" + (state / "verdicts.jsonl").read_bytes())
    before = notes.read_bytes()
    (state / "verdicts.jsonl").unlink()
    os.link(notes, state / "verdicts.jsonl")
    for lock in case.glob("*.lock"):  # the killed run's: a run that starts would take it over
        lock.unlink()
    done = cli(case, "input.mlir", "--check", "check.sh", "-j", "1")
    assert done.returncode == session.EXIT_USAGE, done.stderr
    assert "its verdicts.jsonl is a hard link (a file with another name too)" in error_line(done.stderr)
    assert notes.read_bytes() == before


@pytest.mark.parametrize(
    "content",
    [b"\x93NUMPY -- my notes, not an array\n", "cut short"],
)
def test_notes_that_start_like_an_array_are_the_users(mismatch: Path, content: bytes | str):
    """D3: the .npy magic alone made a file "an array a run wrote", replaced by the report."""
    folder = mismatch / "r.md.inputs"
    folder.mkdir()
    if content == "cut short":  # an array of the user's, cut off: not what a run writes
        np.save(folder / "input0.npy", np.arange(64, dtype=np.float32))
        data = (folder / "input0.npy").read_bytes()[:-8]
        (folder / "input0.npy").write_bytes(data)
    else:
        assert isinstance(content, bytes)
        (folder / "input0.npy").write_bytes(content)
    before = (folder / "input0.npy").read_bytes()
    done = cli(mismatch, "m.mlir", *MISMATCH, "--report", "r.md", "-o", "x.mlir", "--max-checks", "3")
    assert done.returncode == session.EXIT_USAGE, done.stderr
    assert "holds files ireereduce did not write (input0.npy)" in error_line(done.stderr)
    assert (folder / "input0.npy").read_bytes() == before
    assert_clean(mismatch)


def test_an_array_as_a_run_writes_it_is_the_runs(tmp_path: Path):
    """The other side of D3: a whole array under an input's name is an earlier run's."""
    np.save(tmp_path / "input0.npy", np.arange(6, dtype=np.float32).reshape(2, 3))
    files.check_inputs_folder("--report", str(tmp_path))  # no refusal


def test_an_input_named_like_the_stderr_capture_is_checked_as_itself(tmp_path: Path):
    """D4: the candidate TMP/.ireereduce-stderr was also the check's stderr file, emptied
    before the check ran: a check that passes the input by hand said "not interesting"."""
    case = make_case(tmp_path)
    (case / ".ireereduce-stderr").write_text((case / "input.mlir").read_text())
    done = cli(case, ".ireereduce-stderr", "--check", "./check.sh", "-o", "o.mlir")
    assert done.returncode == session.EXIT_OK, done.stderr
    assert "math.exp" in (case / "o.mlir").read_text()
    assert_clean(case)


def test_a_verdict_lost_on_its_way_back_from_dask_is_executor_lost(tmp_path: Path):
    """W2: the scheduler went as a verdict was fetched: distributed's CommClosedError
    escaped the future's callback as a traceback (the check's future never ending)."""
    from reducer.core.dask_executor import DaskExecutor
    from reducer.core.executor import ExecutorLost
    from reducer.core.oracle import ScriptOracle

    check = make_script(tmp_path / "check.sh", 'grep -q math.exp "$1"')
    executor = DaskExecutor(ScriptOracle(str(check), "in.mlir", 30.0), 1)
    try:

        def gone(*_args: object) -> None:
            raise OSError("Stream is closed")  # what CommClosedError is

        executor._settle = gone  # type: ignore[method-assign]
        with pytest.raises(ExecutorLost, match="the connection to the Dask scheduler was lost"):
            executor.submit(b"math.exp").result(60)
    finally:
        executor.close(abort=True)


def test_an_array_given_through_a_link_is_named_as_the_folder_holds_it(mismatch: Path):
    """W5: `--inputs al.npy`, a link to r.md.inputs/input0.npy, was refused as if the
    folder held al.npy."""
    (mismatch / "r.md.inputs").mkdir()
    np.save(mismatch / "r.md.inputs" / "input0.npy", np.ones(4, dtype=np.float32))
    os.symlink("r.md.inputs/input0.npy", mismatch / "al.npy")
    done = cli(mismatch, "m.mlir", *MISMATCH, "--inputs", "al.npy", "--report", "r.md", "-o", "x.mlir")
    assert done.returncode == session.EXIT_USAGE, done.stderr
    assert "it holds input0.npy (al.npy, an array --inputs gives), which this run reads" in error_line(done.stderr)
    assert_clean(mismatch)


#: A .npy header numpy's parser chokes on (no closing brace): a TokenError, not a ValueError.
UNCLOSED = b"\x93NUMPY\x01\x00\x40\x00" + b"{'descr': '<f4', 'fortran_order': False, 'shape': (1,)".ljust(63) + b"\n"


@pytest.mark.parametrize("where", ["--inputs", "REPORT.inputs"])
def test_a_npy_header_numpy_cannot_parse_is_one_line(mismatch: Path, where: str):
    """Review 24: a header whose parse raised TokenError (or TypeError) was "internal error"."""
    if where == "--inputs":
        (mismatch / "bad.npy").write_bytes(UNCLOSED)
        done = cli(mismatch, "m.mlir", *MISMATCH, "--inputs", "bad.npy", "-o", "x.mlir")
        assert done.returncode == session.EXIT_BAD_INPUT, done.stderr
        assert "--inputs: cannot read 'bad.npy' as a .npy file" in error_line(done.stderr)
    else:
        (mismatch / "r.md.inputs").mkdir()
        (mismatch / "r.md.inputs" / "input0.npy").write_bytes(UNCLOSED)
        done = cli(mismatch, "m.mlir", *MISMATCH, "--report", "r.md", "-o", "x.mlir")
        assert done.returncode == session.EXIT_USAGE, done.stderr
        assert "holds files ireereduce did not write (input0.npy)" in error_line(done.stderr)
        assert (mismatch / "r.md.inputs" / "input0.npy").read_bytes() == UNCLOSED
    assert_clean(mismatch)
