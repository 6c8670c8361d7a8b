"""The caller's final re-checks, started early on idle workers.

Once the engine is done, the caller checks the final program again (`wanted` times, on an
executor that never answers from a record) before it trusts it. Near the end of a run
most workers are idle, so speculation starts those re-checks as soon as a program is the
likeliest final one (`speculation.py` says when); `Confirmations` keeps them, by program,
and hands over those of the program the caller asks about (`hand_over`). The others are
cancelled: a commit that leaves a program, or a failure read on the trial that would
have made it, ends its re-checks.

A program may get re-checks while its own check is still pending (its trial the last
candidate of the run, say): it **stands by** with the odds it was given of being final.
Such re-checks give way to a likelier check when every worker is busy, and stop once the
program's check, or that of a trial it follows from, comes back as a failure.
"""

from __future__ import annotations

import concurrent.futures

from reducer.core.cache import key
from reducer.core.checks import Checks
from reducer.core.executor import Executor
from reducer.core.oracle import Verdict
from reducer.core.trials import Branch, Trial
from reducer.core.workspace import Workspace


class Confirmations:
    """The early re-checks, by program (the key of its text)."""

    def __init__(self, wanted: int, executor: Executor, checks: Checks) -> None:
        self.wanted = wanted  # re-checks the caller makes of the final program (0: none start early)
        self.executor = executor  # where they run: never one that answers from a record
        self.checks = checks  # program keys, the oracle, and the verdicts of standing-by programs
        #: Reducing from a move, which is mostly undone: no re-checks start, and those of
        #: the program before it go on through the commits after the move.
        self.held = False
        self.started: dict[bytes, list[concurrent.futures.Future[Verdict]]] = {}
        #: Programs re-checked while their own check is pending: the trial that made each
        #: and the odds it was then given of being final.
        self.standby: dict[bytes, tuple[Trial, float]] = {}
        self.count = 0  # re-checks started
        self.cancelled = 0  # re-checks cancelled before they ran (not the engine's wasted checks)

    def start(self, branch: Branch, odds: float = 1.0) -> None:
        """Start one more re-check of branch's program (`odds`: of it being final)."""
        program = self.checks.program_key(branch.ws)
        if branch.parent is not None and branch.parent.verdict is None:
            self.standby[program] = (branch.parent, odds)
        started = self.started.setdefault(program, [])
        started.append(self.executor.submit(branch.ws.program.text.encode(), self.checks.oracle))
        self.count += 1

    def lacking(self, ws: Workspace) -> int:
        """How many re-checks ws's program still lacks."""
        return self.wanted - len(self.started.get(self.checks.program_key(ws), ()))

    def running(self) -> int:
        """Workers holding a re-check."""
        return sum(not f.done() for fs in self.started.values() for f in fs)

    def hand_over(self, data: bytes) -> list[concurrent.futures.Future[Verdict]]:
        """The re-checks of data already started (in order); the others are cancelled.
        The caller reads or cancels them."""
        program = key(data)
        started = self.started.pop(program, [])
        self.standby.pop(program, None)
        self.stop(keep=set())
        return started

    def stop(self, keep: set[bytes]) -> None:
        """Cancel the re-checks of programs other than those in keep."""
        for program in [p for p in self.started if p not in keep]:
            self.standby.pop(program, None)
            for future in self.started.pop(program):
                self.executor.cancel(future)
                self.cancelled += future.cancelled()

    def drop(self, programs: set[bytes]) -> None:
        """Cancel the re-checks of these programs."""
        self.stop(keep=set(self.started) - programs)

    # -- standing by -------------------------------------------------------------------
    def standing_by(self, below: float) -> list[bytes]:
        """The programs whose re-checks run while their own check is pending, given lower
        odds of being final than `below`: a check that likely takes their workers."""
        return [
            k
            for k, (trial, odds) in self.standby.items()
            if trial.verdict is None and odds < below and any(not f.done() for f in self.started.get(k, ()))
        ]

    def give_way(self, below: float) -> None:
        """Cancel the running re-checks of the program standing by with the lowest odds
        below `below` (those that finished keep their verdicts)."""
        for k in sorted(self.standing_by(below), key=lambda k: self.standby[k][1])[:1]:
            futures = self.started[k]
            self.drop({k})
            finished = [f for f in futures if f.done() and not f.cancelled()]
            if finished:
                self.started[k] = finished

    def drop_failed(self) -> None:
        """Stop the re-checks of programs whose own check was read, or came back, as a
        failure (a decision may not have reached it yet), and forget the entries of
        programs whose verdict is known: their trials hold whole branches."""
        for k, (trial, _odds) in list(self.standby.items()):
            failed = False
            up: Trial | None = trial
            while up is not None and not failed:  # it, or a trial whose success it follows
                up.resolve(self.checks.cache)
                failed = up.verdict is False
                up = up.branch.parent if up.branch is not None else None
            if trial.verdict is not None or failed:
                del self.standby[k]
                if failed and k in self.started:
                    self.drop({k})
