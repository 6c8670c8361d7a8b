"""The third hostile run (issue 27): a low address-space limit (`ulimit -v`) ended in
"internal error: ImportError: ... failed to map segment" (400 MiB), or in OpenBLAS
giving up and exiting the process with the run's temp dir left behind (580 MiB). It is
one line and exit 12 before anything is started."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import make_script
from test_faults import SMALL, assert_clean, env, error_line

from reducer import session
from reducer.core import limits


@pytest.fixture
def case(tmp_path: Path) -> Path:
    (tmp_path / "input.mlir").write_text(SMALL)
    (tmp_path / "tmp").mkdir()
    make_script(tmp_path / "check.sh", 'grep -q math.exp "$1"')
    return tmp_path


def _limited(mib: int):  # type: ignore[no-untyped-def]
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (mib << 20, resource.getrlimit(resource.RLIMIT_AS)[1]))

    return limit


@pytest.mark.parametrize("mib", [400, 580])
def test_a_low_address_space_limit_is_one_line_and_leaves_nothing(case: Path, mib: int):
    """Run as a user runs it (`python -m reducer`, the command's entry point)."""
    done = subprocess.run(
        [sys.executable, "-m", "reducer", "input.mlir", "--check", "./check.sh", "-q"],
        cwd=case,
        capture_output=True,
        text=True,
        timeout=120,
        env=env(case),
        preexec_fn=_limited(mib),
    )
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
        done = subprocess.run(
            [sys.executable, "-m", "reducer", "input.mlir", "--check", "./check.sh", "-o", "out.mlir"],
            cwd=case,
            stdout=subprocess.DEVNULL,
            stderr=full,
            timeout=120,
            env=env(case),
        )
    assert done.returncode == session.EXIT_OK
    assert "math.exp" in (case / "out.mlir").read_text()
    assert_clean(case)
