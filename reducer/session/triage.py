"""IREE's triage steps around the reduction (shared/seeds): before it, which dispatch
and which phase fail; after it, which compiler flags the failure needs and a text
cleaned for upstream. Each only swaps the program or the oracle it is given."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import attrs

from reducer.core.engine import Stopped
from reducer.core.executor import Executor
from reducer.core.oracle import Oracle, Verdict
from reducer.session.settings import (
    EXIT_USAGE,
    INITIAL_TIMEOUT,
    Findings,
    Settings,
    UserError,
    check_timeout,
)

if TYPE_CHECKING:
    from reducer.iree import reproducer
    from reducer.iree.oracles import CompileOracle
    from reducer.session.traced import Alongside

log = logging.getLogger(__name__)


def unchanged(data: bytes) -> bytes:
    return data


def before(
    settings: Settings,
    text: str,
    oracle: Oracle,
    findings: Findings,
    executor: Executor,
    attach: Callable[[bytes], bytes] = unchanged,
    beside: Alongside[Any] | None = None,
) -> tuple[str, Oracle]:
    """IREE's triage steps before reducing (shared/seeds): which dispatch, which phase.
    `attach` makes text's file (its blobs, `reducer.core.resources`): the dumps and traced
    runs here run the compiler on it themselves, not through the executor. `beside`: the
    compile a step needs, started beside the original's check (`alongside`)."""
    from reducer.iree import dispatch, phases
    from reducer.iree.oracles import CompileOracle

    if settings.localize and oracle.kind == "numeric-mismatch":
        return localized(settings, text, oracle, findings, executor, attach, beside)
    if oracle.kind == "pass-replay":  # a crash reproducer: its resource goes back on the output (`trailer`)
        from reducer.iree import reproducer

        return reproducer.strip(text), oracle
    if not isinstance(oracle, CompileOracle):
        if settings.isolate_dispatch or settings.from_phase_dump:
            raise UserError(EXIT_USAGE, "--isolate-dispatch and --from-phase-dump need a --compile failure oracle")
        return text, oracle
    if not oracle.command.is_iree_compile():
        if settings.isolate_dispatch or settings.from_phase_dump:
            raise UserError(EXIT_USAGE, "--isolate-dispatch and --from-phase-dump need an iree-compile command")
        return text, oracle
    if settings.pass_level:
        return pass_level(settings, text, oracle, findings, executor, beside, attach)
    if settings.isolate_dispatch:
        found = dispatch.isolate(oracle, attach(text.encode()), executor)
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
        search = phases.first_failing_phase(oracle, attach(text.encode()), executor)
        findings.workflow_checks += search.checks
        if search.phase is not None:
            findings.phase = search.phase
            _one_flag_away(search.phase, findings)
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
                    limited, attach(text.encode()), os.path.basename(settings.input), search.phase, executor
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


def _one_flag_away(phase: str, findings: Findings) -> None:
    """A failure past parsing is inside a pass: the summary says --pass-level would reduce there."""
    from reducer.iree.phases import PHASES

    if phase != PHASES[0]:
        findings.notes.append(
            f"the failure is inside a pass (phase {phase}): a pass-level repro is one flag away "
            "(--pass-level: reduce the IR entering the failing pass, each check replaying that pass "
            "alone with iree-opt instead of compiling)"
        )


def replay_settings(settings: Settings, pipeline: str) -> Settings:
    """The settings whose oracle replays pipeline (wiring's "replay" row), with
    --compile's own iree-opt when it has one."""
    from reducer.session.wiring import replay_tool

    tool = replay_tool(settings)
    return attrs.evolve(settings, check=None, compile=None, pass_level=False, pass_pipeline=pipeline, replay_tool=tool)


def replayed(settings: Settings, raw: str) -> Settings:
    """An input holding a crash reproducer needs no check: its replay is the oracle."""
    if settings.check is not None or settings.compile is not None or settings.oracle is not None:
        return settings
    if settings.pass_pipeline is not None or "mlir_reproducer" not in raw:
        return settings
    from reducer.iree import reproducer

    found = reproducer.find(raw)
    return settings if found is None else replay_settings(settings, found.pipeline)


