"""What a run is given and what it gives back: the settings, the result, and the
documented exit codes with the errors that carry them.

Every way a user's input can be wrong ends in a `UserError` with one line saying what
is wrong and what to do, and a documented exit code (EXIT_CODES, also in the README).
"""

from __future__ import annotations

import contextlib
import math
import os
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

import attrs

from reducer.core import codec, limits
from reducer.core.engine import DEFAULT_MOVE_BUDGET, RunStats
from reducer.core.executor import OpenFilesLimit, check_open_files
from reducer.core.oracle import Oracle, Verdict
from reducer.core.workspace import Size

if TYPE_CHECKING:
    from reducer.iree import dispatch

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
EXIT_NOT_REPLAYABLE = 15
EXIT_NOT_LOCALIZED = 16
EXIT_INTERRUPTED = 130

EXIT_CODES = {
    EXIT_OK: "reduced; the output is interesting",
    EXIT_INTERNAL: "internal error in ireereduce (rerun with --debug and report it)",
    EXIT_USAGE: "bad command line (a value out of range, a strategy that does not exist, an option without "
    "the one it goes with, an --inputs value written wrong, a --function the module does not export); an output, report, stats, log or progress path that is empty, the input, the check, "
    "another of them (OUTPUT.lock and the state directory included), or not writable; -o that is not a regular "
    "file; an OUTPUT.lock or a --state-dir holding files ireereduce did not write",
    EXIT_BAD_INPUT: "input file missing, unreadable or not text (the message names the first byte that is not UTF-8), "
    "a stream still coming past a quarter of the memory available, a resource section never closed, or an empty stdin; an --inputs .npy file missing or unreadable; a --parameters archive missing or unreadable, or without a key the input uses",
    EXIT_BAD_CHECK: "check script missing, not executable, its '#!' interpreter missing (or CRLF line ends), "
    "or cannot be run (also when deleted or made non-executable mid-run); a program of --compile, --against or --run not found, a directory or not executable",
    EXIT_NOT_INTERESTING: "the check says the original input is not interesting (--compile: it does not fail as expected)",
    EXIT_CHECK_HANGS: "the check did not finish on the original input within the timeout",
    EXIT_FLAKY: "flaky check: the reduced program failed a re-check; the output holds the last program "
    "that passed its re-checks, and the message gives the flip rate seen",
    EXIT_CANNOT_WRITE: "cannot write the output, report, stats or state (disk full, read-only or removed "
    "directory, a FIFO nobody reads); the message says where the best so far is (saved elsewhere if the output's directory is gone)",
    EXIT_BUSY: "another ireereduce run is writing the same output (the message names its PID)",
    EXIT_STATE_MISMATCH: "the state directory holds a run with other settings, input, check, --parameters archive "
    "or compiler (the program of --compile, --against, --run), or a recorded check this command does not build "
    "(--fresh starts over)",
    EXIT_CHECK_CHANGED_FILES: "the input, the output or the check changed during the run (the check must not "
    "write them, nor anyone else until the run ends); the output keeps the last good program",
    EXIT_EXECUTOR: "the executor cannot start, or lost its cluster during the run (the output keeps the best so "
    "far): the Dask scheduler is unreachable or went away, distributed is not installed, "
    "or the open-files limit (ulimit -n) is too low for one worker and its check, or the address space "
    "(ulimit -v) is below 2 GiB",
    EXIT_STOPPED: "--max-time or --max-checks reached; the output holds the smallest interesting program found "
    "(--max-time before the reduction began: while the input was read, the original checked, or the "
    "steps before the reduction ran: nothing written but, once the start is recorded, the state a "
    "rerun continues from)",
    EXIT_TRIVIAL: "--trivial-is-error: the result is trivial (an empty module or a function that only returns)",
    EXIT_NOT_REPLAYABLE: "the input is a crash reproducer iree-opt cannot replay (a full-pipeline one from "
    "iree-compile, or one naming a pass this iree-opt lacks); the message says what to do",
    EXIT_NOT_LOCALIZED: "--localize-only found no dispatch it could cut out (the traced run failed, no dispatch "
    "differs the original's way, the dispatch cannot be cut, or its cut does not mismatch that way); nothing written; "
    "the message says why",
    EXIT_INTERRUPTED: "interrupted; the output holds the smallest interesting program found",
}

