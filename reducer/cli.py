"""The `ireereduce` command."""

from __future__ import annotations

if __name__ == "__main__":  # pragma: no cover - `python -m reducer.cli`: the entry point takes
    from reducer.__main__ import main as _entry  # stops from here on, while the imports run

    _entry()
import contextlib
import logging
import os
import signal
import stat
import sys
import types
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import click
import multiprocessing_logging

from reducer import api, options, progress, session
from reducer.core import processes
from reducer.core.limits import parse_size
from reducer.session import EXECUTORS, EXIT_CODES, ORACLES, Result, Settings, UserError

if TYPE_CHECKING:
    from rich.console import Console

#: The defaults live once, in Settings; the options show them.
DEFAULTS = {f.name: f.default for f in attrs.fields(Settings)}

HELP = (
    """Reduce INPUT (an .mlir file) to a smaller program that is still interesting.

\b
Interesting is decided by a check script or a built-in oracle:
"""
    + "\n".join(f"  {kind.usage}" for kind in ORACLES.values())
    + """
  --backends llvm-cpu,vmvx           --mismatch, with the two commands made for you
Built-in oracles keep the original's failure signature (--allow-slippage to relax),
stop iree-compile at the failing phase, can isolate the failing dispatch, drop flags
the failure does not need, and write a bug report (--report, --report-json).

\b
A check script must exit 0 while the bug is still there (C-Reduce, C-Vise,
llvm-reduce and iree-reduce agree; mlir-reduce is the opposite: invert its scripts).
It gets the candidate's path as its first argument, and runs in a fresh temporary
directory holding the candidate under INPUT's own file name.

\b
The input is never modified. The smallest interesting program found so far is written
to the output (default INPUT.reduced.mlir) every time it shrinks, so Ctrl-C loses nothing.
The output is identical for any -j.

\b
Exit codes:
"""
    + "\n".join(f"  {code:>3}  {text}" for code, text in EXIT_CODES.items())
)


