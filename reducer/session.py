"""One reduction from start to finish: check the inputs, check the original is
interesting, pick how to read it (MLIR or text), run the engine, re-check the result.

Every way a user's input can be wrong ends in a `UserError` with one line saying what
is wrong and what to do, and a documented exit code (see EXIT_CODES and the README).
"""

from __future__ import annotations

import logging
import os
import shlex
import shutil
import tempfile
import time
from collections.abc import Sequence

import attrs

from reducer import ir as irutil
from reducer import dispatch, phases, upstream
from reducer.engine import DEFAULT_MOVE_BUDGET, Engine, RunStats
from reducer.executor import Executor, LocalExecutor
from reducer.flags import reduce_flags
from reducer.oracle import Oracle, ScriptOracle, Verdict
from reducer.oracles import CompileOracle, MismatchOracle, SlowCompileOracle, parse_command
from reducer.oracles.command import Command, CommandError
from reducer.strategy import Strategy, discover
from reducer.workspace import Candidate, MLIRWorkspace, Size, TextWorkspace, Workspace

log = logging.getLogger(__name__)

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_USAGE = 2
EXIT_BAD_INPUT = 3
EXIT_BAD_CHECK = 4
EXIT_NOT_INTERESTING = 5
EXIT_CHECK_HANGS = 6
EXIT_FLAKY = 7
EXIT_EXECUTOR = 11
EXIT_INTERRUPTED = 130

