"""--localize-only: the first dispatch that goes wrong, cut out with the tensors it read,
for users who reduce with their own check. No reduction: one traced run of each side,
the cut's check, and two writes (the program, its inputs), which take the output's lock
and replace only what was there when the run started."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from typing import Any

import attrs

from reducer.core.processes import interrupts_kept
from reducer.core.rundirs import run_scope
from reducer.session.files import check_inputs_folder, default_output, read_by_the_run, save, take_lock
from reducer.session.settings import (
    EXIT_CANNOT_WRITE,
    EXIT_CHECK_CHANGED_FILES,
    EXIT_NOT_INTERESTING,
    EXIT_NOT_LOCALIZED,
    EXIT_OK,
    EXIT_USAGE,
    INITIAL_TIMEOUT,
    Settings,
    UserError,
)
from reducer.session.source import read_input
from reducer.session.wiring import make_oracle

log = logging.getLogger(__name__)

_WRITES = "--localize-only writes the cut program and its inputs only"
_RUNS = "--localize-only runs each side once, traced, on this machine"
_CUTS = "--localize-only cuts the first dispatch that goes wrong out and reduces nothing"
#: What a reduction does and --localize-only does not: asked for with it, refused rather
#: than ignored. The flag, its parameter, and why.
NOT_WITH_LOCALIZE_ONLY = [
    ("--report", "report", _WRITES),
    ("--report-json", "report_json", _WRITES),
    ("--stats-json", "stats_json", _WRITES),
    ("--progress-json", "progress_json", _WRITES),
    ("--state-dir", "state_dir", _WRITES),
    ("--max-time", "max_time", _RUNS),
    ("--max-checks", "max_checks", _RUNS),
    ("--repeat", "repeat", _RUNS),
    ("--executor dask", "executor", _RUNS),
    ("--scheduler", "scheduler", _RUNS),
    ("--resources", "resources", _RUNS),
    ("--check-files", "check_files", _RUNS),
    ("--for-upstream", "for_upstream", _CUTS),
    ("--trivial-is-error", "trivial_is_error", _CUTS),
    ("--strategies", "strategies", _CUTS),
    ("--skip-strategies", "skip_strategies", _CUTS),
    ("--moves", "move_budget", _CUTS),
    ("--print-diff", "print_diff", _CUTS),
    ("--isolate-dispatch", "isolate_dispatch", _CUTS),
]


def _given(key: str, value: Any) -> bool:
    """Whether a parameter was given: not empty, off, or its default (`Settings`')."""
    if value is None or value is False or value in ((), {}, []):
        return False
    field = attrs.fields_dict(Settings).get(key)
    return field is None or value != field.default


def alone_with_localize_only(params: dict[str, Any]) -> None:
    """--localize-only is one traced run of each side, here, and writes the cut program
    and its inputs: what goes with a reduction only is refused, one line, exit 2."""
    for flag, key, why in NOT_WITH_LOCALIZE_ONLY:
        if _given(key, params.get(key)):
            raise UserError(EXIT_USAGE, f"{flag} goes with a reduction: {why}")
    if params.get("localize") is False:
        raise UserError(EXIT_USAGE, "--localize-only and --no-localize ask for opposite things; give one")
    folder = (params.get("output") or default_output(params["input_file"])) + ".inputs"
    log_file = params.get("log_file")
    real = os.path.realpath(folder)
    if log_file and (os.path.realpath(log_file) + os.sep).startswith(real + os.sep):
        raise UserError(EXIT_USAGE, f"--log-file {log_file} is in {folder}, where the cut program's inputs go")


def localize_only(path: str, options: dict[str, Any]) -> int:
    """--localize-only: print the first dispatch that goes wrong and write it cut out, its
    inputs in a folder beside it, for users who reduce with their own check. No reduction.
    The exit code; an error is one line, as the command line prints it."""
    from reducer.session.settings import check_settings

    try:
        settings = Settings(input=path, **options)
        check_settings(settings)  # a --timeout nan, say, as a reduction refuses it
        output = settings.output or default_output(settings.input)
        lock = take_lock(output)  # one run writes an output at a time
        try:  # its compiles' temp dirs and processes are the run's: swept, after a kill -9 by the next run
            with run_scope(), interrupts_kept():
                return _localize_only(settings, output)
        finally:
            lock.release()
    except UserError as exc:
        print(f"ireereduce: error: {exc}", file=sys.stderr)
        return exc.code


def _localize_only(settings: Settings, output: str) -> int:
    from reducer.iree import cut, localize

    if not settings.fresh and os.path.isfile(output) and os.path.getsize(output):
        raise UserError(
            EXIT_USAGE,
            f"{output} exists; --localize-only writes the cut program there and never replaces a file "
            "(give -o another path, or --fresh to replace it)",
        )
    folder, protected = output + ".inputs", read_by_the_run(settings)
    check_inputs_folder("--localize-only", folder, protected)
    if not settings.fresh and os.path.isdir(folder) and os.listdir(folder):
        raise UserError(
            EXIT_USAGE,
            f"{folder} holds inputs, of an earlier run or yours, and no cut program in {output} goes with them; "
            "--localize-only never replaces them (move them away, or --fresh to replace them)",
        )
    before = _seen(output), _seen(folder)  # what is there now: only that may be replaced
    text = settings.text if settings.text is not None else read_input(settings.input)
    basename = os.path.basename(settings.input) if settings.text is None else "input.mlir"
    oracle = make_oracle(settings, basename, settings.timeout or INITIAL_TIMEOUT)
    if oracle.kind != "numeric-mismatch":
        raise UserError(EXIT_USAGE, "--localize-only needs --mismatch (or --backends)")
    from reducer.session.traced import traced_original

    # The traced run starts beside the original's check, as a reduction's does (`traced.py`).
    with contextlib.closing(traced_original(text.encode(), basename, settings.timeout)) as traced:
        traced.start(oracle, now=settings.workers() >= 2)
        verdict = oracle.run(text.encode())
        for note in verdict.notes:  # --inputs that do not fit, as a reduction warns of them
            log.warning("%s", note)
        if verdict.timed_out:
            from reducer.session.start import hung

            raise hung(oracle)
        if not verdict.interesting:
            from reducer.iree.oracles.mismatch import wrong_function

            if (wrong := wrong_function(verdict)) is not None:
                raise UserError(EXIT_USAGE, wrong)
            raise UserError(EXIT_NOT_INTERESTING, f"the original does not mismatch: {oracle.why_not(verdict)}")
        oracle = oracle.calibrate(verdict)
        traced.time_after(verdict)
        traces = traced.result()
    assert traces is not None  # a mismatch's: its kind says so
    where = localize.find(traces, oracle)  # type: ignore[arg-type]  # a MismatchOracle: its kind says so
    # The original does mismatch: not exit 5, which says it does not.
    kept = f" ({output} from before is kept)" if os.path.isfile(output) and os.path.getsize(output) else ""
    if where.found is None:
        raise UserError(EXIT_NOT_LOCALIZED, f"no dispatch found, nothing written{kept}: {where.reason}")
    print(where.found.describe())
    try:
        done = cut.cut(oracle, text.encode(), basename, where.found, lambda data, judge: judge.run(data))  # type: ignore[arg-type]
    except cut.NotCut as exc:
        raise UserError(EXIT_NOT_LOCALIZED, f"the dispatch was not cut out, nothing written{kept}: {exc}") from None
    _inputs_written(output, folder, before, protected, done.oracle.given)
    data = done.text.encode()
    if settings.output_bytecode(output):  # -o cut.mlirbc or --emit-bytecode, as a reduction's output
        from reducer.core.bytecode import Writer

        data = Writer()(data) or data
    save(output, data, "the cut program")
    given = ",".join(os.path.join(folder, f"input{k}.npy") for k in range(len(done.oracle.given)))
    print(
        f"cut out: {output} ({done.oracle.expected.describe() if done.oracle.expected else 'mismatches'}); "
        f"its inputs: --inputs {given}"
    )
    return EXIT_OK


def _inputs_written(
    output: str, folder: str, before: tuple[Any, Any], protected: dict[str, str], given: tuple[bytes, ...]
) -> None:
    """The cut's inputs written into folder, once OUTPUT and the folder are what the start
    saw (`before`) and the folder, made here if it was not there, holds only an earlier
    cut's arrays (`--fresh`: they go). What appeared meanwhile is someone else's, never
    replaced or written through: exit 11, nothing written."""
    for path, seen in zip((output, folder), before):
        if _seen(path) != seen:
            raise UserError(
                EXIT_CHECK_CHANGED_FILES, f"{path} changed during the run (someone else's now); nothing written"
            )
    try:
        with contextlib.suppress(FileExistsError):
            os.mkdir(folder)
        check_inputs_folder("--localize-only", folder, protected)  # a link put there since the look above, say
    except OSError as exc:
        raise UserError(
            EXIT_CANNOT_WRITE, f"cannot make {folder} for the cut program's inputs: {exc.strerror}"
        ) from None
    except UserError as exc:
        raise UserError(EXIT_CHECK_CHANGED_FILES, f"{exc} (it changed during the run); nothing written") from None
    names = [f"input{k}.npy" for k in range(len(given))]
    for stale in set(os.listdir(folder)) - set(names):  # an earlier cut's (--fresh): checked as such above
        os.unlink(os.path.join(folder, stale))
    for name, blob in zip(names, given):
        save(os.path.join(folder, name), blob, "the cut program's input")


def _seen(path: str) -> tuple[tuple[int, int, int, int] | None, ...]:
    """What is at path and, if it is a link, where it leads, as lstat sees them (kind,
    inode, size, mtime; None when nothing): a file that appears at a link's target is
    written through the link."""
    found: list[tuple[int, int, int, int] | None] = []
    for place in dict.fromkeys((path, os.path.realpath(path))):
        try:
            st = os.lstat(place)
        except OSError:
            found.append(None)
            continue
        found.append((st.st_mode, st.st_ino, st.st_size, st.st_mtime_ns))
    return tuple(found)