def _list_strategies(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    found = session.registry()  # in run order
    width = max(map(len, found))
    for name, cls in found.items():
        tags = sorted(cls.modes) + (["moves"] if cls.moves else []) + ([] if cls.shrinks else ["moves only"])
        click.echo(f"{name:<{width}}  [{', '.join(dict.fromkeys(tags))}] {cls.summary}")
    ctx.exit(0)


def _print_schema(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if not value or ctx.resilient_parsing:
        return
    from importlib.resources import files

    click.echo(files("reducer.schemas").joinpath(f"{value}-schema.json").read_text(), nl=False)
    ctx.exit(0)


@click.command(
    cls=options.Command, help=HELP, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100}
)
@click.version_option(package_name="ireereduce", prog_name="ireereduce")
@click.argument("input_file", metavar="INPUT", type=click.Path(dir_okay=True, allow_dash=True))
@click.option(
    "--check",
    "--test",
    "-c",
    "check",
    type=click.Path(),
    help="Interestingness script: exit 0 = still interesting (or use --compile). --test is llvm-reduce's name; a script given with arguments in one string is split.",
)
@click.option(
    "--test-arg",
    "test_args",
    multiple=True,
    metavar="ARG",
    help="An argument for the check, after the candidate's path (repeatable, as in llvm-reduce).",
)
@click.option(
    "--compile",
    "compile",
    metavar="COMMAND",
    help="Built-in oracle: interesting while this command ({input} = the candidate) fails the way it fails on the original.",
)
@click.option("--expect-error", metavar="REGEX", help="With --compile: stderr must also match REGEX.")
@click.option(
    "--expect-crash", is_flag=True, help="With --compile: the compiler must crash (a signal or an LLVM stack dump)."
)
@click.option(
    "--allow-slippage",
    is_flag=True,
    help="Accept any failure, not only the original's signature (exit kind, first error, crash frame and pass; for --mismatch, the kind of difference). Pair it with --expect-error: an empty module fails iree-compile too.",
)
@click.option(
    "--mismatch",
    is_flag=True,
    help="Built-in oracle: --compile and --against build two modules ({output}); interesting while iree-run-module's outputs differ.",
)
@click.option(
    "--against",
    metavar="COMMAND",
    help="The second configuration: for --mismatch, or the fast side of --slower-than-factor.",
)
@click.option(
    "--backends", metavar="A,B", help="Shorthand for --mismatch between two llvm-cpu/vmvx style local backends."
)
@click.option("--run", "runner", default=DEFAULTS["runner"], show_default=True, help="How --mismatch runs a module.")
@click.option("--function", help="With --mismatch: the function to run [default: main, else the first export].")
@click.option("--inputs", multiple=True, help="With --mismatch: .npy files (a.npy,b.npy) or --input values to run on.")
@click.option(
    "--parameters",
    multiple=True,
    metavar="[SCOPE=]FILE",
    help="A parameter archive (.irpa, .gguf) as iree-run-module takes it (repeatable), put inline if it can be.",
)
@click.option("--localize/--no-localize", default=True, help="With --mismatch: reduce the first wrong dispatch alone.")
@click.option("--localize-only", is_flag=True, help="With --mismatch: print the first wrong dispatch, cut it out.")
@click.option(
    "--rtol", type=float, default=DEFAULTS["rtol"], show_default=True, help="With --mismatch: relative tolerance."
)
@click.option(
    "--atol", type=float, default=DEFAULTS["atol"], show_default=True, help="With --mismatch: absolute tolerance."
)
@click.option(
    "--slower-than",
    type=click.FloatRange(min=0),
    metavar="SECONDS",
    help="Built-in oracle: interesting while --compile takes longer than this (measured again near the limit).",
)
@click.option(
    "--slower-than-factor",
    type=click.FloatRange(min=1),
    metavar="N",
    help="Built-in oracle: interesting while --compile takes N times longer than --against.",
)
@click.option(
    "--phases/--no-phases",
    default=True,
    show_default=True,
    help="With an iree-compile --compile: find the phase where the failure appears and stop each check there.",
)
@click.option(
    "--from-phase-dump",
    is_flag=True,
    help="Also start reducing from the IR iree-compile dumps after the phase before (--compile-from).",
)
@click.option(
    "--isolate-dispatch",
    is_flag=True,
    help="For a codegen failure: find the executable that fails alone (--compile-mode=hal-executable) and reduce only it.",
)
@click.option(
    "--pass-level",
    is_flag=True,
    help="With an iree-compile --compile: reduce the IR entering the failing pass, replayed by iree-opt (a crash reproducer).",
)
@click.option(
    "--reduce-flags/--no-reduce-flags",
    default=True,
    show_default=True,
    help="With a built-in oracle: afterwards drop the compiler flags (and pipeline passes) the failure does not need.",
)
@click.option(
    "--for-upstream",
    is_flag=True,
    help="Finally rename symbols, strip locations, discardable attributes and dense_resource blobs (each kept only if still interesting).",
)
@click.option("--report", type=click.Path(dir_okay=False), help="Write a ready-to-file Markdown bug report here.")
@click.option(
    "--report-json",
    type=click.Path(dir_okay=False),
    help="Write the report as JSON (schema: ireereduce --print-schema report).",
)
@click.option(
    "--executor",
    type=click.Choice(list(EXECUTORS)),
    default=next(iter(EXECUTORS)),
    show_default=True,
    help="Where checks run: worker processes here, or a Dask cluster (pip install 'ireereduce[dask]').",
)
@click.option(
    "--scheduler",
    metavar="ADDRESS",
    help="With --executor dask: a running scheduler (tcp://HOST:PORT) [default: start a local cluster with -j workers].",
)
@click.option(
    "--resources",
    metavar="NAME=N,...",
    callback=lambda _c, _p, v: options.resources(v),
    help="With --executor dask: worker resources each check holds, e.g. GPU=1.",
)
@click.option(
    "--check-files",
    metavar="FILE,...",
    callback=lambda _c, _p, v: options.names(v) or (),
    help="With --executor dask: files the check script needs, shipped with it to the workers.",
)
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False),
    help="Where the reduced program goes [default: INPUT.reduced.mlir; required when INPUT is -, stdin]. A name ending in .mlirbc gets MLIR bytecode.",
)
@click.option(
    "--emit-bytecode",
    is_flag=True,
    help="Write the output as MLIR bytecode, whatever its name [default: text, unless -o ends in .mlirbc].",
)
@click.option(
    "--jobs",
    "-j",
    type=int,
    help=f"Checks run in parallel, at most {session.MAX_JOBS} [default: the number of CPUs; 1 with --slower-than*, so timings do not compete].",
)
@click.option(
    "--timeout",
    type=float,
    help="Seconds per check; a timed-out check counts as not interesting [default: 10x the original's check time + 5 s].",
)
@click.option(
    "--memory-limit",
    metavar="SIZE",
    type=parse_size,
    help='Memory a check\'s processes may keep resident together (e.g. 4G, 512M; 0: none); a check past it is killed, "out of memory", not interesting. Reserved address space (ASan, Go, the JVM) does not count [default: 3/4 of the RAM / -j; none where there is no /proc].',
)
@click.option(
    "--repeat",
    type=int,
    default=1,
    show_default=True,
    help=f"A candidate is interesting only if the check passes it this many times in a row, at most {session.MAX_REPEAT} (for flaky checks).",
)
@click.option(
    "--fresh",
    is_flag=True,
    help="Start from the input: ignore a smaller program already in the output and an interrupted run's state.",
)
@click.option(
    "--state-dir",
    type=click.Path(file_okay=False),
    help="Where a run keeps what a rerun continues from after it is killed: a new or empty directory [default: OUTPUT.resume; removed when the run finishes, if the run made it].",
)
@click.option("--no-state", is_flag=True, help="Keep no state: a killed run starts over.")
@click.option(
    "--no-verify", is_flag=True, help="Do not run the MLIR verifier on candidates (for bugs in the verifier itself)."
)
@click.option(
    "--strategies",
    "strategies",
    callback=lambda _c, _p, v: options.names(v),
    help="Comma-separated strategies to use (default: all that apply; llvm-reduce's names operands-zero, operands-to-args, operands-skip, arguments, ir-passes work too).",
)
@click.option(
    "--skip-strategies",
    "skip_strategies",
    callback=lambda _c, _p, v: options.names(v) or (),
    help="Comma-separated strategies not to use.",
)
@click.option(
    "--moves",
    "move_budget",
    type=click.IntRange(min=0),
    default=DEFAULTS["move_budget"],
    show_default=True,
    help="Checks to spend on non-shrinking moves once the program is 1-minimal (0: none).",
)
@click.option(
    "--max-time",
    type=click.FloatRange(min=0),
    metavar="SECONDS",
    help=f"Stop after this long with the best so far (exit {session.EXIT_STOPPED}).",
)
@click.option(
    "--max-checks",
    type=click.IntRange(min=0),
    metavar="N",
    help=f"Stop after this many checks with the best so far (exit {session.EXIT_STOPPED}).",
)
@click.option(
    "--trivial-is-error",
    is_flag=True,
    help=f"Exit {session.EXIT_TRIVIAL} when the result is trivial (an empty module, a function that only returns): the check is too loose.",
)
@click.option("--print-diff", is_flag=True, help="Print each accepted step as a unified diff (stdout).")
@click.option(
    "--progress-json",
    metavar="FILE|-",
    help="Write progress events as JSON lines here (- for stdout; schema: ireereduce --print-schema progress).",
)
@click.option(
    "--heartbeat",
    type=float,
    callback=options.seconds(0.1),
    default=progress.HEARTBEAT_SECONDS,
    show_default=True,
    metavar="SECONDS",
    help="Silence before a status line when stderr is not a terminal (and a heartbeat event).",
)
@click.option(
    "--print-schema",
    type=click.Choice(["report", "stats", "progress"]),
    expose_value=False,
    is_eager=True,
    callback=_print_schema,
    help="Print the JSON schema of --report-json, --stats-json or --progress-json and exit.",
)
@click.option(
    "--list-strategies",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_list_strategies,
    help="List the strategies and exit.",
)
@click.option("--log-file", type=click.Path(dir_okay=False), help="Also write the full log (all workers) here.")
@click.option(
    "--stats-json",
    type=click.Path(dir_okay=False),
    help="Write the run's numbers (sizes, checks, engine vs check time, per strategy) here as JSON.",
)
@click.option("-v", "--verbose", count=True, help="More log output (-vv: every check).")
@click.option("-q", "--quiet", is_flag=True, help="Only errors and the final summary.")
@click.option("--debug", is_flag=True, help="Show tracebacks for internal errors.")
def main(**params: Any) -> None:
    _ensure_stderr()
    options.names_as_given()
    progress_json = params["progress_json"]
    try:  # before the log file (or --progress-json) is opened: it may be the input
        session.check_limits()  # logging's queue needs files of its own
        if params["localize_only"]:
            from reducer.session.localize_only import alone_with_localize_only

            alone_with_localize_only(params)
        session.check_paths(
            Settings(input=params["input_file"], **_only(params, _PATHS)), also=[("--progress-json", progress_json)]
        )
        if progress_json and progress_json != "-":
            params["progress_stream"] = session.open_stream("--progress-json", progress_json)
        _setup_logging(params["verbose"], params["quiet"], params["log_file"])
    except UserError as exc:
        _fail(exc.code, str(exc))
    _stop_on_signals()
    if params["backends"]:
        params["compile"], params["against"], params["mismatch"] = options.backends(
            params["backends"], params["compile"], params["against"]
        )
    source: str | Path = Path(params["input_file"])
    if params["input_file"] == "-":
        if not params["output"]:
            _fail(session.EXIT_USAGE, "reading the input from stdin (-) needs -o FILE for the result")
        try:
            source, params["text"] = "-", session.read_stdin(params["max_time"])
        except UserError as exc:
            _fail(exc.code, str(exc))
    settings = _only(params, _FIELDS | {"text"}) | {"verify": not params["no_verify"]}
    if params["localize_only"]:  # no reduction: reducer/iree/localize.py
        from reducer.session.localize_only import localize_only

        sys.exit(localize_only(params["input_file"], settings))
    done = _reduce(source, settings, params)
    processes.ignore_stops()  # the run is over, its result stands: the summary is told whole
    _stop_worker_logging()
    _summary(done.console or _console(), done.reduction.result)
    sys.exit(_tell_end(done.reduction, params["trivial_is_error"]))


