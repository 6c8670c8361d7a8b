"""--max-time and --max-checks: the engine stops at its next scheduling point with the best
program so far (its `should_stop` hook), without knowing what the limits are."""

from __future__ import annotations

import time

import attrs

from reducer.core.engine import Stopped

#: What a stop looks like, for the session to catch.
STOPPED: tuple[type[BaseException], ...] = (Stopped,)


@attrs.define
class Limits:
    start: float  # time.monotonic() when the run started
    max_time: float | None = None
    max_checks: int | None = None

    def reason(self, checks: int) -> str | None:
        """None while the run may go on; else why it must stop, in words for the summary."""
        if self.max_checks is not None and checks >= self.max_checks:
            return f"--max-checks {self.max_checks} reached"
        if self.max_time is not None and time.monotonic() - self.start >= self.max_time:
            return f"--max-time {self.max_time:g} s reached"
        return None
