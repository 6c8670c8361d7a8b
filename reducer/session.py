"""One reduction from start to finish: check the inputs, check the original is
interesting, pick how to read it (MLIR or text), run the engine, re-check the result.

Every way a user's input can be wrong ends in a `UserError` with one line saying what
is wrong and what to do, and a documented exit code (see EXIT_CODES and the README).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import errno
import importlib
import logging
import math
import os
import re
import shlex
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import attrs

from reducer.core import ir as irutil
from reducer.core import limits
from reducer.core.cache import JournaledExecutor, VerdictJournal, key
from reducer.core.early import EarlyExecutor, provably_same
from reducer.core.engine import DEFAULT_MOVE_BUDGET, Engine, RunStats
from reducer.core.executor import Executor, LocalExecutor
from reducer.core.oracle import KILL_GRACE, Oracle, RepeatOracle, ScriptOracle, Verdict, run_scope
from reducer.core.state import Busy, OutputLock, RunState, differences, fingerprint
from reducer.core.strategy import Strategy, canonical_name, discover
from reducer.core.workspace import Candidate, MLIRWorkspace, Size, TextWorkspace, Workspace
from reducer.progress import Monitor

if TYPE_CHECKING:
    from reducer.iree import dispatch

# The IREE room's modules are imported where they are used: most runs need them only
# after the original's checks (triage, flags, the report) or not at all (a check script
# needs no built-in oracle), and every module imported before those checks delays them
# and the engine's first. `_reduce_on` imports them while the original's checks run.

log = logging.getLogger(__name__)

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_USAGE = 2
EXIT_BAD_INPUT = 3
EXIT_BAD_CHECK = 4
EXIT_NOT_INTERESTING = 5
EXIT_CHECK_HANGS = 6
EXIT_FLAKY = 7
EXIT_CANNOT_WRITE = 8
EXIT_BUSY = 9
EXIT_STATE_MISMATCH = 10
EXIT_CHECK_CHANGED_FILES = 11
EXIT_EXECUTOR = 12
EXIT_STOPPED = 13
EXIT_TRIVIAL = 14
EXIT_INTERRUPTED = 130

EXIT_CODES = {
    EXIT_OK: "reduced; the output is interesting",
    EXIT_INTERNAL: "internal error in ireereduce (rerun with --debug and report it)",
    EXIT_USAGE: "bad command line; an output, report, stats or log path that is the input, the check, "
    "another of them, or not writable",
    EXIT_BAD_INPUT: "input file missing, unreadable or not text",
    EXIT_BAD_CHECK: "check script missing, not executable or cannot be run (also when deleted or made "
    "non-executable mid-run); --compile's program not found",
    EXIT_NOT_INTERESTING: "the check says the original input is not interesting (--compile: it does not fail as expected)",
    EXIT_CHECK_HANGS: "the check did not finish on the original input within the timeout",
    EXIT_FLAKY: "flaky check: the reduced program failed a re-check; the output holds the last program "
    "that passed its re-checks, and the message gives the flip rate seen",
    EXIT_CANNOT_WRITE: "cannot write the output, report, stats or state (disk full, read-only or removed "
    "directory); the message says where the best so far is",
    EXIT_BUSY: "another ireereduce run is writing the same output (the message names its PID)",
    EXIT_STATE_MISMATCH: "the state directory holds a run with other settings, input or check (--fresh starts over)",
    EXIT_CHECK_CHANGED_FILES: "the check changed the input, the output or itself; the output keeps the "
    "last good program",
    EXIT_EXECUTOR: "the executor cannot start: the Dask scheduler is unreachable, or distributed is not installed",
    EXIT_STOPPED: "--max-time or --max-checks reached; the output holds the smallest interesting program found",
    EXIT_TRIVIAL: "--trivial-is-error: the result is trivial (an empty module or a function that only returns)",
    EXIT_INTERRUPTED: "interrupted; the output holds the smallest interesting program found",
}

#: Timeout for checking the original when the user gives none (C-Reduce/C-Vise's default).
INITIAL_TIMEOUT = 300.0


class UserError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


@attrs.define
class Settings:
    """Everything one reduction needs. These defaults are the only ones: the CLI and
    `reducer.reduce` both take theirs from here."""

    input: str  # a path; with `text`, only the name the input goes by ("-" for stdin)
    check: str | None = None  # the user's script; or one of the built-in oracles below
    output: str | None = None
    jobs: int | None = None  # None: the number of CPUs, or 1 for timing oracles (see workers())
    timeout: float | None = None
    verify: bool = True
    strategies: Sequence[str] | None = None
    skip_strategies: Sequence[str] = ()
    move_budget: int = DEFAULT_MOVE_BUDGET
    # Built-in oracles (reducer/oracles): a compile command with {input}, and a second
    # configuration for mismatches and relative compile times.
    compile: str | None = None
    against: str | None = None
    mismatch: bool = False
    runner: str = "iree-run-module --device=local-task"
    function: str | None = None
    rtol: float = 1e-3
    atol: float = 1e-4
    slower_than: float | None = None
    slower_than_factor: float | None = None
    expect_error: str | None = None
    expect_crash: bool = False
    allow_slippage: bool = False
    # IREE workflows (shared/seeds)
    phases: bool = True
    from_phase_dump: bool = False
    isolate_dispatch: bool = False
    reduce_flags: bool = True
    for_upstream: bool = False
    report: str | None = None
    report_json: str | None = None
    # Where checks run (reducer/core/executor.py): "local" worker processes, or "dask".
    executor: str = "local"
    scheduler: str | None = None  # a running Dask scheduler's address; None: an embedded LocalCluster
    resources: dict[str, float] = attrs.field(factory=dict)  # Dask worker resources each check holds
    check_files: Sequence[str] = ()  # shipped to Dask workers with the check script
    # Unattended runs: files the CLI writes (checked with the others before anything runs),
    # repeated checks, and the state a killed run continues from.
    stats_json: str | None = None
    log_file: str | None = None
    repeat: int = 1
    fresh: bool = False
    state_dir: str | None = None
    no_state: bool = False
    max_time: float | None = None  # seconds for the whole run; then stop with the best so far
    max_checks: int | None = None  # checks the reduction may run; then stop likewise
    # After the fields older callers pass by position.
    test_args: Sequence[str] = ()  # appended to the check's arguments after the candidate's path
    text: str | None = None  # the input itself, when it is not read from `input`
    oracle: Oracle | None = None  # a ready-made oracle (Python API), instead of check/compile

    def workers(self) -> int:
        """Parallel checks: as many as CPUs, but one when the oracle measures time, so
        checks do not compete for the cores they are timing."""
        if self.jobs is not None:
            return self.jobs
        timing = self.slower_than is not None or self.slower_than_factor is not None
        return 1 if timing else os.cpu_count() or 1


@attrs.define
class Findings:
    """What the workflows found: for the summary, the report and the oracle-call count."""

    phase: str | None = None  # the first --compile-to phase that shows the failure
    started_from: str | None = None  # --from-phase-dump: the phase whose output IR was reduced
    dispatch: dispatch.Isolated | None = None  # the executable reduced alone
    flags_removed: list[str] = attrs.field(factory=list)
    for_upstream: list[str] = attrs.field(factory=list)  # the --for-upstream steps kept
    workflow_checks: int = 0  # oracle calls outside the engine, before it
    notes: list[str] = attrs.field(factory=list)  # what the run did to the input or its start, for the summary


@attrs.define
class Result:
    output: str
    mode: str
    stats: RunStats
    seconds: float
    timeout: float
    initial_check_seconds: float
    findings: Findings = attrs.field(factory=Findings)
    oracle: Oracle | None = None
    final_verdict: Verdict | None = None
    input_size: Size | None = None
    flaky: str | None = None  # what the re-checks saw, when they disagreed
    state_dir: str | None = None  # kept for a rerun to continue from


def default_output(path: str) -> str:
    stem, ext = os.path.splitext(path)
    return f"{stem}.reduced{ext or '.mlir'}"


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_atomically(path: str, data: bytes) -> None:
    """Replace path in one step, so an interruption never leaves a half-written repro.
    The file gets the mode a plain write would give (the old file's, else the umask's),
    and an error names path, not the temporary file."""
    directory = os.path.dirname(os.path.abspath(path))
    try:
        mode = os.stat(path).st_mode & 0o7777
    except OSError:
        mode = 0o666 & ~_umask()
    try:
        fd, tmp = tempfile.mkstemp(prefix=".ireereduce-", dir=directory)
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, path) from None
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), mode)
            f.write(data)
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise OSError(exc.errno, exc.strerror, path) from None
        raise


def save(path: str, data: bytes, what: str, best: str | None = None) -> None:
    """write_atomically, with a failure a UserError that says where the best so far is."""
    try:
        write_atomically(path, data)
    except OSError as exc:
        raise UserError(
            EXIT_CANNOT_WRITE, f"cannot write {what} {path}: {exc.strerror}" + (f"; {best}" if best else "")
        ) from None


BOM = "\ufeff"


def read_input(path: str) -> str:
    if not os.path.exists(path):
        raise UserError(EXIT_BAD_INPUT, f"input file {path!r} does not exist")
    if os.path.isdir(path):
        raise UserError(EXIT_BAD_INPUT, f"input {path!r} is a directory; give the .mlir file to reduce")
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise UserError(EXIT_BAD_INPUT, f"cannot read input {path!r}: {exc.strerror}") from None
    try:
        return data.decode()
    except UnicodeDecodeError:
        raise UserError(
            EXIT_BAD_INPUT, f"input {path!r} is not UTF-8 text (MLIR bytecode? convert it with iree-opt first)"
        ) from None


def check_paths(settings: Settings) -> None:
    """Every file the run will write, checked before anything runs: none may be the
    input, the check or a file the check uses, or another of them, and each must be
    writable. After a reduction of hours is too late to find out."""
    output = settings.output or default_output(settings.input)
    named = [
        ("the output" if settings.output is None else "-o", output),
        ("--report", settings.report),
        ("--report-json", settings.report_json),
        ("--stats-json", settings.stats_json),
        ("--log-file", settings.log_file),
    ]
    protected = {os.path.realpath(settings.input): f"the input {settings.input}"}
    if settings.check is not None:
        for used in shipped_files(settings.check):
            protected.setdefault(os.path.realpath(used), f"{used}, which the check script uses")
        protected[os.path.realpath(settings.check)] = f"the check script {settings.check}"
    seen: dict[str, str] = {}
    for flag, path in named:
        if path is None:
            continue
        real = os.path.realpath(path)
        if real in protected:
            raise UserError(
                EXIT_USAGE, f"{flag} {path} is {protected[real]}; ireereduce never overwrites it (give another path)"
            )
        if real in seen:
            raise UserError(EXIT_USAGE, f"{seen[real]} and {flag} both name {path}; give each its own file")
        seen[real] = flag
        _check_writable(flag, path)


def _check_writable(flag: str, path: str) -> None:
    if os.path.isdir(path):
        raise UserError(EXIT_USAGE, f"{flag} {path} is a directory; give a file name")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise UserError(EXIT_USAGE, f"cannot write {flag} {path}: the directory {parent} does not exist")
    try:  # os.access is not enough: root passes it on read-only file systems
        fd, probe = tempfile.mkstemp(prefix=".ireereduce-probe-", dir=parent)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise UserError(
            EXIT_USAGE, f"cannot write {flag} {path}: the directory {parent} is not writable ({exc.strerror})"
        ) from None
    if os.path.exists(path) and not os.access(path, os.W_OK):
        raise UserError(EXIT_USAGE, f"cannot write {flag} {path}: it is read-only")


def shipped_files(script: str) -> list[str]:
    """Files a check script names (a reference output, a helper next to it): words of
    its text that are existing files, relative to its directory or the current one."""
    try:
        with open(script, "rb") as f:
            text = f.read(1 << 16).decode(errors="replace")
    except OSError:
        return []
    base = os.path.dirname(os.path.abspath(script))
    found = []
    for word in sorted(set(re.findall(r"[\w.+~/-]+", text))):
        if "/" not in word and "." not in word:
            continue
        for path in {os.path.join(base, word), os.path.abspath(word), os.path.expanduser(word)}:
            if os.path.isfile(path):
                found.append(path)
    return found


def check_script(path: str) -> str:
    if not os.path.exists(path):
        raise UserError(EXIT_BAD_CHECK, f"check script {path!r} does not exist")
    if os.path.isdir(path):
        raise UserError(EXIT_BAD_CHECK, f"check script {path!r} is a directory")
    if not os.access(path, os.X_OK):
        raise UserError(EXIT_BAD_CHECK, f"check script {path!r} is not executable; run: chmod +x {path}")
    with open(path, "rb") as f:
        head = f.read(4)
    if not (head.startswith(b"#!") or head == b"\x7fELF"):
        raise UserError(EXIT_BAD_CHECK, f"check script {path!r} has no '#!' line; start it with #!/bin/sh")
    return os.path.abspath(path)


#: Errors that mean a file could not be written, not that a program could not be run.
WRITE_ERRORS = (errno.ENOSPC, errno.EFBIG, errno.EDQUOT, errno.EROFS)


def _user_error(exc: OSError) -> UserError:
    """What an OSError out of a check means to the user: a full disk, or a check that cannot run."""
    if exc.errno in WRITE_ERRORS:
        return UserError(
            EXIT_CANNOT_WRITE,
            f"cannot write a candidate into the temporary directory "
            f"{tempfile.gettempdir()}: {exc.strerror} (free space, or set TMPDIR)",
        )
    return UserError(EXIT_BAD_CHECK, f"cannot run the check ({exc.filename or 'its program'}): {exc.strerror}")


def check_repeatedly(
    executor: Executor,
    oracle: Oracle,
    data: bytes,
    times: int,
    until: Callable[[Verdict], bool],
    meanwhile: Callable[[], object] | None = None,
    started: Sequence[concurrent.futures.Future[Verdict]] = (),
) -> list[Verdict]:
    """Check data `times` times and read the verdicts in order, stopping after the first
    one `until` accepts. The checks run at once on the executor's workers (a re-check
    waits one check, not three), except for an oracle that measures time, whose runs
    would compete for the CPUs; checks not read are cancelled. What is read is what a
    sequential loop would read, so the outcome does not depend on -j. An OSError out of
    a check is raised as it is: the caller knows what to tell the user (before the run,
    or after it, where the best result so far is). `meanwhile` runs once the first checks
    are submitted, before any is read. `started`: checks of data by oracle on executor
    that are already running (the engine's early re-checks), read first."""
    concurrent_ = not oracle.measures_time
    futures = list(started[:times])
    for future in started[times:]:
        executor.cancel(future)
    futures += [executor.submit(data, oracle) for _ in range(max(0, (times if concurrent_ else 1) - len(futures)))]
    read: list[Verdict] = []
    try:
        if meanwhile is not None:
            meanwhile()
        while len(read) < times:
            if len(futures) <= len(read):
                futures.append(executor.submit(data, oracle))
            verdict = futures[len(read)].result()
            read.append(verdict)
            if until(verdict):
                break
    finally:
        for future in futures[len(read) :]:
            executor.cancel(future)
    return read


def registry() -> dict[str, type[Strategy]]:
    """Every strategy, in run order: the built-in list, then plug-ins. The one place the
    built-ins are named for the core, which never imports them itself."""
    from strategies import BUILTIN

    return discover(BUILTIN)


def _load_deferred(available: dict[str, type[Strategy]]) -> None:
    """Import what the strategies defer (`Strategy.deferred_imports`), so that the engine
    does not wait for it; a module that fails to load is left for the strategy to meet."""
    for name in dict.fromkeys(m for cls in available.values() for m in cls.deferred_imports):
        with contextlib.suppress(Exception):
            importlib.import_module(name)


def select_strategies(
    mode: str,
    only: Sequence[str] | None,
    skip: Sequence[str],
    available: dict[str, type[Strategy]] | None = None,
) -> list[Strategy]:
    """Instances in run order (registry order), filtered by mode and the user's lists."""
    available = registry() if available is None else available
    only = None if only is None else [canonical_name(n) for n in only]
    skip = [canonical_name(n) for n in skip]
    unknown = [n for n in list(only or []) + list(skip) if n not in available]
    if unknown:
        raise UserError(EXIT_USAGE, f"unknown strategy {', '.join(unknown)}; see ireereduce --list-strategies")
    chosen = [cls() for name, cls in available.items() if mode in cls.modes and name not in skip]
    if only is not None:
        chosen = [s for s in chosen if s.name in only]
    return chosen


class _Reprinted:
    """The original parsed, and its re-printed form checked while the original's own two
    checks run, so the engine starts one check time sooner. Started only for an oracle
    that neither learns from the original's verdict nor measures time; its verdict is
    used only where it is provably the one `_choose_workspace`'s check would give."""

    def __init__(self, text: str, verify: bool, oracle: Oracle, executor: Executor) -> None:
        self.text, self.verify, self.oracle, self.executor = text, verify, oracle, executor
        self.data: bytes | None = None
        self.future: concurrent.futures.Future[Verdict] | None = None
        self.workspace: MLIRWorkspace | irutil.ParseError
        try:
            self.workspace = MLIRWorkspace(text, irutil.PrintOptions(), verify=verify)
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

    def verdict(self, data: bytes, judge: Oracle) -> Verdict | None:
        """The early verdict, if checking data with judge would give it: the same bytes,
        the same oracle up to its timeout (set from the original's check time), and, if
        the timeouts differ, one run that finished within judge's (a longer one would
        have been cut off). None: check it as usual. Read once; the check is then done
        or cancelled."""
        future, self.future = self.future, None
        if future is None:
            return None
        if data != self.data or self.oracle.with_timeout(judge.timeout) != judge:
            self.executor.cancel(future)
            return None
        try:  # a check past judge's timeout would have been cut off: no need to wait for it
            verdict = future.result(timeout=None if judge.timeout is None else judge.timeout + 2 * KILL_GRACE)
        except concurrent.futures.TimeoutError:
            self.executor.cancel(future)
            return None
        return verdict if provably_same(self.oracle, verdict, judge) else None

    def cancel(self) -> None:
        if self.future is not None:
            self.executor.cancel(self.future)
            self.future = None


@attrs.define
class _Primed:
    """An engine whose first checks started while the original was checked (see
    `Engine.prime`), on the parse `_Reprinted` made; the run takes it over if it starts
    from that very program (`_take_over`), else its checks are cancelled."""

    engine: Engine
    executor: EarlyExecutor
    program: str  # the text the engine was primed on

    def matches(self, ws: Workspace) -> bool:
        if ws is not self.engine.ws or not isinstance(ws, MLIRWorkspace):
            return False
        return ws.options == irutil.PrintOptions() and ws.program.text == self.program


def _prime(
    settings: Settings,
    early: _Reprinted,
    available: dict[str, type[Strategy]],
    inner: Executor,
    on_event: Callable[[str, dict[str, object]], None],
    primers: list[EarlyExecutor],
) -> _Primed | None:
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
        strategies = select_strategies(ws.mode, settings.strategies, settings.skip_strategies, available)
    except UserError:
        return None  # told where it always is, after the original's verdict (the same at any -j)
    primer = EarlyExecutor(inner, early.oracle)
    primers.append(primer)
    engine = _engine(settings, ws, strategies, primer, early.oracle, inner, on_event)
    engine.prime(room)
    return _Primed(engine, primer, ws.program.text)


def _engine(
    settings: Settings,
    ws: Workspace,
    strategies: Sequence[Strategy],
    executor: Executor,
    judge: Oracle,
    inner: Executor,
    on_event: Callable[[str, dict[str, object]], None],
    on_improve: Callable[[Candidate], None] = lambda candidate: None,
    should_stop: Callable[[], str | None] | None = None,
) -> Engine:
    return Engine(
        ws,
        strategies,
        executor,
        on_improve,
        move_budget=settings.move_budget,
        oracle=judge,
        on_event=on_event,
        should_stop=should_stop,
        # The final re-checks may start while the last round is judged, on the inner
        # executor (the journal would answer them), unless they time the compiler.
        confirm=0 if judge.measures_time else FINAL_CONFIRM,
        confirm_on=inner,
    )


def _take_over(
    primed: _Primed,
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


def _choose_workspace(
    text: str, judged: Callable[[bytes], bool], verify: bool, early: _Reprinted | None = None
) -> Workspace:
    """MLIR if the input parses and the check still likes it once re-printed; else text."""
    try:
        parsed = early.parsed(text, verify) if early is not None else None
        if isinstance(parsed, irutil.ParseError):
            raise parsed
        ws = parsed or MLIRWorkspace(text, irutil.PrintOptions(), verify=verify)
    except irutil.ParseError as exc:
        log.warning(
            "input does not parse as MLIR (%s); falling back to text reduction (lines, balanced blocks, tokens)", exc
        )
        return TextWorkspace(text)
    for options in (irutil.PrintOptions(), irutil.PrintOptions(debug_info=True), irutil.PrintOptions(generic=True)):
        canonical = ws.canonical(options)
        if canonical == text or judged(canonical.encode()):
            if options != ws.options:
                log.warning("the check needs the IR printed with %s; keeping that form", options)
                ws.reprint(options)
            return ws
    log.warning("the check rejects the input once MLIR re-prints it; falling back to text reduction")
    return TextWorkspace(text)


def make_oracle(settings: Settings, basename: str, timeout: float) -> Oracle:
    """The user's check script, or the built-in oracle the flags describe."""
    if settings.oracle is not None:
        if settings.check is not None or settings.compile is not None:
            raise UserError(EXIT_USAGE, "give an oracle, a check script or a compile command, not several")
        return settings.oracle.with_timeout(timeout)
    if (settings.check is None) == (settings.compile is None):
        raise UserError(EXIT_USAGE, "give exactly one of --check SCRIPT or --compile COMMAND")
    if settings.check is not None:
        for flag, value in (
            ("--against", settings.against),
            ("--mismatch", settings.mismatch),
            ("--slower-than", settings.slower_than),
            ("--slower-than-factor", settings.slower_than_factor),
            ("--expect-error", settings.expect_error),
            ("--expect-crash", settings.expect_crash),
        ):
            if value:
                raise UserError(EXIT_USAGE, f"{flag} goes with --compile, not with --check")
        script, args = _script_and_args(settings.check)
        return ScriptOracle(check_script(script), basename, timeout, args + tuple(settings.test_args))
    from reducer.iree.oracles import CompileOracle, SlowCompileOracle, parse_command
    from reducer.iree.oracles.command import Command, CommandError

    timing = settings.slower_than is not None or settings.slower_than_factor is not None
    try:
        command = parse_command(settings.compile or "", needs_output=settings.mismatch)
        against = parse_command(settings.against, needs_output=settings.mismatch) if settings.against else None
    except CommandError as exc:
        raise UserError(EXIT_USAGE, str(exc)) from None
    try:
        runner = Command(tuple(shlex.split(settings.runner)))
    except ValueError as exc:
        raise UserError(EXIT_USAGE, f"cannot split the command: {exc}") from None
    tool = command.render()[0]
    if shutil.which(tool) is None and not os.access(tool, os.X_OK):
        raise UserError(
            EXIT_BAD_CHECK,
            f"the compile command's program {command.argv[0]!r} is not found; install it or give its path",
        )
    if settings.mismatch:
        from reducer.iree.oracles.mismatch import MismatchOracle  # numpy: only a mismatch run needs it

        if against is None or timing:
            raise UserError(
                EXIT_USAGE, "--mismatch needs --against COMMAND (the second configuration), and no --slower-than"
            )
        return MismatchOracle(
            command,
            against,
            basename,
            timeout,
            runner,
            settings.function,
            settings.rtol,
            settings.atol,
            allow_slippage=settings.allow_slippage,
        )
    if timing:
        if settings.slower_than is not None and settings.slower_than_factor is not None:
            raise UserError(EXIT_USAGE, "give one of --slower-than and --slower-than-factor")
        if settings.slower_than_factor is not None and against is None:
            raise UserError(EXIT_USAGE, "--slower-than-factor needs --against COMMAND (the fast compiler or flags)")
        return SlowCompileOracle(
            command,
            basename,
            timeout,
            settings.slower_than,
            settings.slower_than_factor,
            against,
            allow_slippage=settings.allow_slippage,
        )
    if against is not None:
        raise UserError(EXIT_USAGE, "--against goes with --mismatch or --slower-than-factor")
    return CompileOracle(
        command, basename, timeout, settings.expect_error, settings.expect_crash, settings.allow_slippage
    )


def make_executor(settings: Settings, oracle: Oracle | None, factory: type[Executor] | None = None) -> Executor:
    """The executor the settings name; every check of the run goes through it (with
    oracle None, each submit names its oracle)."""
    if factory is not None:
        return factory(oracle, settings.workers())  # type: ignore[call-arg]  # the ABC declares no __init__; every executor takes these two
    if settings.executor == "dask":
        try:
            from reducer.core.dask_executor import DaskExecutor, ExecutorUnavailable
        except ImportError:
            raise UserError(EXIT_EXECUTOR, "--executor dask needs Dask: pip install 'ireereduce[dask]'") from None
        try:
            return DaskExecutor(
                oracle, settings.workers(), settings.scheduler, settings.resources, settings.check_files
            )
        except ExecutorUnavailable as exc:
            raise UserError(EXIT_EXECUTOR, str(exc)) from None
    if settings.scheduler or settings.resources:
        raise UserError(EXIT_USAGE, "--scheduler and --resources go with --executor dask")
    return LocalExecutor(oracle, settings.workers())


#: Re-checks of the final program before exit 0; a 20%-flaky check passes a
#: non-interesting program three times in a row 0.8% of the time.
FINAL_CONFIRM = 3
#: Re-checks in a row a committed program must pass when walking back from a final
#: program the check rejected (0.2**6: a bad program rarely gets through).
WALKBACK_CONFIRM = 6


def default_state_dir(output: str) -> str:
    return output + ".resume"


@attrs.frozen
class Start:
    """Where the engine starts, recorded in the state directory so a rerun skips the
    checks that found it."""

    text: str
    oracle: Oracle  # calibrated, with its timeout; not repeated
    verdict: Verdict  # the original's
    timeout: float
    findings: Findings
    original_text: str


def _script_and_args(check: str) -> tuple[str, tuple[str, ...]]:
    """`-c "./check.sh math.exp"`: a check given with its arguments, as Shrink Ray takes it.
    Split only when the whole string names no file and its first word does."""
    if os.path.exists(check):
        return check, ()
    try:
        words = shlex.split(check)
    except ValueError:
        return check, ()
    if len(words) > 1 and os.path.isfile(words[0]):
        return words[0], tuple(words[1:])
    return check, ()


def reduce_file(
    settings: Settings, executor_factory: type[Executor] | None = None, monitor: Monitor | None = None
) -> Result:
    start = time.monotonic()
    monitor = monitor or Monitor()
    settings = attrs.evolve(settings, jobs=settings.workers())
    if settings.timeout is not None and not (math.isfinite(settings.timeout) and settings.timeout > 0):
        raise UserError(EXIT_USAGE, f"--timeout must be a finite number of seconds above 0, not {settings.timeout}")
    if settings.repeat < 1:
        raise UserError(EXIT_USAGE, "--repeat must be at least 1")
    if settings.text is not None and not settings.output:
        raise UserError(EXIT_USAGE, "reading the input from stdin needs -o FILE for the result")
    check_paths(settings)
    raw = settings.text if settings.text is not None else read_input(settings.input)
    output = settings.output or default_output(settings.input)
    lock = OutputLock(output)
    try:
        lock.acquire()
    except Busy as exc:
        raise UserError(
            EXIT_BUSY,
            f"another ireereduce run (PID {exc.pid}) is writing {output}; wait for it, or give this one another -o",
        ) from None
    except OSError as exc:
        raise UserError(EXIT_CANNOT_WRITE, f"cannot create the lock file {lock.path}: {exc.strerror}") from None
    try:
        with run_scope():
            return _reduce(settings, raw, output, executor_factory, start, monitor)
    finally:
        lock.release()


class _Guard:
    """The user's files as they were: a check that writes the input, the output or
    itself is a broken check, and its verdicts cannot be trusted. Also remembers the
    last good output, to put back if the check overwrote it."""

    def __init__(self, settings: Settings, output: str) -> None:
        self.settings = settings
        self.output = output
        self.paths = [settings.input, output] + ([settings.check] if settings.check else [])
        self.expected = {p: self._stat(p) for p in self.paths}
        self.good: bytes | None = None
        self.lock = threading.Lock()

    @staticmethod
    def _stat(path: str) -> tuple[int, int] | None:
        try:
            st = os.stat(path)
        except OSError:
            return None
        return st.st_size, st.st_mtime_ns

    def write_output(self, data: bytes) -> None:
        with self.lock:
            save(self.output, data, "the output", self._where_best())
            self.expected[self.output] = self._stat(self.output)
            self.good = data

    def _where_best(self) -> str:
        if self.good is None:
            return "no smaller program was found before this"
        return f"{self.output} still holds the smallest interesting program so far ({len(self.good)} bytes)"

    def best(self) -> str:
        if self.good is None:
            return f"no smaller program was found; {self.output} was not written"
        return f"{self.output} holds the smallest interesting program so far"

    def check(self, _verdict: object = None) -> None:
        check = self.settings.check
        with self.lock:
            if check is not None and self.expected.get(check) is not None:
                if not os.path.exists(check):
                    raise UserError(
                        EXIT_BAD_CHECK, f"the check script {check} was deleted during the run; {self.best()}"
                    )
            for path in self.paths:
                if self._stat(path) != self.expected[path]:
                    if path == self.output and self.good is not None:
                        save(self.output, self.good, "the output")
                        self.expected[path] = self._stat(path)
                    raise UserError(
                        EXIT_CHECK_CHANGED_FILES,
                        f"{path} changed while the check ran (size or modification time); a check must not write "
                        f"the user's files (it gets its own copy of the candidate); stopped, {self.best()}",
                    )

    def restore_output(self) -> None:
        with self.lock:
            if self.good is not None and self._stat(self.output) != self.expected[self.output]:
                save(self.output, self.good, "the output")
                self.expected[self.output] = self._stat(self.output)

    def environment_error(self, exc: OSError) -> UserError:
        """An OSError out of the run, in the user's words (never 'internal error')."""
        check = self.settings.check
        if check is not None:
            if not os.path.exists(check):
                return UserError(EXIT_BAD_CHECK, f"the check script {check} was deleted during the run; {self.best()}")
            if not os.access(check, os.X_OK):
                return UserError(
                    EXIT_BAD_CHECK,
                    f"the check script {check} is no longer executable (chmod +x {check}); {self.best()}",
                )
        if exc.errno in WRITE_ERRORS and not exc.filename:
            return UserError(
                EXIT_CANNOT_WRITE,
                f"cannot write a candidate into the temporary directory "
                f"{tempfile.gettempdir()}: {exc.strerror}; {self.best()}",
            )
        if exc.errno in (errno.ENOENT, errno.EACCES, errno.EPERM) and check is None:
            return UserError(
                EXIT_BAD_CHECK, f"cannot run the check ({exc.filename or 'its program'}): {exc.strerror}; {self.best()}"
            )
        where = exc.filename or "a file"
        return UserError(EXIT_CANNOT_WRITE, f"cannot write {where}: {exc.strerror}; {self.best()}")


def _check_original(
    settings: Settings,
    text: str,
    basename: str,
    guard: _Guard,
    executor: Executor,
    meanwhile: Callable[[_Reprinted | None], object] = lambda early: None,
    reprint_early: bool = True,
) -> tuple[Oracle, Verdict, float, str | None, _Reprinted | None]:
    """Run the check on the original twice (at once, given two workers): a check that
    disagrees with itself is flaky. While they run, (if `reprint_early`, with two
    workers or more) parse the original and check its re-printed form where that check
    does not depend on these verdicts (see `_Reprinted`), and call `meanwhile` with it;
    neither happens while an oracle measures time."""
    first = make_oracle(settings, basename, settings.timeout or INITIAL_TIMEOUT)
    if first.measures_time and settings.timeout is None:
        first = first.with_timeout(None)  # the original's time is the question; a limit could hide it
    early: list[_Reprinted] = []

    # --repeat's verdict is its last run's: only with the timeout fixed is it provably the same.
    # With two workers the re-print queues behind the original's two checks: it starts
    # as soon as one ends, not after the parse that would follow their verdict. (A hang
    # holds its worker only until the run reads it: `_Reprinted.verdict` cuts it off at
    # the calibrated timeout.) With one worker it would delay the original's verdict.
    ahead = (
        reprint_early
        and executor.workers >= 2
        and not (first.learns_from_original() or (settings.repeat > 1 and not settings.timeout))
    )

    def while_checking() -> None:
        if ahead:
            judge = RepeatOracle(first, settings.repeat) if settings.repeat > 1 else first
            early.append(_Reprinted(text, settings.verify, judge, executor))
        meanwhile(early[0] if early else None)

    try:
        oracle, verdict, timeout, flaky = _judge_original(
            settings, text, first, guard, executor, None if first.measures_time else while_checking
        )
    except BaseException:
        for e in early:
            e.cancel()
        raise
    return oracle, verdict, timeout, flaky, early[0] if early else None


def _judge_original(
    settings: Settings,
    text: str,
    first: Oracle,
    guard: _Guard,
    executor: Executor,
    meanwhile: Callable[[], None] | None,
) -> tuple[Oracle, Verdict, float, str | None]:
    # A timeout (of a check that does not time things) ends it: the run stops there.
    try:
        verdicts = check_repeatedly(
            executor,
            first,
            text.encode(),
            2,
            until=lambda v: v.timed_out and not first.measures_time,
            meanwhile=meanwhile,
        )
    except OSError as exc:
        raise _user_error(exc) from None
    guard.check()
    flaky = None
    if len({v.interesting for v in verdicts}) > 1:
        flaky = "the check passed the original once and failed it once"
        log.warning("the check is flaky: %s; consider --repeat N (a candidate must then pass N times)", flaky)
    verdict = next((v for v in verdicts if v.interesting), verdicts[0])
    if verdict.timed_out and not first.measures_time:
        raise UserError(
            EXIT_CHECK_HANGS,
            f"the check did not finish on the original input within {first.timeout:g} s; "
            "fix the script or raise --timeout",
        )
    if not verdict.interesting:
        raise UserError(
            EXIT_NOT_INTERESTING,
            f"the check says the original input is not interesting ({first.why_not(verdict)}); "
            "it must be interesting for the input as given (mlir-reduce users: invert your script's exit codes)",
        )
    seconds = max(v.seconds for v in verdicts)
    timeout = settings.timeout or 10 * seconds + 5.0
    if first.measures_time:
        timeout = settings.timeout or 3 * seconds + 5.0
    oracle = first.calibrate(verdict).with_timeout(timeout)
    if verdict.signature is not None and verdict.signature.kind != "ok":
        log.info(
            "the original fails with %s; candidates must fail the same way%s",
            verdict.signature.describe(),
            " (slippage allowed)" if settings.allow_slippage else "",
        )
    return oracle, verdict, timeout, flaky


def _previous_best(output: str, text: str, oracle: Oracle, guard: _Guard, executor: Executor) -> str | None:
    """The output of an earlier run, if it is smaller than text and still interesting."""
    try:
        with open(output, "rb") as f:
            data = f.read()
        previous = data.decode()
    except (OSError, UnicodeDecodeError):
        return None
    if not previous.strip() or len(data) >= len(text.encode()):
        return None
    try:
        interesting = check_repeatedly(executor, oracle, data, 1, until=lambda v: True)[0].interesting
    except OSError as exc:
        raise _user_error(exc) from None
    guard.check()
    if not interesting:
        log.warning("%s holds a program the check rejects; it will be replaced by the first improvement", output)
        return None
    return previous


class _Rechecks:
    """Re-checks of committed programs (the final confirmation, the walk back), recorded
    in the journal in order so that a resumed run replays them too."""

    def __init__(self, oracle: Oracle, journal: VerdictJournal | None, guard: _Guard, executor: Executor) -> None:
        self.oracle, self.journal, self.guard, self.executor = oracle, journal, guard, executor
        self.replay = list(journal.rechecks) if journal is not None else []
        self.runs = self.failures = 0
        self.last: Verdict | None = None  # the last re-check run (not replayed): for the report

    def _drop(self, futures: list[concurrent.futures.Future[Verdict]]) -> list[concurrent.futures.Future[Verdict]]:
        """Cancel checks started on this executor; nothing is left of them."""
        for future in futures:
            self.executor.cancel(future)
        return []

    def _record(self, ok: bool) -> bool:
        self.runs += 1
        self.failures += not ok
        return ok

    def confirm(self, data: bytes, times: int, started: Sequence[concurrent.futures.Future[Verdict]] = ()) -> bool:
        """Whether data passes `times` re-checks in a row (they run at once). `started`:
        re-checks of data by this oracle already running on this executor."""
        k = key(data)
        started = list(started)
        while times and self.replay and self.replay[0][0] == k:
            times -= 1
            started = self._drop(started)  # a resumed run reads what the journal holds
            if not self._record(self.replay.pop(0)[1]):
                return False
        if not times:
            self._drop(started)
            return True
        self.replay = []
        try:  # a full disk or a vanished check here is told with where the best result is
            verdicts = check_repeatedly(
                self.executor, self.oracle, data, times, until=lambda v: not v.interesting, started=started
            )
            self.guard.check()
            for verdict in verdicts:
                self.last = verdict
                if self.journal is not None:
                    self.journal.record_recheck(k, verdict.interesting)
                self._record(verdict.interesting)
        except OSError as exc:
            raise self.guard.environment_error(exc) from None
        return all(v.interesting for v in verdicts)


def _reduce(
    settings: Settings, raw: str, output: str, executor_factory: type[Executor] | None, start: float, monitor: Monitor
) -> Result:
    # One executor for every check (the original's, workflows, engine, flags, re-checks,
    # --for-upstream); its workers are forked before any MLIR context exists here.
    inner = make_executor(settings, None, executor_factory)
    primers: list[EarlyExecutor] = []  # the early checks' timers go before the workers
    try:
        try:
            result = _reduce_on(settings, raw, output, inner, start, monitor, primers)
        finally:
            for primer in primers:
                primer.close()
    except BaseException:
        inner.close(abort=True)
        raise
    inner.close()
    return result


def _reduce_on(
    settings: Settings,
    raw: str,
    output: str,
    inner: Executor,
    start: float,
    monitor: Monitor,
    primers: list[EarlyExecutor],
) -> Result:
    guard = _Guard(settings, output)
    notes: list[str] = []
    text = raw
    if text.startswith(BOM):
        text = text[len(BOM) :]
        notes.append("removed the UTF-8 byte-order mark from the input")
    basename = os.path.basename(settings.input) if settings.text is None else "input.mlir"
    state = None if settings.no_state else RunState(settings.state_dir or default_state_dir(output))
    fp = fingerprint(settings, raw.encode())
    recorded = state.load() if state is not None else None
    resumed: Start | None = None
    if state is not None and recorded is not None:
        if settings.fresh:
            state.remove()
        elif recorded[0] != fp:
            raise UserError(
                EXIT_STATE_MISMATCH,
                f"{state.path} holds an interrupted run of another command "
                f"({differences(recorded[0], fp)}); rerun that command to continue it, or add --fresh "
                "to start over",
            )
        else:
            resumed = recorded[1]
    elif state is not None and state.exists():
        state.remove()  # killed before the start was recorded: nothing to continue

    early: _Reprinted | None = None  # the re-printed original's check, if it ran alongside
    loaded: list[dict[str, type[Strategy]]] = []  # the registry, if loaded meanwhile
    primed: list[_Primed] = []  # the engine, if its first checks started meanwhile
    if resumed is not None:
        begin = resumed
        notes.extend(begin.findings.notes)
        flaky_start = None
    else:
        monitor.phase("checking the original")

        # Loading the strategies (the MLIR bindings, networkx: about a second) while the
        # original's checks run takes it off the way to the engine's first check, and
        # idle workers may start that check and the next ones already. What the rest of
        # the run needs (the IREE room; the report's tool versions: a subprocess and
        # importlib.metadata, 50 ms; the caller's `Monitor.on_idle`) is done here too,
        # where this process would only wait.
        def meanwhile(reprinted: _Reprinted | None) -> None:
            loaded.append(registry())
            found = _prime(settings, reprinted, loaded[0], inner, monitor.engine_event, primers) if reprinted else None
            primed.extend([found] if found is not None else [])
            _load_deferred(loaded[0])
            from reducer.iree import flags, phases, report, upstream  # noqa: F401  (see the imports)

            report.versions()
            monitor.idle()

        oracle, verdict, timeout, flaky_start, early = _check_original(
            settings,
            text,
            basename,
            guard,
            inner,
            meanwhile=meanwhile,
            # A smaller result already in the output may be where the run starts instead.
            reprint_early=settings.fresh or not os.path.exists(output),
        )
        monitor.phase("triage")
        findings = Findings()
        text, oracle = _workflows(settings, text, oracle, findings, inner)
        original_text = raw[len(BOM) :] if raw.startswith(BOM) else raw
        if not settings.fresh and os.path.exists(output):
            previous = _previous_best(output, text, oracle, guard, inner)
            if previous is not None:
                findings.notes.append(
                    f"started from the smaller interesting program already in {output} "
                    f"({len(previous.encode())} bytes; --fresh starts from the input)"
                )
                log.info("%s", findings.notes[-1])
                text = previous
        findings.notes[:0] = notes
        notes = list(findings.notes)
        begin = Start(text, oracle, verdict, timeout, findings, original_text)
        if state is not None:
            try:
                state.create(fp, begin)
            except OSError as exc:
                raise UserError(
                    EXIT_CANNOT_WRITE,
                    f"cannot write the state directory {state.path}: {exc.strerror} "
                    "(--state-dir elsewhere, or --no-state)",
                ) from None
    text, oracle, verdict, timeout, findings = begin.text, begin.oracle, begin.verdict, begin.timeout, begin.findings
    findings.notes = notes
    original_text = begin.original_text
    judge: Oracle = RepeatOracle(oracle, settings.repeat) if settings.repeat > 1 else oracle
    journal = None
    if state is not None:
        try:
            journal = state.open_journal()
        except OSError as exc:
            raise UserError(
                EXIT_CANNOT_WRITE,
                f"cannot write the state directory {state.path}: {exc.strerror} (--state-dir elsewhere, or --no-state)",
            ) from None
        if resumed is not None:
            msg = (
                f"continuing the interrupted run recorded in {state.path} "
                f"({len(journal.verdicts)} verdicts recorded are not checked again)"
            )
            log.info("%s", msg)
            findings.notes.append(msg)
    # A rerun replays the commits the killed run made; the output already holds the
    # last of them, so it is not written again until the replay passes it.
    try:
        with open(output, "rb") as f:
            current = f.read()
    except OSError:
        current = None
    holds = key(current) if current is not None and journal is not None and resumed is not None else None
    if current is not None:
        guard.good = current if (resumed is not None or current.decode(errors="replace") == text) else guard.good
    history: list[str] = [text]
    # Started from an earlier run's output: the output takes no program with more bytes
    # than that one (the engine's order also counts type bits, and it re-prints).
    floor: list[int | None] = (
        [len(current)] if resumed is None and current is not None and guard.good == current else [None]
    )

    try:
        executor = JournaledExecutor(inner, journal, after=guard.check)

        def judged(data: bytes) -> bool:
            known = early.verdict(data, judge) if early is not None else None
            if known is None:
                return executor.submit(data, judge).result().interesting
            executor.record(data, known)
            return known.interesting

        ws = _choose_workspace(text, judged, settings.verify, early)
        if early is not None:
            early.cancel()  # not needed after all (the start changed, or MLIR prints it as it is)
        strategies = select_strategies(
            ws.mode, settings.strategies, settings.skip_strategies, loaded[0] if loaded else None
        )
        # Sizes everywhere (log, summary, report) measure the program as ireereduce prints
        # it, so the first improvement compares like with like, not with the input's spelling.
        input_size = ws.size if text == original_text else _size_of(original_text)
        log.info(
            "reducing %s (%s) as %s with %d workers, check timeout %.1f s",
            settings.input,
            ws.size,
            ws.mode,
            settings.jobs,
            timeout,
        )
        replaying = [holds]

        def improved(candidate: Candidate) -> None:
            history.append(candidate.data.decode())
            if replaying[0] is not None:
                if key(candidate.data) == replaying[0]:
                    replaying[0] = None
                return
            if floor[0] is not None:
                if len(candidate.data) > floor[0]:
                    return
                floor[0] = None
            guard.write_output(candidate.data)
            monitor.improve(candidate)

        limits_ = limits.Limits(start, settings.max_time, settings.max_checks)

        def should_stop() -> str | None:
            return limits_.reason(engine.stats.oracle_calls)

        if primed and primed[0].matches(ws):
            engine = _take_over(primed[0], executor, judge, improved, should_stop)
        else:
            if primed:
                primed[0].executor.discard()  # the run starts from another program
            engine = _engine(
                settings, ws, strategies, executor, judge, inner, monitor.engine_event, improved, should_stop
            )
        engine.stats.original = ws.size  # as reduction started
        monitor.start(input_size, ws.size, ws.mode, settings.workers(), timeout, ws.program.text)

        def result(final: Verdict | None = None, flaky: str | None = None) -> Result:
            return Result(
                output,
                ws.mode,
                engine.stats,
                time.monotonic() - start,
                timeout,
                verdict.seconds,
                findings,
                oracle,
                final,
                input_size,
                flaky,
                state.path if state is not None and state.exists() else None,
            )

        try:
            with monitor.watching(engine):
                stats = engine.run()
        except (KeyboardInterrupt, *limits.STOPPED) as exc:  # type: ignore[misc]  # mypy cannot read a starred tuple of exception types
            engine.stats.final = engine.best.size if engine.best is not None else ws.size
            if isinstance(exc, limits.STOPPED):
                raise LimitReached(result(), getattr(exc, "reason", str(exc))) from None
            raise Interrupted(result()) from None
        monitor.phase("finishing")
        # Nothing committed: keep the start as it was, not re-printed (which may be longer).
        final_text = ws.program.text if len(history) > 1 and floor[0] is None else text
        # The final re-checks the engine started, kept only if nothing runs between the
        # engine and them: tidying (text mode), --reduce-flags and --for-upstream check
        # programs of their own, which would queue behind them, and may change the text
        # or the oracle they are of.
        early_rechecks = engine.confirmations(final_text.encode())
        flags_reduced = settings.reduce_flags and oracle is not None and bool(oracle.commands)
        if ws.mode == "text" or flags_reduced or settings.for_upstream:
            for future in early_rechecks:
                inner.cancel(future)
            early_rechecks = []
        if ws.mode == "text":
            final_text = _tidy_whitespace(final_text, judged, findings)
            if final_text != history[-1]:
                history.append(final_text)
    except OSError as exc:
        raise guard.environment_error(exc) from None
    except UserError as exc:
        if exc.code == EXIT_CHECK_CHANGED_FILES:
            guard.restore_output()  # the workers are stopped now: a check still running may have written it again
        raise
    try:
        if flags_reduced:
            from reducer.iree.flags import reduce_flags

            flags = reduce_flags(oracle, final_text.encode(), inner)
            stats.oracle_calls += flags.checks
            oracle = flags.oracle
            judge = RepeatOracle(oracle, settings.repeat) if settings.repeat > 1 else oracle
            findings.flags_removed = list(flags.removed)
            if flags.removed:
                log.info("flags: %d not needed: %s", len(flags.removed), ", ".join(flags.removed))
        if settings.for_upstream and ws.mode == "mlir":
            checks = [0]

            def interesting(candidate: str) -> bool:
                checks[0] += 1
                return inner.run(candidate.encode(), judge).interesting

            from reducer.iree import upstream

            final_text, done = upstream.clean(final_text, interesting)
            stats.oracle_calls += checks[0]
            findings.for_upstream = done
            log.info("for upstream: %s", ", ".join(done) or "nothing could be changed")
            if final_text != history[-1]:
                history.append(final_text)
    except OSError as exc:
        raise guard.environment_error(exc) from None
    if guard.good != final_text.encode():
        guard.write_output(final_text.encode())

    rechecks = _Rechecks(judge, journal, guard, inner)
    stats.final = Size(stats.final.ops, len(final_text.encode()))
    stats.oracle_calls += findings.workflow_checks
    try:
        confirmed = rechecks.confirm(final_text.encode(), FINAL_CONFIRM, early_rechecks)
        kept = None
        if not confirmed:
            for candidate in reversed(list(dict.fromkeys(history[:-1]))):
                if rechecks.confirm(candidate.encode(), WALKBACK_CONFIRM):
                    kept = candidate
                    break
    except KeyboardInterrupt:
        raise Interrupted(result()) from None
    flaky = None
    if not confirmed:
        how = (
            f"{output} holds the last program that passed {WALKBACK_CONFIRM} re-checks in a row"
            if kept is not None
            else f"no program the run committed passed {WALKBACK_CONFIRM} re-checks in a row; {output} holds the one it started from"
        )
        kept = kept if kept is not None else history[0]
        guard.write_output(kept.encode())
        final_text = kept
        stats.final = Size(None, len(kept.encode()))
        seen = f"{rechecks.failures} of {rechecks.runs} re-checks of programs it had passed failed"
        if flaky_start:
            seen += f", and {flaky_start}"
        flaky = (
            f"{seen} (a flip rate of about {100.0 * rechecks.failures / max(rechecks.runs, 1):.0f}%); "
            f"{how} ({len(kept.encode())} bytes)"
        )
    elif flaky_start:
        findings.notes.append(
            f"the check looked flaky at the start ({flaky_start}); the result passed {FINAL_CONFIRM} re-checks"
        )
    final = rechecks.last if rechecks.last is not None else Verdict(confirmed, 0 if confirmed else 1)
    if state is not None:
        state.remove()
    res = result(final, flaky)
    if flaky is not None:
        raise Flaky(res)
    return res


def _tidy_whitespace(text: str, judged: Callable[[bytes], bool], findings: Findings) -> str:
    """Text mode leaves the whitespace between the tokens it kept; collapse its runs
    (then, failing that, only blank lines and the ends) where that stays interesting."""
    collapsed = re.sub(r"[ \t]+", " ", re.sub(r"\s*\n\s*", "\n", text)).strip() + "\n"
    ends = re.sub(r"\n\s*\n", "\n", text.strip()) + "\n"
    for candidate in (collapsed, ends):
        if len(candidate) < len(text) and judged(candidate.encode()):
            findings.notes.append(f"collapsed whitespace ({len(text)} -> {len(candidate)} bytes)")
            return candidate
    return text


def _size_of(text: str) -> Size:
    """The input's size as the workspace would measure it, for reports, when a workflow
    started the reduction elsewhere."""
    try:
        module = irutil.parse(text, irutil.new_context())
    except irutil.ParseError:
        return Size(None, len(text.encode()))
    return Size(
        irutil.count_ops(module.operation),
        len(irutil.to_text(module.operation, irutil.PrintOptions(), verified=False).encode()),
    )


def _workflows(
    settings: Settings, text: str, oracle: Oracle, findings: Findings, executor: Executor
) -> tuple[str, Oracle]:
    """IREE's triage steps before reducing (shared/seeds): which dispatch, which phase."""
    from reducer.iree import dispatch, phases
    from reducer.iree.oracles import CompileOracle

    if not isinstance(oracle, CompileOracle):
        if settings.isolate_dispatch or settings.from_phase_dump:
            raise UserError(EXIT_USAGE, "--isolate-dispatch and --from-phase-dump need a --compile failure oracle")
        return text, oracle
    if not oracle.command.is_iree_compile():
        if settings.isolate_dispatch or settings.from_phase_dump:
            raise UserError(EXIT_USAGE, "--isolate-dispatch and --from-phase-dump need an iree-compile command")
        return text, oracle
    if settings.isolate_dispatch:
        found = dispatch.isolate(oracle, text.encode(), executor)
        findings.workflow_checks += found.checks
        if found.failing:
            log.info(
                "dispatch isolation: %s fails alone (%d of %d executables fail the same way; %.1f s)",
                found.name,
                len(found.failing),
                found.executables,
                found.seconds,
            )
            findings.dispatch = found
            return found.text, found.oracle
    if settings.phases and phases.applicable(oracle):
        search = phases.first_failing_phase(oracle, text.encode(), executor)
        findings.workflow_checks += search.checks
        if search.phase is not None:
            findings.phase = search.phase
            limited = phases.limit(oracle, search.phase)
            if not search.worth_it() and not settings.from_phase_dump:
                log.info(
                    "phase search: the failure appears in phase %s, after code generation; stopping there "
                    "saves nothing, so checks compile fully",
                    search.phase,
                )
                return text, oracle
            log.info(
                "phase search: the failure appears in phase %s; checks stop there (--compile-to=%s)",
                search.phase,
                search.phase,
            )
            if settings.from_phase_dump:
                resumed = phases.start_from_dump(
                    limited, text.encode(), os.path.basename(settings.input), search.phase, executor
                )
                findings.workflow_checks += 2  # the dump, and its IR checked
                if resumed is not None:
                    findings.started_from = phases.PHASES[phases.PHASES.index(search.phase) - 1]
                    log.info(
                        "starting from the IR after phase %s (%d bytes, was %d)",
                        findings.started_from,
                        len(resumed[0]),
                        len(text),
                    )
                    return resumed[0], resumed[1]
            return text, limited
    return text, oracle


class Interrupted(Exception):
    def __init__(self, result: Result) -> None:
        self.result = result


class LimitReached(Interrupted):
    """--max-time or --max-checks ran out: the output holds the best so far."""

    def __init__(self, result: Result, reason: str) -> None:
        super().__init__(result)
        self.reason = reason


class Flaky(Exception):
    def __init__(self, result: Result) -> None:
        self.result = result
