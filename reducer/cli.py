"""The `ireereduce` command."""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
from pathlib import Path

import attrs
import click
import multiprocessing_logging
from rich.console import Console
from rich.table import Table

from reducer import session
from reducer.session import EXIT_CODES, Flaky, Interrupted, Result, Settings, UserError

HELP = """Reduce INPUT (an .mlir file) to a smaller program that is still interesting.

\b
Interesting is decided by a check script (--check) or a built-in oracle:
  --compile CMD                      CMD fails the way it fails on INPUT ({input} = candidate)
  --mismatch --compile A --against B two compiled modules give different outputs
  --backends llvm-cpu,vmvx           the same, with the two commands made for you
  --compile CMD --slower-than S      compiling takes longer than S seconds
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
""" + "\n".join(f"  {code:>3}  {text}" for code, text in EXIT_CODES.items())


def _list_strategies(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    from reducer.strategy import discover

    found = discover()
    width = max(map(len, found))
    for name, cls in found.items():
        tags = sorted(cls.modes) + (["moves"] if cls.moves else []) + ([] if cls.shrinks else ["moves only"])
        click.echo(f"{name:<{width}}  [{', '.join(dict.fromkeys(tags))}] {cls.summary}")
    ctx.exit(0)


def _resources(value: str | None) -> dict[str, float]:
    """GPU=1,MEMORY=8e9 -> {"GPU": 1.0, "MEMORY": 8e9}: Dask's worker resources."""
    found: dict[str, float] = {}
    for item in _names(value) or []:
        name, _, amount = item.partition("=")
        try:
            found[name.strip()] = float(amount) if amount else 1.0
        except ValueError:
            raise click.BadParameter(f"{item!r}: give NAME=NUMBER, e.g. GPU=1", param_hint="--resources") from None
        if not name.strip() or not found[name.strip()] > 0:
            raise click.BadParameter(f"{item!r}: give NAME=NUMBER with a positive number", param_hint="--resources")
    return found


def _names(value: str | None) -> list[str] | None:
    return None if value is None else [n.strip() for n in value.split(",") if n.strip()]


@click.command(help=HELP, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.argument("input_file", metavar="INPUT", type=click.Path(dir_okay=True))
@click.option("--check", "-c", "check", type=click.Path(), help="Interestingness script: exit 0 = still interesting (or use --compile).")
@click.option("--compile", "compile_", metavar="COMMAND", help="Built-in oracle: interesting while this command ({input} = the candidate) fails the way it fails on the original.")
@click.option("--expect-error", metavar="REGEX", help="With --compile: stderr must also match REGEX.")
@click.option("--expect-crash", is_flag=True, help="With --compile: the compiler must crash (a signal or an LLVM stack dump).")
@click.option("--allow-slippage", is_flag=True, help="Accept any failure, not only the original's signature (exit kind, first error, crash frame and pass; for --mismatch, the kind of difference). Pair it with --expect-error: an empty module fails iree-compile too.")
@click.option("--mismatch", is_flag=True, help="Built-in oracle: --compile and --against build two modules ({output}); interesting while iree-run-module's outputs differ.")
@click.option("--against", metavar="COMMAND", help="The second configuration: for --mismatch, or the fast side of --slower-than-factor.")
@click.option("--backends", metavar="A,B", help="Shorthand for --mismatch between two llvm-cpu/vmvx style local backends.")
@click.option("--run", "runner", default="iree-run-module --device=local-task", show_default=True, help="How --mismatch runs a module.")
@click.option("--function", help="With --mismatch: the function to run [default: main, else the first export].")
@click.option("--rtol", type=float, default=1e-3, show_default=True, help="With --mismatch: relative tolerance.")
@click.option("--atol", type=float, default=1e-4, show_default=True, help="With --mismatch: absolute tolerance.")
@click.option("--slower-than", type=click.FloatRange(min=0), metavar="SECONDS", help="Built-in oracle: interesting while --compile takes longer than this (measured again near the limit).")
@click.option("--slower-than-factor", type=click.FloatRange(min=1), metavar="N", help="Built-in oracle: interesting while --compile takes N times longer than --against.")
@click.option("--phases/--no-phases", default=True, show_default=True, help="With an iree-compile --compile: find the phase where the failure appears and stop each check there.")
@click.option("--from-phase-dump", is_flag=True, help="Also start reducing from the IR iree-compile dumps after the phase before (--compile-from).")
@click.option("--isolate-dispatch", is_flag=True, help="For a codegen failure: find the executable that fails alone (--compile-mode=hal-executable) and reduce only it.")
@click.option("--reduce-flags/--no-reduce-flags", default=True, show_default=True, help="With a built-in oracle: afterwards drop the compiler flags (and pipeline passes) the failure does not need.")
@click.option("--for-upstream", is_flag=True, help="Finally rename symbols, strip locations, discardable attributes and dense_resource blobs (each kept only if still interesting).")
@click.option("--report", type=click.Path(dir_okay=False), help="Write a ready-to-file Markdown bug report here.")
@click.option("--report-json", type=click.Path(dir_okay=False), help="Write the report as JSON (schema: docs/report-schema.json).")
@click.option("--executor", type=click.Choice(["local", "dask"]), default="local", show_default=True, help="Where checks run: worker processes here, or a Dask cluster (pip install 'ireereduce[dask]').")
@click.option("--scheduler", metavar="ADDRESS", help="With --executor dask: a running scheduler (tcp://HOST:PORT) [default: start a local cluster with -j workers].")
@click.option("--resources", metavar="NAME=N,...", help="With --executor dask: worker resources each check holds, e.g. GPU=1.")
@click.option("--check-files", metavar="FILE,...", help="With --executor dask: files the check script needs, shipped with it to the workers.")
@click.option("--output", "-o", type=click.Path(dir_okay=False), help="Where the reduced program goes [default: INPUT.reduced.mlir].")
@click.option("--jobs", "-j", type=click.IntRange(min=1), help="Checks run in parallel [default: the number of CPUs; 1 with --slower-than*, so timings do not compete].")
@click.option("--timeout", type=click.FloatRange(min=0.1), help="Seconds per check; a timed-out check counts as not interesting [default: 10x the original's check time + 5 s].")
@click.option("--no-verify", is_flag=True, help="Do not run the MLIR verifier on candidates (for bugs in the verifier itself).")
@click.option("--strategies", "only", help="Comma-separated strategies to use (default: all that apply).")
@click.option("--skip-strategies", "skip", help="Comma-separated strategies not to use.")
@click.option("--moves", "move_budget", type=click.IntRange(min=0), default=session.DEFAULT_MOVE_BUDGET, show_default=True, help="Checks to spend on non-shrinking moves once the program is 1-minimal (0: none).")
@click.option("--list-strategies", is_flag=True, expose_value=False, is_eager=True, callback=_list_strategies, help="List the strategies and exit.")
@click.option("--log-file", type=click.Path(dir_okay=False), help="Also write the full log (all workers) here.")
@click.option("--stats-json", type=click.Path(dir_okay=False), help="Write the run's numbers (sizes, checks, engine vs check time, per strategy) here as JSON.")
@click.option("-v", "--verbose", count=True, help="More log output (-vv: every check).")
@click.option("-q", "--quiet", is_flag=True, help="Only errors and the final summary.")
@click.option("--debug", is_flag=True, help="Show tracebacks for internal errors.")
def main(
    input_file: str,
    check: str | None,
    compile_: str | None,
    expect_error: str | None,
    expect_crash: bool,
    allow_slippage: bool,
    mismatch: bool,
    against: str | None,
    backends: str | None,
    runner: str,
    function: str | None,
    rtol: float,
    atol: float,
    slower_than: float | None,
    slower_than_factor: float | None,
    phases: bool,
    from_phase_dump: bool,
    isolate_dispatch: bool,
    reduce_flags: bool,
    for_upstream: bool,
    report: str | None,
    report_json: str | None,
    executor: str,
    scheduler: str | None,
    resources: str | None,
    check_files: str | None,
    output: str | None,
    jobs: int | None,
    timeout: float | None,
    no_verify: bool,
    only: str | None,
    skip: str | None,
    move_budget: int,
    log_file: str | None,
    stats_json: str | None,
    verbose: int,
    quiet: bool,
    debug: bool,
) -> None:
    _setup_logging(verbose, quiet, log_file)
    _stop_on_signals()
    timing = slower_than is not None or slower_than_factor is not None
    if backends:
        compile_, against, mismatch = _backends(backends, compile_)
    settings = Settings(
        input=input_file,
        check=check,
        compile=compile_,
        against=against,
        mismatch=mismatch,
        runner=runner,
        function=function,
        rtol=rtol,
        atol=atol,
        slower_than=slower_than,
        slower_than_factor=slower_than_factor,
        expect_error=expect_error,
        expect_crash=expect_crash,
        allow_slippage=allow_slippage,
        phases=phases,
        from_phase_dump=from_phase_dump,
        isolate_dispatch=isolate_dispatch,
        reduce_flags=reduce_flags,
        for_upstream=for_upstream,
        report=report,
        report_json=report_json,
        executor=executor,
        scheduler=scheduler,
        resources=_resources(resources),
        check_files=_names(check_files) or (),
        output=output,
        jobs=jobs or (1 if timing else os.cpu_count() or 1),
        timeout=timeout,
        verify=not no_verify,
        strategies=_names(only),
        skip_strategies=_names(skip) or (),
        move_budget=move_budget,
    )
    console = Console(stderr=True, width=None if sys.stderr.isatty() else 120)
    try:
        result = session.reduce_file(settings)
    except UserError as exc:
        click.echo(f"ireereduce: error: {exc}", err=True)
        sys.exit(exc.code)
    except Interrupted as exc:
        _summary(console, exc.result)
        _write_stats(stats_json, exc.result, "interrupted")
        _write_reports(settings, exc.result, "interrupted")
        click.echo(f"ireereduce: interrupted; the smallest interesting program so far is in {exc.result.output}", err=True)
        sys.exit(session.EXIT_INTERRUPTED)
    except Flaky as exc:
        _summary(console, exc.result)
        _write_stats(stats_json, exc.result, "flaky")
        _write_reports(settings, exc.result, "flaky")
        click.echo(
            f"ireereduce: error: the reduced program in {exc.result.output} was not interesting when checked again; "
            "the check is flaky (make it deterministic, or raise --timeout)",
            err=True,
        )
        sys.exit(session.EXIT_FLAKY)
    except KeyboardInterrupt:
        click.echo("ireereduce: interrupted before reduction started", err=True)
        sys.exit(session.EXIT_INTERRUPTED)
    except Exception as exc:
        if debug:
            raise
        click.echo(f"ireereduce: internal error: {type(exc).__name__}: {exc} (rerun with --debug for details)", err=True)
        sys.exit(session.EXIT_INTERNAL)
    _summary(console, result)
    _write_stats(stats_json, result, "done")
    _write_reports(settings, result, "reduced")


def _backends(value: str, flags: str | None) -> tuple[str, str, bool]:
    """--backends A,B [--compile 'extra flags']: the two local-device compile commands."""
    names = [n.strip() for n in value.split(",") if n.strip()]
    if len(names) != 2:
        raise click.BadParameter("give two backends, e.g. llvm-cpu,vmvx", param_hint="--backends")
    extra = flags or ""
    if "{input}" in extra:
        raise click.BadParameter("with --backends, --compile holds only extra flags", param_hint="--compile")

    def command(backend: str) -> str:
        cpu = " --iree-llvmcpu-target-cpu=generic" if backend == "llvm-cpu" else ""
        return (f"iree-compile {{input}} --iree-hal-target-device=local "
                f"--iree-hal-local-target-device-backends={backend}{cpu} {extra} -o {{output}}").strip()

    return command(names[0]), command(names[1]), True


def _write_reports(settings: Settings, result: Result, status: str) -> None:
    if not (settings.report or settings.report_json):
        return
    from reducer import report

    data = report.build(result, settings.input, status)
    if settings.report:
        session.write_atomically(settings.report, report.to_markdown(data).encode())
    if settings.report_json:
        session.write_atomically(settings.report_json, report.to_json(data).encode())


def _raise_interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def _stop_on_signals() -> None:
    """SIGINT and SIGTERM stop the run cleanly (summary, exit 130), whoever sends them.
    Python keeps SIGINT ignored when its parent ignored it, as a shell does for a
    background job; a bot stopping a reduction would then have to SIGKILL it."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _raise_interrupt)


def _write_stats(path: str | None, result: Result, status: str) -> None:
    """Machine-readable numbers for benchmarks and bots; the summary table is for people."""
    if not path:
        return
    data = attrs.asdict(result.stats)
    data.update(status=status, mode=result.mode, output=str(result.output), seconds=result.seconds)
    Path(path).write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


def _setup_logging(verbose: int, quiet: bool, log_file: str | None) -> None:
    level = logging.WARNING if quiet else logging.DEBUG if verbose >= 2 else logging.INFO
    root = logging.getLogger()
    root.setLevel(logging.DEBUG if log_file else level)
    console = logging.StreamHandler(sys.stderr)
    console.setLevel(level)
    console.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%H:%M:%S"))
    root.addHandler(console)
    if log_file:
        handler = logging.FileHandler(log_file)
        handler.setFormatter(logging.Formatter("%(asctime)s %(processName)s %(name)s %(levelname)s %(message)s"))
        root.addHandler(handler)
    multiprocessing_logging.install_mp_handler()  # worker records arrive through one queue


def _summary(console: Console, result: Result) -> None:
    s = result.stats
    original, final = s.original, s.final
    table = Table(title=f"ireereduce: {result.output}", title_justify="left", show_edge=False)
    for col in ("strategy", "tried", "not valid", "not smaller", "checks", "cache hits", "accepted", "bytes saved"):
        table.add_column(col, justify="left" if col == "strategy" else "right")
    for name, st in s.per_strategy.items():
        if not st.candidates:
            continue
        invalid = st.rejected["invalid"] + st.rejected["unparsable"] + st.rejected["strategy-error"]
        table.add_row(
            name, str(st.candidates), str(invalid), str(st.rejected["not-smaller"] + st.rejected["no-op"]),
            str(st.oracle_calls), str(st.cache_hits), str(st.accepts), str(st.bytes_saved),
        )
    console.print(table)
    ops = f"{original.ops} -> {final.ops} ops, " if original.ops is not None else ""
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
            markup=False, highlight=False, soft_wrap=True,
        )
    f = result.findings
    for label, value in (
        ("dispatch", f"{f.dispatch.name} (of {f.dispatch.executables} executables)" if f.dispatch else None),
        ("failing phase", f.phase),
        ("started from the IR after", f.started_from),
        ("flags not needed", ", ".join(f.flags_removed)),
        ("for upstream", ", ".join(f.for_upstream)),
    ):
        if value:
            console.print(f"{label}: {value}", markup=False, highlight=False, soft_wrap=True)


if __name__ == "__main__":  # pragma: no cover
    main()
