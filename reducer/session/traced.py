"""Work a triage step does on the original anyway, started beside the original's check.

A run checks the original twice (a check that disagrees with itself is flaky), and then
some triage steps compile the original once more: a numeric mismatch's localisation
runs both sides traced (reducer/iree/localize.py), `--pass-level` on a code generation
failure compiles it dumping every executable's source (reducer/iree/reproducer.py).
That compile is also a look at the original: when it fails the way the first check
did, it stands in for the second check, and it runs while the first does, so the step
that needs it starts about one whole-program compile sooner. When it disagrees, the
original is checked a second time as before.
"""

from __future__ import annotations

import contextvars
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Generic, TypeVar

from reducer.core.oracle import CancelFn, Cancelled, Oracle, Verdict
from reducer.core.rundirs import scratch_parent
from reducer.session.settings import check_timeout

if TYPE_CHECKING:
    from reducer.iree import localize

T = TypeVar("T")


class Alongside(Generic[T]):
    """One piece of work on the original (`work(oracle, folder, cancel)`, with the
    uncalibrated oracle; `folder`, when `wants_folder`, is its own and lives as long as
    this does), started by `start.judge_original` as the original's first check starts:
    with two workers or more in a thread of the main process (where triage steps always
    ran), else when first read, after the check. `agree(result, oracle, verdict)` says
    whether it saw the original fail as the check did. Its processes are killed when
    the run stops (`cancel`), and when it runs past `factor` times the check's calibrated
    timeout, counted from its own start (the same budget at any -j)."""

    def __init__(
        self,
        wants: Callable[[Oracle], bool],
        work: Callable[[Oracle, str | None, CancelFn], T],
        agree: Callable[[T, Oracle, Verdict], bool],
        factor: float,
        timeout: float | None,
        timed_out: Callable[[float], T],
        wants_folder: bool = False,
    ) -> None:
        self.wants, self.work, self.agree, self.factor = wants, work, agree, factor
        self.timeout, self.timed_out, self.wants_folder = timeout, timed_out, wants_folder  # timeout: --timeout's
        self.oracle: Oracle | None = None
        self.thread: threading.Thread | None = None
        self.done: T | BaseException | None = None
        self.folder: str | None = None
        self.began: float | None = None  # when the work started
        self.budget: float | None = None  # its seconds, once the check's verdict is known
        self.deadline: float | None = None  # --max-time's end (time.monotonic()), if given
        self.stopped = threading.Event()

    def start(self, oracle: Oracle, now: bool, deadline: float | None = None) -> bool:
        """Begin with the uncalibrated oracle: now, beside the check, or when first read;
        False (nothing started) for an oracle this work is not for. Cut off at `deadline`
        (--max-time's end) too."""
        if not self.wants(oracle):
            return False
        self.oracle, self.deadline = oracle, deadline
        if now:
            run = contextvars.copy_context().run  # the run's directory and limits, as in the main thread
            self.thread = threading.Thread(target=run, args=(self._work,), name="ireereduce-alongside", daemon=True)
            self.thread.start()
        return True

    def _work(self) -> None:
        assert self.oracle is not None
        self.began = time.monotonic()
        try:
            if self.wants_folder:
                self.folder = tempfile.mkdtemp(prefix="ireereduce-alongside-", dir=scratch_parent())
            self.done = self.work(self.oracle, self.folder, self._cancelled)
        except BaseException as exc:  # read, and raised, by the main thread
            self.done = exc

    def _cancelled(self) -> bool:
        if self.stopped.is_set():
            return True
        began, budget, now = self.began, self.budget, time.monotonic()
        if self.deadline is not None and now > self.deadline:
            return True
        return began is not None and budget is not None and now > began + budget

    def agrees(self, verdict: Verdict) -> bool:
        """Whether the work saw the original fail as the check did (waits for it). Not
        for a verdict that is not interesting: the original is checked again, and if
        that check passes (a flaky check), the triage step still reads the work."""
        if self.oracle is None or not verdict.interesting:
            return False
        self.time_after(verdict)
        try:
            result = self.result()
        except Exception:  # raised again where the triage step reads it
            return False
        return result is not None and self.agree(result, self.oracle, verdict)

    def time_after(self, verdict: Verdict) -> None:
        """Cut the work off at `factor` times the check's calibrated timeout (as
        `start.judge_original` sets it from the original's verdict)."""
        self.budget = self.factor * check_timeout(self.timeout, verdict.seconds)

    def result(self) -> T | None:
        """The work's result, once it ended (or what it raised, raised); None if it never
        started (another oracle) or was stopped: the step then does the work itself."""
        if self.oracle is None:
            return None
        if self.thread is None and self.done is None and not self.stopped.is_set():
            self._work()
        elif self.thread is not None:
            self.thread.join()
        if self.stopped.is_set() and (self.done is None or isinstance(self.done, Cancelled)):
            return None
        if isinstance(self.done, Cancelled):  # past its budget
            return self.timed_out(time.monotonic() - (self.began or time.monotonic()))
        if isinstance(self.done, BaseException):
            raise self.done
        return self.done

    def cancel(self) -> None:
        """Stop the work, its processes killed, and wait for its thread."""
        self.stopped.set()
        if self.thread is not None:
            self.thread.join()

    def close(self) -> None:
        """The run's block ends: nothing of the work outlives it, its folder included."""
        self.cancel()
        if self.folder is not None and os.path.isdir(self.folder):
            shutil.rmtree(self.folder, ignore_errors=True)


