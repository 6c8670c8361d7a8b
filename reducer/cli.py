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

HELP = """Reduce INPUT (an .mlir file) to a smaller program that CHECK still finds interesting.

\b
The check script decides. It must exit 0 while the bug is still there (C-Reduce,
C-Vise, llvm-reduce and iree-reduce agree; mlir-reduce is the opposite: users of
mlir-reduce must invert their script's exit codes). It gets the candidate's path as
its first argument, and runs in a fresh temporary directory holding the candidate
under INPUT's own file name, so cvise scripts that read ./input.mlir work unchanged.

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


def _names(value: str | None) -> list[str] | None:
    return None if value is None else [n.strip() for n in value.split(",") if n.strip()]


@click.command(help=HELP, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.argument("input_file", metavar="INPUT", type=click.Path(dir_okay=True))
@click.option("--check", "-c", "check", required=True, type=click.Path(), help="Interestingness script: exit 0 = still interesting.")
@click.option("--output", "-o", type=click.Path(dir_okay=False), help="Where the reduced program goes [default: INPUT.reduced.mlir].")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=os.cpu_count() or 1, show_default=True, help="Checks run in parallel.")
@click.option("--timeout", type=click.FloatRange(min=0.1), help="Seconds per check; a timed-out check counts as not interesting [default: 10x the original's check time + 5 s].")
@click.option("--no-verify", is_flag=True, help="Do not run the MLIR verifier on candidates (for bugs in the verifier itself).")
@click.option("--batch", type=click.IntRange(min=1), default=session.DEFAULT_BATCH, show_default=True, help="Candidates judged together before committing; the output depends on it, never on -j.")
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
    check: str,
    output: str | None,
    jobs: int,
    timeout: float | None,
    no_verify: bool,
    batch: int,
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
    settings = Settings(
        input=input_file,
        check=check,
        output=output,
        jobs=jobs,
        timeout=timeout,
        verify=not no_verify,
        batch=batch,
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
        click.echo(f"ireereduce: interrupted; the smallest interesting program so far is in {exc.result.output}", err=True)
        sys.exit(session.EXIT_INTERRUPTED)
    except Flaky as exc:
        _summary(console, exc.result)
        _write_stats(stats_json, exc.result, "flaky")
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


if __name__ == "__main__":  # pragma: no cover
    main()