#: Options that are Settings fields under the same name go to the run as they are.
_FIELDS = {f.name for f in attrs.fields(Settings)} - {"input", "text", "oracle", "verify"}
_PATHS = set("check output report report_json stats_json log_file state_dir no_state test_args parameters".split())
_PATHS |= set("inputs compile against runner mismatch pass_level check_files".split())  # what the run reads


def _only(params: dict[str, Any], names: set[str]) -> dict[str, Any]:
    return {k: v for k, v in params.items() if k in names}


@attrs.define
class _Done:
    reduction: api.Reduction
    console: Console | None


def _reduce(source: str | Path, options: dict[str, Any], params: dict[str, Any]) -> _Done:
    """Run the reduction with the listeners the options ask for; an error is one line."""
    monitor = progress.Monitor(heartbeat=params["heartbeat"])
    # rich (50 ms to import) is for the summary at the end: imported while the run only
    # waits for the original's checks, not before its first check (unless a terminal
    # shows the live status from the start).
    monitor.on_idle.append(_import_rich)
    console: Console | None = None
    output = params["output"] or session.default_output(params["input_file"])
    before = _stat(output)
    with contextlib.ExitStack() as stack:
        if params["progress_json"]:
            target = params["progress_json"]
            stream = sys.stdout if target == "-" else stack.enter_context(params["progress_stream"])
            monitor.listeners.append(progress.JsonLines(stream, monitor.started, target))
        if params["print_diff"]:
            monitor.on_candidate.append(progress.DiffPrinter(monitor))
        if not params["quiet"] and sys.stderr.isatty():
            console = _console()
            stack.enter_context(progress.LiveStatus(monitor, console))
        elif not params["quiet"]:
            monitor.listeners.append(progress.HeartbeatLine(monitor, lambda line: click.echo(line, err=True)))
        try:
            return _Done(api.reduce(source, monitor=monitor, **options), console)
        except UserError as exc:
            stack.close()
            _fail(exc.code, str(exc))
        except (KeyboardInterrupt, Exception) as exc:  # a stop before the run had a result, or while it was told
            stopped = isinstance(exc, KeyboardInterrupt) or processes.stop_raised()  # the bindings make it RuntimeError
            if params["debug"] and not stopped:
                raise
            stack.close()
            if stopped:
                click.echo(f"ireereduce: interrupted; {_where(output, before)}", err=True)
                sys.exit(session.EXIT_INTERRUPTED)
            click.echo(
                f"ireereduce: internal error: {type(exc).__name__}: {exc} (rerun with --debug for details)", err=True
            )
            sys.exit(session.EXIT_INTERNAL)
    raise AssertionError("unreachable")  # pragma: no cover


