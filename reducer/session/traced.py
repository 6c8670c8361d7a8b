"""A mismatch's traced run, beside the original's check.

Localising a mismatch (reducer/iree/localize.py) needs both sides compiled with tracing
and run once, and the run needs the original checked twice (a check that disagrees
with itself is flaky). The traced run is also a look at the original: when its outputs
mismatch the way the first check's did, it stands in for the second check, and it runs
while the first does: the cut program's reduction starts about one whole-program check
(both sides compiled and run) sooner. When it disagrees, the original is checked a
second time as before.
"""

from __future__ import annotations

import contextvars
import threading
import time

from reducer.core.oracle import Cancelled, Oracle, Verdict
from reducer.iree import localize
from reducer.iree.oracles.mismatch import MismatchOracle


class TracedOriginal:
    """The traced run of the original (`localize.trace`), started by `start.judge_original`
    as the original's first check starts: with two workers or more in a thread of the main
    process (where the traced run always ran), else after that check. Its processes are
    killed when the run stops (`cancel`), and when the run finds the check's timeout far
    exceeded (TRACE_TIMEOUT_FACTOR times the check's calibrated timeout)."""

    def __init__(self, data: bytes, basename: str, timeout: float | None) -> None:
        self.data, self.basename, self.timeout = data, basename, timeout  # timeout: --timeout's
        self.oracle: MismatchOracle | None = None
        self.thread: threading.Thread | None = None
        self.done: localize.Traces | BaseException | None = None
        self.began = 0.0
        self.deadline: float | None = None
        self.stopped = threading.Event()

    def start(self, oracle: Oracle, now: bool) -> bool:
        """Begin with the uncalibrated oracle: now, beside the check, or when first read.
        Only a mismatch's run is traced."""
        if not isinstance(oracle, MismatchOracle):
            return False
        self.oracle, self.began = oracle, time.monotonic()
        if now:
            run = contextvars.copy_context().run  # the run's directory and limits, as in the main thread
            self.thread = threading.Thread(target=run, args=(self._trace,), name="ireereduce-traced", daemon=True)
            self.thread.start()
        return True

    def _trace(self) -> None:
        assert self.oracle is not None
        try:
            self.done = localize.trace(self.oracle, self.data, self.basename, self._cancelled)
        except BaseException as exc:  # read, and raised, by the main thread
            self.done = exc

    def _cancelled(self) -> bool:
        return self.stopped.is_set() or (self.deadline is not None and time.monotonic() > self.deadline)

    def agrees(self, verdict: Verdict) -> bool:
        """Whether the traced run mismatches the way the original's check did (waits for it)."""
        if self.oracle is None or not verdict.interesting:
            self.cancel()
            return False
        self.time_after(verdict)
        try:
            traces = self.traces()
        except Exception:  # raised again where the localisation reads it
            return False
        return traces is not None and traces.agrees(self.oracle, verdict.signature)

    def time_after(self, verdict: Verdict) -> None:
        """Cut the traced run off at TRACE_TIMEOUT_FACTOR times the check's calibrated
        timeout (as `start.judge_original` sets it from the original's verdict)."""
        self.deadline = self.began + localize.TRACE_TIMEOUT_FACTOR * (self.timeout or 10 * verdict.seconds + 5.0)

    def traces(self) -> localize.Traces | None:
        """The traced run, once it ended; None if it never started (another oracle)."""
        if self.oracle is None:
            return None
        if self.thread is None and self.done is None:
            self._trace()
        elif self.thread is not None:
            self.thread.join()
        if isinstance(self.done, Cancelled) and not self.stopped.is_set():
            seconds = time.monotonic() - self.began
            return localize.Traces(failed=f"the traced run timed out after {seconds:.0f} s", seconds=seconds)
        if isinstance(self.done, BaseException):
            raise self.done
        return self.done

    def cancel(self) -> None:
        """Stop the traced run, its processes killed, and wait for its thread."""
        self.stopped.set()
        if self.thread is not None:
            self.thread.join()

    close = cancel  # the run's block ends: nothing of it outlives the block