EXIT_CODES = {
    EXIT_OK: "reduced; the output is interesting",
    EXIT_INTERNAL: "internal error in ireereduce (rerun with --debug and report it)",
    EXIT_USAGE: "bad command line (also: output path equal to the input)",
    EXIT_BAD_INPUT: "input file missing, unreadable or not text",
    EXIT_BAD_CHECK: "check script missing, not executable or cannot be run; --compile's program not found",
    EXIT_NOT_INTERESTING: "the check says the original input is not interesting (--compile: it does not fail as expected)",
    EXIT_CHECK_HANGS: "the check did not finish on the original input within the timeout",
    EXIT_FLAKY: "the reduced output was not interesting when re-checked (flaky check)",
    EXIT_EXECUTOR: "the executor cannot start: the Dask scheduler is unreachable, or distributed is not installed",
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
    input: str
    check: str | None = None  # the user's script; or one of the built-in oracles below
    output: str | None = None
    jobs: int = attrs.field(factory=lambda: os.cpu_count() or 1)
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
    # Where checks run (reducer/executor.py): "local" worker processes, or "dask".
    executor: str = "local"
    scheduler: str | None = None  # a running Dask scheduler's address; None: an embedded LocalCluster
    resources: dict[str, float] = attrs.field(factory=dict)  # Dask worker resources each check holds
    check_files: Sequence[str] = ()  # shipped to Dask workers with the check script


@attrs.define
class Findings:
    """What the workflows found: for the summary, the report and the oracle-call count."""

    phase: str | None = None  # the first --compile-to phase that shows the failure
    started_from: str | None = None  # --from-phase-dump: the phase whose output IR was reduced
    dispatch: dispatch.Isolated | None = None  # the executable reduced alone
    flags_removed: list[str] = attrs.field(factory=list)
    for_upstream: list[str] = attrs.field(factory=list)  # the --for-upstream steps kept
    workflow_checks: int = 0  # oracle calls outside the engine, before it


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


def default_output(path: str) -> str:
    stem, ext = os.path.splitext(path)
    return f"{stem}.reduced{ext or '.mlir'}"


def write_atomically(path: str, data: bytes) -> None:
    """Replace path in one step, so an interruption never leaves a half-written repro."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".ireereduce-", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


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


def run_check(oracle: Oracle, data: bytes) -> Verdict:
    try:
        return oracle.run(data)
    except OSError as exc:
        raise UserError(EXIT_BAD_CHECK, f"cannot run the check ({exc.filename or 'its program'}): {exc.strerror}") from None


def select_strategies(mode: str, only: Sequence[str] | None, skip: Sequence[str]) -> list[Strategy]:
    available = discover()
    unknown = [n for n in list(only or []) + list(skip) if n not in available]
    if unknown:
        raise UserError(
            EXIT_USAGE, f"unknown strategy {', '.join(unknown)}; see ireereduce --list-strategies"
        )
    chosen = [cls() for name, cls in available.items() if mode in cls.modes and name not in skip]
    if only is not None:
        chosen = [s for s in chosen if s.name in only]
    return chosen


def _choose_workspace(text: str, oracle: Oracle, verify: bool) -> Workspace:
    """MLIR if the input parses and the check still likes it once re-printed; else text."""
    try:
        ws = MLIRWorkspace(text, irutil.PrintOptions(), verify=verify)
    except irutil.ParseError as exc:
        log.warning(
            "input does not parse as MLIR (%s); falling back to text reduction (lines, balanced blocks, tokens)", exc
        )
        return TextWorkspace(text)
    for options in (irutil.PrintOptions(), irutil.PrintOptions(debug_info=True), irutil.PrintOptions(generic=True)):
        canonical = ws.canonical(options)
        if canonical == text or run_check(oracle, canonical.encode()).interesting:
            if options != ws.options:
                log.warning("the check needs the IR printed with %s; keeping that form", options)
                ws.reprint(options)
            return ws
    log.warning("the check rejects the input once MLIR re-prints it; falling back to text reduction")
    return TextWorkspace(text)


def make_oracle(settings: Settings, basename: str, timeout: float) -> Oracle:
    """The user's check script, or the built-in oracle the flags describe."""
    if (settings.check is None) == (settings.compile is None):
        raise UserError(EXIT_USAGE, "give exactly one of --check SCRIPT or --compile COMMAND")
    if settings.check is not None:
        for flag, value in (("--against", settings.against), ("--mismatch", settings.mismatch),
                            ("--slower-than", settings.slower_than), ("--slower-than-factor", settings.slower_than_factor),
                            ("--expect-error", settings.expect_error), ("--expect-crash", settings.expect_crash)):
            if value:
                raise UserError(EXIT_USAGE, f"{flag} goes with --compile, not with --check")
        return ScriptOracle(check_script(settings.check), basename, timeout)
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
        raise UserError(EXIT_BAD_CHECK, f"the compile command's program {command.argv[0]!r} is not found; install it or give its path")
    if settings.mismatch:
        if against is None or timing:
            raise UserError(EXIT_USAGE, "--mismatch needs --against COMMAND (the second configuration), and no --slower-than")
        return MismatchOracle(
            command, against, basename, timeout, runner, settings.function, settings.rtol, settings.atol,
            allow_slippage=settings.allow_slippage,
        )
    if timing:
        if settings.slower_than is not None and settings.slower_than_factor is not None:
            raise UserError(EXIT_USAGE, "give one of --slower-than and --slower-than-factor")
        if settings.slower_than_factor is not None and against is None:
            raise UserError(EXIT_USAGE, "--slower-than-factor needs --against COMMAND (the fast compiler or flags)")
        return SlowCompileOracle(
            command, basename, timeout, settings.slower_than, settings.slower_than_factor, against,
            allow_slippage=settings.allow_slippage,
        )
    if against is not None:
        raise UserError(EXIT_USAGE, "--against goes with --mismatch or --slower-than-factor")
    return CompileOracle(command, basename, timeout, settings.expect_error, settings.expect_crash, settings.allow_slippage)


def make_executor(settings: Settings, oracle: Oracle, factory: type[Executor] | None = None) -> Executor:
    """The executor the settings name; every check of the run goes through it."""
    if factory is not None:
        return factory(oracle, settings.jobs)  # type: ignore[call-arg]
    if settings.executor == "dask":
        try:
            from reducer.dask_executor import DaskExecutor, ExecutorUnavailable
        except ImportError:
            raise UserError(EXIT_EXECUTOR, "--executor dask needs Dask: pip install 'ireereduce[dask]'") from None
        try:
            return DaskExecutor(oracle, settings.jobs, settings.scheduler, settings.resources, settings.check_files)
        except ExecutorUnavailable as exc:
            raise UserError(EXIT_EXECUTOR, str(exc)) from None
    if settings.scheduler or settings.resources:
        raise UserError(EXIT_USAGE, "--scheduler and --resources go with --executor dask")
    return LocalExecutor(oracle, settings.jobs)


def reduce_file(settings: Settings, executor_factory: type[Executor] | None = None) -> Result:
    start = time.monotonic()
    text = read_input(settings.input)
    output = settings.output or default_output(settings.input)
    if os.path.exists(output) and os.path.samefile(output, settings.input):
        raise UserError(EXIT_USAGE, "the output path is the input; ireereduce never overwrites its input (use -o)")
    basename = os.path.basename(settings.input)

    first = make_oracle(settings, basename, settings.timeout or INITIAL_TIMEOUT)
    if isinstance(first, SlowCompileOracle) and settings.timeout is None:
        first = first.with_timeout(None)  # the original's time is the question; a limit could hide it
    verdict = run_check(first, text.encode())
    if verdict.timed_out and not isinstance(first, SlowCompileOracle):
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
    timeout = settings.timeout or 10 * verdict.seconds + 5.0
    if isinstance(first, SlowCompileOracle):
        timeout = settings.timeout or 3 * verdict.seconds + 5.0
    oracle = first.calibrate(verdict).with_timeout(timeout)
    findings = Findings()
    if verdict.signature is not None and verdict.signature.kind != "ok":
        log.info("the original fails with %s; candidates must fail the same way%s", verdict.signature.describe(),
                 " (slippage allowed)" if settings.allow_slippage else "")
    original_text = text
    # Workers are forked before any MLIR context exists in this process. Every check from
    # here on (workflows, engine, flags, --for-upstream) goes through this one executor.
    with make_executor(settings, oracle, executor_factory) as executor:
        text, oracle = _workflows(settings, text, oracle, findings, executor)
        write_atomically(output, text.encode())
        ws = _choose_workspace(text, oracle, settings.verify)
        strategies = select_strategies(ws.mode, settings.strategies, settings.skip_strategies)
        input_size = Size(ws.size.ops if text == original_text else _ops_of(original_text), len(original_text.encode()))
        log.info(
            "reducing %s (%s) as %s with %d workers, check timeout %.1f s",
            settings.input, ws.size, ws.mode, settings.jobs, timeout,
        )

        def improved(candidate: Candidate) -> None:
            write_atomically(output, candidate.data)

        engine = Engine(ws, strategies, executor, improved, move_budget=settings.move_budget, oracle=oracle)
        engine.stats.original = Size(ws.size.ops, len(text.encode()))  # as reduction started
        try:
            stats = engine.run()
        except KeyboardInterrupt:
            engine.stats.final = engine.best.size if engine.best is not None else ws.size
            raise Interrupted(Result(output, ws.mode, engine.stats, time.monotonic() - start, timeout, verdict.seconds,
                                     findings, oracle, None, input_size))
        final_text = ws.program.text
        if settings.reduce_flags and getattr(oracle, "commands", ()):
            flags = reduce_flags(oracle, final_text.encode(), executor)
            stats.oracle_calls += flags.checks
            oracle = flags.oracle
            findings.flags_removed = list(flags.removed)
            if flags.removed:
                log.info("flags: %d not needed: %s", len(flags.removed), ", ".join(flags.removed))
        if settings.for_upstream and ws.mode == "mlir":
            checks = [0]

            def interesting(candidate: str) -> bool:
                checks[0] += 1
                return executor.run(candidate.encode(), oracle).interesting

            final_text, done = upstream.clean(final_text, interesting)
            stats.oracle_calls += checks[0]
            findings.for_upstream = done
            log.info("for upstream: %s", ", ".join(done) or "nothing could be changed")
            write_atomically(output, final_text.encode())
    final = run_check(oracle, final_text.encode())
    stats.final = Size(stats.final.ops, len(final_text.encode()))
    stats.oracle_calls += findings.workflow_checks
    result = Result(output, ws.mode, stats, time.monotonic() - start, timeout, verdict.seconds, findings, oracle, final, input_size)
    if not final.interesting:
        raise Flaky(result)
    return result


def _ops_of(text: str) -> int | None:
    """The input's op count, for reports, when a workflow started the reduction elsewhere."""
    try:
        return irutil.count_ops(irutil.parse(text, irutil.new_context()).operation)
    except irutil.ParseError:
        return None


def _workflows(
    settings: Settings, text: str, oracle: Oracle, findings: Findings, executor: Executor
) -> tuple[str, Oracle]:
    """IREE's triage steps before reducing (shared/seeds): which dispatch, which phase."""
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
            log.info("dispatch isolation: %s fails alone (%d of %d executables fail the same way; %.1f s)",
                     found.name, len(found.failing), found.executables, found.seconds)
            findings.dispatch = found
            return found.text, found.oracle
    if settings.phases and phases.applicable(oracle):
        search = phases.first_failing_phase(oracle, text.encode(), executor)
        findings.workflow_checks += search.checks
        if search.phase is not None:
            findings.phase = search.phase
            limited = phases.limit(oracle, search.phase)
            if not search.worth_it() and not settings.from_phase_dump:
                log.info("phase search: the failure appears in phase %s, after code generation; stopping there "
                         "saves nothing, so checks compile fully", search.phase)
                return text, oracle
            log.info("phase search: the failure appears in phase %s; checks stop there (--compile-to=%s)", search.phase, search.phase)
            if settings.from_phase_dump:
                resumed = phases.start_from_dump(limited, text.encode(), os.path.basename(settings.input), search.phase,
                                                 executor)
                findings.workflow_checks += 2  # the dump, and its IR checked
                if resumed is not None:
                    findings.started_from = phases.PHASES[phases.PHASES.index(search.phase) - 1]
                    log.info("starting from the IR after phase %s (%d bytes, was %d)", findings.started_from,
                             len(resumed[0]), len(text))
                    return resumed[0], resumed[1]
            return text, limited
    return text, oracle


class Interrupted(Exception):
    def __init__(self, result: Result) -> None:
        self.result = result


class Flaky(Exception):
    def __init__(self, result: Result) -> None:
        self.result = result
