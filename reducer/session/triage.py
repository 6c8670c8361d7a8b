"""IREE's triage steps around the reduction (shared/seeds): before it, which dispatch
and which phase fail; after it, which compiler flags the failure needs and a text
cleaned for upstream. Each only swaps the program or the oracle it is given."""

from __future__ import annotations

import logging
import os

import attrs

from reducer.core.executor import Executor
from reducer.core.oracle import Oracle
from reducer.session.settings import EXIT_USAGE, Findings, Settings, UserError

log = logging.getLogger(__name__)


def before(settings: Settings, text: str, oracle: Oracle, findings: Findings, executor: Executor) -> tuple[str, Oracle]:
    """IREE's triage steps before reducing (shared/seeds): which dispatch, which phase."""
    from reducer.iree import dispatch, phases
    from reducer.iree.oracles import CompileOracle

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
        search = phases.first_failing_phase(oracle, text.encode(), executor)
        findings.workflow_checks += search.checks
        if search.phase is not None:
            findings.phase = search.phase
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
                    limited, text.encode(), os.path.basename(settings.input), search.phase, executor
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
