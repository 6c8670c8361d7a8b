"""What the command line checks beyond click's types, and click's usage errors said the
way every other error is: one line, `ireereduce: error: ...`, exit 2 (EXIT_USAGE)."""

from __future__ import annotations

import codecs
import contextlib
import errno
import math
import os
import sys
from typing import Any, NoReturn

import click

from reducer.session.settings import EXIT_CANNOT_WRITE, EXIT_INTERRUPTED, MAX_SECONDS, too_long

#: The backends a local device compiles for (iree-compile's
#: --iree-hal-local-target-device-backends), which --backends pairs.
LOCAL_BACKENDS = ("llvm-cpu", "vmvx")


class OneLineUsage(click.ClickException):
    """A usage error as one line: click's own prints a block (Usage:, Try --help, Error:),
    which a script that reads the last line, or a bot that reads one, gets wrong."""

    exit_code = 2

    def show(self, file: Any = None) -> None:
        message = " ".join(self.format_message().split()).rstrip(".")
        click.echo(f"ireereduce: error: {message} (see ireereduce --help)", err=True)


class Command(click.Command):
    """click's command, its usage errors in one line (parsing, callbacks and types alike),
    and Ctrl-C before the run has started (stdin still being read, say) an interrupt like
    any other, exit 130, not click's "Aborted!" and exit 1."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        from reducer.core.rundirs import remove_stale_runs

        remove_stale_runs()  # what a kill -9 left goes first, also when the command line is refused
        if sys.stdout is None and any(a.partition("=")[0] in _PRINTS for a in args):
            _unwritable_stdout(OSError(errno.EBADF, "it is closed"))  # click would print nowhere, exit 0
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as exc:
            raise OneLineUsage(exc.format_message()) from None
        except OSError as exc:  # --help, --version, --list-strategies, --print-schema writing to stdout
            if exc.errno not in _UNWRITABLE:
                raise
            _unwritable_stdout(exc)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:
            raise OneLineUsage(exc.format_message()) from None
        except KeyboardInterrupt:
            click.echo("ireereduce: interrupted before the reduction started", err=True)
            sys.exit(EXIT_INTERRUPTED)


#: The options that only print, to stdout.
_PRINTS = {"--help", "-h", "--version", "--list-strategies", "--print-schema"}
#: How writing to a stdout that takes nothing fails: its reader gone, a full or failing disk.
_UNWRITABLE = (errno.EPIPE, errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO, errno.EBADF)


def _unwritable_stdout(exc: OSError) -> NoReturn:
    """What an option that only prints (--help, --list-strategies) does when stdout takes
    nothing: a reader that closed the pipe (`| head`) had what it wanted, exit 0; a full
    disk or a closed stdout is one line and exit 8. Click's own answers were exit 1 in
    silence, and a traceback."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # the exit's flush of stdout must not fail again
    if exc.errno == errno.EPIPE:
        sys.exit(0)
    sys.stderr.write(f"ireereduce: error: cannot write to standard output ({exc.strerror})\n")
    sys.exit(EXIT_CANNOT_WRITE)


def seconds(minimum: float) -> Any:
    """A click callback: a finite number of seconds, at least `minimum` (a float type and
    click's ranges let nan and inf through)."""

    def check(_ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
        if value is not None and not (math.isfinite(value) and value >= minimum):
            raise click.UsageError(
                f"{param.opts[0]} must be a finite number of seconds, at least {minimum:g}, not {value}"
            )
        if value is not None and value > MAX_SECONDS:
            raise click.UsageError(too_long(param.opts[0], value))
        return value

    return check


#: The most of a resource a check may ask for: Dask adds up the workers' amounts, and a sum
#: past a float's range (GPU=1e308 on a few workers) is no count.
MAX_RESOURCE = 1e12


def resources(value: str | None) -> dict[str, float]:
    """GPU=1,MEMORY=8e9 -> {"GPU": 1.0, "MEMORY": 8e9}: Dask's worker resources."""
    found: dict[str, float] = {}
    for item in names(value) or []:
        name, _, amount = item.partition("=")
        if name.strip() in found:  # the last would win without a word
            raise click.BadParameter(
                f"{name.strip()} is named twice: give each resource once", param_hint="--resources"
            )
        try:
            found[name.strip()] = float(amount) if amount else 1.0
        except ValueError:
            raise click.BadParameter(f"{item!r}: give NAME=NUMBER, e.g. GPU=1", param_hint="--resources") from None
        if not name.strip() or not 0 < found[name.strip()] <= MAX_RESOURCE:  # a sum of workers' must stay finite
            raise click.BadParameter(
                f"{item!r}: give NAME=NUMBER with a positive number up to {MAX_RESOURCE:g}", param_hint="--resources"
            )
    return found


def names(value: str | None) -> list[str] | None:
    return None if value is None else [n.strip() for n in value.split(",") if n.strip()]


def backends(value: str, flags: str | None, against: str | None = None) -> tuple[str, str, bool]:
    """--backends A,B [--compile 'extra flags']: the two local-device compile commands
    (which an --against of the user's would silently replace: refused)."""
    if against is not None:
        raise click.UsageError("--backends makes both commands; give it or --mismatch with --against, not both")
    given = names(value) or []
    unknown = [n for n in given if n not in LOCAL_BACKENDS]
    if unknown:
        raise click.UsageError(
            f"--backends: unknown backend {', '.join(unknown)}; the local backends are {', '.join(LOCAL_BACKENDS)}"
        )
    if len(given) != 2:
        raise click.UsageError(f"--backends: give two backends, e.g. {','.join(LOCAL_BACKENDS)}")
    if given[0] == given[1]:  # --compile's extra flags go to both: the outputs could never differ
        raise click.UsageError(
            f"--backends: {value} names {given[0]} twice; give two different backends, e.g. {','.join(LOCAL_BACKENDS)}"
        )
    extra = flags or ""
    if "{input}" in extra:
        raise click.UsageError("with --backends, --compile holds only extra flags (no {input})")

    def command(backend: str) -> str:
        cpu = " --iree-llvmcpu-target-cpu=generic" if backend == "llvm-cpu" else ""
        return (
            f"iree-compile {{input}} --iree-hal-target-device=local "
            f"--iree-hal-local-target-device-backends={backend}{cpu} {extra} -o {{output}}"
        ).strip()

    return command(given[0]), command(given[1]), True


def names_as_given() -> None:
    """stdout and stderr write a file name's bytes that are not UTF-8 back as those bytes,
    as `ls | cat` and the reports do: Python's default wrote `out\\udcff.mlir` for the
    name `out<0xff>.mlir`. Other characters a stream cannot encode stay backslash-escaped."""

    def handler(exc: UnicodeError) -> tuple[str | bytes, int]:
        if not isinstance(exc, UnicodeEncodeError):
            return codecs.backslashreplace_errors(exc)
        c = exc.object[exc.start]  # one at a time: a run of them may mix both kinds
        if 0xDC80 <= ord(c) <= 0xDCFF:  # a byte os.fsdecode could not decode
            return bytes([ord(c) - 0xDC00]), exc.start + 1
        return c.encode("ascii", "backslashreplace").decode(), exc.start + 1

    codecs.register_error("ireereduce-names", handler)
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            with contextlib.suppress(ValueError, OSError):  # closed: nothing goes through it
                reconfigure(errors="ireereduce-names")
