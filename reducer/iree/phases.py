"""Phase-aware compiling (shared/seeds/developer-tips.md, "Compiling phase by phase").

A failure in phase P also shows with --compile-to=P, which skips every later phase, so
candidates that compile past P are judged sooner. Binary search over the phases finds P in about four
compiles, each stopped early. Optionally the reduction starts from the IR dumped after
the phase before P (--dump-compilation-phases-to), compiled with --compile-from: what
earlier phases did (inlining, constant folding, fusion) is then already done.
"""

from __future__ import annotations

import glob
import logging
import os

import attrs

from reducer.core.executor import Executor
from reducer.core.rundirs import scratch_dir
from reducer.iree.oracles.compile import CompileOracle

log = logging.getLogger(__name__)

#: iree-compile's --compile-to / --compile-from phases, in pipeline order.
PHASES = (
    "input",
    "abi",
    "preprocessing",
    "global-optimization",
    "dispatch-creation",
    "flow",
    "stream",
    "executable-sources",
    "executable-configurations",
    "executable-targets",
    "hal",
    "vm",
)


@attrs.frozen
class PhaseSearch:
    phase: str | None  # the first phase whose --compile-to shows the failure; None: only the full compile
    checks: int

    def worth_it(self) -> bool:
        """Stopping at the phase pays when it skips code generation. A failing compile
        stops at its phase anyway; the savings are on candidates that compile, which
        otherwise go on through codegen. Stopping after codegen saves nothing: printing
        the IR with the serialized executables as text costs more than the hal and vm
        phases it skips (measured: benchmarks/README.md)."""
        return self.phase is not None and PHASES.index(self.phase) < PHASES.index("executable-targets")


def applicable(oracle: CompileOracle) -> bool:
    cmd = oracle.command
    return cmd.is_iree_compile() and not any(
        cmd.has_flag(f) for f in ("--compile-to", "--compile-from", "--compile-mode", "--dump-compilation-phases-to")
    )


def limit(oracle: CompileOracle, phase: str) -> CompileOracle:
    return oracle.with_command(oracle.command.plus(f"--compile-to={phase}"))


def first_failing_phase(oracle: CompileOracle, data: bytes, executor: Executor) -> PhaseSearch:
    """Binary search: failing is monotone in the phase (a failure in P stops P and all after it)."""
    lo, hi = 0, len(PHASES)  # PHASES[hi] == "the full compile", known to fail
    checks = 0
    while lo < hi:
        mid = (lo + hi) // 2
        verdict = executor.run(data, limit(oracle, PHASES[mid]))
        checks += 1
        log.info("phase search: --compile-to=%s: %s (%.1f s)", PHASES[mid], verdict.outcome, verdict.seconds)
        if verdict.interesting:
            hi = mid
        else:
            lo = mid + 1
    return PhaseSearch(PHASES[hi] if hi < len(PHASES) else None, checks)


def start_from_dump(
    oracle: CompileOracle, data: bytes, basename: str, phase: str, executor: Executor
) -> tuple[str, CompileOracle] | None:
    """The IR after the phase before `phase`, and the oracle that compiles it from there;
    None when there is no earlier phase or the dumped IR does not fail the same way."""
    i = PHASES.index(phase)
    if i == 0:
        return None
    before = PHASES[i - 1]
    with scratch_dir("ireereduce-phases-") as out:
        dumping = oracle.with_command(
            oracle.command.plus(f"--dump-compilation-phases-to={out}", f"--compile-to={before}")
        )
        dumping.run(data, executor.expired)  # Cancelled at --max-time's end
        found = glob.glob(os.path.join(out, f"*.{before}.mlir"))
        if not found:
            log.warning("iree-compile dumped no IR for phase %s; reducing the input as given", before)
            return None
        with open(found[0]) as f:
            text = f.read()
    resumed = oracle.with_command(oracle.command.plus(f"--compile-from={before}", f"--compile-to={phase}"))
    verdict = executor.run(text.encode(), resumed)
    if not verdict.interesting:
        log.warning(
            "the IR dumped after %s does not fail the same way (%s); reducing the input as given",
            before,
            verdict.outcome,
        )
        return None
    return text, resumed
