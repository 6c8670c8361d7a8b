"""Checks started while the original is checked (issue 11): the engine's first candidates
run on the workers the original's checks leave idle, and their verdicts count only where
the calibrated check would give them too."""

from __future__ import annotations

import concurrent.futures
import threading
import time
from pathlib import Path

import pytest
from conftest import make_script
from programs import chain

from reducer.core.cache import JournaledExecutor, VerdictJournal, key
from reducer.core.early import EarlyExecutor, provably_same
from reducer.core.engine import Engine
from reducer.core.executor import LocalExecutor
from reducer.core.oracle import RepeatOracle, ScriptOracle, Verdict


def test_an_early_verdict_is_the_calibrated_ones_only_if_no_timeout_could_have_cut_it():
    early = ScriptOracle("check.sh", "in.mlir", 300.0)
    quick, slow = Verdict(True, 0, seconds=0.5), Verdict(True, 0, seconds=12.0)
    assert provably_same(early, quick, early.with_timeout(10.0))
    assert not provably_same(early, slow, early.with_timeout(10.0))  # 10 s would have cut it off
    assert not provably_same(early, Verdict(False, None, timed_out=True, seconds=0.5), early.with_timeout(10.0))
    assert not provably_same(early, quick, ScriptOracle("other.sh", "in.mlir", 10.0))
    # --repeat's verdict is its last run's: provable only with the very same oracle.
    assert provably_same(RepeatOracle(early, 2), slow, RepeatOracle(early, 2))
    assert not provably_same(RepeatOracle(early, 2), quick, RepeatOracle(early, 2).with_timeout(10.0))


def test_an_early_verdict_the_calibrated_check_would_give_is_kept_and_journaled(tmp_path: Path):
    check = make_script(tmp_path / "check.sh", "sleep 0.3; exit 0")
    provisional = ScriptOracle(str(check), "in.mlir", 300.0)
    journal = VerdictJournal(str(tmp_path / "journal"))
    seen: list[Verdict] = []
    with LocalExecutor(None, 2) as inner:
        early = EarlyExecutor(inner, provisional)
        future = early.submit(b"module {}\n", provisional)
        early.adopt(JournaledExecutor(inner, journal, after=seen.append), provisional.with_timeout(30.0))
        assert future.result(timeout=30).interesting
        assert (early.kept, early.dropped, inner.stats.checks) == (1, 0, 1)
    assert key(b"module {}\n") in journal.verdicts  # a rerun after kill -9 replays it
    assert len(seen) == 1  # the session's check on the user's files saw it


@pytest.mark.parametrize("adopted", ["after it ended", "while it runs"])
def test_an_early_verdict_slower_than_the_calibrated_timeout_is_not_kept(tmp_path: Path, adopted: str):
    """The caller's future is cancelled, which the engine takes as a check to start again
    (now with the calibrated oracle). When the check ends after `adopt`, that happens on
    the pool's own thread, under its lock: it must not call the pool (it deadlocked)."""
    check = make_script(tmp_path / "check.sh", "sleep 0.6; exit 0")
    provisional = ScriptOracle(str(check), "in.mlir", 300.0)
    with LocalExecutor(None, 2) as inner:
        early = EarlyExecutor(inner, provisional)
        future = early.submit(b"module {}\n", provisional)
        if adopted == "after it ended":
            concurrent.futures.wait([early._early[future].current], timeout=30)
        early.adopt(JournaledExecutor(inner, None), provisional.with_timeout(0.3))
        concurrent.futures.wait([future], timeout=30)
        assert future.cancelled()
        assert (early.kept, early.dropped) == (0, 1)
        again = early.submit(b"module {}\n", provisional.with_timeout(0.3))  # what the engine does next
        assert again.result(timeout=30).timed_out  # what a check cut off at 0.3 s says
        early.close()


