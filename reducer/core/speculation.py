"""Speculation: idle workers check ahead of the decisions, which it never changes.

While the verdict a decision waits for is pending, idle workers check the candidates the
engine would need next, best-first by the probability of needing them:

* if the pending candidates fail: the rest of the sweep, then the next strategies on the
  same program;
* if a pending candidate succeeds: the sweep on the program it would produce (a forked
  workspace, its branch), which the engine adopts if it does;
* if every pending candidate fails and nothing is left to try: the re-checks the caller
  makes of the final program (`confirm.py`).

A candidate's odds of success are `predictor.py`'s: low if it repeats a failure, else
its strategy's success rate in the run so far, leaning towards success. Where a speculative branch reaches the end of a round, the next
round's order is worked out from the stats the decisions will have by then if the branch
is taken (the engine's `_assumed`). Before the run, `prime` starts the first round's
likeliest checks on the workers the caller's check of the original leaves idle. The decisions read verdicts in their own order and nothing
else, so what speculation checks changes how soon a verdict is there, never which one
is read: the output is the one a single worker would produce.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from reducer.core import predictor
from reducer.core.checks import Checks
from reducer.core.confirm import Confirmations
from reducer.core.trials import Branch, Trial

#: Speculation stops at candidates less likely than this to be needed.
MIN_PROBABILITY = 0.001
#: At most this many checks submitted ahead of the decisions in one go, per worker.
AHEAD_PER_WORKER = 4
#: Seconds of materialising (in this process) before speculation lets verdicts be read.
SPECULATION_SLICE = 0.5

#: The likeliest next piece of work: (probability, trial, branch); see `most_likely`.
Work = tuple[float, Trial | None, Branch | None]


class Speculation:
    """Fills idle workers with the checks the decisions are likeliest to need next."""

    def __init__(self, checks: Checks, confirms: Confirmations, open_branch: Callable[[Trial], Branch]) -> None:
        self.checks, self.confirms = checks, confirms
        self.open_branch = open_branch  # the branch of the program a trial would commit (the engine plans it)
        self.failures = predictor.Failures()  # what the decisions read as failures
        self.rates = predictor.Rates()  # each strategy's fresh verdicts read

    def likelihood(self, trial: Trial) -> float:
        """The odds speculation gives trial's success (reducer/core/predictor.py)."""
        return predictor.AGAIN if self.failures.repeats(trial) else self.rates.odds(trial)

    def read(self, trial: Trial) -> None:
        """A decision read trial's verdict: its strategy's rate learns it, unless trial
        repeats a failure (those have odds of their own) or is a move."""
        if not trial.grow and not self.failures.repeats(trial):
            self.rates.record(trial, bool(trial.verdict))
        if not trial.verdict:
            self.failed(trial)

    def busy(self) -> int:
        """Workers holding a check the engine started: its candidates' and its re-checks'."""
        return self.checks.running() + self.confirms.running()

    def failed(self, trial: Trial) -> None:
        """A decision read trial as a failure: remember it (the predictor's hint), and stop
        the re-checks of the programs its success would have led to."""
        if trial.success is not None and self.confirms.started:  # re-checked while idle
            self.confirms.drop({self.checks.program_key(ws) for ws in trial.success.needed()[1]})
        self.failures.record(trial)

    def prime(self, main: Branch, room: int) -> None:
        """Check what main's first trials need, on up to `room` workers, before the run
        starts: no re-checks (nothing has been checked yet)."""
        wanted, self.confirms.wanted = self.confirms.wanted, 0
        try:
            self.fill(main, room)
        finally:
            self.confirms.wanted = wanted

    def fill(self, main: Branch, room: int | None = None) -> None:
        """Fill idle workers (`room` of them, default all) with the candidates most likely
        to be needed next, main being the branch the decisions are on."""
        budget = AHEAD_PER_WORKER * self.checks.executor.workers
        until = time.monotonic() + SPECULATION_SLICE
        room = self.checks.executor.workers if room is None else room
        if self.confirms.standby:
            self.confirms.drop_failed()
        while budget > 0 and time.monotonic() < until:
            full = self.busy() >= room
            if full and not self.confirms.standby:
                return
            best = self.most_likely(main)
            if best is None:
                return
            probability, trial, branch = best
            if trial is None:  # branch's program is likely the final one
                assert branch is not None
                if full:
                    return
                self.confirms.start(branch, probability)
                continue
            if branch is None:  # the likeliest work is on the program a pending trial would commit
                trial.success = self.open_branch(trial)
                trial.success.probability = probability
                continue
            if full and not self.confirms.standing_by(probability):
                return
            inflight = self.checks.running()
            self.checks.materialise(trial, branch.ws)
            budget -= trial.key is not None
            if full and self.checks.running() > inflight:
                self.confirms.give_way(probability)

    def most_likely(self, main: Branch) -> Work | None:
        """The likeliest next piece of work: an unmaterialised trial (reached when every
        pending trial before it in its branch fails), opening the branch of a pending
        trial that may succeed (no branch in the result: open it), or one more re-check
        of a program that is final if every pending trial fails (no trial).
        That program's own check may still be pending: near the end of a run it is often
        the last candidate, and the run would end one check time after its verdict. Such
        re-checks start only where every one still missing has an idle worker (one alone
        does not shorten the run), if no trial is at least as likely to be needed and no
        program known to be interesting lacks its re-checks (the odds lean towards
        success, and the candidates of a run's last round mostly fail), and they give way
        to a likelier check when the workers are all busy (`fill`)."""
        best: Work | None = None
        pending: Work | None = None
        known = False  # a program known to be interesting lacks re-checks: those go first
        todo = [main]
        looked = 0
        while todo:
            branch = todo.pop()
            reach = branch.probability
            position = max(branch.decided, branch.settled)
            while reach >= MIN_PROBABILITY and looked < 64 * self.checks.executor.workers:
                looked += 1
                trial = branch.trial(position)
                if trial is None:
                    if self.confirm_wanted(branch):
                        known = True
                        if best is None or reach > best[0]:
                            best = (reach, None, branch)
                    elif (pending is None or reach > pending[0]) and self.confirm_wanted(branch, pending=True):
                        pending = (reach, None, branch)
                    break
                if not trial.materialised:
                    if best is None or reach > best[0]:
                        best = (reach, trial, branch)
                    break  # the trials after it are less likely still
                trial.resolve(self.checks.cache)  # a finished check is a known verdict, not a guess
                if trial.grow or trial.key is None or trial.verdict is False:
                    if position == branch.settled:  # for good: the next walk starts after it
                        branch.settled += 1
                    position += 1
                    continue
                p = 1.0 if trial.verdict else self.likelihood(trial)
                if trial.success is None:
                    if best is None or reach * p > best[0]:
                        best = (reach * p, trial, None)
                else:
                    trial.success.probability = reach * p
                    todo.append(trial.success)
                if trial.verdict:
                    break  # nothing after a success is tried on this program
                reach *= 1.0 - p
                position += 1
        if pending is not None and not known and (best is None or pending[0] > best[0]):
            return pending
        return best

    def confirm_wanted(self, branch: Branch, pending: bool = False) -> bool:
        """Whether branch's program, final if every trial on it fails, lacks a re-check:
        once it is known to be interesting; with `pending`, while its own check runs, if
        the idle workers can take every re-check it lacks."""
        verdict = None if branch.parent is None else branch.parent.verdict
        if self.confirms.held or verdict is False or (verdict is None and branch.parent is not None and not pending):
            return False
        lacking = self.confirms.lacking(branch.ws)
        if pending and verdict is None and branch.parent is not None:
            # A program on which no edit even makes a candidate to check is mostly what a
            # chunk of a whole sweep leaves (nothing), which the odds rate far too high.
            checkable = any(t.key is not None for t in branch.trials)
            return checkable and 0 < lacking <= self.checks.executor.workers - self.busy()
        return lacking > 0