def carried(settings: Settings, raw: str) -> bytes:
    """A crash reproducer reduced with the user's own check: the resource every candidate
    and the output carry after the program (MLIR's printer drops it, and a check that
    replays with `iree-opt --run-reproducer` needs it); else nothing."""
    if settings.check is None or "mlir_reproducer" not in raw:
        return b""
    from reducer.iree import reproducer

    found = reproducer.find(raw)
    return b"" if found is None else found.block().encode()


def carrying(resource: bytes) -> Callable[[bytes], bytes]:
    """Each program with the resource after it, unless it has a resource section already
    (the original as given, or text reduced as text)."""
    return lambda data: data if b"{-#" in data else data + resource


def reproducer_as_text(settings: Settings, raw: str, bytecode_input: bool) -> None:
    """A crash reproducer's output carries its pipeline in an `mlir_reproducer` resource
    after the program, which the MLIR bytecode ireereduce writes does not hold: such an
    output would be neither bytecode iree-opt reads nor a reproducer it replays. Nor
    would the bytecode it writes for a check of the user's (`carried`) hold it."""
    from reducer.session.files import default_output

    output = settings.output or default_output(settings.input)
    carries = bool(carried(settings, raw))
    if carries and bytecode_input:
        raise UserError(
            EXIT_USAGE,
            f"{settings.input} is a crash reproducer in bytecode: with your own --check, give it as text "
            f"(iree-opt {settings.input} -o repro.mlir), as the bytecode ireereduce writes for each check "
            "would drop its mlir_reproducer resource",
        )
    if (settings.pass_level or settings.pass_pipeline is not None or carries) and settings.output_bytecode(output):
        asked = "--emit-bytecode" if settings.emit_bytecode else f"-o {output}"
        raise UserError(
            EXIT_USAGE,
            f"{asked}: ireereduce writes a crash reproducer as text (the bytecode it writes would drop its "
            "mlir_reproducer resource, the pipeline iree-opt --run-reproducer replays); give -o NAME.mlir",
        )


def trailer(oracle: Oracle) -> bytes:
    """What the output carries after the program: a replayed reproducer's resource."""
    from reducer.iree import reproducer
    from reducer.iree.oracles.replay import ReplayOracle

    return reproducer.trailer(oracle).encode() if isinstance(oracle, ReplayOracle) else b""


def pass_level(
    settings: Settings,
    text: str,
    oracle: CompileOracle,
    findings: Findings,
    executor: Executor,
    beside: Alongside[Any] | None = None,
    attach: Callable[[bytes], bytes] = unchanged,
) -> tuple[str, Oracle]:
    """--pass-level: the local reproducer of the failing pass, with its replay as the
    oracle, if that replay fails the way the compile does; else the input, and why. A
    code generation failure's comes from the one executable that fails, compiled alone
    (from the sources `beside` dumped, when it did); the whole compile's when that one is
    not found or replays otherwise. The compiles get the program with its blobs (`attach`)."""
    from reducer.iree import reproducer

    data = attach(text.encode())
    codegen = oracle.expected is not None and any(reproducer.CODEGEN in e for e in oracle.expected.errors)
    stop = executor.expired  # --max-time's end: these compiles run here
    tries = [lambda: reproducer.in_executable(oracle, data, _dumped(beside), stop)] if codegen else []
    tries.append(lambda: reproducer.local(oracle, data, stop))
    why = "iree-compile wrote no crash reproducer"
    for attempt in tries:
        found = attempt()
        if found is None:
            continue
        findings.workflow_checks += found.compiles
        replay, verdict, why = _replaying(settings, oracle, found, executor)
        findings.workflow_checks += 1
        if not why:
            return _at_pass_level(settings, oracle, found, replay, verdict, findings)
    findings.notes.append(f"--pass-level: {why}; reducing the input")
    log.warning("%s", findings.notes[-1])
    return text, oracle


