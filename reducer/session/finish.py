"""The end of a run: the final program re-checked, and, when a flaky check rejects it,
the walk back to the newest committed program that passes its re-checks."""

from __future__ import annotations

import concurrent.futures
import re
from collections.abc import Callable, Sequence

import attrs

from reducer.core.cache import VerdictJournal, key
from reducer.core.executor import Executor
from reducer.core.oracle import Oracle, Verdict
from reducer.session.checks import check_repeatedly
from reducer.session.guard import Guard
from reducer.session.settings import Findings

#: Re-checks of the final program before exit 0; a 20%-flaky check passes a
#: non-interesting program three times in a row 0.8% of the time.
FINAL_CONFIRM = 3
#: Re-checks in a row a committed program must pass when walking back from a final
#: program the check rejected (0.2**6: a bad program rarely gets through).
WALKBACK_CONFIRM = 6


class Rechecks:
    """Re-checks of committed programs (the final confirmation, the walk back), recorded
    in the journal in order so that a resumed run replays them too."""

    def __init__(self, oracle: Oracle, journal: VerdictJournal | None, guard: Guard, executor: Executor) -> None:
        self.oracle, self.journal, self.guard, self.executor = oracle, journal, guard, executor
        self.replay = list(journal.rechecks) if journal is not None else []
        self.runs = self.failures = 0
        self.last: Verdict | None = None  # the last re-check run (not replayed): for the report

    def _drop(self, futures: list[concurrent.futures.Future[Verdict]]) -> list[concurrent.futures.Future[Verdict]]:
        """Cancel checks started on this executor; nothing is left of them."""
        for future in futures:
            self.executor.cancel(future)
        return []

    def _record(self, ok: bool) -> bool:
        self.runs += 1
        self.failures += not ok
        return ok

    def confirm(self, data: bytes, times: int, started: Sequence[concurrent.futures.Future[Verdict]] = ()) -> bool:
        """Whether data passes `times` re-checks in a row (they run at once). `started`:
        re-checks of data by this oracle already running on this executor."""
        k = key(data)
        started = list(started)
        while times and self.replay and self.replay[0][0] == k:
            times -= 1
            started = self._drop(started)  # a resumed run reads what the journal holds
            if not self._record(self.replay.pop(0)[1]):
                return False
        if not times:
            self._drop(started)
            return True
        self.replay = []
        try:  # a full disk or a vanished check here is told with where the best result is
            verdicts = check_repeatedly(
                self.executor, self.oracle, data, times, until=lambda v: not v.interesting, started=started
            )
            self.guard.check()
            for verdict in verdicts:
                self.last = verdict
                if self.journal is not None:
                    self.journal.record_recheck(k, verdict.interesting)
                self._record(verdict.interesting)
        except OSError as exc:
            raise self.guard.environment_error(exc) from None
        return all(v.interesting for v in verdicts)


def tidy_whitespace(text: str, judged: Callable[[bytes], bool], findings: Findings) -> str:
    """Text mode leaves the whitespace between the tokens it kept; collapse its runs
    (then, failing that, only blank lines and the ends) where that stays interesting."""
    collapsed = re.sub(r"[ \t]+", " ", re.sub(r"\s*\n\s*", "\n", text)).strip() + "\n"
    ends = re.sub(r"\n\s*\n", "\n", text.strip()) + "\n"
    for candidate in (collapsed, ends):
        if len(candidate) < len(text) and judged(candidate.encode()):
            findings.notes.append(f"collapsed whitespace ({len(text)} -> {len(candidate)} bytes)")
            return candidate
    return text


@attrs.define
class Settled:
    """The program the run ends with: the final one if it passed its re-checks, else the
    newest committed one that passed its walk-back re-checks (or the start)."""

    text: str
    confirmed: bool
    flaky: str | None = None  # what the re-checks saw, when they disagreed


def settle(
    rechecks: Rechecks,
    final: str,
    history: Sequence[str],
    started: Sequence[concurrent.futures.Future[Verdict]],
    output: str,
    flaky_start: str | None,
) -> Settled:
    """Re-check final FINAL_CONFIRM times; if a flaky check rejects it, walk back
    through the programs before it (history: the start, then each commit, the last being
    final's own), newest first, to one that passes WALKBACK_CONFIRM re-checks in a row.
    `started`: the engine's early re-checks of final."""
    if rechecks.confirm(final.encode(), FINAL_CONFIRM, started):
        return Settled(final, True)
    kept = next(
        (c for c in reversed(list(dict.fromkeys(history[:-1]))) if rechecks.confirm(c.encode(), WALKBACK_CONFIRM)),
        None,
    )
    how = (
        f"{output} holds the last program that passed {WALKBACK_CONFIRM} re-checks in a row"
        if kept is not None
        else f"no program the run committed passed {WALKBACK_CONFIRM} re-checks in a row; {output} holds the one it started from"
    )
    kept = kept if kept is not None else history[0]
    seen = f"{rechecks.failures} of {rechecks.runs} re-checks of programs it had passed failed"
    if flaky_start:
        seen += f", and {flaky_start}"
    rate = 100.0 * rechecks.failures / max(rechecks.runs, 1)
    return Settled(kept, False, f"{seen} (a flip rate of about {rate:.0f}%); {how} ({len(kept.encode())} bytes)")
