"""Checks started before the oracle is calibrated (issue 11).

The original is checked twice before reduction starts, and its check time sets the timeout
of every later check. With more workers than those two checks need, the others would sit
idle for a whole check time. `EarlyExecutor` lets them check the engine's first candidates
with the provisional oracle meanwhile. Once the calibrated oracle is known (`adopt`), an
early verdict is kept only where it is provably the one the calibrated oracle would give
(`provably_same`); any other candidate is checked again, so what the engine decides never
depends on having started early.
"""

from __future__ import annotations

import concurrent.futures
import functools
import threading
import time
from typing import Any

import attrs

from reducer.core.cache import JournaledExecutor
from reducer.core.executor import Executor
from reducer.core.oracle import KILL_GRACE, Oracle, RepeatOracle, Verdict


def provably_same(early: Oracle, verdict: Verdict, judge: Oracle) -> bool:
    """Whether `verdict`, reached by `early`, is the one `judge` gives on the same bytes:
    the same oracle up to its timeout, and, if the timeouts differ, one run (not the
    last of --repeat's) that finished within judge's (a longer one would have been cut off)."""
    if early.with_timeout(judge.timeout) != judge:
        return False
    if early == judge:
        return True
    within = judge.timeout is None or verdict.seconds <= judge.timeout
    return not isinstance(judge, RepeatOracle) and within and not verdict.timed_out


@attrs.define(eq=False)
class _Early:
    """One early check: the future the caller holds, and the check that will answer it."""

    data: bytes
    out: concurrent.futures.Future[Verdict]
    current: concurrent.futures.Future[Verdict]
    submitted: float
    timer: threading.Timer | None = None
    redone: bool = False  # checked again on the target: its own verdict answers


class EarlyExecutor(Executor):
    """Checks on `inner` with the provisional oracle until `adopt` names the calibrated one
    and the executor that records verdicts; from then on it submits there, and each
    early check still pending is settled by `provably_same`. `discard` cancels them all
    when the run does not start where they were made."""

    def __init__(self, inner: Executor, provisional: Oracle) -> None:
        self.inner, self.provisional = inner, provisional
        self.workers, self.stats = inner.workers, inner.stats
        self.target: JournaledExecutor | None = None
        self.judge: Oracle | None = None
        self.redone = 0  # early verdicts not kept: their candidates were checked again
        self.kept = 0
        self._early: dict[concurrent.futures.Future[Verdict], _Early] = {}
        self._lock = threading.Lock()

    def submit(self, data: bytes, oracle: Oracle | None = None) -> concurrent.futures.Future[Verdict]:
        if self.target is not None:
            return self.target.submit(data, oracle)
        out: concurrent.futures.Future[Verdict] = concurrent.futures.Future()
        self._early[out] = _Early(data, out, self.inner.submit(data, self.provisional), time.monotonic())
        return out

    def cancel(self, future: concurrent.futures.Future[Verdict]) -> None:
        with self._lock:
            early = self._early.pop(future, None)
        if early is None:
            if self.target is not None:
                self.target.cancel(future)
            return
        if early.timer is not None:
            early.timer.cancel()
        (self.target if early.redone and self.target is not None else self.inner).cancel(early.current)
        future.cancel()

    def adopt(self, target: JournaledExecutor, judge: Oracle) -> None:
        """Checks go to target with judge from now on; settle the early ones."""
        with self._lock:
            self.target, self.judge = target, judge
            pending = list(self._early.values())
        for early in pending:
            if judge.timeout is not None:  # a check still running past judge's timeout is redone, not waited for
                wait = early.submitted + judge.timeout + 2 * KILL_GRACE - time.monotonic()
                early.timer = threading.Timer(max(0.0, wait), self._redo, (early,))
                early.timer.daemon = True
                early.timer.start()
            early.current.add_done_callback(functools.partial(self._settle, early))

    def discard(self) -> None:
        """The run starts elsewhere: no early verdict is wanted."""
        for out in list(self._early):
            self.cancel(out)

    def _settle(self, early: _Early, f: concurrent.futures.Future[Verdict]) -> None:
        assert self.target is not None and self.judge is not None
        with self._lock:
            if early.redone or self._early.get(early.out) is not early:
                return  # checked again, or cancelled
            if (
                not f.cancelled()
                and f.exception() is None
                and not provably_same(self.provisional, f.result(), self.judge)
            ):
                redo = True
            else:
                redo = False
                del self._early[early.out]
        if redo:
            self._redo(early)
            return
        if early.timer is not None:
            early.timer.cancel()
        if f.cancelled():
            early.out.cancel()
            return
        exc = f.exception()
        if exc is None:
            try:
                self.target.record(early.data, f.result())  # the journal, and the check on the user's files
                self.kept += 1
            except BaseException as e:  # noqa: BLE001 - handed to the waiting thread
                exc = e
        _hand_over(f, early.out, exc)

    def _redo(self, early: _Early) -> None:
        """Check early's candidate again on the target, and answer with that verdict."""
        assert self.target is not None
        with self._lock:
            if early.redone or self._early.get(early.out) is not early:
                return
            early.redone = True
            self.redone += 1
            stale, failed = early.current, None
            try:
                early.current = self.target.submit(early.data, self.judge)
            except BaseException as exc:  # noqa: BLE001 - e.g. the executor closed under a timer
                del self._early[early.out]
                failed = exc
        self.inner.cancel(stale)  # its callback takes the lock: not under it
        if failed is not None:
            _hand_over(stale, early.out, failed)
            return

        def done(f: concurrent.futures.Future[Verdict]) -> None:
            with self._lock:
                self._early.pop(early.out, None)
            if f.cancelled():
                early.out.cancel()
            else:
                _hand_over(f, early.out, f.exception())

        early.current.add_done_callback(done)

    def close(self, abort: bool = False) -> None:
        """Early checks are the inner executor's: closing it (the caller's job) ends them."""
        with self._lock:
            pending = list(self._early.values())
        for early in pending:
            if early.timer is not None:
                early.timer.cancel()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def _hand_over(
    f: concurrent.futures.Future[Verdict], out: concurrent.futures.Future[Verdict], exc: BaseException | None
) -> None:
    if not out.set_running_or_notify_cancel():
        return
    if exc is not None:
        out.set_exception(exc)
    else:
        out.set_result(f.result())
