"""One reduction from start to finish, phase by phase: a `Run` holds what the phases
hand each other, and each method is one phase (start, prepare, reduce, after, finish).
`reduce_file` is the way in: it checks the command, locks the output and owns the
executor every check of the run goes through."""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import attrs

from reducer.core import ir as irutil
from reducer.core import limits
from reducer.core.cache import JournaledExecutor, VerdictJournal, key
from reducer.core.early import EarlyExecutor
from reducer.core.encoded import Encoded
from reducer.core.engine import Engine
from reducer.core.executor import DataFileUnreadable, Executor
from reducer.core.oracle import Cancelled, Oracle, Verdict
from reducer.core.processes import interrupts_kept, note_stop, raise_if_stopped
from reducer.core.resources import Blobs
from reducer.core.rundirs import RUN_DIR_ENV, remove_stale_runs, run_scope, tmpdir_unused
from reducer.core.strategy import Strategy
from reducer.core.workspace import Candidate, Size, Workspace
from reducer.progress import Monitor
from reducer.session import overlap, triage, wiring
from reducer.session.files import check_paths, default_output, take_lock
from reducer.session.finish import FINAL_CONFIRM, Rechecks, settle, tidy_whitespace
from reducer.session.guard import Guard
from reducer.session.settings import (
    EXIT_BAD_INPUT,
    EXIT_CHECK_CHANGED_FILES,
    EXIT_NOT_INTERESTING,
    EXIT_STOPPED,
    EXIT_USAGE,
    Findings,
    Flaky,
    Interrupted,
    LimitReached,
    Result,
    Settings,
    UserError,
    check_limits,
    check_settings,
)
from reducer.session.source import BOM, Input, blobs_apart, load_input
from reducer.session.start import (
    Resume,
    Start,
    as_file,
    check_original,
    choose_workspace,
    open_journal,
    open_state,
    record_start,
    size_of,
    where_to_start,
)
from reducer.session.wiring import (
    build_engine,
    check_oracle,
    check_strategy_names,
    load_deferred,
    make_executor,
    select_strategies,
)

# The IREE room's modules are imported where they are used: most runs need them only
# after the original's checks (triage, flags, the report) or not at all (a check script
# needs no built-in oracle), and every module imported before those checks delays them
# and the engine's first. `Run._meanwhile` imports them while the original's checks run.

log = logging.getLogger(__name__)


def reduce_file(
    settings: Settings, executor_factory: type[Executor] | None = None, monitor: Monitor | None = None
) -> Result:
    """Reduce settings.input; the output holds the smallest interesting program found."""
    began = time.monotonic()
    note_stop(False)  # a stop raised earlier in this process (one run of several) was this one's
    remove_stale_runs()  # first: a run refused below still removes what a kill -9 left
    settings = attrs.evolve(settings, jobs=settings.workers())
    check_settings(settings)
    check_paths(settings)
    given = (
        Input(settings.text, settings.text.encode())
        if settings.text is not None
        else load_input(settings.input, max_time=settings.max_time)
    )
    settings = triage.replayed(settings, given.text)  # a crash reproducer: its replay is the oracle
    triage.reproducer_as_text(settings, given.text, given.bytecode)
    check_oracle(settings)
    supplies = wiring.open_archives(settings, given.text)  # before any worker: a missing archive is one line
    _say_unusable_tmpdir()
    check_limits()
    output = settings.output or default_output(settings.input)
    lock = take_lock(output)  # beside the file a link leads to: one lock for both
    held = _Held()
    try:
        with run_scope(), interrupts_kept():
            result = _reduce(settings, given, output, executor_factory, began, monitor or Monitor(), held, supplies)
    finally:
        lock.release()
        came = held.release()
    if came:  # Ctrl-C while the finished run stopped its workers: it ends as interrupted, with its result
        raise Interrupted(result)
    return result


