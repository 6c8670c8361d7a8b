"""Repeated checks of one program (the original's two, the final re-checks, the walk
back) run at once on the executor's workers, are read in order, and stop at the first
verdict that settles the question; an oracle that measures time runs them one by one."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import attrs
import pytest
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
    from reducer.session import EXIT_CANNOT_WRITE, Settings, UserError
    from reducer.session.finish import Rechecks
    from reducer.session.guard import Guard

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
    guard = Guard(Settings(str(tmp_path / "in.mlir"), str(script), str(out)), str(out))
    guard.good = b"module {}\n"
    rechecks = Rechecks(ScriptOracle(str(script), "in.mlir", 30.0), None, guard, FullDisk())
    with pytest.raises(UserError) as raised:
        rechecks.confirm(b"module {}\n", 3)
    assert raised.value.code == EXIT_CANNOT_WRITE
    assert "No space left on device" in str(raised.value)
    assert f"{out} holds the smallest interesting program so far" in str(raised.value)


#: Spelled unlike MLIR prints it, so the run checks the re-printed form too.
UNPRINTED = "func.func @f(%a: f32) -> f32 {\n  %0 = math.atan2 %a, %a : f32\n  return   %0 : f32\n}\n"


def tagged_check(tmp_path: Path, src: Path, log: Path, original: str, reprinted: str) -> str:
    """A check that logs its start and end, tagged with whether it got the original."""
    stamp = "python3 -c 'import time; print(time.time())'"
    return str(
        make_script(
            tmp_path / "check.sh",
            f'tag=reprint; cmp -s "$1" {src} && tag=original\n'
            f'echo "start:$({stamp}):$tag" >> {log}\n'
            f"if [ $tag = original ]; then {original}; else {reprinted}; fi\n"
            f'rc=$?; echo "end:$({stamp}):$tag" >> {log}; exit $rc',
        )
    )


def test_the_reprinted_original_is_checked_alongside_the_original(tmp_path: Path):
    """A script's verdict does not depend on the original's, so the re-printed form's
    check runs with the original's two instead of after them: one check time less
    before the engine starts. The decision is still the one a sequential run makes."""
    import pytest

    from reducer.session import LimitReached, Settings, reduce_file

    src, log = tmp_path / "in.mlir", tmp_path / "log"
    src.write_text(UNPRINTED)
    # The original's checks outlast the parse that comes before the re-print's, even on a
    # loaded machine; the re-print's own check is short.
    original, reprint = 'sleep 2; grep -q math.atan2 "$1"', 'sleep 0.6; grep -q math.atan2 "$1"'
    check = tagged_check(tmp_path, src, log, original, reprint)
    with pytest.raises(LimitReached) as stopped:
        reduce_file(Settings(str(src), check, str(tmp_path / "out.mlir"), jobs=3, no_state=True, max_checks=1))
    assert stopped.value.result.mode == "mlir"  # the re-printed form was judged interesting
    lines = [line.split(":") for line in log.read_text().split()]
    starts = [(float(t), tag) for what, t, tag in lines if what == "start"]
    ends = [(float(t), tag) for what, t, tag in lines if what == "end"]
    first_three = sorted(starts)[:3]
    assert sorted(tag for _, tag in first_three) == ["original", "original", "reprint"]
    reprint_start = next(t for t, tag in first_three if tag == "reprint")
    original_end = min(t for t, tag in ends if tag == "original")
    assert reprint_start < original_end  # not one after another


def test_an_original_that_is_not_interesting_is_told_so_while_the_reprint_still_runs(tmp_path: Path):
    """The original's verdicts are read first, as before: a not-interesting original gives
    the same message and exit code at once, and the re-print's check (hanging here) is
    killed with the run (the session's abort kills it, whether or not it was cancelled)."""
    import time

    import pytest

    from reducer.session import EXIT_NOT_INTERESTING, Settings, UserError, reduce_file

    src, log, pid = tmp_path / "in.mlir", tmp_path / "log", tmp_path / "reprint.pid"
    src.write_text(UNPRINTED)
    # The original's checks outlast the parse that comes before the re-print's, even on a
    # loaded machine, so the re-print's check has started when their verdicts are read.
    check = tagged_check(
        tmp_path,
        src,
        log,
        "sleep 2; echo 'no crash here' >&2; false",
        f"echo $$ > {pid}.new; mv {pid}.new {pid}; sleep 60",
    )
    with pytest.raises(UserError) as raised:
        reduce_file(Settings(str(src), check, str(tmp_path / "out.mlir"), jobs=3, no_state=True))
    assert raised.value.code == EXIT_NOT_INTERESTING
    assert str(raised.value) == (
        "the check says the original input is not interesting (exit code 1; no crash here); "
        "it must be interesting for the input as given (mlir-reduce users: invert your script's exit codes)"
    )
    time.sleep(0.5)
    tags = [line.rsplit(":", 1)[1] + ":" + line.split(":")[0] for line in log.read_text().split()]
    assert "reprint:start" in tags and "reprint:end" not in tags  # it ran, and was killed
    assert not Path(f"/proc/{pid.read_text().strip()}").exists()  # and it is gone, not still running
    assert not (tmp_path / "out.mlir").exists()


def test_an_early_reprint_verdict_counts_only_where_the_run_would_reach_the_same(tmp_path: Path):
    """Checked before the run's timeout is known, the re-print's verdict is used only if
    the check with that timeout could not have differed: a run longer than it would
    have been cut off, so that one is checked again."""
    from reducer.session.overlap import Reprinted

    check = make_script(tmp_path / "check.sh", "sleep 0.5; exit 0")
    early_oracle = ScriptOracle(str(check), "in.mlir", 300.0)
    with LocalExecutor(None, 1) as ex:
        early = Reprinted(UNPRINTED, True, early_oracle, ex)
        assert early.data is not None and early.data.decode() != UNPRINTED
        assert early.verdict(early.data, early_oracle.with_timeout(0.3)) is None  # took 0.5 s
        early = Reprinted(UNPRINTED, True, early_oracle, ex)
        verdict = early.verdict(early.data, early_oracle.with_timeout(30.0))
        assert verdict is not None and verdict.interesting
        early = Reprinted(UNPRINTED, True, early_oracle, ex)
        assert early.verdict(early.data, ScriptOracle(str(check), "other.mlir", 30.0)) is None  # another oracle


def test_only_oracles_that_do_not_learn_from_the_original_check_the_reprint_early():
    """A built-in oracle keeps the original's failure signature, so a candidate's
    verdict depends on the original's: its re-print waits for it. --repeat asks the
    oracle it repeats."""
    from reducer.core.oracle import RepeatOracle
    from reducer.iree.oracles import CompileOracle, MismatchOracle, SlowCompileOracle, parse_command

    script = ScriptOracle("check.sh", "in.mlir", 10.0)
    compile_ = CompileOracle(parse_command("iree-compile {input}"), "in.mlir", 10.0)
    io = parse_command("iree-compile {input} -o {output}", needs_output=True)
    assert not script.learns_from_original()
    assert not RepeatOracle(script, 3).learns_from_original()
    assert compile_.learns_from_original()
    assert RepeatOracle(compile_, 3).learns_from_original()
    assert MismatchOracle(io, io, "in.mlir", 10.0).learns_from_original()
    assert SlowCompileOracle(parse_command("iree-compile {input}"), "in.mlir", 10.0, seconds=1.0).learns_from_original()


@pytest.mark.parametrize(
    ("workers", "fresh_start", "early"), [(3, True, True), (2, True, True), (1, True, False), (3, False, False)]
)
def test_the_reprint_goes_early_only_with_a_worker_for_it_and_a_fresh_start(
    tmp_path: Path, workers: int, fresh_start: bool, early: bool
):
    """With one worker it would delay the original's verdict (with two it queues behind
    the original's checks and starts when one ends); with a result already in the output
    the run may start from that instead, so the original's re-print is not checked ahead then."""
    submitted, reprinted = _checked_with(tmp_path, None, workers, reprint_early=fresh_start)
    assert (reprinted is not None) == early
    assert submitted == (3 if early else 2)


class Look:
    """A `Beside` that records what it was asked, agreeing (or not) with the verdict."""

    def __init__(self, agree: bool, starts: bool = True) -> None:
        self.agree, self.starts = agree, starts
        self.started: list[bool] = []
        self.heard: list[bool] = []  # each verdict's `interesting` it was asked about
        self.cancelled = 0

    def start(self, oracle, now: bool, deadline: float | None = None) -> bool:
        self.started.append(now)
        return self.starts

    def agrees(self, verdict) -> bool:
        self.heard.append(verdict.interesting)
        return self.agree

    def cancel(self) -> None:
        self.cancelled += 1


def _checked_with(
    tmp_path: Path, look: Look | None, workers: int, body: str = 'grep -q math.atan2 "$1"', reprint_early: bool = False
):
    """How many checks check_original submitted (`look` beside them), and its re-print."""
    from reducer.session import Settings
    from reducer.session.guard import Guard
    from reducer.session.start import check_original

    src = tmp_path / "in.mlir"
    src.write_text(UNPRINTED)
    check = str(make_script(tmp_path / "check.sh", body))
    settings = Settings(str(src), check, str(tmp_path / "out.mlir"), jobs=workers, no_state=True)
    submitted: list[bytes] = []

    class Counting(LocalExecutor):
        def submit(self, data: bytes, oracle=None):
            submitted.append(data)
            return super().submit(data, oracle)

    with Counting(None, workers) as ex:
        guard = Guard(settings, settings.output)
        *_, reprinted = check_original(
            settings, UNPRINTED, "in.mlir", guard, ex, reprint_early=reprint_early, beside=look
        )
        if reprinted is not None:
            reprinted.cancel()
    return len(submitted), reprinted


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("agree", [True, False])
def test_a_look_beside_the_original_that_agrees_is_its_second_check(tmp_path: Path, workers: int, agree: bool):
    """A mismatch's traced run (reducer/session/traced.py) starts with the original's
    first check (at once, given a second worker) and, when it agrees with that check's
    verdict, stands in for the second: one whole-program check less before the run
    localises. When it disagrees, the original is checked a second time, as before."""
    look = Look(agree)
    assert _checked_with(tmp_path, look, workers)[0] == (1 if agree else 2)
    assert look.started == [workers >= 2] and look.heard == [True]


def test_a_look_that_did_not_start_leaves_both_checks(tmp_path: Path):
    """Another oracle than a mismatch's is not traced: its original is checked twice."""
    look = Look(True, starts=False)
    assert _checked_with(tmp_path, look, 2)[0] == 2
    assert look.heard == []


def test_a_look_beside_an_original_that_fails_is_cancelled(tmp_path: Path):
    """The run ends there (exit 5): what runs beside the check must end with it."""
    from reducer.session.settings import UserError

    look = Look(False)
    with pytest.raises(UserError):
        _checked_with(tmp_path, look, 2, body="exit 1")
    assert look.heard == [False] and look.cancelled == 1


@pytest.mark.parametrize("workers", [1, 2])
def test_work_beside_a_flaky_original_is_still_read(tmp_path: Path, workers: int):
    """Review 20 M1: the original's first check failed it and the second passed it (a
    flaky check): the work beside was cancelled on the first verdict, and the triage step
    that read it then raised Cancelled (internal error, exit 1). It runs on, and is read."""
    from reducer.session.traced import Alongside

    look = Alongside(lambda o: True, lambda o, f, c: "seen", lambda r, o, v: True, 1.0, None, str)
    count = tmp_path / "count"
    body = f'echo x >> {count}; [ $(wc -l < {count}) -ge 2 ] && grep -q math.atan2 "$1"'
    checks, _ = _checked_with(tmp_path, look, workers, body)  # type: ignore[arg-type]
    assert checks == 2  # it disagreed with the first verdict: the original was checked again
    assert look.result() == "seen"


def test_a_checks_own_timeout_is_not_max_time(tmp_path: Path):
    """A check that fails with a TimeoutError of its own (a Dask connection's, say) is an
    error of the check, as any OSError; only the wait for --max-time's end is a stop
    (concurrent.futures.TimeoutError is that same class since Python 3.11)."""
    import concurrent.futures

    from reducer.session import Settings, UserError
    from reducer.session.guard import Guard
    from reducer.session.settings import EXIT_STOPPED
    from reducer.session.start import check_original

    src = tmp_path / "in.mlir"
    src.write_text(UNPRINTED)
    check = str(make_script(tmp_path / "check.sh", "exit 0"))
    settings = Settings(str(src), check, str(tmp_path / "out.mlir"), no_state=True, max_time=600.0)

    class TimesOut(LocalExecutor):
        def submit(self, data: bytes, oracle=None):
            future: concurrent.futures.Future = concurrent.futures.Future()
            future.set_exception(TimeoutError("the scheduler did not answer"))
            return future

    with TimesOut(None, 2) as ex, pytest.raises(UserError) as raised:
        check_original(settings, UNPRINTED, "in.mlir", Guard(settings, settings.output), ex, deadline=1e18)
    assert raised.value.code != EXIT_STOPPED and "--max-time" not in str(raised.value), str(raised.value)
