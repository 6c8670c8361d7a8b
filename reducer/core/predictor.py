"""The odds speculation gives a candidate's success, and the verdicts they are read from.

Speculation spends idle workers on the candidates most likely to be needed, and reads
"needed" off these odds: a trial is needed if every pending trial before it in its
sweep fails, and the sweep on the program a pending trial would commit is needed if
it succeeds. So the odds decide where the look-ahead goes, never what is committed.
`Failures` remembers the chunks the decisions read as failures, to tell a repeat.

They are two constants, chosen by measurement (`benchmarks/speculation.py`: five cases
in virtual time, each check 1 s):

* A candidate that repeats a failure (the same chunk as one that failed, one holding an
  edit that failed alone, or one holding every edit left of a chunk that failed earlier
  in its sweep: `Failures.repeats` below) mostly fails again: 0.1.
* Any other candidate: 0.7, though fewer than half of them succeed. Until 7150c69 the
  odds were learnt from the run's verdicts (a success rate per strategy, chunk size and
  previous verdict, Beta-smoothed level by level). Those rates were right on average,
  yet on that engine a flat 0.7 for every candidate steered speculation better at every
  worker count, and a flat 0.5 no worse than the learnt rates
  (`benchmarks/results/speculation-4a8fa15.json`, geometric mean of the five cases, time
  against one worker, at 2 / 4 / 8 / 16 workers: learnt 0.64x / 0.46x / 0.33x / 0.27x,
  flat 0.5 0.69x / 0.46x / 0.32x / 0.27x, flat 0.7 0.60x / 0.38x / 0.29x / 0.26x). In
  experiments, blending any share of the learnt rate into 0.7 made it slower, and 0.6
  to 0.8 did about as well. Leaning towards success keeps the sweep a commit opens
  covered: a run of commits, each needing the next program's first verdicts, is where a
  miss costs a whole check time. With these odds, repeats followed through commits and
  the other changes of 7150c69: 0.58x / 0.35x / 0.26x / 0.23x (`speculation.json`).

Since issue 31, the 0.7 is where a strategy starts, worth `PRIOR_WEIGHT` verdicts: each
fresh verdict the decisions read moves that strategy's odds towards its own success rate
in the run (`Rates`). One rate per strategy, not per candidate kind: forward-operands,
say, mostly fails on the programs it meets and values-to-return mostly succeeds, while a
strategy's candidates are alike. On the five cases and seven of the corpus's (replayed
from their recorded verdicts), geometric mean at 2 / 4 / 8 / 16 workers: the constants
alone 0.62x / 0.41x / 0.32x / 0.27x, with the rates 0.61x / 0.40x / 0.30x / 0.27x
(`results/speculation-predictors.json`). Measured there too and not taken: ProbDD's
probability per edit (followed through commits by lineage, raised by each failed chunk
holding it), 0.63x / 0.42x / 0.32x / 0.27x. What stays out of reach is the perfect
predictor's 0.11x at 16 workers: most of the gap is between two halves of a chunk, where
nothing the run has read says which one holds what the check needs.
"""

from __future__ import annotations

import collections

import attrs

from reducer.core.trials import Trial

#: The odds of a candidate that does not repeat a failure.
FRESH = 0.7
#: The odds of a candidate that repeats one.
AGAIN = 0.1
#: How many verdicts FRESH counts for against a strategy's own verdicts (`Rates`).
PRIOR_WEIGHT = 8


def odds(again: bool) -> float:
    """The chance speculation assumes a candidate has of being interesting, before any
    verdict of its strategy was read."""
    return AGAIN if again else FRESH


@attrs.define
class Rates:
    """Each strategy's fresh verdicts the decisions read (candidates that repeat no
    failure, moves aside): its odds start at FRESH and lean towards its success rate."""

    #: strategy name -> [verdicts read, of which interesting]
    read: dict[str, list[int]] = attrs.field(factory=dict)

    def record(self, trial: Trial, interesting: bool) -> None:
        counts = self.read.setdefault(trial.strategy.name, [0, 0])
        counts[0] += 1
        counts[1] += interesting

    def odds(self, trial: Trial) -> float:
        n, hits = self.read.get(trial.strategy.name, (0, 0))
        return (hits + PRIOR_WEIGHT * FRESH) / (n + PRIOR_WEIGHT)


@attrs.define
class Failures:
    """The chunks the decisions read as failures: which trials repeat one. A hint for the
    odds, never a decision (an edit names its place only on the program it was listed
    on, and the round after a commit lists mostly the same edits)."""

    #: Hashes of the chunks (strategy, edits) that failed, on any program.
    chunks: set[int] = attrs.field(factory=set)
    #: Failed chunks by lineage (`trials.Lineages`), indexed by each member; a round
    #: lists every strategy's edits afresh (`new_round`).
    by_lineage: collections.defaultdict[int, list[frozenset[int]]] = attrs.field(
        factory=lambda: collections.defaultdict(list)
    )
    read: int = 0  # failures the decisions have read: a repeat can only become one

    def record(self, trial: Trial) -> None:
        """A decision read trial's verdict: not interesting."""
        self.read += 1
        self.chunks.add(hash(trial.identity))
        chunk = frozenset(trial.lineage[trial.offset : trial.offset + trial.chunk])
        for member in chunk:
            self.by_lineage[member].append(chunk)

    def new_round(self) -> None:
        self.by_lineage.clear()

    def repeats(self, trial: Trial) -> bool:
        """Whether trial repeats a failure: the same chunk, one of its edits alone, or
        every edit left of a chunk that failed earlier in the sweep (`_implied`). Worked
        out again when a failure was read since (a repeat stays one)."""
        if trial.again is None or (not trial.again and trial.again_at != self.read):
            name = trial.strategy.name
            trial.again = (
                hash(trial.identity) in self.chunks
                or any(hash((name, (edit,))) in self.chunks for edit in trial.chunk_edits)
                or self._implied(trial)
            )
            trial.again_at = self.read
        return trial.again

    def _implied(self, trial: Trial) -> bool:
        """Whether trial's chunk holds every edit left of a chunk that failed earlier in
        the sweep: under ddmin's assumption (removing more than a failure fails too) it
        fails as well. Edits are followed through commits by their place in the list."""
        chunk = trial.lineage[trial.offset : trial.offset + trial.chunk]
        failed = {id(f): f for member in chunk for f in self.by_lineage.get(member, ())}
        if not failed:
            return False
        outside = set(trial.lineage).difference(chunk)  # the edits left outside the chunk
        return any(f.isdisjoint(outside) for f in failed.values())
