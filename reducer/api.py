"""The Python API: `reducer.reduce(...)`, what the `ireereduce` command is a thin layer over.

Bots get a result object instead of scraping log lines, events instead of a progress
bar, and the same defaults as the command line (they live once, in `session.Settings`).
See docs/api.md.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from reducer import session
from reducer.core import ir as irutil
from reducer.core.bytecode import program_text
from reducer.core.oracle import Oracle
from reducer.core.workspace import Size
from reducer.progress import Listener, Monitor, Point
from reducer.session import Result, Settings, UserError

STATS_SCHEMA = "ireereduce-stats/1"

#: The exit code of each status; `trivial` results exit EXIT_TRIVIAL only when asked.
EXIT_OF_STATUS = {
    "reduced": session.EXIT_OK,
    "interrupted": session.EXIT_INTERRUPTED,
    "stopped": session.EXIT_STOPPED,
    "flaky": session.EXIT_FLAKY,
}


@attrs.define
class Reduction:
    """What one reduction produced."""

    status: str  # reduced, interrupted, stopped or flaky (progress.STATUSES)
    text: str  # the smallest interesting program found
    output: str | None  # the file holding it (None when the API kept it in a temporary file)
    original: Size  # the input, measured like `final`: as ireereduce prints programs
    final: Size
    checks: int  # oracle calls, workflows included
    cache_hits: int
    seconds: float
    trivial: bool  # an empty module or a function that only returns: the check is probably too loose
    reason: str | None  # why a `stopped` run stopped
    report: dict[str, Any]  # the --report-json content (docs/report-schema.json)
    result: Result  # everything else: per-strategy numbers, findings, the final oracle
    #: The size against time and checks: the original, each commit, the final (--stats-json's `trajectory`).
    trajectory: list[Point] = attrs.Factory(list)

    @property
    def interesting(self) -> bool:
        """True unless the final re-check disagreed (a flaky check)."""
        return self.status != "flaky"


def _as_settings(source: str | os.PathLike[str], **options: Any) -> Settings:
    """A Path is always a file; a str is a file if one exists by that name or it has no
    newline and no brace (so `reduce("module {}")` and `reduce(text)` read as programs)."""
    if isinstance(source, os.PathLike):
        return Settings(input=os.fspath(source), **options)
    if os.path.exists(source) or ("\n" not in source and "{" not in source):
        return Settings(input=source, **options)
    return Settings(input="-", text=source, **options)


def reduce(
    source: str | os.PathLike[str],
    *,
    check: str | os.PathLike[str] | None = None,
    test_args: Sequence[str] = (),
    oracle: Oracle | None = None,
    compile: str | None = None,
    output: str | os.PathLike[str] | None = None,
    jobs: int | None = None,
    on_event: Listener | None = None,
    monitor: Monitor | None = None,
    stats_json: str | os.PathLike[str] | None = None,
    **options: Any,
) -> Reduction:
    """Reduce a program (a path, or its text) to the smallest one still interesting.

    Give one of `check` (a script: exit 0 = interesting; `test_args` follow the
    candidate's path), `compile` (the built-in failure oracle; more built-in oracles
    through the other `Settings` fields: against, mismatch, slower_than, ...) or `oracle`
    (any `reducer.core.oracle.Oracle`). `on_event(kind, fields)` gets the progress events of
    docs/progress-schema.json. Bad input raises `UserError` (its `code` is the command's
    exit code); an interrupted, stopped or flaky run returns with that status.
    """
    monitor = monitor or Monitor()
    if on_event is not None:
        monitor.listeners.append(on_event)
    tmp = None
    try:
        settings = _as_settings(
            source,
            check=os.fspath(check) if check is not None else None,
            test_args=tuple(test_args),
            oracle=oracle,
            compile=compile,
            output=os.fspath(output) if output is not None else None,
            jobs=jobs,
            stats_json=os.fspath(stats_json) if stats_json is not None else None,  # checked as the CLI's is
            **options,
        )
        if settings.text is not None and settings.output is None:
            tmp = tempfile.mkdtemp(prefix="ireereduce-api-")
            settings = attrs.evolve(settings, output=os.path.join(tmp, "reduced.mlir"))
        reduction = _run(settings, monitor)
    except UserError as exc:
        monitor.finish("error", code=exc.code, message=str(exc))
        raise
    except Exception as exc:  # a bot tailing the stream must see the end of the run too
        monitor.finish("error", code=session.EXIT_INTERNAL, message=f"internal error: {type(exc).__name__}: {exc}")
        raise
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    if tmp is not None:
        reduction.output = None
    if stats_json is not None:
        write_stats(os.fspath(stats_json), reduction)
    monitor.finish(
        reduction.status,
        size=_size(reduction.final),
        input=_size(reduction.original),
        checks=reduction.checks,
        seconds=round(reduction.seconds, 2),
        output=reduction.output,
        trivial=reduction.trivial,
        reason=reduction.reason,
    )
    return reduction


def _run(settings: Settings, monitor: Monitor) -> Reduction:
    status, reason = "reduced", None
    with monitor.running():
        try:
            result = session.reduce_file(settings, monitor=monitor)
        except session.LimitReached as exc:
            result, status, reason = exc.result, "stopped", exc.reason
        except session.Interrupted as exc:
            result, status = exc.result, "interrupted"
        except session.Flaky as exc:
            result, status = exc.result, "flaky"
    monitor.end(result.stats)
    # An interrupted run may have found nothing smaller yet: the output is not written then.
    # (then the smallest interesting program found is the input itself).
    if os.path.exists(result.output) and result.written:
        text = program_text(Path(result.output).read_bytes())  # -o x.mlirbc holds bytecode
    else:
        text = settings.text if settings.text is not None else program_text(Path(settings.input).read_bytes())
    try:
        data = _reports(settings, result, status)
    except KeyboardInterrupt:  # Ctrl-C again, while the reports were written: the result stands
        status = "interrupted"
        data = {"status": status, "trivial": irutil.trivial(text)}
    return Reduction(
        status=status,
        text=text,
        output=str(result.output),
        original=result.input_size or result.stats.original,
        final=result.stats.final,
        checks=result.stats.oracle_calls,
        cache_hits=result.stats.cache_hits,
        seconds=result.seconds,
        trivial=data["trivial"],
        reason=reason,
        report=data,
        result=result,
        trajectory=list(monitor.trajectory),
    )


def _reports(settings: Settings, result: Result, status: str) -> dict[str, Any]:
    """The report's content, written where --report and --report-json ask."""
    from reducer.iree import report as reporting  # imported while the original was checked
    from reducer.session.files import report_inputs

    folder, beside = report_inputs(settings, result.output) or (None, "")  # None: no report ships inputs
    data = reporting.build(result, settings.input, status, folder, beside)
    best = f"the reduced program is in {result.output}"
    if settings.report:
        session.save(settings.report, reporting.to_markdown(data).encode(errors="surrogateescape"), "the report", best)
    if settings.report_json:
        session.save(settings.report_json, reporting.to_json(data).encode(), "the JSON report", best)
    return data


def _size(size: Size) -> dict[str, Any]:
    return {"ops": size.ops, "bytes": size.bytes}


def write_stats(path: str, reduction: Reduction) -> None:
    """--stats-json: the run's numbers for benchmarks and bots (docs/stats-schema.json)."""
    result = reduction.result
    data = attrs.asdict(result.stats)
    data.update(
        schema=STATS_SCHEMA,
        status=reduction.status,
        mode=result.mode,
        output=str(result.output),
        seconds=result.seconds,
        trivial=reduction.trivial,
        trajectory=[point.fields() for point in reduction.trajectory],
    )
    session.save(
        path,
        (json.dumps(data, indent=1, sort_keys=True) + "\n").encode(),
        "--stats-json",
        f"the reduced program is in {result.output}",
    )


def trivial(text: str) -> bool:
    """See reducer.core.ir.trivial."""
    return irutil.trivial(text)