def _stat(path: str) -> tuple[int, int, int] | None:
    with contextlib.suppress(OSError):
        st = os.stat(path)
        return st.st_ino, st.st_size, st.st_mtime_ns
    return None


def _where(output: str, before: tuple[int, int, int] | None) -> str:
    """Where the best so far is, for a run stopped without its result: what the output
    holds now, told apart from what it held before the run."""
    now = _stat(output)
    if now is not None and now != before:
        return f"the smallest interesting program so far is in {output}"
    if now is None:
        return f"no smaller program was found yet; {output} was not written"
    return f"no smaller program was found yet; {output} is as it was"


def _tell_end(done: api.Reduction, trivial_is_error: bool) -> int:
    """The last lines for a run that did not end plainly, and the exit code."""
    code = api.EXIT_OF_STATUS[done.status]
    there = os.path.exists(done.output or "")
    where = (
        f"the smallest interesting program so far is in {done.output}"
        if there and done.result.written
        else f"no smaller program was found yet; {done.output} {'is as it was' if there else 'was not written'}"
    )
    if done.status == "interrupted":
        state = done.result.state_dir
        again = f"; rerun the same command to continue (state in {state})" if state else ""
        click.echo(f"ireereduce: interrupted; {where}{again}", err=True)
    elif done.status == "stopped":
        click.echo(f"ireereduce: stopped ({done.reason}); {where}", err=True)
    elif done.status == "flaky":
        click.echo(
            f"ireereduce: error: the check is flaky: {done.result.flaky}; make the check deterministic "
            "or use --repeat N",
            err=True,
        )
    if done.trivial:
        click.echo(
            f"ireereduce: {'error' if trivial_is_error else 'warning'}: the result is trivial (an empty module or a "
            "function that only returns); the check probably accepts programs without the bug "
            "(make it look for the failure, e.g. grep the error message)",
            err=True,
        )
        if trivial_is_error and code == session.EXIT_OK:
            code = session.EXIT_TRIVIAL
    return code


