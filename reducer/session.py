"""One reduction from start to finish: check the inputs, check the original is
interesting, pick how to read it (MLIR or text), run the engine, re-check the result.

Every way a user's input can be wrong ends in a `UserError` with one line saying what
is wrong and what to do, and a documented exit code (see EXIT_CODES and the README).
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from collections.abc import Sequence

import attrs

from reducer import ir as irutil
from reducer.engine import DEFAULT_BATCH, DEFAULT_MOVE_BUDGET, Engine, RunStats
from reducer.executor import Executor, LocalExecutor
from reducer.oracle import Oracle, Verdict
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
EXIT_INTERRUPTED = 130

EXIT_CODES = {
    EXIT_OK: "reduced; the output is interesting",
    EXIT_INTERNAL: "internal error in ireereduce (rerun with --debug and report it)",
    EXIT_USAGE: "bad command line (also: output path equal to the input)",
    EXIT_BAD_INPUT: "input file missing, unreadable or not text",
    EXIT_BAD_CHECK: "check script missing, not executable or cannot be run",
    EXIT_NOT_INTERESTING: "the check says the original input is not interesting",
    EXIT_CHECK_HANGS: "the check did not finish on the original input within the timeout",
    EXIT_FLAKY: "the reduced output was not interesting when re-checked (flaky check)",
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
    check: str
    output: str | None = None
    jobs: int = attrs.field(factory=lambda: os.cpu_count() or 1)
    timeout: float | None = None
    verify: bool = True
    batch: int = DEFAULT_BATCH
    strategies: Sequence[str] | None = None
    skip_strategies: Sequence[str] = ()
    move_budget: int = DEFAULT_MOVE_BUDGET


@attrs.define
class Result:
    output: str
    mode: str
    stats: RunStats
    seconds: float
    timeout: float
    initial_check_seconds: float


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
        raise UserError(EXIT_BAD_CHECK, f"cannot run check script {oracle.script!r}: {exc.strerror}") from None


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


def reduce_file(settings: Settings, executor_factory: type[Executor] | None = None) -> Result:
    start = time.monotonic()
    text = read_input(settings.input)
    script = check_script(settings.check)
    output = settings.output or default_output(settings.input)
    if os.path.exists(output) and os.path.samefile(output, settings.input):
        raise UserError(EXIT_USAGE, "the output path is the input; ireereduce never overwrites its input (use -o)")
    basename = os.path.basename(settings.input)

    first = Oracle(script, basename, settings.timeout or INITIAL_TIMEOUT, keep_stderr=True)
    verdict = run_check(first, text.encode())
    if verdict.timed_out:
        raise UserError(
            EXIT_CHECK_HANGS,
            f"the check did not finish on the original input within {first.timeout:g} s; "
            "fix the script or raise --timeout",
        )
    if not verdict.interesting:
        tail = verdict.stderr_tail.strip().splitlines()[-1:] or [""]
        how = f"exit code {verdict.returncode}" if (verdict.returncode or 0) >= 0 else f"signal {-verdict.returncode}"  # type: ignore[operator]
        raise UserError(
            EXIT_NOT_INTERESTING,
            f"the check says the original input is not interesting ({how}{'; ' + tail[0] if tail[0] else ''}); "
            "it must exit 0 for the input as given (mlir-reduce users: invert your script's exit codes)",
        )
    timeout = settings.timeout or 10 * verdict.seconds + 5.0
    oracle = Oracle(script, basename, timeout)
    write_atomically(output, text.encode())

    # Workers are forked before any MLIR context exists in this process.
    factory = executor_factory or LocalExecutor
    with factory(oracle, settings.jobs) as executor:  # type: ignore[call-arg]
        ws = _choose_workspace(text, oracle, settings.verify)
        strategies = select_strategies(ws.mode, settings.strategies, settings.skip_strategies)
        log.info(
            "reducing %s (%s) as %s with %d workers, check timeout %.1f s",
            settings.input, ws.size, ws.mode, settings.jobs, timeout,
        )

        def improved(candidate: Candidate) -> None:
            write_atomically(output, candidate.data)

        engine = Engine(ws, strategies, executor, improved, batch=settings.batch, move_budget=settings.move_budget)
        engine.stats.original = Size(ws.size.ops, len(text.encode()))  # as the user gave it
        try:
            stats = engine.run()
        except KeyboardInterrupt:
            engine.stats.final = engine.best.size if engine.best is not None else ws.size
            raise Interrupted(Result(output, ws.mode, engine.stats, time.monotonic() - start, timeout, verdict.seconds))
    final = run_check(oracle, ws.program.text.encode())
    result = Result(output, ws.mode, stats, time.monotonic() - start, timeout, verdict.seconds)
    if not final.interesting:
        raise Flaky(result)
    return result


class Interrupted(Exception):
    def __init__(self, result: Result) -> None:
        self.result = result


class Flaky(Exception):
    def __init__(self, result: Result) -> None:
        self.result = result
