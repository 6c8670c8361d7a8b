"""The delta-debugging loop, and the speculation that keeps every worker busy.

**What is committed** (the rule the output depends on; llvm-reduce's): for each strategy
(untried ones first, in registry order, then best bytes saved per verdict first; a
strategy last swept on a program twice the size counts as untried) the engine lists its edits and tries chunks of them
in a fixed order, largest chunks first, halving the chunk size when a sweep finds
nothing. The first interesting chunk in that order is committed, the edits are listed
again on the new program, and the sweep goes on from the same position (an `exclusive`
strategy's sweep stops there: its alternatives are listed afresh next round). A round
ends when a strategy that changed the program is done (the next round starts from the
most profitable strategy) or when every strategy failed. A strategy whose whole sweep
failed sits out the following rounds until a round changes nothing; then all of them
are tried again, and a round of all that changes nothing is the fixpoint (issue 13:
most of its edits fail again on a program that changed elsewhere). The decisions read
verdicts in this order and nothing else, so the output is the one a single worker
would produce, for any -j and any executor.

**How N workers help** (speculation, which never changes a decision): while the verdict
the engine waits for is pending, idle workers check the candidates it would need next,
best-first by the probability of needing them:

* if the pending candidates fail: the rest of the sweep, then the next strategies on the
  same program;
* if a pending candidate succeeds: the sweep on the program it would produce (a forked
  workspace), which the engine adopts if it does.

A candidate's odds of success are `predictor.py`'s: low if it repeats a failure, else
leaning towards success. Where a speculative branch reaches the end of a round, the next
round's order is worked out from the stats the decisions will have by then if the branch
is taken. A verdict is cached by content whether a decision reads it or not; a commit cancels the checks that
can no longer be needed (their process groups are killed).
"""

from __future__ import annotations

import collections
import concurrent.futures
import logging
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import attrs

from reducer.core import predictor
from reducer.core.cache import VerdictCache, key
from reducer.core.executor import Executor
from reducer.core.oracle import Oracle, Verdict
from reducer.core.strategy import Edit, Strategy
from reducer.core.workspace import UNKNOWN_VOLUME, Candidate, Rejected, Size, Workspace

log = logging.getLogger(__name__)

#: Verdicts spent on moves (not on the reductions that follow an accepted one).
DEFAULT_MOVE_BUDGET = 24
#: Speculation stops at candidates less likely than this to be needed.
MIN_PROBABILITY = 0.001
#: At most this many checks submitted ahead of the decisions in one go, per worker.
AHEAD_PER_WORKER = 4
#: Seconds of materialising (in this process) before speculation lets verdicts be read.
SPECULATION_SLICE = 0.5
#: A strategy last swept on a program this many times the current one's size (in ops)
#: or more is ranked as untried again (`Engine._ordered`).
STALE_FACTOR = 2


def _scale(size: Size) -> int:
    """What `STALE_FACTOR` compares: ops, or bytes for a program read as text."""
    return size.ops if size.ops is not None else size.bytes