def traced_original(data: bytes, basename: str, timeout: float | None) -> Alongside[localize.Traces]:
    """A mismatch's traced run (`localize.trace`): TRACE_TIMEOUT_FACTOR check timeouts,
    as tracing may compile far slower than a check."""
    from reducer.iree import localize
    from reducer.iree.oracles.mismatch import MismatchOracle

    def work(oracle: Oracle, folder: str | None, cancel: CancelFn) -> localize.Traces:
        assert isinstance(oracle, MismatchOracle)
        return localize.trace(oracle, data, basename, cancel)

    def agree(traces: localize.Traces, oracle: Oracle, verdict: Verdict) -> bool:
        assert isinstance(oracle, MismatchOracle)
        return traces.agrees(oracle, verdict.signature)

    def timed_out(seconds: float) -> localize.Traces:
        return localize.Traces(failed=f"the traced run timed out after {seconds:.0f} s", seconds=seconds)

    wants = lambda oracle: isinstance(oracle, MismatchOracle)  # noqa: E731
    return Alongside(wants, work, agree, localize.TRACE_TIMEOUT_FACTOR, timeout, timed_out)


def dumped_original(data: bytes, timeout: float | None) -> Alongside[Verdict]:
    """--pass-level's compile that dumps every executable's source
    (`reproducer.dump_sources`), which a code generation failure's reproducer is made
    from; a compile's time, twice over for the dumping."""
    from reducer.iree import reproducer, signature
    from reducer.iree.oracles import CompileOracle

    def wants(oracle: Oracle) -> bool:
        return (
            isinstance(oracle, CompileOracle) and oracle.kind == "compile-failure" and oracle.command.is_iree_compile()
        )

    def work(oracle: Oracle, folder: str | None, cancel: CancelFn) -> Verdict:
        assert isinstance(oracle, CompileOracle) and folder is not None
        return reproducer.dump_sources(oracle, data, folder, cancel)

    def agree(dumped: Verdict, oracle: Oracle, verdict: Verdict) -> bool:
        mine, its = signature.of_verdict(dumped), signature.of_verdict(verdict)
        return dumped.interesting and mine is not None and its is not None and mine.matches(its)

    def timed_out(seconds: float) -> Verdict:
        return Verdict(False, None, True, seconds, outcome="timeout")

    return Alongside(wants, work, agree, 2.0, timeout, timed_out, wants_folder=True)
