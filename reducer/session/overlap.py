"""The start-up overlap: what runs while the original's own checks run.

A run must check the original twice before it knows it may reduce. Meanwhile the
workers would idle, so two things start early: the original re-printed by MLIR is
checked (`Reprinted`), and the engine's first candidates go to the workers left
(`prime`, through `EarlyExecutor`). Neither verdict counts unless it is provably the
one the calibrated oracle would give (`provably_same`), so the output is the same as
if nothing had started early, for any -j.
"""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Callable, Mapping

import attrs

from reducer.core import ir as irutil
from reducer.core.cache import JournaledExecutor
from reducer.core.early import EarlyExecutor, provably_same
from reducer.core.engine import Engine
from reducer.core.executor import Executor
from reducer.core.oracle import KILL_GRACE, Oracle, RepeatOracle, ScriptOracle, Verdict
from reducer.core.strategy import Strategy
from reducer.core.workspace import Candidate, MLIRWorkspace, Workspace
from reducer.session.settings import Settings, UserError
from reducer.session.wiring import build_engine, select_strategies


class Reprinted:
    """The original parsed, and its re-printed form checked while the original's own two
    checks run, so the engine starts one check time sooner. Started only for an oracle
    that neither learns from the original's verdict nor measures time; its verdict is
    used only where it is provably the one `choose_workspace`'s check would give."""

    def __init__(
        self,
        text: str,
        verify: bool,
        oracle: Oracle,
        executor: Executor,
        blob_sizes: Mapping[str, int] | None = None,
        outside: Callable[[str], int] | None = None,
    ) -> None:
        self.text, self.verify, self.oracle, self.executor = text, verify, oracle, executor
        self.data: bytes | None = None
        self.future: concurrent.futures.Future[Verdict] | None = None
        self.workspace: MLIRWorkspace | irutil.ParseError
        try:
            self.workspace = MLIRWorkspace(text, irutil.PrintOptions(), verify, blob_sizes, outside)
        except irutil.ParseError as exc:
            self.workspace = exc
            return
        canonical = self.workspace.canonical(irutil.PrintOptions())
        if canonical != text:
            self.data = canonical.encode()
            self.future = executor.submit(self.data, oracle)

    def parsed(self, text: str, verify: bool) -> MLIRWorkspace | irutil.ParseError | None:
        """The parse of text, if it is the one made here; None if text changed since."""
        return self.workspace if (text, verify) == (self.text, self.verify) else None

    def verdict(self, data: bytes, judge: Oracle, deadline: float | None = None) -> Verdict | None:
        """The early verdict, if checking data with judge would give it: the same bytes,
        the same oracle up to its timeout (set from the original's check time), and, if
        the timeouts differ, one run that finished within judge's (a longer one would
        have been cut off). None: check it as usual (also at `deadline`, --max-time's end).
        Read once; the check is then done or cancelled."""
        future, self.future = self.future, None
        if future is None:
            return None
        if data != self.data or self.oracle.with_timeout(judge.timeout) != judge:
            self.executor.cancel(future)
            return None
        waits = [] if judge.timeout is None else [judge.timeout + 2 * KILL_GRACE]
        waits += [] if deadline is None else [max(0.0, deadline - time.monotonic())]
        try:  # a check past judge's timeout would have been cut off: no need to wait for it
            verdict = future.result(timeout=min(waits, default=None))
        except concurrent.futures.TimeoutError:
            self.executor.cancel(future)
            return None
        return verdict if provably_same(self.oracle, verdict, judge) else None

    def cancel(self) -> None:
        if self.future is not None:
            self.executor.cancel(self.future)
            self.future = None


@attrs.define
class Primed:
    """An engine whose first checks started while the original was checked (see
    `Engine.prime`), on the parse `Reprinted` made; the run takes it over if it starts
    from that very program (`take_over`), else its checks are cancelled."""

    engine: Engine
    executor: EarlyExecutor
    program: str  # the text the engine was primed on

    def matches(self, ws: Workspace) -> bool:
        if ws is not self.engine.ws or not isinstance(ws, MLIRWorkspace):
            return False
        return ws.options == irutil.PrintOptions() and ws.program.text == self.program


def prime(
    settings: Settings,
    early: Reprinted,
    available: dict[str, type[Strategy]],
    inner: Executor,
    on_event: Callable[[str, dict[str, object]], None],
    primers: list[EarlyExecutor],
    supplies: Mapping[str, object] | None = None,
) -> Primed | None:
    """Start the engine's first checks on the workers the re-print's check leaves: those
    the original's two checks leave idle start now, the others queue and start as soon as
    the original's checks end (before the run has read their verdict and taken the engine
    over). Only for a check script with no triage ahead (which would check programs of
    its own, and may change the start) and no --max-checks (which the checks would count
    against before the run knows it starts here). Its executor goes in `primers`, which
    the caller closes."""
    room = inner.workers - (early.future is not None)
    ws = early.workspace
    base = early.oracle.inner if isinstance(early.oracle, RepeatOracle) else early.oracle
    if room < 1 or not isinstance(ws, MLIRWorkspace) or not isinstance(base, ScriptOracle):
        return None
    if settings.max_checks is not None:
        return None
    try:
        strategies = select_strategies(ws.mode, settings.strategies, settings.skip_strategies, available, supplies)
    except UserError:
        return None  # told where it always is, after the original's verdict (the same at any -j)
    primer = EarlyExecutor(inner, early.oracle)
    primers.append(primer)
    engine = build_engine(settings, ws, strategies, primer, early.oracle, inner, on_event)
    engine.prime(room)
    return Primed(engine, primer, ws.program.text)


def take_over(
    primed: Primed,
    executor: JournaledExecutor,
    judge: Oracle,
    on_improve: Callable[[Candidate], None],
    should_stop: Callable[[], str | None],
) -> Engine:
    """The primed engine, now checking with the calibrated oracle through the journal; its
    early checks' verdicts count only where the calibrated oracle would give them too."""
    engine = primed.engine
    primed.executor.adopt(executor, judge)
    engine.oracle, engine.on_improve, engine.should_stop = judge, on_improve, should_stop
    return engine