def _fail(code: int, message: str) -> None:
    click.echo(f"ireereduce: error: {message}", err=True)
    sys.exit(code)


def _ensure_stderr() -> None:
    """With stderr closed (a daemon, `2>&-`) errors have nowhere to go and the checks would
    inherit a closed descriptor 2; /dev/null keeps the run and its exit code right."""
    try:
        os.fstat(2)
    except OSError:
        fd = os.open(os.devnull, os.O_WRONLY)
        if fd != 2:
            os.dup2(fd, 2)
            os.close(fd)
    if sys.stderr is None or sys.stderr.closed:
        sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115 - lives as long as the process
    logging.raiseExceptions = False  # a log line that cannot be written must not stop the run


_MAIN_PID = os.getpid()


def _raise_interrupt(signum: int, frame: types.FrameType | None) -> None:
    """The first stop of the run raises KeyboardInterrupt; a later one, while the first
    ends the run, is not raised again (raised in a garbage collector callback, say, it
    printed a traceback) unless Python swallowed the first. One that lands in what the
    MLIR bindings call (`NATIVE_CALLBACKS`) is raised a moment later, not there."""
    if os.getpid() != _MAIN_PID:  # a worker forked before it installed its own handler
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        os._exit(1)
    if processes.stop_raised() and not processes.take_swallowed():
        return
    processes.note_stop()
    if processes.in_native_callback(frame):
        processes.stop_later()
        return
    raise KeyboardInterrupt