#: Timeout for checking the original when the user gives none (C-Reduce/C-Vise's default).
INITIAL_TIMEOUT = 300.0


def check_timeout(given: float | None, seconds: float, times: float = 10.0) -> float:
    """A check's timeout, calibrated on how long the original's check took: --timeout if
    given, else `times` that plus 5 s (3 for an oracle that measures time)."""
    return given or times * seconds + 5.0


#: Past these a count is a typo, not a wish: -j 100000 would fork that many workers (or
#: queue that many checks on a cluster) and --repeat 1000000 run each check for days.
MAX_JOBS = 1024
MAX_REPEAT = 100


class UserError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


#: Python's escape for a file name's byte that is not UTF-8 (`os.fsdecode`), in a repr.
_UNDECODED = re.compile(r"(?<!\\)\\udc([89a-f][0-9a-f])")


def quoted(path: str) -> str:
    """path quoted as repr quotes it (one line whatever it holds), its bytes that are not
    UTF-8 left as themselves for the terminal (reducer/options.py), not `\\udce9`."""
    return _UNDECODED.sub(lambda m: chr(0xDC00 + int(m.group(1), 16)), repr(path))


def missing(what: str, path: str) -> str:
    """Why a named file cannot be opened: a dangling link says where it leads, since the
    user sees the link's name in ls and would think the file is there."""
    if os.path.islink(path):
        with contextlib.suppress(OSError):
            target = os.readlink(path)
            if os.path.islink(os.path.join(os.path.dirname(path), target)):  # a chain: where it ends
                target = os.path.realpath(path)
            return f"{what} {quoted(path)} is a symlink to {quoted(target)}, which does not exist"
    return f"{what} {quoted(path)} does not exist"


def check_counts(settings: Settings) -> None:
    """The counts, tolerances and flag pairs a run can use: each refused in one line (exit 2)."""
    if settings.jobs is not None and not 1 <= settings.jobs <= MAX_JOBS:
        raise UserError(EXIT_USAGE, f"-j must be from 1 to {MAX_JOBS} checks at once, not {settings.jobs}")
    if not 1 <= settings.repeat <= MAX_REPEAT:
        raise UserError(
            EXIT_USAGE, f"--repeat must be from 1 to {MAX_REPEAT} runs of each check, not {settings.repeat}"
        )
    for flag, value in (("--rtol", settings.rtol), ("--atol", settings.atol)):
        if not value >= 0:
            raise UserError(EXIT_USAGE, f"{flag} must be a tolerance of 0 or more, not {value}")
    if settings.from_phase_dump and not settings.phases:  # the dump is of the phase the search finds
        raise UserError(EXIT_USAGE, "--from-phase-dump starts from the phase search's dump: drop --no-phases")


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
    # External parameter archives, iree-run-module's `scope=FILE` (or FILE: the default
    # scope): given to the built-in run oracles, and read by inline-parameters.
    parameters: Sequence[str] = ()
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
    memory_limit: int | None = None  # bytes a check's processes may use together; None: 3/4 of RAM / workers; 0: none
    inputs: Sequence[str] = ()  # --mismatch: .npy files or iree-run-module --input values, not generated ones
    localize: bool = True  # --mismatch: reduce the first dispatch that goes wrong, cut out (reducer/iree/cut.py)
    emit_bytecode: bool = False  # the output as MLIR bytecode (also when -o ends in .mlirbc); else text
    # A crash reproducer's pass pipeline, replayed by iree-opt as the oracle: set from the
    # input's `mlir_reproducer` resource when no check is given (reducer/iree/reproducer.py).
    pass_pipeline: str | None = None
    pass_level: bool = False  # --compile: reduce the local reproducer of the failing pass instead
    replay_tool: str = "iree-opt"  # what replays pass_pipeline: --pass-level's compiler's own (command.beside)

    def output_bytecode(self, output: str) -> bool:
        """Whether the output is written as MLIR bytecode: asked for, or named so."""
        return self.emit_bytecode or output.endswith(".mlirbc")

    def workers(self) -> int:
        """Parallel checks: as many as CPUs, but one when the oracle measures time, so
        checks do not compete for the cores they are timing."""
        if self.jobs is not None:
            return self.jobs
        timing = self.slower_than is not None or self.slower_than_factor is not None
        return 1 if timing else min(os.cpu_count() or 1, MAX_JOBS)


