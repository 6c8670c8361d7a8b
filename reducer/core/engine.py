"""The decision rule: which chunks of edits to try, and which to commit.

**What is committed** (the rule the output depends on; llvm-reduce's): for each strategy
(untried ones first, in registry order, then best bytes saved per verdict first; a
strategy last swept on a program twice the size counts as untried) the engine lists its
edits and tries chunks of them in a fixed order, largest chunks first, halving the chunk
size when a sweep finds nothing. The first interesting chunk in that order is committed,
the edits are listed again on the new program, and the sweep goes on from the same
position (an `exclusive` strategy's sweep stops there: its alternatives are listed
afresh next round). A round ends when a strategy that changed the program is done (the
next round starts from the most profitable strategy) or when every strategy failed. A
strategy whose whole sweep failed sits out the following rounds until a round changes
nothing; then all of them are tried again, and a round of all that changes nothing is
the fixpoint (issue 13: most of its edits fail again on a program that changed
elsewhere). At the fixpoint come the moves: an interesting move is kept only if reducing
from it ends smaller. The decisions read verdicts in this order and nothing else, so the
output is the one a single worker would produce, for any -j and any executor.

The rest of the engine serves the decisions without changing them, each part in a file
of its own: `checks.py` builds each candidate once and checks each text once;
`speculation.py` keeps idle workers checking what the decisions are likeliest to need
next (`predictor.py` gives the odds); `confirm.py` keeps the caller's final re-checks
that speculation started early; `trials.py` holds the trials and branches they share.
"""

from __future__ import annotations

import collections
import concurrent.futures
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import attrs

from reducer.core.cache import VerdictCache
from reducer.core.checks import Checks
from reducer.core.confirm import Confirmations
from reducer.core.executor import Executor
from reducer.core.oracle import Oracle, Verdict
from reducer.core.processes import raise_if_stopped
from reducer.core.speculation import Speculation
from reducer.core.stats import RunStats, StrategyStats
from reducer.core.strategy import Edit, Strategy
from reducer.core.trials import Branch, Lineages, Resume, Trial
from reducer.core.workspace import UNKNOWN_VOLUME, Candidate, Size, Workspace

log = logging.getLogger(__name__)

#: Verdicts spent on moves (not on the reductions that follow an accepted one).
DEFAULT_MOVE_BUDGET = 24
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


