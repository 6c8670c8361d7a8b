"""The third hostile run (issue 27): a low address-space limit (`ulimit -v`) ended in
"internal error: ImportError: ... failed to map segment" (400 MiB), or in OpenBLAS
giving up and exiting the process with the run's temp dir left behind (580 MiB). It is
one line and exit 12 before anything is started."""

from __future__ import annotations

import resource
import subprocess
from pathlib import Path

import pytest
from test_faults import assert_clean, command, error_line
from test_faults_audit import make_case

from reducer import session
from reducer.core import limits


@pytest.fixture
def case(tmp_path: Path) -> Path:
    return make_case(tmp_path)


def _limited(mib: int):  # type: ignore[no-untyped-def]
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (mib << 20, resource.getrlimit(resource.RLIMIT_AS)[1]))

    return limit


@pytest.mark.parametrize("mib", [400, 580])
def test_a_low_address_space_limit_is_one_line_and_leaves_nothing(case: Path, mib: int):
    """Run as a user runs it (`python -m reducer`, the command's entry point)."""
    done = command(case, "input.mlir", "--check", "./check.sh", "-q", preexec_fn=_limited(mib))
    assert done.returncode == session.EXIT_EXECUTOR, done.stderr
    line = error_line(done.stderr)
    assert f"ulimit -v) is {mib} MiB" in line and "raise it" in line
    assert not (case / "input.reduced.mlir").exists()
    assert_clean(case)


def test_the_floor_is_what_the_check_compares_against(monkeypatch):
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    monkeypatch.setattr(resource, "getrlimit", lambda which: (limits.MIN_ADDRESS_SPACE - 1, hard))
    assert limits.address_space_short() is not None
    monkeypatch.setattr(resource, "getrlimit", lambda which: (limits.MIN_ADDRESS_SPACE, hard))
    assert limits.address_space_short() is None
    monkeypatch.setattr(resource, "getrlimit", lambda which: (resource.RLIM_INFINITY, hard))
    assert limits.address_space_short() is None


def test_a_stderr_that_takes_nothing_leaves_the_exit_code_the_runs(case: Path):
    """The third hostile run: with stderr on a full disk, a run that reduced and wrote its
    output exited 1 (internal error), as the summary's write raised after the run."""
    with open("/dev/full", "w") as full:
        done = command(
            case, "input.mlir", "--check", "./check.sh", "-o", "out.mlir", stdout=subprocess.DEVNULL, stderr=full
        )
    assert done.returncode == session.EXIT_OK
    assert "math.exp" in (case / "out.mlir").read_text()
    assert_clean(case)
