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
* Any other candidate: 0.7, though fewer than half of them succeed. Until this module
  said so, the odds were learnt from the run's verdicts (a success rate per strategy,
  chunk size and previous verdict, Beta-smoothed level by level). Those rates were right
  on average, yet speculation steered by them was slower than by a flat 0.7 at every
  worker count (geometric mean of the five cases, time vs one worker: 2 workers 0.62x
  against 0.59x, 4: 0.45x against 0.36x, 8: 0.34x against 0.28x, 16: 0.27x against
  0.24x), and blending any share of them back in made it slower. A flat 0.5 did worse
  than 0.7 (4: 0.44x, 8: 0.32x), 0.6 and 0.8 about as well. Leaning towards success keeps
  the sweep a commit opens covered: a run of commits, each needing the next program's
  first verdicts, is where a miss costs a whole check time.
"""

from __future__ import annotations

#: The odds of a candidate that does not repeat a failure.
FRESH = 0.7
#: The odds of a candidate that repeats one.
AGAIN = 0.1


def odds(again: bool) -> float:
    """The chance speculation assumes a candidate has of being interesting."""
    return AGAIN if again else FRESH
