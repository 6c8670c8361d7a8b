"""Dispatch isolation (shared/seeds/compile-time-regressions.md, "executable sources";
model-development-debugging.md, "executable substitution").

For a failure in code generation, the program around the failing dispatch is noise:
dump every executable's source, compile each one alone with --compile-mode=hal-executable,
and keep the one(s) that fail the way the whole program did. Reducing that one source
is far cheaper than reducing the program: each check compiles one executable.
"""

from __future__ import annotations

import logging
import os
import re
import time

import attrs

from reducer.core import codec
from reducer.core.executor import Executor
from reducer.core.rundirs import scratch_dir
from reducer.iree.oracles.compile import CompileOracle

log = logging.getLogger(__name__)


@codec.record("text")
@attrs.frozen
class Isolated:
    """What isolation found; `failing` is empty when no executable fails alone."""

    name: str  # the executable source's file name, e.g. module_main_dispatch_0.mlir
    text: str
    oracle: CompileOracle  # compiles an executable source alone
    failing: tuple[str, ...]  # every executable that fails the same way
    executables: int  # how many were dumped
    checks: int
    seconds: float


def _natural(name: str) -> list[object]:
    """dispatch_9 before dispatch_88, as a person reads them."""
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name)]


def compiled_alone(oracle: CompileOracle) -> CompileOracle:
    """The oracle's compile, of one dumped executable source on its own."""
    return oracle.with_command(oracle.command.plus("--compile-mode=hal-executable"))


def isolate(oracle: CompileOracle, data: bytes, executor: Executor) -> Isolated:
    """The first (by name) executable that fails alone the way the program fails. The dump
    runs here (its files are read here); the executables are checked on the executor."""
    start = time.monotonic()
    with scratch_dir("ireereduce-sources-") as out:
        dumping = oracle.with_command(
            oracle.command.plus(f"--iree-hal-dump-executable-sources-to={out}", "--compile-to=executable-sources")
        )
        dumping.run(data, executor.expired)  # Cancelled at --max-time's end
        names = sorted((n for n in os.listdir(out) if n.endswith(".mlir")), key=_natural)
        sources = {}
        for n in names:
            with open(os.path.join(out, n)) as f:
                sources[n] = f.read()
    alone = compiled_alone(oracle)
    verdicts = executor.map([sources[n].encode() for n in names], alone)
    failing = tuple(n for n, v in zip(names, verdicts) if v.interesting)
    for n, v in zip(names, verdicts):
        log.info("dispatch isolation: %s alone: %s", n, v.outcome)
    if not sources:
        log.warning(
            "iree-compile dumped no executable sources (the failure comes before them); reducing the whole program"
        )
    elif not failing:
        log.warning(
            "no executable fails alone the way the program does (%d tried); reducing the whole program", len(names)
        )
    first = failing[0] if failing else ""
    return Isolated(first, sources.get(first, ""), alone, failing, len(names), 1 + len(names), time.monotonic() - start)
