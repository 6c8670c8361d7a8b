"""The engine's counters: per strategy, and for the whole run (`--stats-json` dumps them).

Their own module because the parts of the engine share them: the decisions and the
checks (`checks.py`) add to them, and progress reports read them while the run goes on.
"""

from __future__ import annotations

import collections

import attrs

from reducer.core.workspace import Size


@attrs.define
class StrategyStats:
    candidates: int = 0  # subsets materialised by the decisions
    rejected: collections.Counter[str] = attrs.field(factory=collections.Counter)  # never reached the oracle
    oracle_calls: int = 0  # checks submitted (speculative ones included)
    cache_hits: int = 0
    judged: int = 0  # verdicts the decisions read: the same for any -j
    accepts: int = 0
    bytes_saved: int = 0
    ops_saved: int = 0

    def benefit(self) -> float:
        return self.bytes_saved / max(self.judged, 1)


@attrs.define
class RunStats:
    original: Size
    final: Size
    oracle_calls: int = 0
    cache_hits: int = 0
    timeouts: int = 0
    rounds: int = 0
    #: Judged candidates by the oracle's reason: interesting, not interesting, different bug, ...
    outcomes: collections.Counter[str] = attrs.field(factory=collections.Counter)
    moves_tried: int = 0  # move candidates judged
    moves_kept: int = 0  # moves after which reducing ended smaller than before them
    #: Main-process time in the engine not blocked on a check: listing edits, applying,
    #: verifying, printing, hashing, forking and committing programs, writing the output.
    engine_seconds: float = 0.0
    wait_seconds: float = 0.0  # blocked on the oracle (idle while checks run)
    wasted_checks: int = 0  # speculative checks whose verdict no decision read
    early_rechecks: int = 0  # the caller's final re-checks started early (of programs that then stayed final or not)
    cancelled_checks: int = 0  # of those, stopped (or never started) once a commit made them obsolete
    busy_seconds: float = 0.0  # worker-seconds spent in checks (early final re-checks included)
    workers: int = 1
    utilisation: float = 0.0  # busy_seconds / (workers x wall)
    lost_workers: int = 0  # worker processes that died under a check (each check retried once)
    killed_workers: list[str] = attrs.field(factory=list)  # candidates (key prefixes) that killed their worker twice
    running: int = 0  # checks in flight right now
    strategy: str = ""  # the strategy the engine is on
    per_strategy: dict[str, StrategyStats] = attrs.field(factory=dict)

    @property
    def judged(self) -> int:
        """Verdicts the decisions read, over every strategy: the same for any -j."""
        return sum(s.judged for s in list(self.per_strategy.values()))
