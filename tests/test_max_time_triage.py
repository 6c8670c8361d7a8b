"""--max-time holds in IREE's triage steps, between the original's check and the
reduction: a dispatch isolation compiles every executable, a phase search several stops.
Told to stop at 6 s, a run went on isolating for 47 (exit 13 then, nothing written, but
late). `limits.Bounded` ends their waits at the deadline and cancels what still runs."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import make_script, needs_iree
from test_executor import alive, wait_for
from test_faults import assert_clean, cli, error_line

from reducer import session
from reducer.core import limits
from reducer.core.engine import Stopped
from reducer.core.executor import LocalExecutor
from reducer.core.oracle import ScriptOracle
from reducer.core.rundirs import run_scope

F6 = Path(__file__).resolve().parent.parent / "examples" / "f6-legalize" / "model.mlir"


@pytest.fixture
def pool(tmp_path: Path) -> Iterator[LocalExecutor]:
    """Two workers whose check sleeps (its PID in marks/) on a candidate that says "slow"."""
    (tmp_path / "marks").mkdir()
    body = f'grep -q slow "$1" || exit 0\necho > {tmp_path}/marks/$$\nexec sleep 60'
    script = make_script(tmp_path / "check.sh", body)
    with run_scope():
        executor = LocalExecutor(ScriptOracle(str(script), "in.mlir", 120.0), 2)
        try:
            yield executor
        finally:
            executor.close(abort=True)


def test_bounded_waits_end_at_the_deadline_and_its_checks_are_killed(pool: LocalExecutor, tmp_path: Path):
    bounded = limits.Bounded(pool, time.monotonic() + 60, "--max-time 60 s reached")
    assert bounded.run(b"fast").interesting and not bounded.expired()
    bounded.deadline = time.monotonic() + 1
    with pytest.raises(Stopped, match="--max-time 60 s reached"):
        bounded.map([b"slow 1", b"slow 2"])
    assert bounded.expired()
    pids = [int(p.name) for p in (tmp_path / "marks").iterdir()]
    assert pids, "the slow checks never started"
    assert wait_for(lambda: not any(alive(p) for p in pids), 30), "the checks still run past the deadline"
    submitted = pool.stats.checks
    with pytest.raises(Stopped):
        bounded.run(b"fast")
    with pytest.raises(Stopped):
        bounded.map([b"fast"])
    assert pool.stats.checks == submitted, "a check was started past the deadline"
    assert pool.run(b"fast").interesting  # the caller's executor goes on


def _compile(case: Path, hang_on: str) -> str:
    """The f6 example's compile, through an `iree-compile` in case/bin that hangs when its
    arguments hold `hang_on` (one triage step's compiles) and else runs the real one."""
    real = shutil.which("iree-compile")
    assert real is not None
    (case / "bin").mkdir()
    make_script(case / "bin" / "iree-compile", f'case "$*" in *{hang_on}*) exec sleep 600;; esac\nexec {real} "$@"')
    flags = "--iree-hal-target-device=local --iree-hal-local-target-device-backends=llvm-cpu"
    return f"{case / 'bin' / 'iree-compile'} {{input}} {flags} --iree-llvmcpu-target-cpu=generic -o {{output}}"


@pytest.mark.e2e
@needs_iree
@pytest.mark.parametrize(
    "step, hang_on, flags",
    [
        ("the isolation's dump, run here", "--compile-to=executable-sources", ["--isolate-dispatch"]),
        ("the executables compiled alone", "--compile-mode=hal-executable", ["--isolate-dispatch"]),
        ("the phase search", "--compile-to=", []),
        ("the pass-level reproducer, written here", "--mlir-pass-pipeline-crash-reproducer", ["--pass-level"]),
    ],
)
def test_max_time_holds_in_the_steps_before_the_reduction(tmp_path: Path, step: str, hang_on: str, flags: list[str]):
    case = tmp_path
    (case / "tmp").mkdir()
    shutil.copy(F6, case / "model.mlir")
    command = _compile(case, hang_on)
    args = ["model.mlir", "--compile", command, *flags, "-j", "2", "-o", "o.mlir", "--timeout", "300"]
    done = cli(case, *args, "--max-time", "20")
    assert done.returncode == session.EXIT_STOPPED, (step, done.stderr)
    assert (
        "--max-time 20 s ran out in the steps before the reduction (the original fails as it should); "
        "nothing was written" in error_line(done.stderr)
    ), step
    assert not (case / "o.mlir").exists()
    assert_clean(case)