class Engine:
    """Reduces a workspace with strategies, checking candidates on an executor. It owns
    its parts: `checks` (candidates and checks), `confirms` (the early final re-checks)
    and `speculation` (idle workers)."""

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
        self.on_improve = on_improve
        self.on_event = on_event or (lambda kind, fields: None)
        self.should_stop = should_stop or (lambda: None)
        self.cache = cache if cache is not None else VerdictCache()
        self.stats = RunStats(workspace.size, workspace.size, workers=executor.workers)
        self.stats.per_strategy = {s.name: StrategyStats() for s in strategies}
        #: The smallest interesting program so far; a move trial may sit above it for a while.
        self.best: Candidate | None = None
        self.checks = Checks(executor, self.cache, self.stats, oracle, self.on_event, self._check_stop)
        #: The caller re-checks the final program `confirm` times (on `confirm_on`, which
        #: must not answer from a record): idle workers start those checks once the current
        #: program is the likeliest final one (`confirmations` hands them over).
        self.confirms = Confirmations(confirm, confirm_on or executor, self.checks)
        # Looked up at each call, so that a test may wrap `_success_branch`.
        self.speculation = Speculation(self.checks, self.confirms, lambda trial: self._success_branch(trial))
        #: Strategies whose last sweep failed, sitting out rounds until the fixpoint (`_fixpoint`).
        self._resting: set[str] = set()
        #: The size (ops, else bytes) of the program each strategy's last sweep started on.
        self._swept_at: dict[str, int] = {}
        self._rested = False  # the current round left some of them out
        self._lineages = Lineages()
        self._started = time.monotonic()
        #: The executor's counters when the engine started: checks it ran before (the
        #: original's, the workflows') are not the engine's. Both are set again by run().
        self._executor_before = attrs.evolve(executor.stats)

    @property
    def oracle(self) -> Oracle | None:
        """What the checks run (None: the executor's own). The session swaps in the
        calibrated oracle when it takes over an engine primed with the provisional one."""
        return self.checks.oracle

    @oracle.setter
    def oracle(self, oracle: Oracle | None) -> None:
        self.checks.oracle = oracle

    # -- the outer loop --------------------------------------------------------------
    def run(self) -> RunStats:
        """Reduce to a fixpoint, then try moves that may unlock more."""
        self._started, self._executor_before = time.monotonic(), attrs.evolve(self.executor.stats)
        try:
            self._fixpoint()
            self._explore_moves()
        except BaseException:
            self.confirms.stop(keep=set())
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
        self.speculation.prime(Branch(self.ws, self._plan(self.ws, self._ordered(), 0), 1.0), room)

    def confirmations(self, data: bytes) -> list[concurrent.futures.Future[Verdict]]:
        """The final re-checks of data already started (in order); the others are
        cancelled. The caller reads or cancels them."""
        return self.confirms.hand_over(data)

    def _account(self) -> None:
        if self.best is not None:  # the best's volume, left unmeasured at its commit
            self.best = self.ws.measured(self.best)
            if self.stats.final.volume == UNKNOWN_VOLUME:
                self.stats.final = self.best.size
        ex, before = self.executor.stats, self._executor_before
        wall = max(time.monotonic() - self._started, 1e-9)
        self.stats.busy_seconds = ex.busy_seconds - before.busy_seconds
        self.stats.lost_workers = ex.lost_workers - before.lost_workers
        self.stats.cancelled_checks = ex.cancelled - before.cancelled - self.confirms.cancelled
        self.stats.utilisation = min(1.0, self.stats.busy_seconds / (self.executor.workers * wall))
        self.stats.engine_seconds = max(0.0, wall - self.stats.wait_seconds)
        self.stats.wasted_checks = self.checks.wasted()
        self.stats.early_rechecks = self.confirms.count

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
        self.speculation.failures.new_round()  # a round lists every strategy's edits afresh
        order = self._ordered()
        self._rested = len(order) < len(self.strategies)
        branch = Branch(self.ws, self._plan(self.ws, order, 0), 1.0)
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
            self.checks.forget_other_programs(self.ws)

    def _plan(
        self,
        ws: Workspace,
        order: list[Strategy],
        index: int,
        after: Resume | None = None,
        branch: Branch | None = None,
    ) -> Iterator[Trial]:
        """The trials the sequential algorithm makes on ws if every one of them fails: the
        rest of a sweep (after a committed trial: on its new edit list, from its place, and
        then the round ends), else the strategies of the round from `index` on."""
        if after is not None:
            # An exclusive strategy's alternatives are listed afresh in the next round.
            edits = [] if getattr(after.strategy, "exclusive", False) else self._edits(ws, after.strategy)
            if edits:
                lineage = self._lineages.after(after, len(edits))
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
                yield from self._sweep(order[i], i, edits, 0, len(edits), self._lineages.fresh(len(edits)))
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
    ) -> Iterator[Trial]:
        while True:
            if offset >= len(edits):
                if chunk <= 1:
                    return
                chunk, offset = (chunk + 1) // 2, 0
                continue
            yield Trial(strategy, index, edits, offset, chunk, lineage=lineage)
            offset += chunk

    def _success_branch(self, trial: Trial) -> Branch:
        """The sweep on the program trial commits: a fork of the program it was made on."""
        assert trial.candidate is not None and trial.ws is not None
        ws = trial.ws.fork(trial.candidate)
        if trial.key is not None:  # its program is the candidate's text, hashed already
            self.checks.know_program(ws, trial.key)
        branch = Branch(ws, iter(()), 0.0, parent=trial)
        # The plan keeps only where the sweep goes on, not the trial: a trial holds its
        # branch, whose plan would hold the trial before it, and so on, back to the
        # round's first program (megabytes each).
        branch.plan = self._plan(ws, [], trial.index, after=Resume.of(trial), branch=branch)
        return branch

    def _explore_moves(self) -> None:
        """Try non-shrinking moves on the 1-minimal program (Vulcan's auxiliary moves,
        Shrink Ray's "make it simpler, not smaller"). An interesting move is kept only if
        reducing from it ends strictly smaller than before it; otherwise the program goes
        back to what it was. Each kept move shrinks the program, so this terminates; the
        budget bounds the verdicts spent on moves that lead nowhere."""
        budget = self.move_budget
        while budget > 0:
            branch = Branch(self.ws, self._moves(self.ws), 1.0)
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

    def _moves(self, ws: Workspace) -> Iterator[Trial]:
        for index, strategy in enumerate(self.movers):
            edits = self._edits(ws, strategy)
            for offset in range(len(edits)):
                yield Trial(strategy, index, edits, offset, 1, grow=True)

    def _trial(self, strategy: Strategy, move: Candidate | None) -> bool:
        assert move is not None
        self._cancel()
        snapshot = Candidate(self.ws.program.text, self.ws.size, "snapshot")
        saved = {name: (st.bytes_saved, st.ops_saved) for name, st in self.stats.per_strategy.items()}
        self.ws.commit(move)
        log.info("%-16s move to %s; reducing from there", strategy.name, self.ws.size)
        # Most moves are undone: the re-checks of the program before it go on meanwhile.
        self.confirms.held = True
        try:
            self._fixpoint()
        finally:
            self.confirms.held = False
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
    def _assumed(branch: Branch | None) -> dict[str, tuple[int, int]]:
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
            raise_if_stopped(exc)
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
        self.checks.know_program(self.ws, self.checks.key(candidate))
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
    def _decide(self, trial: Trial, branch: Branch) -> bool:
        """The verdict a decision reads; idle workers speculate while it is pending."""
        self.checks.materialise(trial, branch.ws)
        st = self.stats.per_strategy[trial.strategy.name]
        st.candidates += 1
        if trial.key is None:
            st.rejected[trial.rejection] += 1
            return False
        t0 = time.monotonic()
        trial.resolve(self.cache)  # its speculative check may have finished already
        while trial.verdict is None:
            if trial.key not in self.checks.inflight:  # its check was cancelled, and is needed after all
                self.checks.submit(trial)
            self.speculation.fill(branch)
            self.checks.wait()
            trial.resolve(self.cache)
        log.debug(
            "decided %s chunk %d@%d: %s after %.2f s (%d in flight)",
            trial.strategy.name,
            trial.chunk,
            trial.offset,
            trial.verdict,
            time.monotonic() - t0,
            self.checks.running(),
        )
        self.checks.read(trial.key)
        st.judged += 1
        trial.read = True
        self.speculation.read(trial)
        if not trial.verdict:
            self.checks.drop_ir(trial)
        return trial.verdict

    def _cancel(self, branch: Branch | None = None) -> None:
        """Stop the checks no decision can read any more (with no branch: none but the
        current program's re-checks), and free their workers."""
        keys, programs = branch.needed() if branch is not None else (set(), [])
        self.checks.cancel(keep=keys)
        # A move is mostly undone: the program before it may be final. Programs are hashed
        # only when re-checks are running (a megabyte each, for every branch ahead).
        if self.confirms.started and not self.confirms.held:
            self.confirms.stop(keep={self.checks.program_key(ws) for ws in [self.ws, *programs]})

    def _check_stop(self) -> None:
        reason = self.should_stop()
        if reason:
            raise Stopped(reason)
