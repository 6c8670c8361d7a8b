"""The twenty-second hostile run's defects: --localize-only outside the run's scope (a
kill -9 left its compiles and temp dirs for good) and writing through a link whose target
appeared during the run; --max-time waiting for checks that run to a long --timeout; a
--timeout past what a thread can wait; a user's text file named input0.npy replaced; a
Dask scheduler lost while the original is checked ("internal error: CancelledError")."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import make_script, needs_iree, on_call
from test_dask import Cluster
from test_faults import assert_clean, cli, env, error_line, wait_for
from test_faults_audit18 import MISMATCH, mismatch_case, wrapped

from reducer import session

F6 = Path(__file__).resolve().parent.parent / "examples" / "f6-legalize" / "model.mlir"
#: Two functions: the check hangs on every candidate that lost the subf (the original answers at once).
TWO = """func.func @f(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %0 = arith.addf %a, %b : tensor<4xf32>
  %1 = math.exp %0 : tensor<4xf32>
  %2 = arith.mulf %1, %a : tensor<4xf32>
  %3 = arith.subf %2, %b : tensor<4xf32>
  return %3 : tensor<4xf32>
}
func.func @g(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = arith.addf %a, %a : tensor<4xf32>
  %1 = arith.mulf %0, %a : tensor<4xf32>
  return %1 : tensor<4xf32>
}
"""


@pytest.mark.e2e
@needs_iree
def test_a_killed_localize_only_leaves_nothing_the_next_run_does_not_sweep(mismatch: Path):
    """D1: --localize-only made its temp dirs in TMPDIR itself and its compiles carried no
    run tag: after a kill -9 they stayed for good. They are the run's now."""
    started = mismatch / "started"
    args = wrapped(mismatch, f"touch {started}; sleep 60")
    run = subprocess.Popen(
        [sys.executable, "-m", "reducer.cli", "m.mlir", *args, "-o", "cut.mlir", "--localize-only", "-j", "2"],
        cwd=mismatch,
        env=env(mismatch),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_for(started.exists)
    run.kill()
    run.wait(30)
    assert list((mismatch / "tmp").iterdir()), "the killed run left nothing: the case tests nothing"
    done = cli(mismatch, "input.mlir", "-c", "./check.sh", "-o", "small.mlir")
    assert done.returncode == session.EXIT_OK, done.stderr
    (mismatch / "cut.mlir.lock").unlink()  # a dead run's lock: the next run on cut.mlir takes it over
    assert_clean(mismatch)


@pytest.mark.e2e
@needs_iree
def test_localize_only_writes_nothing_through_a_link_whose_target_appeared(mismatch: Path):
    """D2: -o latest.mlir, a link to a target.mlir not there yet; the user wrote target.mlir
    during the run, and the cut replaced it (exit 0). Exit 11 now, the user's file kept."""
    os.symlink("target.mlir", mismatch / "latest.mlir")
    calls, target = mismatch / "calls", mismatch / "target.mlir"
    args = wrapped(mismatch, on_call(calls, 2, f"echo mine > {target}"))
    done = cli(mismatch, "m.mlir", *args, "-o", "latest.mlir", "--localize-only")
    assert done.returncode == session.EXIT_CHECK_CHANGED_FILES, done.stderr
    assert "latest.mlir changed during the run (someone else's now); nothing written" in error_line(done.stderr)
    assert target.read_text() == "mine\n"
    assert_clean(mismatch)


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_max_time_does_not_wait_for_checks_that_run_to_their_timeout(tmp_path: Path, jobs: str):
    """D3: the engine waited for a running check to come back before it looked at the
    clock: with --timeout 1000, a --max-time 5 run was still going at 40 s."""
    case = mismatch_case(tmp_path)
    (case / "two.mlir").write_text(TWO)
    make_script(
        case / "hangs.sh", 'case "$(cat "$1")" in *arith.subf*) grep -q math.exp "$1";; *) exec sleep 600;; esac'
    )
    done = cli(case, "two.mlir", "-c", "./hangs.sh", "-j", jobs, "--timeout", "1000", "--max-time", "5")
    assert done.returncode == session.EXIT_STOPPED, done.stderr
    assert "stopped (--max-time 5 s reached)" in done.stderr
    assert_clean(case)


@pytest.mark.parametrize("option", ["--timeout", "--max-time", "--heartbeat", "--slower-than"])
def test_seconds_past_what_a_wait_can_hold_are_refused(mismatch: Path, option: str):
    """D5: --timeout 1e10 was taken, then a thread's timer died in an OverflowError."""
    done = cli(mismatch, "input.mlir", "-c", "./check.sh", option, "1e10")
    assert done.returncode == session.EXIT_USAGE, done.stderr
    line = error_line(done.stderr)
    assert f"{option} 1e+10 is more seconds than a run can wait (about 3 years): give at most 1e+08" in line
    assert_clean(mismatch)


@pytest.mark.parametrize(
    "folder, args",
    [
        ("r.md.inputs", ["--report", "r.md", "-o", "x.mlir", "--max-checks", "3"]),
        ("cut.mlir.inputs", ["-o", "cut.mlir", "--localize-only", "--fresh"]),
    ],
)
def test_a_file_only_named_like_an_input_array_is_the_users(mismatch: Path, folder: str, args: list[str]):
    """D6 (and W5, with --fresh): notes of the user's named input0.npy in REPORT.inputs or
    OUTPUT.inputs were taken for an array an earlier run wrote, and replaced."""
    (mismatch / folder).mkdir()
    (mismatch / folder / "input0.npy").write_text("my precious notes\n")
    done = cli(mismatch, "m.mlir", *MISMATCH, *args)
    assert done.returncode == session.EXIT_USAGE, done.stderr
    assert "holds files ireereduce did not write (input0.npy)" in error_line(done.stderr)
    assert (mismatch / folder / "input0.npy").read_text() == "my precious notes\n"
    assert os.listdir(mismatch / folder) == ["input0.npy"]
    assert_clean(mismatch)


def test_a_scheduler_lost_while_the_original_is_checked_is_exit_12(mismatch: Path):
    """D7: the client's checks were cancelled under it: "internal error: CancelledError"."""
    cluster = Cluster(mismatch / "cluster", workers=1)
    try:
        started = mismatch / "started"
        make_script(mismatch / "slow.sh", f'touch {started}\nsleep 6\ngrep -q math.exp "$1"')
        argv = [sys.executable, "-m", "reducer.cli", "input.mlir", "-c", "./slow.sh", "-o", "o.mlir"]
        argv += ["--executor", "dask", "--scheduler", cluster.address]
        run = subprocess.Popen(argv, cwd=mismatch, env=env(mismatch), stderr=subprocess.PIPE, text=True)
        wait_for(started.exists)
        os.kill(cluster.procs[0].pid, signal.SIGKILL)
        _, stderr = run.communicate(timeout=120)
    finally:
        cluster.close()
    assert run.returncode == session.EXIT_EXECUTOR, stderr
    assert "the Dask cluster cancelled a check: the connection to its scheduler was lost" in error_line(stderr)
    assert not (mismatch / "o.mlir").exists()
    assert_clean(mismatch)


def test_a_resource_named_twice_is_refused(mismatch: Path):
    """W2: `--resources GPU=1,GPU=2` took the last without a word."""
    done = cli(mismatch, "input.mlir", "-c", "./check.sh", "--executor", "dask", "--resources", "GPU=1,GPU=2")
    assert done.returncode == session.EXIT_USAGE, done.stderr
    assert "GPU is named twice: give each resource once" in error_line(done.stderr)
    assert_clean(mismatch)


def test_complex_inputs_are_refused_not_cut_to_their_real_parts(mismatch: Path):
    """W3: a complex64 array for a tensor<4xf32> argument ran as its real parts, unsaid."""
    np.save(mismatch / "c.npy", np.array([1 + 1j, 2, 3, 4], dtype=np.complex64))
    np.save(mismatch / "b.npy", np.ones(4, dtype=np.float32))
    done = cli(mismatch, "m.mlir", *MISMATCH, "--inputs", "c.npy,b.npy", "-o", "cut.mlir", "--localize-only")
    assert done.returncode == session.EXIT_BAD_INPUT, done.stderr
    assert "'c.npy' holds complex numbers (complex64), which no argument takes here" in error_line(done.stderr)
    assert not (mismatch / "cut.mlir").exists()
    assert_clean(mismatch)


@pytest.mark.e2e
@needs_iree
def test_a_cluster_lost_before_the_reduction_is_exit_12(tmp_path: Path):
    """Review 23: a cluster lost in a step between the original's check and the engine's
    start (here: the phase search's first compile) escaped as "internal error", exit 1."""
    from reducer.core.executor import ExecutorLost, LocalExecutor

    class Lost(LocalExecutor):
        def submit(self, data, oracle=None):
            if oracle is not None and any(a.startswith("--compile-to=") for a in oracle.command.extra):
                raise ExecutorLost("the Dask client lost its scheduler and closed; no check can run")
            return super().submit(data, oracle)

    flags = "--iree-hal-target-device=local --iree-hal-local-target-device-backends=llvm-cpu"
    compile = f"iree-compile {{input}} {flags} --iree-llvmcpu-target-cpu=generic -o {{output}}"
    settings = session.Settings(input=str(F6), compile=compile, output=str(tmp_path / "o.mlir"), jobs=2)
    with pytest.raises(session.UserError) as err:
        session.reduce_file(settings, executor_factory=Lost)
    assert err.value.code == session.EXIT_EXECUTOR, err.value
    assert str(err.value).startswith("the Dask client lost its scheduler and closed; no check can run")
    assert not (tmp_path / "o.mlir").exists()


def test_a_check_submitted_after_the_client_gave_up_is_executor_lost(tmp_path: Path):
    """Review 23: with no check in flight when the scheduler went, the client closed after
    its reconnect timeout and the next submit raised ClosedClientError: exit 1."""
    from reducer.core.dask_executor import DaskExecutor
    from reducer.core.executor import ExecutorLost
    from reducer.core.oracle import ScriptOracle

    check = make_script(tmp_path / "check.sh", 'grep -q math.exp "$1"')
    cluster = Cluster(tmp_path / "cluster", workers=1)
    executor = None
    try:
        executor = DaskExecutor(ScriptOracle(str(check), "in.mlir", 30.0), 1, scheduler=cluster.address)
        assert executor.run(b"math.exp").interesting
        os.kill(cluster.procs[0].pid, signal.SIGKILL)
        wait_for(lambda: executor.client.status == "closed")
        with pytest.raises(ExecutorLost, match="the Dask client lost its scheduler and closed"):
            executor.submit(b"math.exp")
    finally:
        if executor is not None:
            executor.close(abort=True)
        cluster.close()