@codec.record()
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
    localized: dict[str, object] | None = None  # the dispatch a mismatch was cut down to (triage.localized)
    pass_level: dict[str, object] | None = None  # --pass-level: the pipeline replayed, the input-level command


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
    #: The output holds a program this run stands behind: one it wrote, the earlier result it
    #: started from, or what the run it continues wrote. Else a file the run never wrote.
    written: bool = True


#: The most seconds an option may give: a wait (a thread's timer, a future's result) past
#: threading.TIMEOUT_MAX (about 9.2e9) ends in an OverflowError from deep in a thread, and
#: a localisation's traced run waits ten check timeouts.
MAX_SECONDS = 1e8


def too_long(flag: str, value: float) -> str:
    return f"{flag} {value:g} is more seconds than a run can wait (about 3 years): give at most {MAX_SECONDS:g}"


#: Options that must be finite numbers (click's ranges let nan through), with their unit.
_FINITE = (
    ("--max-time", "max_time", " of seconds"),
    ("--slower-than", "slower_than", " of seconds"),
    ("--slower-than-factor", "slower_than_factor", ""),
    ("--rtol", "rtol", ""),
    ("--atol", "atol", ""),
)


def check_settings(settings: Settings) -> None:
    """The values a run refuses in one line (exit 2) before anything runs."""
    from reducer.session.wiring import split_parameters  # wiring builds on this module

    if settings.timeout is not None and not (math.isfinite(settings.timeout) and settings.timeout > 0):
        raise UserError(EXIT_USAGE, f"--timeout must be a finite number of seconds above 0, not {settings.timeout}")
    for flag, name, unit in _FINITE:
        value = getattr(settings, name)
        if value is not None and not math.isfinite(value):
            raise UserError(EXIT_USAGE, f"{flag} must be a finite number{unit}, not {value}")
    for flag, value in (
        ("--timeout", settings.timeout),
        ("--max-time", settings.max_time),
        ("--slower-than", settings.slower_than),
    ):
        if value is not None and value > MAX_SECONDS:
            raise UserError(EXIT_USAGE, too_long(flag, value))
    if settings.strategies is not None and not settings.strategies:
        raise UserError(EXIT_USAGE, "--strategies names no strategy; see ireereduce --list-strategies")
    check_counts(settings)
    if settings.no_state and settings.state_dir is not None:
        raise UserError(EXIT_USAGE, "--no-state and --state-dir contradict each other; give one of them")
    if settings.text is not None and not settings.output:
        raise UserError(EXIT_USAGE, "reading the input from stdin needs -o FILE for the result")
    for spec in settings.parameters:  # `--parameters model=` names no file: a slip on the command line
        if not split_parameters(spec)[1]:
            raise UserError(EXIT_USAGE, f"--parameters {spec!r} names no archive: give [SCOPE=]FILE")


#: Files a run holds open besides its executor's: the output's lock, the run directory's
#: lock, the journal, and one being written.
RUN_FILES = 4


def check_limits() -> None:
    """UserError (exit 12) if the open-files limit leaves no room for one worker, or the
    address space none for the libraries: said first, before the command line opens its
    log or a worker's lock runs out of files."""
    short = limits.address_space_short()
    if short is not None:
        raise UserError(EXIT_EXECUTOR, short)
    if (none := limits.no_file_size()) is not None:
        raise UserError(EXIT_CANNOT_WRITE, none)
    try:
        check_open_files(RUN_FILES)
    except OpenFilesLimit as exc:
        raise UserError(EXIT_EXECUTOR, str(exc)) from None