def test_an_early_check_that_timed_out_on_a_shorter_provisional_limit_is_not_kept(tmp_path: Path):
    """An original slower than 29.5 s calibrates a timeout above the provisional 300 s: an
    early check cut off at 300 s proves nothing about the longer limit."""
    check = make_script(tmp_path / "check.sh", "sleep 30; exit 0")
    provisional = ScriptOracle(str(check), "in.mlir", 0.3)
    with LocalExecutor(None, 2) as inner:
        early = EarlyExecutor(inner, provisional)
        future = early.submit(b"module {}\n", provisional)
        early.adopt(JournaledExecutor(inner, None), provisional.with_timeout(60.0))
        concurrent.futures.wait([future], timeout=30)
        assert future.cancelled() and early.dropped == 1
        early.close()


def test_an_early_check_still_running_past_the_calibrated_timeout_is_cut_off(tmp_path: Path):
    """A provisional timeout is long (the original's time is not known yet): a check that
    hangs would hold its worker that long. Once the real timeout is known, it is cut off,
    and no timer outlives `close`."""
    woke = tmp_path / "woke"
    check = make_script(tmp_path / "check.sh", f"sleep 60; touch {woke}")
    provisional = ScriptOracle(str(check), "in.mlir", 300.0)
    with LocalExecutor(None, 2) as inner:
        early = EarlyExecutor(inner, provisional)
        future = early.submit(b"module {}\n", provisional)
        early.adopt(JournaledExecutor(inner, None), provisional.with_timeout(0.5))
        concurrent.futures.wait([future], timeout=120)
        assert future.cancelled() and not woke.exists()  # cut off, not run to its end
        assert inner.stats.cancelled == 1  # its process group was killed, the worker freed
        early.close()
    assert not [t for t in threading.enumerate() if isinstance(t, threading.Timer) and t.is_alive()]


def test_a_primed_engine_whose_early_verdicts_are_dropped_ends_where_an_unprimed_one_does(tmp_path: Path):
    """Every early check hangs and is cut off at the calibrated timeout: the engine checks
    those candidates again and decides as if nothing had started early (a cancelled
    check is no verdict: read as "not interesting", one of them would be a commit missed,
    which later, smaller chunks make up for in the output but not in the verdicts read)."""
    from reducer.core.workspace import TextWorkspace
    from strategies.text_lines import TextLines

    marker, log, woke = tmp_path / "calibrated", tmp_path / "log", tmp_path / "woke"
    check = make_script(
        tmp_path / "check.sh", f'[ -e {marker} ] || {{ echo >> {log}; sleep 60; touch {woke}; }}; grep -q "^x$" "$1"'
    )
    provisional = ScriptOracle(str(check), "in.txt", 300.0)
    text = "a\nb\nx\nc\nd\n"
    with LocalExecutor(None, 4) as inner:
        early = EarlyExecutor(inner, provisional)
        ws = TextWorkspace(text)
        engine = Engine(ws, [TextLines()], early, lambda c: None, move_budget=0, oracle=provisional)
        engine.prime(3)
        assert len(engine.checks.inflight) == 3
        while len(log.read_text().splitlines() if log.exists() else []) < 3:
            time.sleep(0.05)  # all three are running, provisionally
        marker.touch()
        early.adopt(JournaledExecutor(inner, None), provisional.with_timeout(0.5))
        engine.oracle = provisional.with_timeout(0.5)
        stats = engine.run()
        early.close()
    assert ws.program.text == "x\n"
    assert early.dropped == 3 and early.kept == 0
    assert not woke.exists()  # the run did not wait for the hanging checks
    with LocalExecutor(ScriptOracle(str(check), "in.txt", 30.0), 1) as alone:
        unprimed = Engine(TextWorkspace(text), [TextLines()], alone, lambda c: None, move_budget=0).run()
    decisions = [
        (st.judged, st.accepts) for st in (stats.per_strategy["text-lines"], unprimed.per_strategy["text-lines"])
    ]
    assert decisions[0] == decisions[1]