class Stopped(Exception):
    """`should_stop` asked the engine to stop (a time or check budget); `best` is kept."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


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


@attrs.define(eq=False)
class _Trial:
    """One chunk of edits at one place of a sweep: materialised once, judged by the cache
    or a check. It remembers where it stands, so the sweep can go on after it."""

    strategy: Strategy
    index: int  # the strategy's place in the round's order
    edits: list[Edit]  # the strategy's whole list on this program
    offset: int
    chunk: int
    lineage: tuple[int, ...] = ()  # per edit: which edit of the sweep's first list it is (see `_implied`)
    grow: bool = False
    next_round: bool = False  # speculation only: the round a commit ends would go on with it
    ws: Workspace | None = None  # the program it was materialised on
    rejection: str = ""  # why it never reached the oracle
    candidate: Candidate | None = None
    key: bytes | None = None
    verdict: bool | None = None  # known: from a rejection, the cache or a finished check
    materialised: bool = False
    success: _Branch | None = None  # the sweep on the program this trial would commit
    again: bool | None = None  # repeats a failure (predictor.py), as of `again_at` failures read
    again_at: int = -1
    branch: _Branch | None = None  # the branch it is a trial of
    read: bool = False  # a decision read its verdict (it counts in the strategy's stats)

    @property
    def identity(self) -> tuple[str, tuple[Edit, ...]]:
        return (self.strategy.name, tuple(self.chunk_edits))

    @property
    def chunk_edits(self) -> list[Edit]:
        return self.edits[self.offset : self.offset + self.chunk]


@attrs.frozen
class _Resume:
    """Where a sweep goes on after a trial of it commits."""

    strategy: Strategy
    index: int
    offset: int
    chunk: int
    lineage: tuple[int, ...]

    @classmethod
    def of(cls, trial: _Trial) -> _Resume:
        return cls(trial.strategy, trial.index, trial.offset, trial.chunk, trial.lineage)


@attrs.define(eq=False)
class _Branch:
    """A program and the trials the sequential algorithm makes on it if they all fail."""

    ws: Workspace
    plan: Iterator[_Trial]
    probability: float
    trials: list[_Trial] = attrs.field(factory=list)
    exhausted: bool = False
    decided: int = 0  # the trials before this one have been read by a decision
    settled: int = 0  # the trials before this one are known to fail, or are moves (`_most_likely` skips them)
    #: The trial whose success this branch follows, while no decision has read it.
    parent: _Trial | None = None

    def trial(self, position: int) -> _Trial | None:
        while len(self.trials) <= position and not self.exhausted:
            nxt = next(self.plan, None)
            if nxt is None:
                self.exhausted = True
            else:
                nxt.branch = self
                self.trials.append(nxt)
        return self.trials[position] if position < len(self.trials) else None


class Engine:
    def __init__(
        self,
        workspace: Workspace,
        strategies: Sequence[Strategy],
        executor: Executor,
        on_improve: Callable[[Candidate], None],
        cache: VerdictCache | None = None,
        move_budget: int = DEFAULT_MOVE_BUDGET,
        on_event: Callable[[str, dict[str, Any]], None] | None = None,
        should_stop: Callable[[], str | None] | None = None,
        oracle: Oracle | None = None,
        confirm: int = 0,
        confirm_on: Executor | None = None,
    ) -> None:
        self.ws = workspace
        self.strategies = [s for s in strategies if s.shrinks]
        self.movers = [s for s in strategies if s.moves]
        self.move_budget = move_budget
        self.executor = executor
        self.oracle = oracle  # None: the executor's own
        #: The caller re-checks the final program `confirm` times (on `confirm_on`, which
        #: must not answer from a record): idle workers start those checks once the current
        #: program is the likeliest final one (`confirmations` hands them over).
        self.confirm, self.confirm_on = confirm, confirm_on or executor
        self._confirming: dict[bytes, list[concurrent.futures.Future[Verdict]]] = {}  # by program
        # Re-checks started while the program's own check is pending (`_most_likely`):
        # by program, the trial that made it and the odds it was then given of being final.
        self._standby: dict[bytes, tuple[_Trial, float]] = {}
        self._moving = False  # reducing from a move, which is undone unless it ends smaller
        self._recheck_cancels = 0
        self.on_improve = on_improve
        self.on_event = on_event or (lambda kind, fields: None)
        self.should_stop = should_stop or (lambda: None)
        self.cache = cache if cache is not None else VerdictCache()
        self.stats = RunStats(workspace.size, workspace.size, workers=executor.workers)
        self.stats.per_strategy = {s.name: StrategyStats() for s in strategies}
        #: The smallest interesting program so far; a move trial may sit above it for a while.
        self.best: Candidate | None = None
        self._inflight: dict[bytes, concurrent.futures.Future[Verdict]] = {}
        #: Checks cancelled just after they finished: their verdicts are on the way, and
        #: are read (not checked again) if a decision needs them after all.
        self._late: dict[bytes, concurrent.futures.Future[Verdict]] = {}
        self._submitted: set[bytes] = set()
        self._read: set[bytes] = set()
        #: What each (program, strategy, edits) made: speculation and decisions build a candidate once.
        self._made: dict[tuple[bytes, str, tuple[Edit, ...], bool], Candidate | Rejected] = {}
        self._program_keys: dict[int, tuple[Any, bytes]] = {}
        #: Cache keys of candidates alive (equal candidates share one: same text, same key).
        self._keys: weakref.WeakKeyDictionary[Candidate, bytes] = weakref.WeakKeyDictionary()
        #: (strategy, fingerprint) -> the key and size of the text it builds (issue 13: skip
        #: rebuilding what the cache already judged); small, unlike `_made`, so kept across programs.
        self._dull: dict[tuple[str, bytes], tuple[bytes, Size]] = {}
        #: Hashes of the chunks (strategy, edits) that failed, on any program. An edit names
        #: its place only on the program it was listed on, so this is a hint for the
        #: predictor (the round after a commit lists mostly the same edits), never a decision.
        self._failed: set[int] = set()
        #: Failed chunks by lineage (see `_implied`), indexed by each member.
        self._failed_lineage: dict[int, list[frozenset[int]]] = collections.defaultdict(list)
        #: Strategies whose last sweep failed, sitting out rounds until the fixpoint (`_fixpoint`).
        self._resting: set[str] = set()
        #: The size (ops, else bytes) of the program each strategy's last sweep started on.
        self._swept_at: dict[str, int] = {}
        self._rested = False  # the current round left some of them out
        self._failures = 0  # failures the decisions have read: a repeat can only become one
        self._next_lineage = 0
        self._started = time.monotonic()
        #: The executor's counters when the engine started: checks it ran before (the
        #: original's, the workflows') are not the engine's. Both are set again by run().
        self._executor_before = attrs.evolve(executor.stats)

    # -- the outer loop --------------------------------------------------------------
    def run(self) -> RunStats:
        """Reduce to a fixpoint, then try moves that may unlock more."""
        self._started, self._executor_before = time.monotonic(), attrs.evolve(self.executor.stats)
        try:
            self._fixpoint()
            self._explore_moves()
        except BaseException:
            self._stop_confirming(keep=set())
            raise
        finally:
            self._cancel()
            self._account()
        return self.stats

    def prime(self, room: int) -> None:
        """Start the checks the first round is likeliest to need, on up to `room` workers,
        before run(): the caller may still be checking the original, and the workers it
        leaves idle would wait for nothing. Nothing is read, decided or re-checked here;
        run() finds these checks in flight (by text) and does not start them again."""
        confirm, self.confirm = self.confirm, 0
        try:
            self._speculate(_Branch(self.ws, self._plan(self.ws, self._ordered(), 0), 1.0), room)
        finally:
            self.confirm = confirm

    def confirmations(self, data: bytes) -> list[concurrent.futures.Future[Verdict]]:
        """The re-checks of data already started (in order); the others are cancelled.
        The caller reads or cancels them."""
        started = self._confirming.pop(key(data), [])
        self._standby.pop(key(data), None)
        self._stop_confirming(keep=set())
        return started

    def _start_confirming(self, branch: _Branch, odds: float = 1.0) -> None:
        """Start one more re-check of branch's program (`odds`: of it being final)."""
        program = self._program_key(branch.ws)
        if branch.parent is not None and branch.parent.verdict is None:
            self._standby[program] = (branch.parent, odds)
        started = self._confirming.setdefault(program, [])
        started.append(self.confirm_on.submit(branch.ws.program.text.encode(), self.oracle))
        self.stats.early_rechecks += 1

    def _stop_confirming(self, keep: set[bytes]) -> None:
        """Cancel the re-checks of programs other than those in keep."""
        for program in [p for p in self._confirming if p not in keep]:
            self._standby.pop(program, None)
            for future in self._confirming.pop(program):
                self.confirm_on.cancel(future)
                self._recheck_cancels += future.cancelled()  # not the engine's wasted checks

    def _busy(self) -> int:
        """Workers holding a check the engine started: its candidates' and its re-checks'."""
        return len(self._inflight) + sum(not f.done() for fs in self._confirming.values() for f in fs)

    def _account(self) -> None:
        if self.best is not None:  # the best's volume, left unmeasured at its commit
            self.best = self.ws.measured(self.best)
            if self.stats.final.volume == UNKNOWN_VOLUME:
                self.stats.final = self.best.size
        ex, before = self.executor.stats, self._executor_before
        wall = max(time.monotonic() - self._started, 1e-9)
        self.stats.busy_seconds = ex.busy_seconds - before.busy_seconds
        self.stats.lost_workers = ex.lost_workers - before.lost_workers
        self.stats.cancelled_checks = ex.cancelled - before.cancelled - self._recheck_cancels
        self.stats.utilisation = min(1.0, self.stats.busy_seconds / (self.executor.workers * wall))
        self.stats.engine_seconds = max(0.0, wall - self.stats.wait_seconds)
        self.stats.wasted_checks = len(self._submitted - self._read)

    def _fixpoint(self) -> None:
        """Reduce until a full round over every strategy changes nothing. A strategy whose
        whole sweep failed sits out the rounds after it (most of its edits would fail
        again on a program that changed elsewhere) until the others stop changing the
        program; then every strategy is tried again on it."""
        self._resting.clear()
        while True:
            if self._round():
                continue
            if not self._rested:
                return
            self._resting.clear()

    def _round(self) -> bool:
        """One round; True if it changed the program."""
        self.stats.rounds += 1
        self._failed_lineage.clear()  # a round lists every strategy's edits afresh
        order = self._ordered()
        self._rested = len(order) < len(self.strategies)
        branch = _Branch(self.ws, self._plan(self.ws, order, 0), 1.0)
        changed = False
        position = 0
        swept: dict[str, bool] = {}  # the strategies the round's decisions reached: committed or not
        while True:
            trial = branch.trial(position)
            if trial is None or trial.next_round:
                self._resting.update(name for name, committed in swept.items() if not committed)
                return changed
            if trial.strategy.name not in swept:
                self._swept_at[trial.strategy.name] = _scale(self.ws.size_known())
            swept.setdefault(trial.strategy.name, False)
            if self.stats.strategy != trial.strategy.name:
                self.stats.strategy = trial.strategy.name
                self.on_event("strategy", {"name": trial.strategy.name})
            if not self._decide(trial, branch):
                position += 1
                branch.decided = position
                continue
            changed = True
            swept[trial.strategy.name] = True
            branch = trial.success or self._success_branch(trial)
            self._accept(trial.strategy, trial.candidate, branch.ws)
            branch.probability, branch.parent = 1.0, None
            position = 0
            self._cancel(branch)
            self._forget_other_programs()

    def _plan(
        self,
        ws: Workspace,
        order: list[Strategy],
        index: int,
        after: _Resume | None = None,
        branch: _Branch | None = None,
    ) -> Iterator[_Trial]:
        """The trials the sequential algorithm makes on ws if every one of them fails: the
        rest of a sweep (after a committed trial: on its new edit list, from its place, and
        then the round ends), else the strategies of the round from `index` on."""
        if after is not None:
            # An exclusive strategy's alternatives are listed afresh in the next round.
            edits = [] if getattr(after.strategy, "exclusive", False) else self._edits(ws, after.strategy)
            if edits:
                lineage = self._lineage(after, len(edits))
                yield from self._sweep(
                    after.strategy, after.index, edits, after.offset, min(after.chunk, len(edits)), lineage
                )
            # The round ends here. Speculation goes on into the next one, in the order the
            # decisions will find if every trial before it goes as this branch assumes.
            for trial in self._plan(ws, self._ordered(self._assumed(branch), size=ws.size_known()), 0):
                trial.next_round = True
                yield trial
            return
        for i in range(index, len(order)):
            edits = self._edits(ws, order[i])
            if edits:
                yield from self._sweep(order[i], i, edits, 0, len(edits), self._fresh(len(edits)))
        if len(order) < len(self.strategies):
            # A round that left resting strategies out is followed by one of them all.
            for trial in self._plan(ws, self._ordered(everyone=True, size=ws.size_known()), 0):
                trial.next_round = True
                yield trial
            return
        # A round in which everything fails is the fixpoint, where the moves come next
        # (unless --moves 0: speculation must not spend checks the budget does not allow).
        for trial in self._moves(ws) if self.move_budget > 0 else ():
            trial.next_round = True
            yield trial

    @staticmethod
    def _sweep(
        strategy: Strategy, index: int, edits: list[Edit], offset: int, chunk: int, lineage: tuple[int, ...]
    ) -> Iterator[_Trial]:
        while True:
            if offset >= len(edits):
                if chunk <= 1:
                    return
                chunk, offset = (chunk + 1) // 2, 0
                continue
            yield _Trial(strategy, index, edits, offset, chunk, lineage=lineage)
            offset += chunk

    def _fresh(self, n: int) -> tuple[int, ...]:
        start = self._next_lineage
        self._next_lineage += n
        return tuple(range(start, start + n))

    def _lineage(self, committed: _Resume, n: int) -> tuple[int, ...]:
        """The lineage of the list a commit leaves: the committed chunk's edits are gone and
        the others keep their places (what the sweep assumes when it goes on from the same
        offset), if the new list is that long; else a fresh start."""
        old, o, k = committed.lineage, committed.offset, committed.chunk
        if len(old) - min(k, len(old) - o) == n:
            return old[:o] + old[o + k :]
        return self._fresh(n)

    def _success_branch(self, trial: _Trial) -> _Branch:
        """The sweep on the program trial commits: a fork of the program it was made on."""
        assert trial.candidate is not None and trial.ws is not None
        ws = trial.ws.fork(trial.candidate)
        if trial.key is not None:  # its program is the candidate's text, hashed already
            self._program_keys[id(ws.program)] = (ws.program, trial.key)
        branch = _Branch(ws, iter(()), 0.0, parent=trial)
        # The plan keeps only where the sweep goes on, not the trial: a trial holds its
        # branch, whose plan would hold the trial before it, and so on, back to the
        # round's first program (megabytes each).
        branch.plan = self._plan(ws, [], trial.index, after=_Resume.of(trial), branch=branch)
        return branch

    def _explore_moves(self) -> None:
        """Try non-shrinking moves on the 1-minimal program (Vulcan's auxiliary moves,
        Shrink Ray's "make it simpler, not smaller"). An interesting move is kept only if
        reducing from it ends strictly smaller than before it; otherwise the program goes
        back to what it was. Each kept move shrinks the program, so this terminates; the
        budget bounds the verdicts spent on moves that lead nowhere."""
        budget = self.move_budget
        while budget > 0:
            branch = _Branch(self.ws, self._moves(self.ws), 1.0)
            position = 0
            while budget > 0:
                trial = branch.trial(position)
                if trial is None:
                    return
                interesting = self._decide(trial, branch)
                if trial.key is not None:
                    budget -= 1
                    self.stats.moves_tried += 1
                if interesting and self._trial(trial.strategy, trial.candidate):
                    break  # the program changed: list the moves again
                position += 1
                branch.decided = position
            else:
                return

    def _moves(self, ws: Workspace) -> Iterator[_Trial]:
        for index, strategy in enumerate(self.movers):
            edits = self._edits(ws, strategy)
            for offset in range(len(edits)):
                yield _Trial(strategy, index, edits, offset, 1, grow=True)

    def _trial(self, strategy: Strategy, move: Candidate | None) -> bool:
        assert move is not None
        self._cancel()
        snapshot = Candidate(self.ws.program.text, self.ws.size, "snapshot")
        saved = {name: (st.bytes_saved, st.ops_saved) for name, st in self.stats.per_strategy.items()}
        self.ws.commit(move)
        log.info("%-16s move to %s; reducing from there", strategy.name, self.ws.size)
        # Most moves are undone: the re-checks of the program before it go on meanwhile.
        self._moving = True
        try:
            self._fixpoint()
        finally:
            self._moving = False
        if self.ws.size.smaller_than(snapshot.size):
            self.stats.moves_kept += 1
            self.stats.per_strategy[strategy.name].accepts += 1
            return True
        log.info("%-16s move did not lead below %s; back to it", strategy.name, snapshot.size)
        self.ws.commit(snapshot)
        # What the reductions after the move saved is gone with it: the summary and the
        # strategy order count bytes that reached the output only.
        for name, (saved_bytes, saved_ops) in saved.items():
            self.stats.per_strategy[name].bytes_saved, self.stats.per_strategy[name].ops_saved = saved_bytes, saved_ops
        self.stats.final = self.ws.size
        return False

    def _ordered(
        self, assumed: dict[str, tuple[int, int]] | None = None, everyone: bool = False, size: Size | None = None
    ) -> list[Strategy]:
        """Untried strategies in registry order (the list given), then by bytes saved per
        verdict, ties again in registry order; none that is resting (`_fixpoint`) unless
        `everyone`. A strategy whose last sweep started on a program STALE_FACTOR times
        the size of this one (`size`, default the current program's) counts as untried:
        what it saved per verdict there says little about a program that small, and the
        registry order (largest cuts first) is the better guess. values-to-return, say,
        cuts most of a function once drop-ops shrank it, where the strategies after it in
        the registry, never tried yet, would spend a check per op first. Such a strategy
        that never cut the first size measure (ops; bytes for text) comes after the
        untried ones: it only shortens text, which every op that goes later changes again.
        `assumed`: verdicts and bytes saved per strategy that no decision has read yet, as
        a speculative branch assumes them."""
        assumed = assumed or {}
        size = size if size is not None else self.ws.size_known()
        now = _scale(size)

        def rank(item: tuple[int, Strategy]) -> tuple[int, float, int]:
            index, s = item
            st = self.stats.per_strategy[s.name]
            judged, saved = assumed.get(s.name, (0, 0))
            judged += st.judged
            if judged == 0:
                return (0, 0.0, index)
            if self._swept_at.get(s.name, 0) >= STALE_FACTOR * max(now, 1):
                cut = st.ops_saved if size.ops is not None else st.bytes_saved
                return (0, 0.0 if cut > 0 else 1.0, index)
            return (1, -(st.bytes_saved + saved) / judged, index)

        return [s for _, s in sorted(enumerate(self.strategies), key=rank) if everyone or s.name not in self._resting]

    @staticmethod
    def _assumed(branch: _Branch | None) -> dict[str, tuple[int, int]]:
        """What the decisions will have added to each strategy's stats when they reach the
        end of branch's trials so far, if every trial there fails and every trial whose
        success it follows succeeds: the verdicts not read yet, and the bytes saved."""
        assumed: collections.Counter[tuple[str, int]] = collections.Counter()
        upto = None
        while branch is not None:
            for trial in branch.trials[:upto]:
                if trial.key is not None and not trial.read:
                    assumed[trial.strategy.name, 0] += 1
            parent = branch.parent
            if parent is None or parent.read or parent.branch is None:
                break
            assert parent.candidate is not None and parent.ws is not None
            assumed[parent.strategy.name, 0] += 1
            assumed[parent.strategy.name, 1] += parent.ws.size_known().bytes - parent.candidate.size.bytes
            branch, upto = parent.branch, parent.branch.trials.index(parent)
        return {name: (assumed[name, 0], assumed[name, 1]) for name, _ in assumed}

    def _edits(self, ws: Workspace, strategy: Strategy) -> list[Edit]:
        try:
            return ws.opportunities(strategy)
        except Exception as exc:  # a faulty strategy is skipped, never fatal
            log.warning("strategy %s could not list its edits: %s: %s", strategy.name, type(exc).__name__, exc)
            return []

    # -- committing ------------------------------------------------------------------
    def _accept(self, strategy: Strategy, candidate: Candidate | None, fork: Workspace) -> None:
        assert candidate is not None
        before = self.ws.size_known()  # volumes are measured only where a tie needs them
        if fork is self.ws:
            self.ws.commit(candidate)
        else:
            self.ws.adopt(fork)
        # Hashed as a candidate (the fork's own key may have gone with an earlier commit).
        self._program_keys[id(self.ws.program)] = (self.ws.program, self._key(candidate))
        st = self.stats.per_strategy[strategy.name]
        st.accepts += 1
        st.bytes_saved += before.bytes - candidate.size.bytes
        if before.ops is not None and candidate.size.ops is not None:
            st.ops_saved += before.ops - candidate.size.ops
        size = self.ws.size_known()
        if self.best is None or self.ws.smaller_than(self.best):
            self.best = attrs.evolve(candidate, size=size)
            self.stats.final = size
            self.on_improve(candidate)
            self.on_event("improve", {"size": size, "strategy": strategy.name, "checks": self.stats.oracle_calls})
        original = self.stats.original.bytes or 1
        log.info(
            "%-16s %s (%.1f%% of the original), %d oracle calls so far",
            strategy.name,
            size,
            100.0 * size.bytes / original,
            self.stats.oracle_calls,
        )

    # -- judging candidates ------------------------------------------------------------
    def _decide(self, trial: _Trial, branch: _Branch) -> bool:
        """The verdict a decision reads; idle workers speculate while it is pending."""
        self._materialise(trial, branch.ws)
        st = self.stats.per_strategy[trial.strategy.name]
        st.candidates += 1
        if trial.key is None:
            st.rejected[trial.rejection] += 1
            return False
        t0 = time.monotonic()
        self._resolve(trial)  # its speculative check may have finished already
        while trial.verdict is None:
            if trial.key not in self._inflight:  # its check was cancelled, and is needed after all
                self._submit(trial)
            self._speculate(branch)
            self._wait()
            self._resolve(trial)
        log.debug(
            "decided %s chunk %d@%d: %s after %.2f s (%d in flight)",
            trial.strategy.name,
            trial.chunk,
            trial.offset,
            trial.verdict,
            time.monotonic() - t0,
            len(self._inflight),
        )
        self._read.add(trial.key)
        st.judged += 1
        trial.read = True
        if not trial.verdict:
            if trial.success is not None and self._confirming:  # programs it led to were re-checked while idle
                gone = {self._program_key(ws) for ws in self._needed(trial.success)[1]}
                self._stop_confirming(keep=set(self._confirming) - gone)
            self._drop_ir(trial)
            self._failures += 1
            self._failed.add(hash(trial.identity))
            chunk = frozenset(trial.lineage[trial.offset : trial.offset + trial.chunk])
            for member in chunk:
                self._failed_lineage[member].append(chunk)
        return trial.verdict

    def _drop_ir(self, trial: _Trial) -> None:
        """A candidate that failed is never committed: let go of the IR it carries (a whole
        module, kept for a fork or a commit), here and where it is memoised."""
        candidate = trial.candidate
        if candidate is None or candidate.module is None or trial.ws is None:
            return
        trial.candidate = attrs.evolve(candidate, module=None)
        made = (self._program_key(trial.ws), trial.strategy.name, tuple(trial.chunk_edits), trial.grow)
        if self._made.get(made) is candidate:
            self._made[made] = trial.candidate

    def _materialise(self, trial: _Trial, ws: Workspace) -> None:
        if trial.materialised:
            return
        trial.materialised, trial.ws = True, ws
        self._check_stop()
        made = (self._program_key(ws), trial.strategy.name, tuple(trial.chunk_edits), trial.grow)
        result = self._made.get(made)
        if result is None:
            fingerprint = self._fingerprint(trial, ws)
            if fingerprint is not None and self._known_dull(trial, ws, fingerprint):
                return
            result = self._made[made] = ws.materialize(trial.strategy, trial.chunk_edits, grow=trial.grow)
            if fingerprint is not None and isinstance(result, Candidate):
                self._dull[fingerprint] = (self._key(result), result.size)
        if isinstance(result, Rejected):
            trial.rejection = result.reason
            trial.verdict = False
            return
        trial.candidate, trial.key = result, self._key(result)
        cached = self.cache.get(trial.key)
        if cached is not None:
            st = self.stats.per_strategy[trial.strategy.name]
            st.cache_hits += 1
            self.stats.cache_hits += 1
            trial.verdict = cached
            return
        self._submit(trial)

    @staticmethod
    def _fingerprint(trial: _Trial, ws: Workspace) -> tuple[str, bytes] | None:
        """The strategy's key of what trial would build (moves have none: they may grow)."""
        method = getattr(trial.strategy, "fingerprint", None)
        if trial.grow or method is None:
            return None
        try:
            with ws.scope():
                fingerprint = method(ws.program, trial.chunk_edits)
        except Exception:  # a faulty fingerprint only costs the shortcut
            return None
        return None if fingerprint is None else (trial.strategy.name, fingerprint)

    def _known_dull(self, trial: _Trial, ws: Workspace, fingerprint: tuple[str, bytes]) -> bool:
        """Answer trial without building it when its fingerprint names a text already
        judged not interesting, and that text is strictly smaller in ops and bytes than
        ws's program (so building it would reach the same cache hit)."""
        known = self._dull.get(fingerprint)
        if known is None or self.cache.get(known[0]) is not False:
            return False
        size, current = known[1], ws.size_known()
        if size.ops is None or current.ops is None or (size.ops, size.bytes) >= (current.ops, current.bytes):
            return False  # a tie needs the volume: build it
        trial.key, trial.verdict = known[0], False
        self.stats.per_strategy[trial.strategy.name].cache_hits += 1
        self.stats.cache_hits += 1
        return True

    def _submit(self, trial: _Trial) -> None:
        """Check trial's candidate unless the same text is being checked already, or was
        by a check cancelled as it finished (`_late`: its verdict is read instead)."""
        assert trial.candidate is not None and trial.key is not None
        if trial.key in self._late and trial.key not in self._inflight:
            self._inflight[trial.key] = self._late.pop(trial.key)
        if trial.key not in self._inflight:
            self._inflight[trial.key] = self.executor.submit_keyed(trial.candidate.data, trial.key, self.oracle)
            self._submitted.add(trial.key)
            self.stats.per_strategy[trial.strategy.name].oracle_calls += 1
            self.stats.oracle_calls += 1
            self.stats.running = len(self._inflight)

    def _forget_other_programs(self) -> None:
        """After a commit, drop what was made on programs other than the current one: on a
        megabyte input every memoised candidate holds a megabyte of text (and, until it
        fails, the module it was printed from)."""
        current = self._program_key(self.ws)
        self._made = {k: v for k, v in self._made.items() if k[0] == current}
        self._program_keys = {k: v for k, v in self._program_keys.items() if v[1] == current}

    def _key(self, candidate: Candidate) -> bytes:
        """candidate's cache key, hashed once per candidate (a megabyte each; a memoised
        candidate comes back for every sweep that reaches its chunk)."""
        found = self._keys.get(candidate)
        if found is None:
            found = self._keys[candidate] = key(candidate.data)
        return found

    def _program_key(self, ws: Workspace) -> bytes:
        """Which program a workspace holds (forks of the same text share what they made)."""
        program = ws.program
        found = self._program_keys.get(id(program))
        if found is None or found[0] is not program:
            found = self._program_keys[id(program)] = (program, key(program.text.encode()))
        return found[1]

    def _resolve(self, trial: _Trial) -> None:
        if trial.verdict is None and trial.key is not None:
            trial.verdict = self.cache.get(trial.key)

    def _speculate(self, main: _Branch, room: int | None = None) -> None:
        """Fill idle workers (`room` of them, default all) with the candidates most likely
        to be needed next."""
        budget = AHEAD_PER_WORKER * self.executor.workers
        until = time.monotonic() + SPECULATION_SLICE
        room = self.executor.workers if room is None else room
        if self._standby:
            self._drop_standby()
        while budget > 0 and time.monotonic() < until:
            full = self._busy() >= room
            if full and not self._standby:
                return
            best = self._most_likely(main)
            if best is None:
                return
            probability, trial, branch = best
            if trial is None:  # branch's program is likely the final one
                assert branch is not None
                if full:
                    return
                self._start_confirming(branch, probability)
                continue
            if branch is None:  # the likeliest work is on the program a pending trial would commit
                trial.success = self._success_branch(trial)
                trial.success.probability = probability
                continue
            if full and not self._standing_by(probability):
                return
            inflight = len(self._inflight)
            self._materialise(trial, branch.ws)
            budget -= trial.key is not None
            if full and len(self._inflight) > inflight:
                self._give_way(probability)

    def _standing_by(self, below: float) -> list[bytes]:
        """The programs whose re-checks run while their own check is pending, given lower
        odds of being final than `below`: a check that likely takes their workers."""
        return [
            k
            for k, (trial, odds) in self._standby.items()
            if trial.verdict is None and odds < below and any(not f.done() for f in self._confirming.get(k, ()))
        ]

    def _give_way(self, below: float) -> None:
        """Cancel the running re-checks of the program standing by with the lowest odds
        below `below` (those that finished keep their verdicts)."""
        for k in sorted(self._standing_by(below), key=lambda k: self._standby[k][1])[:1]:
            futures = self._confirming[k]
            self._stop_confirming(keep=set(self._confirming) - {k})
            finished = [f for f in futures if f.done() and not f.cancelled()]
            if finished:
                self._confirming[k] = finished

    def _drop_standby(self) -> None:
        """Stop the re-checks of programs whose own check was read, or came back, as a
        failure (a decision may not have reached it yet), and forget the entries of
        programs whose verdict is known: their trials hold whole branches."""
        for k, (trial, _odds) in list(self._standby.items()):
            failed = False
            up: _Trial | None = trial
            while up is not None and not failed:  # it, or a trial whose success it follows
                self._resolve(up)
                failed = up.verdict is False
                up = up.branch.parent if up.branch is not None else None
            if trial.verdict is not None or failed:
                del self._standby[k]
                if failed and k in self._confirming:
                    self._stop_confirming(keep=set(self._confirming) - {k})

    def _most_likely(self, main: _Branch) -> tuple[float, _Trial | None, _Branch | None] | None:
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
        to a likelier check when the workers are all busy (`_speculate`)."""
        best: tuple[float, _Trial | None, _Branch | None] | None = None
        pending: tuple[float, _Trial | None, _Branch | None] | None = None
        known = False  # a program known to be interesting lacks re-checks: those go first
        todo = [main]
        looked = 0
        while todo:
            branch = todo.pop()
            reach = branch.probability
            position = max(branch.decided, branch.settled)
            while reach >= MIN_PROBABILITY and looked < 64 * self.executor.workers:
                looked += 1
                trial = branch.trial(position)
                if trial is None:
                    if self._confirm_wanted(branch):
                        known = True
                        if best is None or reach > best[0]:
                            best = (reach, None, branch)
                    elif (pending is None or reach > pending[0]) and self._confirm_wanted(branch, pending=True):
                        pending = (reach, None, branch)
                    break
                if not trial.materialised:
                    if best is None or reach > best[0]:
                        best = (reach, trial, branch)
                    break  # the trials after it are less likely still
                self._resolve(trial)  # a finished check is a known verdict, not a guess
                if trial.grow or trial.key is None or trial.verdict is False:
                    if position == branch.settled:  # for good: the next walk starts after it
                        branch.settled += 1
                    position += 1
                    continue
                p = 1.0 if trial.verdict else self._likelihood(trial)
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

    def _confirm_wanted(self, branch: _Branch, pending: bool = False) -> bool:
        """Whether branch's program, final if every trial on it fails, lacks a re-check:
        once it is known to be interesting; with `pending`, while its own check runs, if
        the idle workers can take every re-check it lacks."""
        verdict = None if branch.parent is None else branch.parent.verdict
        if self._moving or verdict is False or (verdict is None and branch.parent is not None and not pending):
            return False
        lacking = self.confirm - len(self._confirming.get(self._program_key(branch.ws), ()))
        if pending and verdict is None and branch.parent is not None:
            # A program on which no edit even makes a candidate to check is mostly what a
            # chunk of a whole sweep leaves (nothing), which the odds rate far too high.
            checkable = any(t.key is not None for t in branch.trials)
            return checkable and 0 < lacking <= self.executor.workers - self._busy()
        return lacking > 0

    def _likelihood(self, trial: _Trial) -> float:
        """The odds speculation gives trial's success (reducer/core/predictor.py)."""
        return predictor.odds(self._again(trial))

    def _again(self, trial: _Trial) -> bool:
        """Whether trial repeats a failure: the same chunk, one of its edits alone, or
        every edit left of a chunk that failed earlier in the sweep (`_implied`). Worked
        out again when a failure was read since (a repeat stays one)."""
        if trial.again is None or (not trial.again and trial.again_at != self._failures):
            name = trial.strategy.name
            trial.again = (
                hash(trial.identity) in self._failed
                or any(hash((name, (edit,))) in self._failed for edit in trial.chunk_edits)
                or self._implied(trial)
            )
            trial.again_at = self._failures
        return trial.again

    def _implied(self, trial: _Trial) -> bool:
        """Whether trial's chunk holds every edit left of a chunk that failed earlier in
        the sweep: under ddmin's assumption (removing more than a failure fails too) it
        fails as well. Edits are followed through commits by their place in the list."""
        chunk = trial.lineage[trial.offset : trial.offset + trial.chunk]
        failed = {id(f): f for member in chunk for f in self._failed_lineage.get(member, ())}
        if not failed:
            return False
        outside = set(trial.lineage).difference(chunk)  # the edits left outside the chunk
        return any(f.isdisjoint(outside) for f in failed.values())

    @staticmethod
    def _needed(branch: _Branch) -> tuple[set[bytes], list[Workspace]]:
        """The keys of the checks a branch's program may still need, and the programs (it
        and those its pending trials would commit) that may be the final one."""
        keys: set[bytes] = set()
        programs: list[Workspace] = []
        todo = [branch]
        while todo:
            b = todo.pop()
            programs.append(b.ws)
            for t in b.trials:
                if t.key is not None:
                    keys.add(t.key)
                if t.success is not None:
                    todo.append(t.success)
        return keys, programs

    def _wait(self) -> None:
        """Block until a check finishes; record its verdict in the cache."""
        if not self._inflight:
            return
        t0 = time.monotonic()
        done, _ = concurrent.futures.wait(list(self._inflight.values()), return_when=concurrent.futures.FIRST_COMPLETED)
        self.stats.wait_seconds += time.monotonic() - t0
        for k, future in list(self._inflight.items()):
            if future not in done:
                continue
            del self._inflight[k]
            if not future.cancelled():
                self._record(k, future.result())
        self.stats.running = len(self._inflight)
        self._check_stop()

    def _record(self, k: bytes, verdict: Verdict) -> None:
        """A check came back: its verdict goes in the cache, and in the run's counts."""
        self.cache.put(k, verdict.interesting)
        self.stats.outcomes[verdict.outcome or ("interesting" if verdict.interesting else "not interesting")] += 1
        if verdict.timed_out:
            self.stats.timeouts += 1
        if verdict.outcome == "worker died":
            self.stats.killed_workers.append(k.hex()[:12])
        self.on_event("check", {"outcome": verdict.outcome, "seconds": verdict.seconds})

    def _cancel(self, branch: _Branch | None = None) -> None:
        """Stop the checks no decision can read any more (with no branch: none but the
        current program's re-checks), and free their workers."""
        keys, programs = self._needed(branch) if branch is not None else (set(), [])
        for k in [k for k in self._inflight if k not in keys]:
            future = self._inflight.pop(k)
            if future.done() and not future.cancelled() and future.exception() is None:
                self._record(k, future.result())  # came back before its wait read it: kept
            else:
                self.executor.cancel(future)
                if not future.cancelled():  # it finished as it was cancelled
                    self._late[k] = future
        # A move is mostly undone: the program before it may be final. Programs are hashed
        # only when re-checks are running (a megabyte each, for every branch ahead).
        if self._confirming and not self._moving:
            self._stop_confirming(keep={self._program_key(ws) for ws in [self.ws, *programs]})
        self.stats.running = len(self._inflight)

    def _check_stop(self) -> None:
        reason = self.should_stop()
        if reason:
            raise Stopped(reason)
