"""The odds speculation gives a candidate's success.

Speculation spends idle workers on the candidates most likely to be needed, and reads
"needed" off these odds: a trial is needed if every pending trial before it in its
sweep fails, and the sweep on the program a pending trial would commit is needed if
it succeeds. So the odds decide where the look-ahead goes, never what is committed.

They are two constants, chosen by measurement (`benchmarks/speculation.py`: five cases
in virtual time, each check 1 s):

* A candidate that repeats a failure (the same chunk as one that failed, one holding an
  edit that failed alone, or one holding every edit left of a chunk that failed earlier
  in its sweep: see the engine's `_again`) mostly fails again: 0.1.
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
"""

from __future__ import annotations

#: The odds of a candidate that does not repeat a failure.
FRESH = 0.7
#: The odds of a candidate that repeats one.
AGAIN = 0.1


def odds(again: bool) -> float:
    """The chance speculation assumes a candidate has of being interesting."""
    return AGAIN if again else FRESH