def _hang_up(signum: int, frame: types.FrameType | None) -> None:
    """SIGHUP (a closed terminal or ssh session) stops the run as SIGTERM does. Writes to a
    terminal that hung up (a character device, no longer a tty) fail: they go to /dev/null."""
    for fd in (1, 2) if os.getpid() == _MAIN_PID else ():
        with contextlib.suppress(OSError):
            if stat.S_ISCHR(os.fstat(fd).st_mode) and not os.isatty(fd):
                os.dup2(null := os.open(os.devnull, os.O_WRONLY), fd)
                os.close(null)
    _raise_interrupt(signum, frame)


def _stop_on_signals() -> None:
    """SIGINT, SIGTERM and SIGHUP stop the run cleanly (summary, exit 130), whoever sends them.
    Python keeps SIGINT ignored when its parent ignored it, as a shell does for a
    background job; a bot stopping a reduction would then have to SIGKILL it. An ignored
    SIGHUP stays ignored: `nohup` asked for that."""
    processes.note_stop(False)  # a new run (the API's callers may run several in one process)
    signal.signal(signal.SIGINT, _raise_interrupt)
    signal.signal(signal.SIGTERM, _raise_interrupt)
    if signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN:
        signal.signal(signal.SIGHUP, _hang_up)


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever sys.stderr is now, so log lines go above the live status."""

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, _value: Any) -> None:
        pass


def _stop_worker_logging() -> None:
    """Let the workers' log queue go once the workers are gone. multiprocessing-logging's
    handler joins its receiving thread on close, at exit, and that thread polls the queue
    every 0.2 s: up to a fifth of a second added to every run. Marked closed, the thread
    still hands on what is queued, then leaves by itself (it is a daemon); the records
    of this process go straight to the handlers it wrapped."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        if not isinstance(handler, multiprocessing_logging.MultiProcessingHandler):
            continue
        if not hasattr(handler, "_is_closed"):  # another version: its own close, with the wait
            continue
        handler._is_closed = True  # no public way to close it without the join
        root.removeHandler(handler)
        root.addHandler(handler.sub_handler)
        with contextlib.suppress(Exception):  # what is queued goes on now, not at the thread's pace
            while handler.queue.qsize() > 0:
                handler.sub_handler.emit(handler.queue.get_nowait())


