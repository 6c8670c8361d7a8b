"""The nineteenth hostile run's defects: a link, a FIFO or a folder under an input's name
in a report's inputs folder (written through, waited on, or an internal error at the end),
and a damaged start program in the state directory."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from conftest import needs_iree
from test_faults import assert_clean, cli, error_line
from test_faults_audit import make_case
from test_faults_audit18 import MISMATCH, wrapped

from reducer import session
from reducer.iree.evidence import _save


@pytest.fixture
def case(tmp_path: Path) -> Path:
    return make_case(tmp_path)


def _plant(folder: Path, kind: str, victim: Path) -> None:
    entry = folder / "input0.npy"
    if kind == "symlink":
        entry.symlink_to(victim)
    elif kind == "hard link":
        os.link(victim, entry)
    elif kind == "fifo":
        os.mkfifo(entry)
    else:
        entry.mkdir()


@pytest.mark.parametrize("kind", ["symlink", "hard link", "fifo", "folder"])
@pytest.mark.parametrize("report", ["--report", "--report-json"])
def test_an_inputs_folder_entry_that_is_not_a_plain_file_is_refused(case: Path, kind: str, report: str):
    """D1-D3: the folder check read names only: a link named input0.npy had the user's
    file it leads to overwritten with an array, a FIFO hung the run after the reduction,
    and a folder ended it in an internal error. Refused up front now."""
    victim = case / "precious.txt"
    victim.write_text("mine\n")
    (case / "r.inputs").mkdir()
    _plant(case / "r.inputs", kind, victim)
    done = cli(case, "input.mlir", "--check", "./check.sh", "-o", "o.mlir", report, "r")
    assert done.returncode == session.EXIT_USAGE, done.stderr
    assert "holds files ireereduce did not write (input0.npy)" in error_line(done.stderr)
    assert victim.read_text() == "mine\n" and not (case / "o.mlir").exists()
    assert_clean(case)


@pytest.mark.parametrize("kind", ["symlink", "fifo"])
def test_an_input_array_replaces_what_is_under_its_name(tmp_path: Path, kind: str):
    """What appears under an input's name during the run is replaced, never written
    through (a link) nor waited on (a FIFO)."""
    victim = tmp_path / "precious.txt"
    victim.write_text("mine\n")
    _plant(tmp_path, kind, victim)
    _save(str(tmp_path / "input0.npy"), np.arange(3, dtype=np.float32))
    assert victim.read_text() == "mine\n"
    assert np.load(tmp_path / "input0.npy").tolist() == [0, 1, 2]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["input0.npy", "precious.txt"]


# -- the weak points ---------------------------------------------------------------------
@pytest.mark.e2e
@needs_iree
def test_localize_only_that_finds_no_dispatch_writes_nothing_and_says_so(mismatch: Path):
    """W1: a traced run that failed gave "no dispatch found" on stdout and exit 5, which
    says the original does not mismatch (it does: the reduction goes on with the whole
    program). One line, exit 16, nothing written."""
    args = wrapped(mismatch, 'case "$*" in *trace-dispatch*) echo "error: boom" >&2; exit 1;; esac')
    done = cli(mismatch, "m.mlir", *args, "-o", "cut.mlir", "--localize-only")
    assert done.returncode == session.EXIT_NOT_LOCALIZED, done.stderr
    line = error_line(done.stderr)
    assert "no dispatch found, nothing written: the traced run failed" in line and "boom" in line, line
    assert not (mismatch / "cut.mlir").exists() and not (mismatch / "cut.mlir.inputs").exists()
    assert_clean(mismatch)


@pytest.mark.e2e
@needs_iree
def test_localize_only_on_an_original_that_times_out_says_so_as_a_reduction_does(mismatch: Path):
    """W1: --timeout shorter than a compile exited 5 ("does not mismatch: timeout"),
    where the reduction of the same command exits 6."""
    done = cli(mismatch, "m.mlir", *MISMATCH, "--timeout", "0.05", "-o", "cut.mlir", "--localize-only")
    assert done.returncode == session.EXIT_CHECK_HANGS, done.stderr
    assert "did not finish on the original input within 0.05 s" in error_line(done.stderr)
    assert not (mismatch / "cut.mlir").exists()
    assert_clean(mismatch)


@pytest.mark.parametrize(
    "limit",
    [
        ["--max-time", "5"],
        ["--max-checks", "0"],
        ["--repeat", "2"],
        ["--executor", "dask"],
        ["--scheduler", "tcp://127.0.0.1:1"],
        ["--check-files", "m.mlir"],
        ["--resources", "GPU=1"],
    ],
)
def test_localize_only_refuses_what_it_would_ignore(mismatch: Path, limit: list[str]):
    """W2: --localize-only ran whole past --max-time and --max-checks, once whatever
    --repeat said, and on this machine whatever --executor and its options said."""
    done = cli(mismatch, "m.mlir", *MISMATCH, *limit, "-o", "cut.mlir", "--localize-only")
    assert done.returncode == session.EXIT_USAGE, done.stderr
    line = error_line(done.stderr)
    assert limit[0] in line and "--localize-only runs each side once, traced, on this machine" in line, line
    assert_clean(mismatch)


def test_localize_only_keeps_no_state(mismatch: Path):
    done = cli(mismatch, "m.mlir", *MISMATCH, "--state-dir", "st", "-o", "cut.mlir", "--localize-only")
    assert done.returncode == session.EXIT_USAGE, done.stderr
    assert "--state-dir goes with a reduction" in error_line(done.stderr)
    assert not (mismatch / "st").exists()
    assert_clean(mismatch)


@pytest.mark.e2e
@needs_iree
def test_localize_only_takes_the_defaults_as_not_given(mismatch: Path):
    """The refusals read what was given, not a default (--repeat 1, --executor local)."""
    done = cli(
        mismatch, "m.mlir", *MISMATCH, "--repeat", "1", "--executor", "local", "--localize-only", "--timeout", "0.05"
    )
    assert done.returncode == session.EXIT_CHECK_HANGS, done.stderr


def test_a_missing_script_given_with_arguments_is_named_alone(mismatch: Path):
    """W5: `-c "./a.sh math.exp"` with no a.sh named the whole string as the script; it
    may be one name with a space too, so both are said. A first word that is a folder
    is said to be one."""
    done = cli(mismatch, "input.mlir", "-c", "./a.sh math.exp", "-o", "o.mlir")
    assert done.returncode == session.EXIT_BAD_CHECK, done.stderr
    line = error_line(done.stderr)
    assert "'./a.sh math.exp' does not exist, nor does './a.sh', were the rest its arguments" in line, line
    (mismatch / "checks").mkdir()
    done = cli(mismatch, "input.mlir", "-c", "./checks math.exp", "-o", "o.mlir")
    assert done.returncode == session.EXIT_BAD_CHECK, done.stderr
    assert "check script './checks' is a directory" in error_line(done.stderr)


@pytest.mark.parametrize("given", [["--test-arg", "o.mlir"], ["-c", "./check.sh o.mlir"]])
@pytest.mark.parametrize("flag", ["-o", "--stats-json"])
def test_a_path_the_check_is_given_is_protected_before_it_exists(mismatch: Path, given: list[str], flag: str):
    """W6: a path the check is given was protected only if it existed at the start:
    `--test-arg o.mlir -o o.mlir` gave the check the output the run rewrites."""
    check = [] if given[0] == "-c" else ["-c", "./check.sh"]
    done = cli(mismatch, "input.mlir", *check, *given, flag, "o.mlir")
    assert done.returncode == session.EXIT_USAGE, done.stderr
    assert f"{flag} o.mlir is o.mlir, which the check is given" in error_line(done.stderr)
    assert not (mismatch / "o.mlir").exists()
    assert_clean(mismatch)


def test_a_device_the_check_is_given_is_no_file_to_keep(mismatch: Path):
    """`--test-arg /dev/null --log-file /dev/null` ran before the W6 fix, and runs."""
    done = cli(mismatch, "input.mlir", "-c", "./check.sh", "--test-arg", "/dev/null", "--log-file", "/dev/null")
    assert done.returncode == session.EXIT_OK, done.stderr
    assert_clean(mismatch)


@pytest.mark.e2e
@needs_iree
def test_localize_only_that_cannot_cut_the_dispatch_writes_nothing(mismatch: Path):
    """The dispatch found but not cut out (here its flow IR cannot be made) exited 0
    with nothing written; 16 now, and an earlier cut (with --fresh) is said to be kept."""
    args = wrapped(mismatch, 'case "$*" in *compile-to=flow*) echo "error: flow boom" >&2; exit 1;; esac')
    (mismatch / "cut.mlir").write_text("earlier\n")
    done = cli(mismatch, "m.mlir", *args, "-o", "cut.mlir", "--localize-only", "--fresh")
    assert done.returncode == session.EXIT_NOT_LOCALIZED, done.stderr
    line = error_line(done.stderr)
    assert "the dispatch was not cut out, nothing written (cut.mlir from before is kept)" in line, line
    assert "flow boom" in line and "dispatch #" in done.stdout
    assert (mismatch / "cut.mlir").read_text() == "earlier\n" and not (mismatch / "cut.mlir.inputs").exists()
    assert_clean(mismatch)