def test_early_checks_are_cancelled_when_the_run_starts_elsewhere(tmp_path: Path):
    check = make_script(tmp_path / "check.sh", "sleep 60; exit 0")
    provisional = ScriptOracle(str(check), "in.mlir", 300.0)
    with LocalExecutor(None, 2) as inner:
        early = EarlyExecutor(inner, provisional)
        futures = [early.submit(b"module {}\n", provisional), early.submit(b"module {\n}\n", provisional)]
        time.sleep(0.3)
        early.discard()
        assert all(f.cancelled() for f in futures)
        assert inner.stats.cancelled == 2  # their process groups were killed, the workers freed


def test_the_engine_starts_its_first_candidates_while_the_original_is_checked(tmp_path: Path, primers: list):
    """With eight workers, the original's two checks and the re-print's leave five idle:
    the engine's first candidates start on them at once, and their verdicts are used.
    With two, the first candidate waits for a worker: it starts once one of the
    original's checks ends (the other may still be waiting, and see it start). What the
    run decides is the same."""
    from reducer.core import ir as irutil
    from reducer.core.workspace import MLIRWorkspace
    from reducer.session import Settings, reduce_file

    src, reprint, log, started = (tmp_path / n for n in ("in.mlir", "reprint.mlir", "log", "engine-started"))
    # Spelled unlike MLIR prints it, so the re-printed form is checked as well.
    text = chain(16, keep=5).replace(" = ", "  =  ")
    src.write_text(text)
    reprint.write_text(MLIRWorkspace(text, irutil.PrintOptions()).canonical(irutil.PrintOptions()))
    # The original's check waits (up to 4 s) for an engine candidate's check to start,
    # and says whether one did: timing does not decide this, the order of events does.
    check = make_script(
        tmp_path / "check.sh",
        f'if cmp -s "$1" {src}; then\n'
        f"  for i in $(seq 40); do [ -e {started} ] && break; sleep 0.1; done\n"
        f"  [ -e {started} ] && echo original-saw-the-engine >> {log} || echo original-alone >> {log}\n"
        f'elif ! cmp -s "$1" {reprint}; then touch {started}; fi\n'
        'grep -q math.exp "$1"',
    )
    outs = {}
    for jobs in (2, 8):
        log.unlink(missing_ok=True)
        started.unlink(missing_ok=True)
        out = tmp_path / f"out-{jobs}.mlir"
        reduce_file(Settings(str(src), str(check), str(out), jobs=jobs, no_state=True))
        outs[jobs] = out.read_text()
        seen = log.read_text().split()
        if jobs == 8:
            assert seen == ["original-saw-the-engine"] * 2
        else:  # the first to end saw no candidate start
            assert len(seen) == 2 and seen[0] == "original-alone"
    assert outs[8] == outs[2]
    # At -j 2 the primed candidate queues behind the original's checks; its verdict is kept too.
    assert [(p.kept >= 1, p.dropped) for p in primers] == [(True, 0), (True, 0)]