def _dumped(beside: Alongside[Any] | None) -> tuple[str, Verdict] | None:
    """The folder the sources were dumped into beside the original's check, and that
    compile's verdict; None when there is none to use (then the dump is made again)."""
    try:
        dumped = beside.result() if beside is not None else None
    except Exception:  # the dump failed beside the check: made again, where its error is told
        return None
    if beside is None or beside.folder is None or not isinstance(dumped, Verdict) or dumped.timed_out:
        return None
    return beside.folder, dumped


def _replaying(
    settings: Settings, oracle: CompileOracle, found: reproducer.Local, executor: Executor
) -> tuple[Oracle, Verdict, str]:
    """The replay of found's pipeline, its verdict on found, and why it is no repro
    (empty when its failure is the compile's)."""
    from reducer.iree import signature
    from reducer.session.wiring import make_oracle

    pipeline = found.reproducer.pipeline
    replay = make_oracle(replay_settings(settings, pipeline), oracle.basename, oracle.timeout or INITIAL_TIMEOUT)
    verdict = executor.run(found.text.encode(), replay)
    sig = signature.of_verdict(verdict)
    if (
        not verdict.interesting
        or sig is None
        or (oracle.expected is not None and not settings.allow_slippage and not sig.matches(oracle.expected))
    ):
        why = sig.describe() if sig is not None else replay.why_not(verdict)
        return replay, verdict, f"replaying {pipeline} fails otherwise ({why})"
    return replay, verdict, ""


def _at_pass_level(
    settings: Settings,
    oracle: CompileOracle,
    found: reproducer.Local,
    replay: Oracle,
    verdict: Verdict,
    findings: Findings,
) -> tuple[str, Oracle]:
    """The reproducer's IR and its replay, calibrated, and what the report says of them."""
    from reducer.iree import reproducer

    pipeline = found.reproducer.pipeline
    replay = replay.calibrate(verdict).with_timeout(check_timeout(settings.timeout, verdict.seconds))
    name = os.path.basename(settings.input) if settings.text is None else "input.mlir"
    findings.pass_level = {
        "pipeline": pipeline,
        "input_level": oracle.reproducer(name),
        "compile_seconds": round(found.seconds, 2),
        "replay_seconds": round(verdict.seconds, 2),
        "executable": found.executable or None,
    }
    alone = f", from executable {found.executable} compiled alone" if found.executable else ""
    findings.notes.append(
        f"pass level: reducing the IR entering the failing pass ({len(found.text.encode())} bytes{alone}; "
        f"{pipeline}); a check replays it in {verdict.seconds:.2f} s with {_tool(replay)}, "
        f"writing it took {found.seconds:.1f} s"
    )
    log.info("%s", findings.notes[-1])
    return reproducer.strip(found.text), replay


def _tool(replay: Oracle) -> str:
    """The replay's program as it runs: which iree-opt (a build's own, or PATH's)."""
    import shutil

    from reducer.iree.oracles import CompileOracle

    program = replay.command.argv[0] if isinstance(replay, CompileOracle) else "iree-opt"
    return shutil.which(program) or program


def alongside(
    settings: Settings, text: str, attach: Callable[[bytes], bytes], basename: str
) -> contextlib.AbstractContextManager[Alongside[Any] | None]:
    """The compile a triage step will make of the original anyway, to start beside the
    original's check (`reducer.session.traced`), ended as the block ends: a localised
    mismatch's traced run, or --pass-level's dump of the executables' sources; else None."""
    from reducer.session import traced

    if settings.oracle is None and settings.check is None:
        if settings.localize and settings.mismatch:
            return contextlib.closing(traced.traced_original(attach(text.encode()), basename, settings.timeout))
        if settings.pass_level and not settings.mismatch:
            return contextlib.closing(traced.dumped_original(attach(text.encode()), settings.timeout))
    elif settings.oracle is not None and settings.localize:  # the API's own oracle: start() asks its kind
        return contextlib.closing(traced.traced_original(attach(text.encode()), basename, settings.timeout))
    return contextlib.nullcontext()


