"""Repeated checks of one program (the original's two, the final re-checks, the walk
back) run at once on the executor's workers, are read in order, and stop at the first
verdict that settles the question; an oracle that measures time runs them one by one."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import attrs
from conftest import make_script

from reducer.core.executor import LocalExecutor
from reducer.core.oracle import ScriptOracle
from reducer.session import check_repeatedly


@attrs.frozen
class TimedScript(ScriptOracle):
    measures_time: ClassVar[bool] = True


def spans(log: Path) -> list[tuple[float, float]]:
    """(start, end) of every check, from the lines the script wrote."""
    starts, ends = [], []
    for line in log.read_text().split():
        what, when = line.split(":")
        (starts if what == "start" else ends).append(float(when))
    return list(zip(sorted(starts), sorted(ends), strict=True))


def script(tmp_path: Path, log: Path, body: str = "exit 0") -> str:
    stamp = "python3 -c 'import time; print(time.time())'"
    return str(
        make_script(
            tmp_path / "check.sh",
            f'echo "start:$({stamp})" >> {log}; sleep 0.6; echo "end:$({stamp})" >> {log}\n{body}',
        )
    )


def test_repeated_checks_run_at_once(tmp_path: Path):
    log = tmp_path / "log"
    with LocalExecutor(None, 3) as ex:
        read = check_repeatedly(ex, ScriptOracle(script(tmp_path, log), "in.mlir", 30.0), b"x", 3, lambda v: False)
    assert [v.interesting for v in read] == [True, True, True]
    runs = spans(log)
    assert len(runs) == 3
    assert max(start for start, _ in runs) < min(end for _, end in runs), runs  # all three overlapped


def test_an_oracle_that_measures_time_checks_one_at_a_time(tmp_path: Path):
    log = tmp_path / "log"
    with LocalExecutor(None, 3) as ex:
        read = check_repeatedly(ex, TimedScript(script(tmp_path, log), "in.mlir", 30.0), b"x", 2, lambda v: False)
    assert len(read) == 2
    (_, first_end), (second_start, _) = spans(log)
    assert second_start >= first_end  # parallel runs would compete for the CPUs it measures


def test_reading_stops_at_the_verdict_that_settles_it_and_cancels_the_rest(tmp_path: Path):
    log = tmp_path / "log"
    oracle = ScriptOracle(script(tmp_path, log, "exit 1"), "in.mlir", 30.0)
    with LocalExecutor(None, 1) as ex:
        read = check_repeatedly(ex, oracle, b"x", 3, lambda v: not v.interesting)
        assert [v.interesting for v in read] == [False]
        assert ex.stats.cancelled == 2
    # The first one ran to its end; a queued one may have started before its cancel arrived.
    assert log.read_text().count("end:") == 1


def test_a_full_disk_during_the_final_rechecks_says_where_the_best_result_is(tmp_path: Path):
    """The re-checks come after the output was written: their errors go through the
    guard, which names the output holding the result, and the journal's write is inside."""
    import concurrent.futures
    import errno

    import pytest

    from reducer.core.executor import Executor, ExecutorStats
    from reducer.session import EXIT_CANNOT_WRITE, Settings, UserError, _Guard, _Rechecks

    class FullDisk(Executor):
        workers, stats = 2, ExecutorStats()

        def submit(self, data: bytes, oracle=None) -> concurrent.futures.Future:
            future: concurrent.futures.Future = concurrent.futures.Future()
            future.set_exception(OSError(errno.ENOSPC, "No space left on device"))
            return future

        def cancel(self, future) -> None:
            pass

        def close(self, abort: bool = False) -> None:
            pass

    script = make_script(tmp_path / "check.sh", "exit 0")
    out = tmp_path / "out.mlir"
    guard = _Guard(Settings(str(tmp_path / "in.mlir"), str(script), str(out)), str(out))
    guard.good = b"module {}\n"
    rechecks = _Rechecks(ScriptOracle(str(script), "in.mlir", 30.0), None, guard, FullDisk())
    with pytest.raises(UserError) as raised:
        rechecks.confirm(b"module {}\n", 3)
    assert raised.value.code == EXIT_CANNOT_WRITE
    assert "No space left on device" in str(raised.value)
    assert f"{out} holds the smallest interesting program so far" in str(raised.value)
