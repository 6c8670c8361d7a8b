"""A program checked several times, as a sequential loop would read the verdicts."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable, Sequence
from typing import Protocol

from reducer.core.executor import Executor
from reducer.core.oracle import Oracle, Verdict


class Beside(Protocol):
    """Work on the original that starts with its first check (at once with two workers or
    more: `now`) and, when it agrees with that check's verdict, stands in for the second
    check (`reducer.session.traced`: a mismatch's traced run, --pass-level's dump)."""

    def start(self, oracle: Oracle, now: bool, deadline: float | None = None) -> bool:
        """Whether it started, and so stands in for the second check if it agrees. It
        stops at `deadline` (time.monotonic(); --max-time's) whatever its budget."""

    def agrees(self, verdict: Verdict) -> bool: ...

    def cancel(self) -> None: ...


def check_repeatedly(
    executor: Executor,
    oracle: Oracle,
    data: bytes,
    times: int,
    until: Callable[[Verdict], bool],
    meanwhile: Callable[[], object] | None = None,
    started: Sequence[concurrent.futures.Future[Verdict]] = (),
) -> list[Verdict]:
    """Check data `times` times and read the verdicts in order, stopping after the first
    one `until` accepts. The checks run at once on the executor's workers (a re-check
    waits one check, not three), except for an oracle that measures time, whose runs
    would compete for the CPUs; checks not read are cancelled. What is read is what a
    sequential loop would read, so the outcome does not depend on -j. An OSError out of
    a check is raised as it is: the caller knows what to tell the user (before the run,
    or after it, where the best result so far is). `meanwhile` runs once the first checks
    are submitted, before any is read. `started`: checks of data by oracle on executor
    that are already running (the engine's early re-checks), read first. A bounded
    executor (`limits.Bounded`: --max-time) ends the wait at its deadline in `Stopped`,
    the checks cancelled."""
    concurrent_ = not oracle.measures_time
    futures = list(started[:times])
    for future in started[times:]:
        executor.cancel(future)
    futures += [executor.submit(data, oracle) for _ in range(max(0, (times if concurrent_ else 1) - len(futures)))]
    read: list[Verdict] = []
    try:
        if meanwhile is not None:
            meanwhile()
        while len(read) < times:
            if len(futures) <= len(read):
                futures.append(executor.submit(data, oracle))
            verdict = executor.result(futures[len(read)])
            read.append(verdict)
            if until(verdict):
                break
    finally:
        for future in futures[len(read) :]:
            executor.cancel(future)
    return read
