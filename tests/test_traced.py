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


def _sleeper(tmp_path: Path):
    """Work that writes its pid into its folder's 'pid' file, then runs a minute (cancellable)."""
    from reducer.core.oracle import run_in

    def work(oracle, folder, cancel):
        script = make_script(tmp_path / "sleep.sh", f'echo $$ > "{folder}/pid"\nexec sleep 60')
        return run_in([str(script)], folder, None, cancel=cancel)

    return work


def test_the_work_and_its_folder_end_with_the_block(tmp_path: Path):
    """The folder a piece of work keeps (the dumped sources) lives until the run's block
    ends, and not longer; work that wants none gets none."""
    import contextlib

    from reducer.session.traced import Alongside

    work = Alongside(lambda o: True, _sleeper(tmp_path), lambda r, o, v: True, 1.0, None, str, wants_folder=True)
    with contextlib.closing(work):
        assert work.start(object(), now=True)  # type: ignore[arg-type]
        _started_in(work)
        folder = work.folder
        assert folder is not None and os.path.isdir(folder)
        pid = int(Path(folder, "pid").read_text())
    assert not os.path.exists(folder) and not _alive(pid)
    assert traced_original(b"", "in.mlir", None).folder is None


def _started_in(work) -> None:
    for _ in range(500):
        if work.folder is not None and Path(work.folder, "pid").exists() and Path(work.folder, "pid").read_text():
            return
        time.sleep(0.01)
    raise AssertionError("the work never started")


def test_work_read_after_the_check_starts_its_budget_then():
    """Review 20 S1: with one worker the work runs after the original's check; its time
    budget counted from before that check, so it had less time than at -j 2."""
    from reducer.session.traced import Alongside

    work = Alongside(lambda o: True, lambda o, f, c: "done", lambda r, o, v: True, 1.0, None, str)
    assert work.start(object(), now=False)  # type: ignore[arg-type]
    assert work.began is None  # not started: it runs when read
    before = time.monotonic()
    assert work.result() == "done"
    assert work.began is not None and work.began >= before


def test_the_budget_is_the_checks_calibrated_timeout_times_the_factor():
    """The work may take `factor` times the timeout a check gets: --timeout if given, else
    ten times the original's check plus 5 s (`settings.check_timeout`, as the start sets it)."""
    from reducer.session.settings import check_timeout
    from reducer.session.traced import Alongside

    for given, budget in ((None, 10.0 * (10 * 2.0 + 5.0)), (7.0, 70.0)):
        work = Alongside(lambda o: True, lambda o, f, c: "done", lambda r, o, v: True, 10.0, given, str)
        work.time_after(Verdict(True, 0, seconds=2.0, outcome="interesting"))
        assert work.budget == budget
    assert check_timeout(None, 2.0, 3.0) == 11.0  # an oracle that measures time: three times
