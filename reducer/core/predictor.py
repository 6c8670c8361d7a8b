"""How likely a candidate is to be interesting, learnt from the verdicts of this run.

Speculation spends idle workers on the candidates the engine will most likely need,
so its speedup rests on how sharp this guess is: with every guess at 50%, 8 workers
cover only three decisions ahead. A run's verdicts are far from coin flips. Big chunks
of a strategy fail where single edits pass (ProbDD's observation: a chunk survives only
if every edit in it could go), and a sweep that just cut something tends to fail next
at the same place, or the other way round.

So the guess is a success rate counted at four levels, each smoothed towards the one
above it (a hierarchical Beta prior, as Laplace smoothing with backoff): the whole run,
the strategy, the strategy at this chunk size (powers of two), and that with whether
the decision before succeeded. It only steers speculation: what the engine commits
never depends on it.

A candidate that repeats a failure (the same edits as a chunk that failed, or holding an
edit that failed alone, on an earlier program) is counted apart, from its own start: the
round after a commit lists most of the edits of the round before, and they mostly fail
again. Rates learnt on fresh edits say nothing about those, and guessing them at the
strategy's rate sent speculation down branches a decision never reached.
"""

from __future__ import annotations

import collections

import attrs

#: How many verdicts a level's parent counts as (the smoothing weight).
PRIOR_WEIGHT = 2.0
#: The run's rate before any verdict (most candidates of a fresh run fail).
START = 1 / 3
#: The rate of a repeated failure before any such verdict: it mostly fails again.
START_AGAIN = 0.1


def size_class(chunk: int) -> int:
    """Chunks of 1, 2-3, 4-7, ... edits are alike."""
    return max(chunk, 1).bit_length()


@attrs.define
class SuccessModel:
    """Counts (successes, verdicts) per level; `p` reads them, `record` adds one."""

    _counts: collections.defaultdict[tuple[object, ...], list[int]] = attrs.field(
        factory=lambda: collections.defaultdict(lambda: [0, 0])
    )

    @staticmethod
    def _levels(strategy: str, chunk: int, after_success: bool, again: bool) -> list[tuple[object, ...]]:
        if again:
            return [("again",), ("again", strategy)]
        size = size_class(chunk)
        return [(), (strategy,), (strategy, size), (strategy, size, after_success)]

    def p(self, strategy: str, chunk: int, after_success: bool, again: bool = False) -> float:
        """The chance of success; `again`: the candidate repeats a failure (see above)."""
        rate = START_AGAIN if again else START
        for level in self._levels(strategy, chunk, after_success, again):
            hits, tries = self._counts.get(level, (0, 0))
            rate = (hits + PRIOR_WEIGHT * rate) / (tries + PRIOR_WEIGHT)
        return rate

    def record(self, strategy: str, chunk: int, after_success: bool, success: bool, again: bool = False) -> None:
        for level in self._levels(strategy, chunk, after_success, again):
            counts = self._counts[level]
            counts[0] += success
            counts[1] += 1