def _say_unusable_tmpdir() -> None:
    """Python falls back to /tmp without a word when $TMPDIR cannot be used; every
    candidate would then go where the user did not send it."""
    said = tmpdir_unused()
    if said is not None:
        log.warning("%s", said)


class _Held:
    """SIGINT, SIGTERM (and SIGHUP, if handled) noted instead of raised while a run that
    has ended stops its workers and removes its temp dir: a second Ctrl-C must not leave
    them behind. Only in the main thread, where Python runs signal handlers."""

    def __init__(self) -> None:
        self.came = False
        self._old: dict[int, Any] = {}

    def hold(self) -> None:
        if self._old or threading.current_thread() is not threading.main_thread():
            return
        for signum in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", signal.SIGTERM)):
            old = signal.getsignal(signum)
            if callable(old):
                self._old[signum] = old
                signal.signal(signum, self._note)

    def _note(self, _signum: int, _frame: object) -> None:
        self.came = True

    def release(self) -> bool:
        """Put the handlers back; whether a signal came meanwhile."""
        for signum, old in self._old.items():
            signal.signal(signum, old)
        self._old = {}
        return self.came


def _reduce(
    settings: Settings,
    given: Input,
    output: str,
    executor_factory: type[Executor] | None,
    began: float,
    monitor: Monitor,
    held: _Held,
    supplies: dict[str, object] | None = None,
) -> Result:
    # One executor for every check (the original's, workflows, engine, flags, re-checks,
    # --for-upstream); its workers are forked before any MLIR context exists here.
    if given.bytecode or settings.text is not None or not os.path.isfile(settings.input):  # read whole
        given = blobs_apart(given, os.environ[RUN_DIR_ENV])  # blobs kept in a file, as a text input's
    inner = make_executor(settings, None, executor_factory)
    if given.bytecode:  # every check gets each program as bytecode, as the input was
        inner = _as_bytecode(inner)
    if given.blobs is not None:  # every check gets each program with the blobs it uses
        inner = Encoded(inner, given.blobs.attach, "")
    carried = b"" if given.bytecode else triage.carried(settings, given.text)
    if carried:  # a crash reproducer's resource goes after every program the check gets, before its blobs
        inner = Encoded(inner, triage.carrying(carried), "")
    primers: list[EarlyExecutor] = []  # the early checks' timers go before the workers
    try:
        try:
            result = Run(
                settings,
                given.text,
                output,
                inner,
                began,
                monitor,
                primers,
                given.data,
                given.blobs,
                supplies or {},
                carried=carried,
            ).go()
        finally:
            held.hold()  # the run has ended: from here on, stopping it again would leave workers
            for primer in primers:
                primer.close()
    except BaseException:
        inner.close(abort=True)
        raise
    inner.close()
    return result


def _as_bytecode(inner: Executor) -> Executor:
    """Checks that get bytecode: the engine, the cache and the state keep the text."""
    from reducer.core.bytecode import Writer
    from reducer.core.encoded import Encoded

    why = "ireereduce: the program does not parse as MLIR, so it has no bytecode form to check"
    return Encoded(inner, Writer(), why)


