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
    """One early check: the future the caller holds, and the check that answers it."""

    data: bytes
    out: concurrent.futures.Future[Verdict]
    current: concurrent.futures.Future[Verdict]
    timer: threading.Timer | None = None


class EarlyExecutor(Executor):
    """Checks on `inner` with the provisional oracle until `adopt` names the calibrated one
    and the executor that records verdicts; from then on it submits there. Each early
    check is then settled by `provably_same`: kept (and recorded), or its future is
    cancelled, which the engine takes as a check to start again (on the target, now).
    `discard` cancels them all when the run does not start where they were made.

    Callbacks run on the inner executor's thread, which may hold its lock: nothing here
    calls an executor from a callback, or while holding this executor's lock."""

    def __init__(self, inner: Executor, provisional: Oracle) -> None:
        self.inner, self.provisional = inner, provisional
        self.workers, self.stats = inner.workers, inner.stats
        self.target: JournaledExecutor | None = None
        self.judge: Oracle | None = None
        self.kept = 0  # early verdicts the calibrated oracle would give: used
        self.dropped = 0  # early checks not kept: their candidates are checked again
        self._early: dict[concurrent.futures.Future[Verdict], _Early] = {}
        self._timers: list[threading.Timer] = []
        self._lock = threading.Lock()

    def submit(self, data: bytes, oracle: Oracle | None = None) -> concurrent.futures.Future[Verdict]:
        if self.target is not None:
            return self.target.submit(data, oracle)
        out: concurrent.futures.Future[Verdict] = concurrent.futures.Future()
        current = self.inner.submit(data, self.provisional)
        with self._lock:
            self._early[out] = _Early(data, out, current)
        return out

    def submit_keyed(self, data: bytes, k: bytes, oracle: Oracle | None = None) -> concurrent.futures.Future[Verdict]:
        """The journal's keyed submit, once there is one (the engine hashed data already)."""
        if self.target is not None:
            return self.target.submit_keyed(data, k, oracle)
        return self.submit(data, oracle)

    def cancel(self, future: concurrent.futures.Future[Verdict]) -> None:
        with self._lock:
            early = self._early.pop(future, None)
        if early is None:
            if self.target is not None:
                self.target.cancel(future)
            return
        if early.timer is not None:
            early.timer.cancel()
        self.inner.cancel(early.current)
        future.cancel()

    def adopt(self, target: JournaledExecutor, judge: Oracle) -> None:
        """Checks go to target with judge from now on; settle the early ones."""
        with self._lock:
            self.target, self.judge = target, judge
            pending = list(self._early.values())
        # Timed from now, not from the submit: a check may have queued behind the
        # original's (from -j 2 on the engine primes more than the idle workers), and it
        # started at the latest now, once their verdict was read. A check that hangs may
        # so run up to the original's check time longer; what it says is kept only if it
        # ran within judge's timeout (`provably_same`).
        cut_off_at = time.monotonic() + (judge.timeout or 0.0) + 2 * KILL_GRACE
        for early in pending:
            early.current.add_done_callback(functools.partial(self._settle, early))
            if judge.timeout is not None and not early.current.done():
                # Still running past judge's timeout: cut off, not waited for (the
                # provisional timeout is long: the original's time was not known).
                timer = threading.Timer(max(0.0, cut_off_at - time.monotonic()), self._cut_off, (early,))
                timer.daemon = True
                with self._lock:
                    if self._early.get(early.out) is not early:
                        continue  # settled meanwhile
                    early.timer = timer
                    self._timers.append(timer)
                timer.start()

    def discard(self) -> None:
        """The run starts elsewhere: no early verdict is wanted."""
        with self._lock:
            pending = list(self._early)
        for out in pending:
            self.cancel(out)

    def _settle(self, early: _Early, f: concurrent.futures.Future[Verdict]) -> None:
        """An early check ended (maybe on the inner executor's thread): keep its verdict,
        or cancel the caller's future so the candidate is checked again."""
        assert self.target is not None and self.judge is not None
        with self._lock:
            if self._early.pop(early.out, None) is None:
                return  # cancelled or cut off
        if early.timer is not None:
            early.timer.cancel()
        exc = None if f.cancelled() else f.exception()
        if f.cancelled() or (exc is None and not provably_same(self.provisional, f.result(), self.judge)):
            with self._lock:
                self.dropped += 1
            _cancel_waited(early.out)
            return
        if exc is None:
            try:
                self.target.record(early.data, f.result())  # the journal, and the check on the user's files
                self.kept += 1
            except BaseException as e:  # noqa: BLE001 - handed to the waiting thread
                exc = e
        if early.out.set_running_or_notify_cancel():
            if exc is not None:
                early.out.set_exception(exc)
            else:
                early.out.set_result(f.result())

    def _cut_off(self, early: _Early) -> None:
        """The timer's: an early check outlived the calibrated timeout."""
        with self._lock:
            if self._early.pop(early.out, None) is None:
                return
            self.dropped += 1
        self.inner.cancel(early.current)
        _cancel_waited(early.out)

    def close(self, abort: bool = False) -> None:
        """Stop the timers (the early checks are the inner executor's, closed by its owner)."""
        with self._lock:
            timers, self._timers = self._timers, []
        for timer in timers:
            timer.cancel()
            timer.join()


def _cancel_waited(out: concurrent.futures.Future[Verdict]) -> None:
    """Cancel a future someone may be waiting on: `cancel()` alone does not wake
    `concurrent.futures.wait`; the notification does."""
    if not out.cancelled() and out.cancel():  # (a caller's cancel notifies no one: it does not wait)
        out.set_running_or_notify_cancel()
