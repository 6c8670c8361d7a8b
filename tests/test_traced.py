"""Work beside the original's check (reducer/session/traced.py): it ends with the run,
it is cut off when it takes far longer than a check, and its folder goes with it."""

from __future__ import annotations

import os
import time
from pathlib import Path

from conftest import make_script

from reducer.core.oracle import Cancelled, Verdict
from reducer.iree.oracles import MismatchOracle, parse_command
from reducer.session.traced import traced_original


def _slow_sides(tmp_path: Path) -> tuple[MismatchOracle, Path]:
    """A mismatch oracle whose compile writes its pid, then sleeps a minute."""
    pids = tmp_path / "pids"
    compile_ = make_script(tmp_path / "compile.sh", f'echo $$ >> "{pids}"\nexec sleep 60')
    command = parse_command(f"{compile_} {{input}} -o {{output}}", needs_output=True)
    return MismatchOracle(command, command, "in.mlir", 300.0), pids


def _started(pids: Path) -> int:
    for _ in range(500):
        if pids.exists() and pids.read_text().strip():
            return int(pids.read_text().split()[0])
        time.sleep(0.01)
    raise AssertionError("the traced compile never started")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_the_traced_run_ends_with_the_run(tmp_path: Path):
    """A stop while the original is checked cancels what runs beside it: its thread
    ends and its compile is killed, not left running after the run."""
    oracle, pids = _slow_sides(tmp_path)
    traced = traced_original(b"module {}\n", "in.mlir", None)
    assert traced.start(oracle, now=True)
    pid = _started(pids)
    traced.cancel()
    assert traced.thread is not None and not traced.thread.is_alive()
    assert isinstance(traced.done, Cancelled)  # stopped, not run to its end
    assert not _alive(pid)


def test_a_traced_run_far_longer_than_a_check_is_cut_off(tmp_path: Path):
    """Once the original's check is done, the traced run gets TRACE_TIMEOUT_FACTOR
    times that check's timeout (here --timeout 0.1 s: one second), not the uncalibrated
    oracle's 300 s. It then neither stands in for the second check nor localises."""
    oracle, pids = _slow_sides(tmp_path)
    traced = traced_original(b"module {}\n", "in.mlir", 0.1)
    assert traced.start(oracle, now=True)
    pid = _started(pids)
    assert not traced.agrees(Verdict(True, 0, seconds=0.05, outcome="interesting"))
    traces = traced.result()
    assert traces is not None and traces.failed.startswith("the traced run timed out after")
    assert not _alive(pid)


def test_only_a_mismatch_is_traced(tmp_path: Path):
    from reducer.core.oracle import ScriptOracle

    traced = traced_original(b"module {}\n", "in.mlir", None)
    assert not traced.start(ScriptOracle(str(tmp_path / "check.sh"), "in.mlir", 1.0), now=True)
    assert traced.thread is None and traced.result() is None


def test_the_work_and_its_folder_end_with_the_block(tmp_path: Path):
    """The folder a piece of work keeps (the dumped sources) lives until the run's block
    ends, and not longer."""
    import contextlib

    oracle, pids = _slow_sides(tmp_path)
    with contextlib.closing(traced_original(b"module {}\n", "in.mlir", None)) as traced:
        assert traced.start(oracle, now=True)
        pid = _started(pids)
        assert traced.folder is not None and os.path.isdir(traced.folder)
    assert not os.path.exists(traced.folder) and not _alive(pid)
