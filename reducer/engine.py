"""The delta-debugging loop.

For each strategy (best measured benefit first) the engine lists its edits and tries
applying chunks of them, largest chunks first, halving the chunk size when a sweep
finds nothing (llvm-reduce's granularity schedule, CIRCT's apply-a-window search).

Parallelism without losing determinism: the chunks are tried in batches of a fixed
size (`batch`, independent of the number of workers). Every chunk of a batch is judged
against the same program; if several succeed, their union is tried once, in a fixed
order. What is committed therefore depends only on verdicts, never on timing or -j.
"""

from __future__ import annotations

import concurrent.futures
import logging
import time
from collections import Counter
from collections.abc import Callable, Sequence

import attrs

from reducer.cache import VerdictCache, key
from reducer.executor import Executor
from reducer.oracle import Verdict
from reducer.strategy import Edit, Strategy
from reducer.workspace import Candidate, Rejected, Size, Workspace

log = logging.getLogger(__name__)

DEFAULT_BATCH = 4
#: Oracle calls spent on moves (not on the reductions that follow an accepted one).
DEFAULT_MOVE_BUDGET = 24


@attrs.define
class StrategyStats:
    candidates: int = 0  # subsets materialised
    rejected: Counter[str] = attrs.field(factory=Counter)  # never reached the oracle, by reason
    oracle_calls: int = 0
    cache_hits: int = 0
    accepts: int = 0
    bytes_saved: int = 0
    ops_saved: int = 0

    def benefit(self) -> float:
        return self.bytes_saved / max(self.oracle_calls, 1)


@attrs.define
class RunStats:
    original: Size
    final: Size
    oracle_calls: int = 0
    cache_hits: int = 0
    timeouts: int = 0
    rounds: int = 0
    #: Judged candidates by the oracle's reason: interesting, not interesting, different bug, ...
    outcomes: Counter[str] = attrs.field(factory=Counter)
    moves_tried: int = 0  # move candidates judged by the oracle
    moves_kept: int = 0  # moves after which reducing ended smaller than before them
    engine_seconds: float = 0.0  # materialising: applying, verifying, printing
    wait_seconds: float = 0.0  # blocked on the oracle
    per_strategy: dict[str, StrategyStats] = attrs.field(factory=dict)


