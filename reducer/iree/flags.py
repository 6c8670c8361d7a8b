"""Flag and pass-pipeline reduction: keep only the compiler flags (and the passes of a
--pass-pipeline) without which the failure disappears.

No MLIR reducer does this; DuoReduce shows that the pass list matters as much as the
IR. Flags are few, so
this is one-at-a-time removal to a fixpoint; the removals of a round are judged in
parallel and the first success in flag order wins, so any -j gives the same result.
"""

from __future__ import annotations

import logging
import re

import attrs

from reducer.core.executor import Executor
from reducer.core.oracle import Oracle
from reducer.iree.oracles.command import Command

log = logging.getLogger(__name__)


@attrs.frozen
class FlagResult:
    oracle: Oracle
    removed: tuple[str, ...]
    checks: int


def _pipeline_variants(flag: str) -> list[str]:
    """The pipeline with one pass (a leaf, with its options) removed, for each pass."""
    name, _, pipeline = flag.partition("=")
    out = []
    for m in re.finditer(r"[\w.-]+(?:\{[^}]*\})?(?=[,)]|$)", pipeline):
        start, end = m.span()
        if pipeline[:start].count("{") > pipeline[:start].count("}"):
            continue  # inside a pass's options
        before, after = pipeline[:start], pipeline[end:]
        if after.startswith(","):
            after = after[1:]
        elif before.endswith(","):
            before = before[:-1]
        elif before.endswith("("):  # the only pass of a nest: drop the nest
            continue
        if m.group(0).startswith(("builtin.module", "func.func", "util.func")) and after.startswith("("):
            continue  # an anchor, not a pass
        out.append(f"{name}={before}{after}")
    return out


def reduce_flags(oracle: Oracle, data: bytes, executor: Executor) -> FlagResult:
    """Remove flags from every command of the oracle (its `commands` fields) while the
    candidate stays interesting."""
    removed: list[str] = []
    checks = 0
    for side, field in zip("ab", oracle.commands):
        while True:
            command: Command | None = getattr(oracle, field)
            if command is None:
                break
            tries: list[tuple[str, Command]] = [(command.argv[i], command.without([i])) for i in command.flags()]
            for i in command.flags():
                if command.argv[i].startswith("--pass-pipeline="):
                    for variant in _pipeline_variants(command.argv[i]):
                        argv = list(command.argv)
                        argv[i] = variant
                        tries.append(
                            (f"a pass of {command.argv[i]} (now {variant})", attrs.evolve(command, argv=tuple(argv)))
                        )
            found = _first_interesting(oracle, field, tries, data, executor)
            checks += found[1]
            if found[0] is None:
                break
            what, oracle = found[0]
            removed.append(what if len(oracle.commands) == 1 else f"{what} (side {side})")  # a flag both had twice
            log.info("flags: still interesting without %s", what)
    return FlagResult(oracle, tuple(removed), checks)


def _first_interesting(
    oracle: Oracle, field: str, tries: list[tuple[str, Command]], data: bytes, executor: Executor
) -> tuple[tuple[str, Oracle] | None, int]:
    """The first try (in order) that stays interesting. All are submitted at once and read
    in order; the ones after the first interesting one are cancelled."""
    # Oracles with commands are attrs classes; the abstract base cannot say so.
    candidates = [(what, attrs.evolve(oracle, **{field: cmd})) for what, cmd in tries]  # type: ignore[misc]
    futures = [executor.submit(data, candidate) for _, candidate in candidates]
    try:
        for checks, ((what, candidate), future) in enumerate(zip(candidates, futures), 1):
            if executor.result(future).interesting:
                return (what, candidate), checks
        return None, len(futures)
    finally:
        for future in futures:
            executor.cancel(future)