def _setup_logging(verbose: int, quiet: bool, log_file: str | None) -> None:
    level = logging.WARNING if quiet else logging.DEBUG if verbose >= 2 else logging.INFO
    root = logging.getLogger()
    root.setLevel(logging.DEBUG if log_file else level)
    console = _StderrHandler()
    console.setLevel(level)
    console.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%H:%M:%S"))
    root.addHandler(console)
    if log_file:
        handler = _LogFile(session.open_stream("--log-file", log_file, append=True))
        handler.name = log_file
        handler.setFormatter(logging.Formatter("%(asctime)s %(processName)s %(name)s %(levelname)s %(message)s"))
        root.addHandler(handler)
    multiprocessing_logging.install_mp_handler()  # worker records arrive through one queue


class _LogFile(logging.StreamHandler):  # type: ignore[type-arg,unused-ignore]
    """--log-file: a file that cannot be written (a full disk) ends the log, not the
    run, in one line on stderr; logging's default says nothing (raiseExceptions off)."""

    failed = False

    def handleError(self, record: logging.LogRecord) -> None:
        exc = sys.exc_info()[1]
        if self.failed or not isinstance(exc, OSError):
            return
        self.failed = True
        progress.stop_writing(self.stream, "--log-file", self.name or "", exc, "log lines")


def _import_rich() -> None:
    import rich.console
    import rich.table  # noqa: F401


def _console() -> Console:
    from rich.console import Console

    return Console(stderr=True, width=None if sys.stderr.isatty() else 120)


def _summary(console: Console, result: Result) -> None:
    from rich.table import Table

    s = result.stats
    original, final = s.original, s.final
    table = Table(title=f"ireereduce: {result.output}", title_justify="left", show_edge=False)
    # The names are what --skip-strategies takes: never cut them (headers and numbers fold instead).
    longest = max((len(n) for n in s.per_strategy), default=8)
    for col in ("strategy", "tried", "not valid", "not smaller", "checks", "cache hits", "accepted", "bytes saved"):
        if col == "strategy":
            table.add_column(col, justify="left", no_wrap=True, min_width=longest)
        else:
            table.add_column(col, justify="right", overflow="fold")
    for name, st in s.per_strategy.items():
        if not st.candidates:
            continue
        invalid = st.rejected["invalid"] + st.rejected["unparsable"] + st.rejected["strategy-error"]
        table.add_row(
            name,
            str(st.candidates),
            str(invalid),
            str(st.rejected["not-smaller"] + st.rejected["no-op"]),
            str(st.oracle_calls),
            str(st.cache_hits),
            str(st.accepts),
            str(st.bytes_saved),
        )
    console.print(table)
    ops = session.triage.ops_summary(result) if original.ops is not None else ""
    pct = 100.0 * final.bytes / max(original.bytes, 1)
    console.print(
        f"{ops}{original.bytes} -> {final.bytes} bytes ({pct:.1f}%) as {result.mode}; "
        f"{s.oracle_calls} checks, {s.cache_hits} cache hits, {s.timeouts} timeouts; "
        f"{result.seconds:.1f} s (engine {s.engine_seconds:.1f} s, waiting on checks {s.wait_seconds:.1f} s)",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    judged = ", ".join(f"{n} {what}" for what, n in sorted(s.outcomes.items(), key=lambda kv: -kv[1]))
    if judged:
        console.print(f"checked candidates: {judged}", markup=False, highlight=False, soft_wrap=True)
    if s.outcomes.get("different bug"):
        n = s.outcomes["different bug"]
        console.print(
            f"{n} candidate{' was' if n == 1 else 's were'} rejected as a different bug (another failure signature)",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    f = result.findings
    for note in f.notes:
        console.print(note, markup=False, highlight=False, soft_wrap=True)
    for label, value in (
        ("dispatch", f"{f.dispatch.name} (of {f.dispatch.executables} executables)" if f.dispatch else None),
        ("failing phase", f.phase),
        ("started from the IR after", f.started_from),
        ("flags not needed", ", ".join(f.flags_removed)),
        ("for upstream", ", ".join(f.for_upstream)),
    ):
        if value:
            console.print(f"{label}: {value}", markup=False, highlight=False, soft_wrap=True)