def localized(
    settings: Settings,
    text: str,
    oracle: Oracle,
    findings: Findings,
    executor: Executor,
    attach: Callable[[bytes], bytes] = unchanged,
    traced: Alongside[Any] | None = None,
) -> tuple[str, Oracle]:
    """A mismatch cut down to the first dispatch that goes wrong, fed its traced inputs,
    when that still mismatches the original's way; else the whole program, and why. The
    traced run is `traced`'s when it ran (beside the original's check), else run here."""
    from reducer.iree import cut, localize
    from reducer.iree.oracles.mismatch import MismatchOracle

    assert isinstance(oracle, MismatchOracle)
    basename = os.path.basename(settings.input) if settings.text is None else "input.mlir"
    traces = traced.result() if traced is not None else None
    if executor.expired():  # a traced run cut off at --max-time's end is no timeout to report
        raise Stopped("--max-time reached")
    if not isinstance(traces, localize.Traces):
        traces = localize.trace(oracle, attach(text.encode()), basename, executor.expired)
    where = localize.find(traces, oracle)
    findings.workflow_checks += 1  # both sides traced: one check's work
    if where.found is None:
        findings.notes.append(f"localisation: {where.reason}; reducing the whole program")
        log.warning("%s", findings.notes[-1])
        return text, oracle
    log.info("localisation (%.1f s): %s", where.seconds, where.found.describe().replace("\n", "; "))
    try:
        done = cut.cut(oracle, attach(text.encode()), basename, where.found, executor.run, executor.expired)
    except cut.NotCut as exc:
        findings.workflow_checks += exc.checks
        findings.notes.append(f"localised to {where.found.name}, but {exc}; reducing the whole program")
        log.warning("%s", findings.notes[-1])
        return text, oracle
    findings.workflow_checks += done.checks  # the cut program's check (or two)
    findings.localized = where.found.summary()
    findings.notes.append(
        f"localised to dispatch #{where.found.index} {where.found.name} ({where.found.kind}); "
        "reducing it alone, fed the tensors it read in the traced run"
    )
    log.info("%s", findings.notes[-1])
    return done.text, done.oracle


def ops_summary(result: Any) -> str:
    """The summary's ops: 'N -> R ops, ', or for a mismatch cut down to one dispatch 'model
    N ops, cut at dispatch #k to M ops, reduced to R ops; ' (the engine started from the cut)."""
    original, final, where = result.stats.original, result.stats.final, result.findings.localized
    if original.ops is None or final.ops is None:  # a program not read as MLIR: its bytes say it
        return ""
    model = result.input_size.ops if result.input_size is not None else None
    if result.findings.pass_level is not None and model is not None:
        return f"model {model} ops, the failing pass's reproducer {original.ops} ops, reduced to {final.ops} ops; "
    if where is None or model is None:
        return f"{original.ops} -> {final.ops} ops, "
    return f"model {model} ops, cut at dispatch #{where['index']} to {original.ops} ops, reduced to {final.ops} ops; "


@attrs.define
class After:
    """What the steps after the reduction changed: the text, the oracle, their checks."""

    text: str
    oracle: Oracle
    checks: int = 0


def after(settings: Settings, mode: str, text: str, oracle: Oracle, findings: Findings, executor: Executor) -> After:
    """--reduce-flags, then --for-upstream: each step is kept only while still interesting."""
    done = After(text, oracle)
    if settings.reduce_flags and oracle.commands:
        from reducer.iree.flags import reduce_flags

        flags = reduce_flags(oracle, text.encode(), executor)
        done.checks += flags.checks
        done.oracle = flags.oracle
        findings.flags_removed = list(flags.removed)
        if flags.removed:
            log.info("flags: %d not needed: %s", len(flags.removed), ", ".join(flags.removed))
    if settings.for_upstream and mode == "mlir":
        judge = repeated(done.oracle, settings.repeat)

        def interesting(candidate: str) -> bool:
            done.checks += 1
            return executor.run(candidate.encode(), judge).interesting

        from reducer.iree import upstream

        done.text, steps = upstream.clean(done.text, interesting)
        findings.for_upstream = steps
        log.info("for upstream: %s", ", ".join(steps) or "nothing could be changed")
    return done


