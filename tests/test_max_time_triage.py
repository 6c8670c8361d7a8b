"""--max-time holds in the steps between the original's check and the reduction: IREE's
triage (a dispatch isolation compiles every executable, a phase search several stops, a
localisation compiles to flow to cut), the check of an earlier output, the re-printed
start's check. Told to stop at 6 s, a run went on isolating for 47 (exit 13 then, nothing
written, but late). `limits.Bounded` ends their waits at the deadline and cancels what
still runs."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import make_script, needs_iree
from test_executor import alive, wait_for
from test_faults import assert_clean, cli, error_line
from test_faults_audit18 import mismatch_case, wrapped

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


STOPPED = "--max-time {} s ran out in the steps before the reduction (the original fails as it should); "


@pytest.mark.e2e
@needs_iree
def test_max_time_holds_while_a_localised_dispatch_is_cut_out(tmp_path: Path):
    """The cut's --compile-to=flow compiles ran to their timeout: 168 s for --max-time 15."""
    case = mismatch_case(tmp_path)
    args = wrapped(case, 'case "$*" in *--compile-to=flow*) exec sleep 600;; esac')
    done = cli(case, "m.mlir", *args, "-j", "2", "-o", "o.mlir", "--timeout", "300", "--max-time", "20")
    assert done.returncode == session.EXIT_STOPPED, done.stderr
    assert STOPPED.format(20) + "nothing was written" in error_line(done.stderr)
    assert not (case / "o.mlir").exists()
    assert_clean(case)


def test_max_time_holds_while_an_earlier_output_is_checked(tmp_path: Path):
    """An earlier result in -o is checked twice before the run starts from it: at its
    check's pace (20 s for --max-time 5), not --max-time's."""
    case = mismatch_case(tmp_path)
    make_script(case / "slow.sh", 'grep -q SLOW "$1" && exec sleep 600\ngrep -q math.exp "$1"')
    earlier = "// SLOW\nfunc.func @f(%a: f32) -> f32 {\n  %e = math.exp %a : f32\n  return %e : f32\n}\n"
    (case / "o.mlir").write_text(earlier)
    done = cli(case, "input.mlir", "-c", "./slow.sh", "-j", "2", "-o", "o.mlir", "--max-time", "5", "--timeout", "300")
    assert done.returncode == session.EXIT_STOPPED, done.stderr
    assert STOPPED.format(5) + "nothing was written" in error_line(done.stderr)
    assert (case / "o.mlir").read_text() == earlier
    assert_clean(case)


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_max_time_holds_while_the_reprinted_start_is_checked(tmp_path: Path, jobs: str):
    """The check accepts the input as written only (its comment), and the start as MLIR
    prints it is checked before the engine's first round: that check ran to its end
    (31 s for --max-time 3, the early re-print's wait too). Its state is kept to resume."""
    case = mismatch_case(tmp_path)
    (case / "input.mlir").write_text("// marker\n" + (case / "input.mlir").read_text())
    make_script(case / "marked.sh", 'grep -q "// marker" "$1" && exit 0\nexec sleep 600')
    done = cli(
        case, "input.mlir", "-c", "./marked.sh", "-j", jobs, "-o", "o.mlir", "--max-time", "5", "--timeout", "900"
    )
    assert done.returncode == session.EXIT_STOPPED, done.stderr
    assert STOPPED.format(
        5
    ) + "nothing but its state was written; rerun the same command to continue (state in o.mlir.resume)" in error_line(
        done.stderr
    )
    assert not (case / "o.mlir").exists()
    assert_clean(case)


def test_max_time_holds_while_flags_are_reduced(mismatch: Path):
    """After the engine, flag reduction read each try's verdict without a deadline: a try
    that hangs held the run to its --timeout. It stops at --max-time, the output kept."""
    make_script(
        mismatch / "fc",
        'case "$*" in *--keep-me*) ;; *) exec sleep 600;; esac\n'
        'grep -q math.exp "$1" || exit 0\necho "error: failed to legalize math.exp" >&2\nexit 1',
    )
    command = f"{mismatch / 'fc'} {{input}} --keep-me --drop-me -o {{output}}"
    done = cli(mismatch, "input.mlir", "--compile", command, "-o", "o.mlir", "--max-time", "10", "--timeout", "300")
    assert done.returncode == session.EXIT_STOPPED, done.stderr
    assert "stopped (--max-time 10 s reached); the smallest interesting program so far is in o.mlir" in done.stderr
    assert "math.exp" in (mismatch / "o.mlir").read_text()
    assert_clean(mismatch)