def test_early_checks_are_stopped_when_the_check_rejects_the_reprinted_program(tmp_path: Path):
    """The check wants the input's own spelling, so the run reduces it as text, not on the
    parse the engine was primed on: the primed candidates' checks (which would hang here)
    are killed, and the run is not held up by them."""
    from reducer.core import ir as irutil
    from reducer.core.workspace import MLIRWorkspace
    from reducer.session import Settings, reduce_file

    src, reprint = tmp_path / "in.mlir", tmp_path / "reprint.mlir"
    text = chain(16, keep=5).replace(" = ", "  =  ")
    src.write_text(text)
    reprint.write_text(MLIRWorkspace(text, irutil.PrintOptions()).canonical(irutil.PrintOptions()))
    done, primed, log, woke = tmp_path / "original-checked", tmp_path / "primed", tmp_path / "log", tmp_path / "woke"
    # The original's check waits (up to 6 s) for a primed candidate's check to start.
    check = make_script(
        tmp_path / "check.sh",
        f'if cmp -s "$1" {src}; then\n'
        f"  for i in $(seq 60); do [ -e {primed} ] && break; sleep 0.1; done\n"
        f"  [ -e {primed} ] && echo primed >> {log}; touch {done}; exit 0\n"
        "fi\n"
        f'if cmp -s "$1" {reprint}; then exit 1; fi\n'
        f"if [ ! -e {done} ]; then touch {primed}; sleep 60; touch {woke}; exit 1; fi\n"  # the primed candidates
        'grep -q "  =  " "$1" && grep -q math.exp "$1"',
    )
    result = reduce_file(Settings(str(src), str(check), str(tmp_path / "out.mlir"), jobs=8, no_state=True))
    assert log.read_text().split() == ["primed", "primed"]
    assert result.mode == "text"
    assert not woke.exists()  # the primed checks were killed, not waited for
    assert "math.exp" in (tmp_path / "out.mlir").read_text()


def test_an_early_check_that_queued_behind_the_original_gets_the_whole_calibrated_timeout(tmp_path: Path):
    """From -j 2 on, primed checks may wait for a worker until the original's checks end.
    The cut-off counts from when the run reads the original's verdict, not from the
    submit: a check that queued for longer than the calibrated timeout, then ran well
    within it, is kept, not killed and checked again."""
    blocker = ScriptOracle(str(make_script(tmp_path / "original.sh", "sleep 3.2; exit 0")), "in.mlir", 300.0)
    check = make_script(tmp_path / "check.sh", "sleep 0.3; exit 0")
    provisional = ScriptOracle(str(check), "in.mlir", 300.0)
    with LocalExecutor(None, 1) as inner:
        original = inner.submit(b"the original\n", blocker)
        early = EarlyExecutor(inner, provisional)
        future = early.submit(b"module {}\n", provisional)  # queues behind the original
        assert original.result(timeout=30).interesting  # 3.2 s > 0.8 s + 2 x KILL_GRACE
        early.adopt(JournaledExecutor(inner, None), provisional.with_timeout(0.8))
        concurrent.futures.wait([future], timeout=30)
        assert not future.cancelled() and future.result().interesting
        assert (early.kept, early.dropped) == (1, 0)
        early.close()


def test_a_journaled_check_cancelled_after_it_finished_keeps_its_verdict():
    """The inner check finished, and the cancel came before its verdict was handed on:
    the verdict is recorded and reaches the caller's future, which is not cancelled (a
    cancelled future would drop a check that was paid for, and the engine would count
    it again when it needs that text)."""
    from reducer.core.executor import Executor, ExecutorStats

    handed_on = threading.Event()

    class Finished(Executor):
        """One check, finished before the cancel; its callbacks run once `handed_on` is set."""

        def __init__(self) -> None:
            self.workers, self.stats = 1, ExecutorStats()
            self.future: concurrent.futures.Future[Verdict] = concurrent.futures.Future()
            self.future.add_done_callback(lambda f: handed_on.wait(10))

        def submit(self, data, oracle=None):  # type: ignore[no-untyped-def]
            return self.future

        def cancel(self, future):  # type: ignore[no-untyped-def]
            future.cancel()  # a no-op on a finished future, as on every executor

        def close(self, abort=False):  # type: ignore[no-untyped-def]
            pass

    inner = Finished()
    ex = JournaledExecutor(inner, None)
    out = ex.submit(b"x\n")
    finishing = threading.Thread(target=inner.future.set_result, args=(Verdict(True, 0),))
    finishing.start()  # done at once; its callbacks (the journal's hand-on among them) wait
    while not inner.future.done():
        time.sleep(0.01)
    ex.cancel(out)
    handed_on.set()
    finishing.join(10)
    assert not out.cancelled() and out.result(timeout=10).interesting