def repeated(oracle: Oracle, times: int) -> Oracle:
    """--repeat N: a candidate counts only if the check passes it N times in a row."""
    from reducer.core.oracle import RepeatOracle

    return RepeatOracle(oracle, times) if times > 1 else oracle


def reduces_flags(settings: Settings, oracle: Oracle | None) -> bool:
    """Whether `after` will check programs of its own for the flags."""
    return settings.reduce_flags and oracle is not None and bool(oracle.commands)


#: What calibration and the timeout set in an oracle: data, not what it runs.
_CALIBRATED = ("timeout", "expected")


def _triage_flags() -> set[str]:
    """The flags `before` adds to a compile command (phases.limit, start_from_dump,
    dispatch.isolate) and a replay's (replay_command): a recorded command may carry these, and only these, beyond the user's."""
    from reducer.iree.oracles.replay import NO_THREADS
    from reducer.iree.phases import PHASES

    return {"--compile-mode=hal-executable", NO_THREADS} | {
        f"--compile-{w}={p}" for w in ("to", "from") for p in PHASES
    }


def untriaged(oracle: Oracle) -> Oracle | str:
    """The oracle as `wiring.make_oracle` builds it, before the original calibrated it and
    the triage added flags to its commands; else (a str) what in it neither does."""
    from reducer.iree.oracles.command import Command

    cls: Any = type(oracle)  # every oracle is an attrs class; the abstract base cannot say so
    if not attrs.has(cls):
        return oracle
    changes: dict[str, object] = {}
    for field in attrs.fields(cls):
        value = getattr(oracle, field.name)
        if not field.init:
            continue
        if field.name in _CALIBRATED:
            changes[field.alias] = None
        elif isinstance(value, Command):
            added = [flag for flag in value.extra if flag not in _triage_flags()]
            if added:
                return f"its {field.name} command carries {' '.join(added)}, which no triage step adds"
            changes[field.alias] = attrs.evolve(value, extra=())
        elif isinstance(value, Oracle):
            inner = untriaged(value)
            if isinstance(inner, str):
                return inner
            changes[field.alias] = inner
    return cast(Oracle, attrs.evolve(cast(Any, oracle), **changes))


def differs(recorded: Oracle, built: Oracle) -> str | None:
    """What makes a recorded oracle another than the one this command builds, in the
    user's words; None when it is the same one, calibrated and triaged."""
    was, now = untriaged(recorded), untriaged(built)
    if isinstance(was, str) or isinstance(now, str):
        return was if isinstance(was, str) else str(now)
    if was == now:
        return None
    cls: Any = type(was)
    if cls is not type(now) or not attrs.has(cls):
        return f"its check is {_kind(was)}, this command's {_kind(now)}"
    for field in attrs.fields(cls):
        a, b = getattr(was, field.name), getattr(now, field.name)
        if a != b and field.name == "given":  # --inputs' arrays, as bytes: which one, not its bytes
            k = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            count = f"{len(a)} then, {len(b)} now" if len(a) != len(b) else f"array {k + 1} of {len(b)} differs"
            return f"--inputs gives other arrays than the recorded run's ({count})"
        if a != b:
            return f"its {field.name} is {_show(a)}, this command's {_show(b)}"
    return "its check is another"  # pragma: no cover - attrs equality is by the fields


def _kind(oracle: Oracle) -> str:
    return f"a {getattr(oracle, 'kind', type(oracle).__name__)} oracle"


def _show(value: object) -> str:
    from reducer.iree.oracles.command import Command

    shown = repr(value.shell() if isinstance(value, Command) else value)
    return shown if len(shown) <= 120 else shown[:117] + "..."
