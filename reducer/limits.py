"""--max-time and --max-checks: stop at a scheduling point with the best program so far.

The engine asks its executor for every check, so an executor that refuses the next check
once a limit is spent stops the engine exactly where it would schedule more work, without
the engine knowing about limits. (Once the engine takes a `should_stop` hook, `reason()`
is that hook.)
"""

from __future__ import annotations

import concurrent.futures
import inspect
import time
from collections.abc import Callable
from typing import Any

from reducer import engine as engine_module
from reducer.executor import Executor
from reducer.oracle import Verdict


class Stopped(Exception):
    """A limit ran out; the reason says which, in words for the summary."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Limited(Executor):
    """Wraps the run's executor; counts the checks it hands on."""

    def __init__(self, inner: Executor, start: float, max_time: float | None, max_checks: int | None) -> None:
        self.inner = inner
        self.start = start
        self.max_time = max_time
        self.max_checks = max_checks
        self.checks = 0

    def reason(self) -> str | None:
        """None while the run may go on; else why it must stop."""
        if self.max_checks is not None and self.checks >= self.max_checks:
            return f"--max-checks {self.max_checks} reached"
        if self.max_time is not None and time.monotonic() - self.start >= self.max_time:
            return f"--max-time {self.max_time:g} s reached"
        return None

    def submit(self, data: bytes) -> concurrent.futures.Future[Verdict]:
        why = self.reason()
        if why is not None:
            raise Stopped(why)
        self.checks += 1
        return self.inner.submit(data)

    def close(self, abort: bool = False) -> None:
        """The session closes the executor it made; this wrapper owns nothing."""

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


#: What a stop looks like: ours, and the engine's own once it has one.
STOPPED: tuple[type[BaseException], ...] = (Stopped,) + (
    (engine_module.Stopped,) if isinstance(getattr(engine_module, "Stopped", None), type) else ()
)


def engine_hooks(engine_class: type, on_event: Callable[..., None], should_stop: Callable[[], str | None]) -> dict[str, Any]:
    """The engine's on_event/should_stop hooks, for an engine that takes them (the
    executor wrapper above covers one that does not yet)."""
    params = inspect.signature(engine_class).parameters
    hooks = {"on_event": on_event, "should_stop": should_stop}
    return {name: hook for name, hook in hooks.items() if name in params}
