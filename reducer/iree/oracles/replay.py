"""Interesting while replaying a pass pipeline with iree-opt fails the way the original
replay failed: the oracle of a crash reproducer (reducer/iree/reproducer.py).

A check runs only the failing pass on the IR that entered it, a fraction of a compile.
The pipeline comes from the settings (the input's `mlir_reproducer` resource, or the
reproducer iree-compile wrote for --pass-level); this oracle only runs the command, and
judges it as the compile-failure oracle does, slippage guard included.
"""

from __future__ import annotations

import re
import shlex
from typing import ClassVar

import attrs

from reducer.core.oracle import Verdict
from reducer.iree import signature
from reducer.iree.oracles.command import Command
from reducer.iree.oracles.compile import CompileOracle

PIPELINE_FLAG = "--pass-pipeline="
NO_THREADS = "--mlir-disable-threading"
#: What iree-opt says when a pipeline names a pass it does not have (iree-compile's full
#: reproducers name its 'iree-op-pipeline-adaptor', which only iree-compile registers).
UNREGISTERED = "does not refer to a registered pass"


def replay_command(pipeline: str, tool: str = "iree-opt") -> Command:
    """The lit-style command: the pipeline on the candidate, threads off as the
    reproducer's replay runs it (an extra: flag reduction keeps it)."""
    return Command((tool, PIPELINE_FLAG + pipeline, "{input}", "-o", "/dev/null"), (NO_THREADS,))


@attrs.frozen
class ReplayOracle(CompileOracle):
    kind: ClassVar[str] = "pass-replay"

    @classmethod
    def of(
        cls, pipeline: str, basename: str, timeout: float | None, tool: str = "iree-opt", **options: object
    ) -> ReplayOracle:
        return cls(replay_command(pipeline, tool), basename, timeout, **options)  # type: ignore[arg-type]

    def pipeline(self) -> str | None:
        """The pipeline the command replays now (flag reduction may have shortened it)."""
        return next((a[len(PIPELINE_FLAG) :] for a in self.command.argv if a.startswith(PIPELINE_FLAG)), None)

    def judge(self, sig: signature.Signature, stderr: str, timed_out: bool = False) -> str:
        if UNREGISTERED in stderr:
            return "not replayable"
        return super().judge(sig, stderr, timed_out)

    def reproducer(self, path: str) -> str:
        """As a lit test's RUN line reads: --pass-pipeline='...' rather than the whole word quoted."""
        words = []
        for a in (*self.command.argv, *self.command.extra):
            a = a.replace("{input}", path).replace("{output}", "/dev/null")
            if a.startswith(PIPELINE_FLAG):
                words.append(PIPELINE_FLAG + shlex.quote(a[len(PIPELINE_FLAG) :]))
            else:
                words.append(shlex.quote(a))
        return " ".join(words)

    def why_not(self, verdict: Verdict) -> str:
        if verdict.outcome == "not replayable":
            named = re.search(rf"'([^']+)' {UNREGISTERED}", verdict.stderr_tail)
            return f"{repr(named.group(1)) if named else 'a pass'} in its pipeline {UNREGISTERED} of iree-opt"
        return super().why_not(verdict)
