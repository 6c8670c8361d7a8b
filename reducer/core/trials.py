"""Trials and branches: the words the decisions, speculation and the re-checks share.

A **trial** is one chunk of one strategy's edits at one place of a sweep. A **branch**
is a program and the trials the sequential algorithm makes on it if every one of them
fails, listed lazily from a plan (`engine.py` writes the plans). A trial that may succeed
opens the branch of the program it would commit (`Trial.success`), so the branches form
a tree rooted at the current program: the decisions walk its main line, speculation
looks ahead on the rest.
"""

from __future__ import annotations

from collections.abc import Iterator

import attrs

from reducer.core.cache import VerdictCache
from reducer.core.strategy import Edit, Strategy
from reducer.core.workspace import Candidate, Workspace


@attrs.define(eq=False)
class Trial:
    """One chunk of edits at one place of a sweep: materialised once, judged by the cache
    or a check. It remembers where it stands, so the sweep can go on after it."""

    strategy: Strategy
    index: int  # the strategy's place in the round's order
    edits: list[Edit]  # the strategy's whole list on this program
    offset: int
    chunk: int
    lineage: tuple[int, ...] = ()  # per edit: which edit of the sweep's first list it is (see `Lineages`)
    grow: bool = False
    next_round: bool = False  # speculation only: the round a commit ends would go on with it
    ws: Workspace | None = None  # the program it was materialised on
    rejection: str = ""  # why it never reached the oracle
    candidate: Candidate | None = None
    key: bytes | None = None
    verdict: bool | None = None  # known: from a rejection, the cache or a finished check
    materialised: bool = False
    success: Branch | None = None  # the sweep on the program this trial would commit
    again: bool | None = None  # repeats a failure (predictor.py), as of `again_at` failures read
    again_at: int = -1
    branch: Branch | None = None  # the branch it is a trial of
    read: bool = False  # a decision read its verdict (it counts in the strategy's stats)

    @property
    def identity(self) -> tuple[str, tuple[Edit, ...]]:
        return (self.strategy.name, tuple(self.chunk_edits))

    @property
    def chunk_edits(self) -> list[Edit]:
        return self.edits[self.offset : self.offset + self.chunk]

    def resolve(self, cache: VerdictCache) -> None:
        """Take the verdict from the cache once a check has put it there."""
        if self.verdict is None and self.key is not None:
            self.verdict = cache.get(self.key)


@attrs.frozen
class Resume:
    """Where a sweep goes on after a trial of it commits."""

    strategy: Strategy
    index: int
    offset: int
    chunk: int
    lineage: tuple[int, ...]

    @classmethod
    def of(cls, trial: Trial) -> Resume:
        return cls(trial.strategy, trial.index, trial.offset, trial.chunk, trial.lineage)


@attrs.define(eq=False)
class Branch:
    """A program and the trials the sequential algorithm makes on it if they all fail."""

    ws: Workspace
    plan: Iterator[Trial]
    probability: float
    trials: list[Trial] = attrs.field(factory=list)
    exhausted: bool = False
    decided: int = 0  # the trials before this one have been read by a decision
    settled: int = 0  # the trials before this one are known to fail, or are moves (speculation skips them)
    #: The trial whose success this branch follows, while no decision has read it.
    parent: Trial | None = None

    def trial(self, position: int) -> Trial | None:
        while len(self.trials) <= position and not self.exhausted:
            nxt = next(self.plan, None)
            if nxt is None:
                self.exhausted = True
            else:
                nxt.branch = self
                self.trials.append(nxt)
        return self.trials[position] if position < len(self.trials) else None

    def needed(self) -> tuple[set[bytes], list[Workspace]]:
        """The keys of the checks this branch's program may still need, and the programs
        (it and those its pending trials would commit) that may be the final one."""
        keys: set[bytes] = set()
        programs: list[Workspace] = []
        todo = [self]
        while todo:
            b = todo.pop()
            programs.append(b.ws)
            for t in b.trials:
                if t.key is not None:
                    keys.add(t.key)
                if t.success is not None:
                    todo.append(t.success)
        return keys, programs


@attrs.define
class Lineages:
    """Names for the edits of a sweep that survive its commits. An edit names its place
    only on the program it was listed on; the predictor follows a failed chunk's edits
    through the commits after it by these names (`predictor.Failures`)."""

    next: int = 0

    def fresh(self, n: int) -> tuple[int, ...]:
        start = self.next
        self.next += n
        return tuple(range(start, start + n))

    def after(self, committed: Resume, n: int) -> tuple[int, ...]:
        """The lineage of the list a commit leaves: the committed chunk's edits are gone and
        the others keep their places (what the sweep assumes when it goes on from the same
        offset), if the new list is that long; else a fresh start."""
        old, o, k = committed.lineage, committed.offset, committed.chunk
        if len(old) - min(k, len(old) - o) == n:
            return old[:o] + old[o + k :]
        return self.fresh(n)