class Engine:
    def __init__(
        self,
        workspace: Workspace,
        strategies: Sequence[Strategy],
        executor: Executor,
        on_improve: Callable[[Candidate], None],
        batch: int = DEFAULT_BATCH,
        cache: VerdictCache | None = None,
        move_budget: int = DEFAULT_MOVE_BUDGET,
    ) -> None:
        self.ws = workspace
        self.strategies = [s for s in strategies if s.shrinks]
        self.movers = [s for s in strategies if s.moves]
        self.move_budget = move_budget
        self.executor = executor
        self.on_improve = on_improve
        self.batch = max(1, batch)
        self.cache = cache or VerdictCache()
        self.stats = RunStats(workspace.size, workspace.size)
        self.stats.per_strategy = {s.name: StrategyStats() for s in strategies}
        #: The smallest interesting program so far; a move trial may sit above it for a while.
        self.best: Candidate | None = None

    # -- the outer loop --------------------------------------------------------------
    def run(self) -> RunStats:
        """Reduce to a fixpoint, then try moves that may unlock more."""
        self._fixpoint()
        self._explore_moves()
        return self.stats

    def _fixpoint(self) -> None:
        """Reduce until a full round over every strategy changes nothing."""
        while True:
            self.stats.rounds += 1
            for strategy in self._ordered():
                if self._reduce_with(strategy):
                    break  # restart from the most profitable strategy
            else:
                return

    def _explore_moves(self) -> None:
        """Try non-shrinking moves on the 1-minimal program (Vulcan's auxiliary moves,
        Shrink Ray's "make it simpler, not smaller"). An interesting move is kept only if
        reducing from it ends strictly smaller than before it; otherwise the program goes
        back to what it was. Each kept move shrinks the program, so this terminates; the
        budget bounds the oracle calls spent on moves that lead nowhere."""
        budget = self.move_budget
        while budget > 0:
            progressed = False
            for strategy in self.movers:
                edits = self._edits(strategy)
                for start in range(0, len(edits), self.batch):
                    if budget <= 0:
                        return
                    chunks = [[e] for e in edits[start : start + self.batch]]
                    before = self.stats.oracle_calls
                    verdicts, candidates = self._try_batch(strategy, chunks, grow=True)
                    spent = self.stats.oracle_calls - before
                    budget -= spent
                    self.stats.moves_tried += spent
                    for ok, candidate in zip(verdicts, candidates):
                        if ok and self._trial(strategy, candidate):
                            progressed = True
                            break
                    if progressed:
                        break
                if progressed:
                    break
            if not progressed:
                return

    def _trial(self, strategy: Strategy, move: Candidate | None) -> bool:
        assert move is not None
        snapshot = Candidate(self.ws.program.text, self.ws.size, "snapshot", ())
        self.ws.commit(move)
        log.info("%-16s move to %s; reducing from there", strategy.name, self.ws.size)
        self._fixpoint()
        if self.ws.size.smaller_than(snapshot.size):
            self.stats.moves_kept += 1
            self.stats.per_strategy[strategy.name].accepts += 1
            return True
        log.info("%-16s move did not lead below %s; back to it", strategy.name, snapshot.size)
        self.ws.commit(snapshot)
        self.stats.final = self.ws.size
        return False

    def _ordered(self) -> list[Strategy]:
        """Untried strategies in their declared order, then by bytes saved per oracle call."""

        def rank(item: tuple[int, Strategy]) -> tuple[int, float, int, int]:
            index, s = item
            st = self.stats.per_strategy[s.name]
            if st.oracle_calls == 0:
                return (0, 0.0, s.priority, index)
            return (1, -st.benefit(), s.priority, index)

        return [s for _, s in sorted(enumerate(self.strategies), key=rank)]

    # -- one strategy ------------------------------------------------------------------
    def _edits(self, strategy: Strategy) -> list[Edit]:
        try:
            return self.ws.opportunities(strategy)
        except Exception as exc:  # a faulty strategy is skipped, never fatal
            log.warning("strategy %s could not list its edits: %s: %s", strategy.name, type(exc).__name__, exc)
            return []

    def _reduce_with(self, strategy: Strategy) -> bool:
        edits = self._edits(strategy)
        if not edits:
            return False
        changed = False
        chunk = len(edits)
        offset = 0
        while True:
            if offset >= len(edits):
                if chunk == 1:
                    return changed
                chunk = (chunk + 1) // 2
                offset = 0
                continue
            starts = list(range(offset, len(edits), chunk))[: self.batch]
            chunks = [edits[s : s + chunk] for s in starts]
            verdicts, candidates = self._try_batch(strategy, chunks)
            wins = [i for i, ok in enumerate(verdicts) if ok]
            if not wins:
                offset = starts[-1] + len(chunks[-1])
                continue
            committed = self._commit_wins(strategy, chunks, candidates, wins)
            changed = True
            # Edits of failed chunks before the last committed one presumably survive in
            # the new list; resume right after them instead of retrying them at once.
            survivors = sum(len(c) for i, c in enumerate(chunks) if i not in committed and i < max(committed))
            edits = self._edits(strategy)
            if not edits:
                return True
            offset = starts[0] + survivors
            chunk = min(chunk, max(1, len(edits)))

    def _commit_wins(
        self,
        strategy: Strategy,
        chunks: list[Sequence[Edit]],
        candidates: list[Candidate | None],
        wins: list[int],
    ) -> set[int]:
        """Commit the union of the successful chunks if it is interesting, else the first."""
        if len(wins) > 1:
            union = [e for i in wins for e in chunks[i]]
            merged, merged_candidates = self._try_batch(strategy, [union])
            if merged[0]:
                self._accept(strategy, merged_candidates[0])
                return set(wins)
        best = candidates[wins[0]]
        assert best is not None
        self._accept(strategy, best)
        return {wins[0]}

    def _accept(self, strategy: Strategy, candidate: Candidate | None) -> None:
        assert candidate is not None
        before = self.ws.size
        self.ws.commit(candidate)
        st = self.stats.per_strategy[strategy.name]
        st.accepts += 1
        st.bytes_saved += before.bytes - candidate.size.bytes
        if before.ops is not None and candidate.size.ops is not None:
            st.ops_saved += before.ops - candidate.size.ops
        if self.best is None or self.ws.size.smaller_than(self.best.size):
            self.best = attrs.evolve(candidate, size=self.ws.size)
            self.stats.final = self.ws.size
            self.on_improve(candidate)
        original = self.stats.original.bytes or 1
        log.info(
            "%-16s %s (%.1f%% of the original), %d oracle calls so far",
            strategy.name,
            self.ws.size,
            100.0 * self.ws.size.bytes / original,
            self.stats.oracle_calls,
        )

    # -- judging candidates ------------------------------------------------------------
    def _try_batch(
        self, strategy: Strategy, chunks: list[Sequence[Edit]], grow: bool = False
    ) -> tuple[list[bool], list[Candidate | None]]:
        """Materialise each chunk, then judge them all; oracle calls overlap with materialising."""
        st = self.stats.per_strategy[strategy.name]
        candidates: list[Candidate | None] = []
        pending: dict[bytes, concurrent.futures.Future[Verdict]] = {}
        keys: list[bytes | None] = []
        for edits in chunks:
            t0 = time.monotonic()
            result = self.ws.materialize(strategy, edits, grow=grow)
            self.stats.engine_seconds += time.monotonic() - t0
            st.candidates += 1
            if isinstance(result, Rejected):
                st.rejected[result.reason] += 1
                candidates.append(None)
                keys.append(None)
                continue
            k = key(result.data)
            candidates.append(result)
            keys.append(k)
            if k in pending:
                continue
            cached = self.cache.get(k)
            if cached is not None:
                st.cache_hits += 1
                self.stats.cache_hits += 1
                continue
            pending[k] = self.executor.submit(result.data)
            st.oracle_calls += 1
            self.stats.oracle_calls += 1
        t0 = time.monotonic()
        for k, future in pending.items():
            verdict = future.result()
            self.cache.put(k, verdict.interesting)
            self.stats.outcomes[verdict.outcome or ("interesting" if verdict.interesting else "not interesting")] += 1
            if verdict.timed_out:
                self.stats.timeouts += 1
        self.stats.wait_seconds += time.monotonic() - t0
        verdicts = [k is not None and bool(self.cache.peek(k)) for k in keys]
        return verdicts, candidates