@attrs.define
class Run:
    """One reduction's state, handed from phase to phase."""

    settings: Settings
    raw: str
    output: str
    inner: Executor  # every check of the run goes through it
    began: float
    monitor: Monitor
    primers: list[EarlyExecutor]  # closed by the caller, before the executor
    data: bytes | None = None  # the input's bytes, if not raw encoded (bytecode): what a resumed run must find again
    blobs: Blobs | None = None  # the input's dense_resource blobs, kept out of raw
    supplies: dict[str, object] = attrs.Factory(dict)  # what strategies want beyond the program (wiring.open_archives)
    carried: bytes = b""  # a crash reproducer's resource, after every program checked and written (`triage.carried`)
    guard: Guard = attrs.field(init=False)
    notes: list[str] = attrs.Factory(list)  # what the run did to the input or its start
    # start(): where the engine starts, and what ran alongside the original's checks.
    resume: Resume = attrs.field(init=False)
    begin: Start = attrs.field(init=False)
    flaky_start: str | None = None  # the original passed once and failed once
    early: overlap.Reprinted | None = None  # the re-printed original's check
    loaded: dict[str, type[Strategy]] | None = None  # the registry, if loaded meanwhile
    primed: overlap.Primed | None = None  # the engine, if its first checks started meanwhile
    # prepare(): the journal, and what the output holds.
    journal: VerdictJournal | None = None
    history: list[str] = attrs.Factory(list)  # the start, then every committed program
    floor: Size | None = None  # the output's earlier result (`as_file`): nothing larger replaces it
    replaying: bytes | None = None  # a resumed run's last commit: the output already holds it
    judge: Oracle = attrs.field(init=False)  # the calibrated oracle, --repeat included
    # reduce()
    executor: JournaledExecutor = attrs.field(init=False)
    ws: Workspace = attrs.field(init=False)
    engine: Engine = attrs.field(init=False)
    input_size: Size | None = None

    def __attrs_post_init__(self) -> None:
        self.guard = Guard(self.settings, self.output, self.blobs.attach if self.blobs is not None else None)

    def go(self) -> Result:
        try:
            self.start()
            self.prepare()
            try:
                return self._reduce_and_finish()
            except KeyboardInterrupt:
                if getattr(self, "engine", None) is None:
                    raise  # nothing reduced yet: the caller says what the output holds
                raise Interrupted(self.result()) from None  # after the engine: the output holds its result
        except DataFileUnreadable as exc:
            raise self._unreadable(exc) from None

    def _unreadable(self, exc: DataFileUnreadable) -> UserError:
        """A file the oracle reads, gone before an executor that ships it read it (Dask):
        a --parameters archive is the input's (exit 3, as when it is missing at the start)."""
        archives = {os.path.abspath(wiring.split_parameters(spec)[1]) for spec in self.settings.parameters}
        known = os.path.abspath(exc.path) in archives
        what = f"the parameter archive {exc.path} (--parameters)" if known else f"the file {exc.path} the checks read"
        return UserError(
            EXIT_BAD_INPUT,
            f"{what} cannot be read to ship it to the workers: {exc.reason} "
            f"(deleted or moved during the run?); {self.guard.best()}",
        )

    def _reduce_and_finish(self) -> Result:
        try:
            text, early_rechecks = self.reduce()
        except OSError as exc:
            raise self.guard.environment_error(exc) from None
        except UserError as exc:
            if exc.code == EXIT_CHECK_CHANGED_FILES:
                self.guard.restore_output()  # the workers are stopped now: a check still running may have written it
            raise
        try:
            text = self.after(text)
        except OSError as exc:
            raise self.guard.environment_error(exc) from None
        return self.finish(text, early_rechecks)

    # -- start -----------------------------------------------------------------------

    def start(self) -> None:
        """Continue a killed run from its recorded start, or check the original and run
        the triage that may change the program and the oracle."""
        text = self.raw
        if text.startswith(BOM):
            text = text[len(BOM) :]
            self.notes.append("removed the UTF-8 byte-order mark from the input")
        self.resume = open_state(
            self.settings, self.data if self.data is not None else self.raw.encode(), self.output, self._basename()
        )
        if self.resume.start is not None:
            self.begin = self.resume.start
            self.notes.extend(self.begin.findings.notes)
        else:
            try:
                self.begin = self._check_start(text)
            except UserError as exc:  # a check that needs the mark cannot pass: say it was removed
                if exc.code == EXIT_NOT_INTERESTING and self.raw.startswith(BOM):
                    exc.args = (f"{exc}; the input's UTF-8 byte-order mark was removed before the check",)
                raise
            # A typo in a strategy's name leaves no state for the corrected command to refuse
            # (the names are checked once the registry loaded, while the original's checks ran).
            if self.loaded is None:
                self.loaded = wiring.registry()
            check_strategy_names(self.settings.strategies, self.settings.skip_strategies, self.loaded)
            record_start(self.resume, self.begin)
        self.begin.findings.notes = self.notes
        self.guard.trailer = triage.trailer(self.begin.oracle) or self.carried

    def _check_start(self, text: str) -> Start:
        settings = self.settings
        attach = self.blobs.attach if self.blobs is not None else triage.unchanged
        with triage.alongside(settings, text, attach, self._basename()) as beside:
            oracle, verdict, timeout, self.flaky_start, self.early = check_original(
                settings,
                text,
                self._basename(),
                self.guard,
                self.inner,
                meanwhile=self._meanwhile,
                # A smaller result already in the output may be where the run starts instead.
                reprint_early=settings.fresh or not os.path.exists(self.output),
                told=self.monitor.checking_original,
                blob_sizes=self._blob_sizes(),
                beside=beside,
                deadline=self._deadline(),
            )
            self.monitor.phase("triage")
            findings = Findings()
            bounded = self._bounded()
            with self._before_the_reduction(bounded):
                text, oracle = triage.before(settings, text, oracle, findings, bounded, attach, beside)
        original_text = self.raw[len(BOM) :] if self.raw.startswith(BOM) else self.raw
        with self._before_the_reduction(bounded):
            text = where_to_start(settings, self.output, text, oracle, self.guard, bounded, original_text, findings)
        findings.notes[:0] = self.notes
        self.notes = list(findings.notes)
        return Start(text, oracle, verdict, timeout, findings, original_text)

    def _deadline(self) -> float | None:
        """--max-time's end, in time.monotonic()."""
        return None if self.settings.max_time is None else self.began + self.settings.max_time

    @contextlib.contextmanager
    def _before_the_reduction(self, executor: Executor) -> Iterator[None]:
        """A stop at --max-time's end in the checks between the original's and the
        engine's start: nothing is written yet, as when the original's check runs out."""
        try:
            yield
        except OSError as exc:  # a cluster lost (ExecutorLost), a full disk: the user's words
            raise self.guard.environment_error(exc) from None
        except (Cancelled, *limits.STOPPED) as exc:  # type: ignore[misc]  # a starred tuple of exception types
            if isinstance(exc, Cancelled) and not executor.expired():
                raise
            state = self.resume.state
            kept = "nothing was written"
            if state is not None and state.exists():
                kept = f"nothing but its state was written; rerun the same command to continue (state in {state.path})"
            raise UserError(
                EXIT_STOPPED,
                f"--max-time {self.settings.max_time:g} s ran out in the steps before the reduction "
                f"(the original fails as it should); {kept}",
            ) from None

    def _bounded(self, executor: Executor | None = None) -> Executor:
        """executor (the run's) for the checks before and after the engine's, stopped at
        --max-time's end."""
        executor = executor or self.inner
        deadline = self._deadline()
        if deadline is None:
            return executor
        return limits.Bounded(executor, deadline, f"--max-time {self.settings.max_time:g} s reached")

    def _blob_sizes(self) -> dict[str, int]:
        return self.blobs.sizes if self.blobs is not None else {}

    def _basename(self) -> str:
        return os.path.basename(self.settings.input) if self.settings.text is None else "input.mlir"

    def _meanwhile(self, reprinted: overlap.Reprinted | None) -> None:
        """While the original's checks run: load the strategies (the MLIR bindings,
        networkx: about a second) and prime the engine's first checks on idle workers;
        then what the rest of the run needs (the IREE room; the report's tool versions: a
        subprocess and importlib.metadata, 50 ms; the caller's `Monitor.on_idle`), where
        this process would only wait."""
        self.loaded = wiring.registry()
        if reprinted is not None:
            self.primed = overlap.prime(
                self.settings,
                reprinted,
                self.loaded,
                self.inner,
                self.monitor.engine_event,
                self.primers,
                self.supplies,
            )
        load_deferred(self.loaded)
        from reducer.iree import flags, phases, report, upstream  # noqa: F401  (see the imports)

        report.versions()
        self.monitor.idle()

    # -- prepare ---------------------------------------------------------------------

    def prepare(self) -> None:
        """Open the journal, and see what the output already holds: a resumed run's last
        commit (replayed, not written again), or an earlier run's smaller result (the
        floor nothing larger replaces)."""
        self.judge = triage.repeated(self.begin.oracle, self.settings.repeat)
        self.journal = open_journal(self.resume, self.begin.findings.notes)
        resumed = self.resume.start is not None
        text = self.begin.text
        try:
            with open(self.output, "rb") as f:
                current: bytes | None = f.read()
        except OSError:
            current = None
        trailer = self.guard.trailer
        if current is not None and trailer and current.endswith(trailer):
            current = current[: -len(trailer)]  # the program the output holds
        if current is not None and self.journal is not None and resumed:
            self._ours(current, self.journal)
            self.replaying = key(current)
        if current is not None and (resumed or self.guard.holds(current, text.encode())):
            self.guard.good = current
        self.history = [text]
        # Started from an earlier run's output: the output takes no program larger than
        # that one as a file (`as_file`: what it needs from other files, then its bytes;
        # the engine's order also counts type bits, and it re-prints).
        if not resumed and current is not None and self.guard.good == current:
            self.floor = as_file(text, wiring.outside(self.settings))

    def _ours(self, current: bytes, journal: VerdictJournal) -> None:
        """A resumed run takes the output as its last commit only if its journal holds an
        interesting verdict for it: else the user put a file there after the kill, and it
        is kept, as a fresh run keeps an output the check rejects."""
        verdict = journal.verdicts.get(key(current))
        if self.guard.plain and current.strip() and not (verdict is not None and verdict.interesting):
            raise UserError(
                EXIT_USAGE,
                f"{self.output} holds a program the interrupted run's journal does not record (a file put there "
                "after the kill, or a journal cut short); it is kept: "
                "give -o another path, move it away, or --fresh to start over",
            )

    # -- reduce ----------------------------------------------------------------------

    def reduce(self) -> tuple[str, list[concurrent.futures.Future[Verdict]]]:
        """Run the engine from the start; the final text, and the final re-checks it
        started early (kept only if nothing checks programs between it and them)."""
        self.executor = JournaledExecutor(self.inner, self.journal, after=self.guard.check)
        text = self.begin.text
        with self._before_the_reduction(self.inner):
            self.ws = choose_workspace(
                text,
                lambda data: self.judged(data, self._bounded(self.executor)),
                self.settings.verify,
                self.early,
                self._blob_sizes(),
                wiring.outside(self.settings),
            )
        if self.early is not None:
            self.early.cancel()  # not needed after all (the start changed, or MLIR prints it as it is)
        self.engine = self._engine()
        try:
            with self.monitor.watching(self.engine):
                self.engine.run()
                raise_if_stopped()  # one the bindings lost after the last candidate
        except (KeyboardInterrupt, *limits.STOPPED) as exc:  # type: ignore[misc]  # mypy cannot read a starred tuple of exception types
            self.engine.stats.final = self.engine.best.size if self.engine.best is not None else self.ws.size
            if isinstance(exc, limits.STOPPED):
                raise LimitReached(self.result(), getattr(exc, "reason", str(exc))) from None
            raise Interrupted(self.result()) from None
        self.monitor.phase("finishing")
        self._tell_idle_strategies()
        # Nothing committed: keep the start as it was, not re-printed (which may be longer).
        final = self.ws.program.text if len(self.history) > 1 and self.floor is None else text
        # Tidying (text mode), --reduce-flags and --for-upstream check programs of their
        # own, which would queue behind the early re-checks, and may change the text or
        # the oracle they are of.
        early_rechecks = self.engine.confirmations(final.encode())
        if (
            self.ws.mode == "text"
            or triage.reduces_flags(self.settings, self.begin.oracle)
            or self.settings.for_upstream
        ):
            for future in early_rechecks:
                self.inner.cancel(future)
            early_rechecks = []
        if self.ws.mode == "text":
            final = tidy_whitespace(final, self.judged, self.begin.findings)
            self._committed(final)
        return final, early_rechecks

    def _tell_idle_strategies(self) -> None:
        """Strategies the user chose that found nothing to try on this program (a text
        strategy on parseable MLIR, inline-parameters without --parameters): exit 0 with
        the input as it was would read as 'already minimal'."""
        chosen = self.settings.strategies or self.settings.skip_strategies
        if chosen and not any(s.candidates for s in self.engine.stats.per_strategy.values()):
            ran = ", ".join(self.engine.stats.per_strategy) or f"none of them works on {self.ws.mode} programs"
            self.begin.findings.notes.append(
                f"the strategies left by --strategies/--skip-strategies ({ran}) found nothing to try on this "
                "program; it is not known to be minimal"
            )
            log.warning("%s", self.begin.findings.notes[-1])

    def _engine(self) -> Engine:
        """The primed engine if it started from this very program, else a new one."""
        settings, ws = self.settings, self.ws
        strategies = select_strategies(
            ws.mode, settings.strategies, settings.skip_strategies, self.loaded, self.supplies
        )
        # Sizes everywhere (log, summary, report) measure the program as ireereduce prints
        # it, so the first improvement compares like with like, not with the input's spelling.
        original = self.begin.original_text
        self.input_size = ws.size if self.begin.text == original else size_of(original)
        log.info(
            "reducing %s (%s) as %s with %d workers, check timeout %.5g s",
            settings.input,
            ws.size,
            ws.mode,
            self.inner.workers,
            self.begin.timeout,
        )
        if self.primed is not None and self.primed.matches(ws):
            engine = overlap.take_over(self.primed, self.executor, self.judge, self.improved, self.should_stop)
        else:
            if self.primed is not None:
                self.primed.executor.discard()  # the run starts from another program
            engine = build_engine(
                settings,
                ws,
                strategies,
                self.executor,
                self.judge,
                self.inner,
                self.monitor.engine_event,
                self.improved,
                self.should_stop,
            )
        engine.stats.original = ws.size  # as reduction started
        self.monitor.start(self.input_size, ws.size, ws.mode, self.inner.workers, self.begin.timeout, ws.program.text)
        return engine

    def judged(self, data: bytes, executor: Executor | None = None) -> bool:
        """Whether data is interesting, read from the early re-print's check if it is provably
        the same; else checked on executor (the run's; before the engine starts, bounded by
        --max-time: `Stopped` at its end)."""
        known = self.early.verdict(data, self.judge, self._deadline()) if self.early is not None else None
        if known is None:
            executor = executor or self.executor
            return executor.result(executor.submit(data, self.judge)).interesting
        self.executor.record(data, known)
        return known.interesting

    def improved(self, candidate: Candidate) -> None:
        """A commit: written to the output, unless a resumed run replays what it holds or
        the output's earlier result is still smaller."""
        self.history.append(candidate.data.decode())
        if self.replaying is not None:
            if key(self.guard.form(candidate.data)) == self.replaying:
                self.replaying = None
            return
        if self.floor is not None:
            if self.floor.smaller_than(Size(None, len(candidate.data), outside=candidate.size.outside)):
                return
            self.floor = None
        self.guard.write_output(candidate.data)
        self.monitor.improve(candidate)

    def should_stop(self) -> str | None:
        """--max-time and --max-checks: why the engine must stop now, if it must."""
        return limits.Limits(self.began, self.settings.max_time, self.settings.max_checks).reason(
            self.engine.stats.oracle_calls
        )

    def _committed(self, text: str) -> None:
        if text != self.history[-1]:
            self.history.append(text)

    # -- after and finish ------------------------------------------------------------

    def after(self, text: str) -> str:
        """The flags and --for-upstream steps, counted with the engine's checks."""
        try:  # stopped at --max-time's end: the output holds the engine's result
            done = triage.after(
                self.settings, self.ws.mode, text, self.begin.oracle, self.begin.findings, self._bounded()
            )
        except limits.STOPPED as exc:
            raise LimitReached(self.result(), str(exc)) from None
        self.engine.stats.oracle_calls += done.checks
        if done.oracle is not self.begin.oracle:
            self.begin = attrs.evolve(self.begin, oracle=done.oracle)
            self.judge = triage.repeated(done.oracle, self.settings.repeat)
            trailer = triage.trailer(done.oracle)
            if trailer != self.guard.trailer:  # a shorter pipeline: the output's resource says so
                self.guard.trailer = trailer
                if self.guard.good is not None:
                    self.guard.write_output(self.guard.good)
        self._committed(done.text)
        return done.text

    def finish(self, text: str, early_rechecks: list[concurrent.futures.Future[Verdict]]) -> Result:
        """Write the final program, re-check it, walk back if a flaky check rejects it."""
        if self.guard.good is None or not self.guard.holds(self.guard.good, text.encode()):
            self.guard.write_output(text.encode())
        stats = self.engine.stats
        rechecks = Rechecks(self.judge, self.journal, self.guard, self.inner)
        stats.final = self._measured(text, stats.final.ops)
        stats.oracle_calls += self.begin.findings.workflow_checks
        try:
            settled = settle(rechecks, text, self.history, early_rechecks, self.output, self.flaky_start)
        except KeyboardInterrupt:
            raise Interrupted(self.result()) from None
        if not settled.confirmed:
            self.guard.write_output(settled.text.encode())
            stats.final = self._measured(settled.text, None)
        elif self.flaky_start:
            self.begin.findings.notes.append(
                f"the check looked flaky at the start ({self.flaky_start}); the result passed {FINAL_CONFIRM} re-checks"
            )
        self._tell_parameters(settled.text)
        confirmed = settled.confirmed
        final = rechecks.last if rechecks.last is not None else Verdict(confirmed, 0 if confirmed else 1)
        if self.resume.state is not None:
            self.resume.state.remove()
        res = self.result(final, settled.flaky)
        if settled.flaky is not None:
            raise Flaky(res)
        return res

    def _measured(self, text: str, ops: int | None) -> Size:
        """The result's size as the workspace measures a program: its bytes (with the blobs
        it uses), its tensor volume, and what it needs from other files (`Size.outside`:
        --stats-json said 0 for a result that still needed a parameter archive)."""
        volume = irutil.tensor_volume(text) if self.ws.mode == "mlir" else 0
        return Size(ops, self.ws.weigh(text), volume, self.ws.count_outside(text))

    def _tell_parameters(self, text: str) -> None:
        """Whether the result still needs a parameter archive, and for which keys."""
        if not self.settings.parameters and "#stream.parameter.named<" not in text:
            return
        from reducer.iree.parameters import note

        told = note(text, bool(self.settings.parameters))
        if told is not None:
            self.begin.findings.notes.append(told)

    def result(self, final: Verdict | None = None, flaky: str | None = None) -> Result:
        state = self.resume.state
        return Result(
            self.output,
            self.ws.mode,
            self.engine.stats,
            time.monotonic() - self.began,
            self.begin.timeout,
            self.begin.verdict.seconds,
            self.begin.findings,
            self.begin.oracle,
            final,
            self.input_size,
            flaky,
            state.path if state is not None and state.exists() else None,
            self.guard.good is not None,
        )
