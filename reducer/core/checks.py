"""Building candidates and checking them: each text is built once and checked once.

The decisions and speculation both ask for the same trials; `Checks.materialise` builds
a trial's candidate (or answers it from what it knows) and starts its check unless the
cache has the verdict or the same text is being checked already. `wait` blocks until a
check comes back and puts its verdict in the cache, whoever asked for it: a verdict is
kept by content whether a decision reads it or not. `cancel` stops the checks that can
no longer be needed.
"""

from __future__ import annotations

import concurrent.futures
import time
import weakref
from collections.abc import Callable
from typing import Any

import attrs

from reducer.core.cache import VerdictCache, key
from reducer.core.executor import Executor
from reducer.core.oracle import Oracle, Verdict
from reducer.core.stats import RunStats
from reducer.core.strategy import Edit
from reducer.core.trials import Trial
from reducer.core.workspace import Candidate, Rejected, Size, Workspace

#: How often a wait for checks asks whether the run must stop (`check_stop`: --max-time),
#: so a stop does not wait for a check that runs to its timeout, or never comes back.
STOP_POLL = 0.5


class Checks:
    """The candidates made and the checks in flight, for one engine."""

    def __init__(
        self,
        executor: Executor,
        cache: VerdictCache,
        stats: RunStats,
        oracle: Oracle | None,
        on_event: Callable[[str, dict[str, Any]], None],
        check_stop: Callable[[], None],
    ) -> None:
        self.executor, self.cache, self.stats = executor, cache, stats
        self.oracle = oracle  # None: the executor's own
        self.on_event = on_event
        self.check_stop = check_stop  # raises if the run must stop (a time or check budget)
        self.inflight: dict[bytes, concurrent.futures.Future[Verdict]] = {}
        #: Checks cancelled just after they finished: their verdicts are on the way, and
        #: are read (not checked again) if a decision needs them after all.
        self._late: dict[bytes, concurrent.futures.Future[Verdict]] = {}
        self._submitted: set[bytes] = set()
        self._read: set[bytes] = set()
        #: What each (program, strategy, edits) made: speculation and decisions build a candidate once.
        self.made: dict[tuple[bytes, str, tuple[Edit, ...], bool], Candidate | Rejected] = {}
        self._program_keys: dict[int, tuple[Any, bytes]] = {}
        #: Cache keys of candidates alive (equal candidates share one: same text, same key).
        self._keys: weakref.WeakKeyDictionary[Candidate, bytes] = weakref.WeakKeyDictionary()
        #: (strategy, fingerprint) -> the key and size of the text it builds (issue 13: skip
        #: rebuilding what the cache already judged); small, unlike `made`, so kept across programs.
        self._dull: dict[tuple[str, bytes], tuple[bytes, Size]] = {}

    def running(self) -> int:
        """Checks in flight (each holds a worker, or waits for one)."""
        return len(self.inflight)

    def wasted(self) -> int:
        """Checks whose verdict no decision read."""
        return len(self._submitted - self._read)

    def read(self, k: bytes) -> None:
        """A decision read the verdict of the check of k."""
        self._read.add(k)

    # -- building ----------------------------------------------------------------------
    def materialise(self, trial: Trial, ws: Workspace) -> None:
        """Build trial's candidate on ws (once), and judge it: by a rejection, the cache,
        or a check started here."""
        if trial.materialised:
            return
        trial.materialised, trial.ws = True, ws
        self.check_stop()
        made = (self.program_key(ws), trial.strategy.name, tuple(trial.chunk_edits), trial.grow)
        result = self.made.get(made)
        if result is None:
            fingerprint = self._fingerprint(trial, ws)
            if fingerprint is not None and self._known_dull(trial, ws, fingerprint):
                return
            result = self.made[made] = ws.materialize(trial.strategy, trial.chunk_edits, grow=trial.grow)
            if fingerprint is not None and isinstance(result, Candidate):
                self._dull[fingerprint] = (self.key(result), result.size)
        if isinstance(result, Rejected):
            trial.rejection = result.reason
            trial.verdict = False
            return
        trial.candidate, trial.key = result, self.key(result)
        cached = self.cache.get(trial.key)
        if cached is not None:
            st = self.stats.per_strategy[trial.strategy.name]
            st.cache_hits += 1
            self.stats.cache_hits += 1
            trial.verdict = cached
            return
        self.submit(trial)

    @staticmethod
    def _fingerprint(trial: Trial, ws: Workspace) -> tuple[str, bytes] | None:
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

    def _known_dull(self, trial: Trial, ws: Workspace, fingerprint: tuple[str, bytes]) -> bool:
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

    def drop_ir(self, trial: Trial) -> None:
        """A candidate that failed is never committed: let go of the IR it carries (a whole
        module, kept for a fork or a commit), here and where it is memoised."""
        candidate = trial.candidate
        if candidate is None or candidate.module is None or trial.ws is None:
            return
        trial.candidate = attrs.evolve(candidate, module=None)
        made = (self.program_key(trial.ws), trial.strategy.name, tuple(trial.chunk_edits), trial.grow)
        if self.made.get(made) is candidate:
            self.made[made] = trial.candidate

    def forget_other_programs(self, ws: Workspace) -> None:
        """After a commit, drop what was made on programs other than ws's: on a megabyte
        input every memoised candidate holds a megabyte of text (and, until it fails, the
        module it was printed from)."""
        current = self.program_key(ws)
        self.made = {k: v for k, v in self.made.items() if k[0] == current}
        self._program_keys = {k: v for k, v in self._program_keys.items() if v[1] == current}

    # -- keys --------------------------------------------------------------------------
    def key(self, candidate: Candidate) -> bytes:
        """candidate's cache key, hashed once per candidate (a megabyte each; a memoised
        candidate comes back for every sweep that reaches its chunk)."""
        found = self._keys.get(candidate)
        if found is None:
            found = self._keys[candidate] = key(candidate.data)
        return found

    def program_key(self, ws: Workspace) -> bytes:
        """Which program a workspace holds (forks of the same text share what they made)."""
        program = ws.program
        found = self._program_keys.get(id(program))
        if found is None or found[0] is not program:
            found = self._program_keys[id(program)] = (program, key(program.text.encode()))
        return found[1]

    def know_program(self, ws: Workspace, k: bytes) -> None:
        """ws holds the text whose key is k (hashed already, as a candidate's)."""
        self._program_keys[id(ws.program)] = (ws.program, k)

    # -- checking ----------------------------------------------------------------------
    def submit(self, trial: Trial) -> None:
        """Check trial's candidate unless the same text is being checked already, or was
        by a check cancelled as it finished (`_late`: its verdict is read instead)."""
        assert trial.candidate is not None and trial.key is not None
        if trial.key in self._late and trial.key not in self.inflight:
            self.inflight[trial.key] = self._late.pop(trial.key)
        if trial.key not in self.inflight:
            self.inflight[trial.key] = self.executor.submit_keyed(trial.candidate.data, trial.key, self.oracle)
            self._submitted.add(trial.key)
            self.stats.per_strategy[trial.strategy.name].oracle_calls += 1
            self.stats.oracle_calls += 1
            self.stats.running = len(self.inflight)

    def wait(self) -> None:
        """Block until a check finishes; record its verdict in the cache."""
        if not self.inflight:
            return
        t0 = time.monotonic()
        try:
            while True:  # a budget may run out while every check still runs (or none comes back)
                done, _ = concurrent.futures.wait(
                    list(self.inflight.values()), timeout=STOP_POLL, return_when=concurrent.futures.FIRST_COMPLETED
                )
                if done:
                    break
                self.check_stop()
        finally:
            self.stats.wait_seconds += time.monotonic() - t0
        for k, future in list(self.inflight.items()):
            if future not in done:
                continue
            del self.inflight[k]
            if not future.cancelled():
                self._record(k, future.result())
        self.stats.running = len(self.inflight)
        self.check_stop()

    def _record(self, k: bytes, verdict: Verdict) -> None:
        """A check came back: its verdict goes in the cache, and in the run's counts."""
        self.cache.put(k, verdict.interesting)
        self.stats.outcomes[verdict.outcome or ("interesting" if verdict.interesting else "not interesting")] += 1
        if verdict.timed_out:
            self.stats.timeouts += 1
        if verdict.outcome == "worker died":
            self.stats.killed_workers.append(k.hex()[:12])
        self.on_event("check", {"outcome": verdict.outcome, "seconds": verdict.seconds})

    def cancel(self, keep: set[bytes]) -> None:
        """Stop the checks in flight but those of keep, and free their workers. A verdict
        that came back already is kept; one on its way is read if needed after all."""
        for k in [k for k in self.inflight if k not in keep]:
            future = self.inflight.pop(k)
            if future.done() and not future.cancelled() and future.exception() is None:
                self._record(k, future.result())  # came back before its wait read it: kept
            else:
                self.executor.cancel(future)
                if not future.cancelled():  # it finished as it was cancelled
                    self._late[k] = future
        self.stats.running = len(self.inflight)
