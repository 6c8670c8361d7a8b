"""What a running reduction tells the outside: events for bots, a live status for people.

A `Monitor` turns the session's milestones (start, each improvement, the end) and a poll
of the engine's counters (current strategy, checks done and running) into events
`(kind, fields)`. Listeners get them: the Python API's `on_event`, the `--progress-json`
writer (JSON lines, schema `reducer/schemas/progress-schema.json`), the heartbeat line
printed when stderr is not a terminal. `LiveStatus` draws `Monitor.status()` with rich's
Live on a terminal. Nothing here knows IR, strategies or processes: only counters.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import IO, Any

import attrs

SCHEMA = "ireereduce-progress/1"
#: How a run ends, the same words in the final event, --stats-json and the report.
STATUSES = ("reduced", "interrupted", "stopped", "flaky", "error")
#: Seconds without a start, improve or heartbeat event before a heartbeat.
HEARTBEAT_SECONDS = 30.0

Listener = Callable[[str, dict[str, Any]], None]


def size_fields(size: Any) -> dict[str, Any] | None:
    """A workspace Size as JSON: ops (null for text) and bytes."""
    return None if size is None else {"ops": size.ops, "bytes": size.bytes}


@attrs.frozen
class Point:
    """One step of the run's trajectory (`--stats-json`): so a reader sees how fast the
    size went, not only where it ended. The clock is the progress events' `elapsed`;
    checks are oracle calls submitted (the run's `oracle_calls`), judged the verdicts
    the decisions read (the same for any -j)."""

    event: str  # original, start (when it differs from the original), commit, final
    seconds: float
    checks: int
    judged: int
    size: Any  # a workspace Size

    def fields(self) -> dict[str, Any]:
        return {
            "event": self.event,
            "seconds": round(self.seconds, 3),
            "checks": self.checks,
            "judged": self.judged,
            "ops": self.size.ops,
            "bytes": self.size.bytes,
            "outside": getattr(self.size, "outside", 0),  # what it needs from other files (Size.outside)
        }


@attrs.define
class Status:
    """One look at a running reduction: what the live status line and heartbeats show."""

    phase: str
    elapsed: float
    original: Any = None  # Size of the input, measured like every other size
    best: Any = None  # Size of the smallest interesting program so far
    strategy: str | None = None
    checks: int = 0  # verdicts received
    running: int = 0  # checks in flight
    cache_hits: int = 0
    invalid: int = 0  # candidates rejected before any check (did not verify or parse)
    different_bug: int = 0
    since_improvement: float = 0.0
    improvements: int = 0
    detail: str | None = None  # what runs when no checks are counted yet (the original's)

    def percent(self) -> float | None:
        if self.original is None or self.best is None:
            return None
        return 100.0 * self.best.bytes / max(self.original.bytes, 1)

    def fields(self) -> dict[str, Any]:
        return {
            "phase": self.phase,
            "size": size_fields(self.best),
            "strategy": self.strategy,
            "checks": self.checks,
            "running": self.running,
            "cache_hits": self.cache_hits,
            "invalid": self.invalid,
            "different_bug": self.different_bug,
            "since_improvement": round(self.since_improvement, 2),
        }

    def line(self) -> str:
        """One line for a log that is not a terminal."""
        if self.detail:
            return f"{self.phase}: {self.detail}; {self.elapsed:.0f} s elapsed"
        size = f"best {self.best} ({self.percent():.1f}%)" if self.best is not None else "no result yet"
        return (
            f"{self.phase}{': ' + self.strategy if self.strategy else ''}; {size}; "
            f"{self.checks} checks done, {self.running} running, {self.cache_hits} cache hits; "
            f"last improvement {self.since_improvement:.0f} s ago; {self.elapsed:.0f} s elapsed"
        )


class Monitor:
    """Collects a run's progress and hands events to listeners (thread-safe)."""

    def __init__(
        self, on_event: Listener | None = None, heartbeat: float = HEARTBEAT_SECONDS, poll: float = 0.25
    ) -> None:
        self.listeners: list[Listener] = [on_event] if on_event else []
        #: Called with each improving candidate (its text too): --print-diff.
        self.on_candidate: list[Callable[[Any], None]] = []
        #: Called once, if at all, while the run only waits for the original's checks,
        #: its first engine checks started (not on a resumed run, nor with an oracle that
        #: measures time): the caller's own warm-up (the CLI imports rich there, 50 ms
        #: that would otherwise delay those first checks).
        self.on_idle: list[Callable[[], None]] = []
        self.start_text: str | None = None
        self.heartbeat = heartbeat
        self.poll = poll
        self.started = time.monotonic()
        self._phase = "starting"
        self._phase_began = self.started
        self._original_timeout: float | None = None
        self._original: Any = None
        self._best: Any = None
        self._last_improvement = self.started
        self._last_said = self.started
        self._improvements = 0
        self._engine: Any = None
        self._strategy: str | None = None
        self._seen: dict[str, int] = {}
        #: The original, then every commit the run reports, then the final (`end`).
        self.trajectory: list[Point] = []
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- milestones, from the session ------------------------------------------------
    def emit(self, kind: str, **fields: Any) -> None:
        with self._lock:
            if kind in ("start", "improve", "heartbeat"):
                self._last_said = time.monotonic()
            for listener in list(self.listeners):
                listener(kind, dict(fields))

    def phase(self, name: str) -> None:
        self._phase, self._phase_began = name, time.monotonic()

    def checking_original(self, timeout: float | None) -> None:
        """The original's checks run (None: with no time limit). No check is counted
        before the engine starts, so the status says what runs, for how long, and when
        it will be cut off: a check that hangs on the original looks like one then."""
        self.phase("checking the original")
        self._original_timeout = timeout

    def idle(self) -> None:
        """The run only waits for checks now: each `on_idle` warm-up runs, once. One that
        fails is left for the code that needs it to meet."""
        warm_ups, self.on_idle = self.on_idle, []
        for warm_up in warm_ups:
            with contextlib.suppress(Exception):
                warm_up()

    def start(self, original: Any, start: Any, mode: str, jobs: int, timeout: float, text: str = "") -> None:
        self._original, self._best = original, start
        self.start_text = text
        self.trajectory = [self._point("original", original)]
        if size_fields(start) != size_fields(original):  # the triage's rewrite, or an earlier run's smaller output
            self.trajectory.append(self._point("start", start))
        self._phase = "reducing"
        self.emit(
            "start",
            input=size_fields(original),
            size=size_fields(start),
            mode=mode,
            jobs=jobs,
            timeout=round(timeout, 2),
        )

    def improve(self, candidate: Any) -> None:
        with self._lock:
            self._best = candidate.size
            self._improvements += 1
            self._last_improvement = time.monotonic()
            self._strategy = candidate.strategy
            status = self.status()
            self.trajectory.append(self._point("commit", candidate.size))
        for show in list(self.on_candidate):
            show(candidate)
        self.emit(
            "improve",
            size=size_fields(candidate.size),
            strategy=candidate.strategy,
            checks=status.checks,
            percent=round(status.percent() or 0.0, 2),
        )

    def end(self, stats: Any) -> None:
        """The run's result (its `RunStats`) as the trajectory's last point: after the final
        re-checks and any walk-back, so it may be larger than the last commit."""
        with self._lock:
            point = Point("final", time.monotonic() - self.started, stats.oracle_calls, stats.judged, stats.final)
            self.trajectory.append(point)

    def _point(self, event: str, size: Any) -> Point:
        checks, judged = self._counts()
        return Point(event, time.monotonic() - self.started, checks, judged, size)

    def _counts(self) -> tuple[int, int]:
        """Oracle calls and judged verdicts so far (0 before the engine is watched)."""
        engine = self._engine
        if engine is None:
            return 0, 0
        stats = engine.stats
        return stats.oracle_calls, stats.judged

    def finish(self, status: str, **fields: Any) -> None:
        assert status in STATUSES, status
        self.emit(status, **fields)

    # -- polling the engine ----------------------------------------------------------
    @contextlib.contextmanager
    def running(self) -> Iterator[Monitor]:
        """Poll (strategy changes, heartbeats) for the whole run."""
        self._thread = threading.Thread(target=self._loop, name="ireereduce-monitor", daemon=True)
        self._thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            self._thread.join()

    @contextlib.contextmanager
    def watching(self, engine: Any) -> Iterator[None]:
        self._engine = engine
        if self.trajectory and all(p.event != "commit" for p in self.trajectory):
            # A primed engine's first checks were submitted before the start was told.
            checks, judged = self._counts()
            self.trajectory = [attrs.evolve(p, checks=checks, judged=judged) for p in self.trajectory]
        try:
            yield
        finally:
            self._poll_engine()
            self._engine = None

    def engine_event(self, kind: str, fields: dict[str, Any]) -> None:
        """The engine's own on_event hook, once it has one: strategy and check events."""
        if kind == "strategy":
            self._set_strategy(fields.get("name"))
        elif kind == "check":
            self.emit("check", **fields)

    def _loop(self) -> None:
        while not self._stop.wait(self.poll):
            self._poll_engine()
            if time.monotonic() - self._last_said >= self.heartbeat:
                self.emit("heartbeat", **self.status().fields())

    def _poll_engine(self) -> None:
        engine = self._engine
        if engine is None:
            return
        current = getattr(engine.stats, "strategy", None)
        if current is None:  # until the engine says: the strategy whose candidates grew
            try:
                counts = {name: st.candidates for name, st in list(engine.stats.per_strategy.items())}
            except RuntimeError:  # changed while read; next poll
                return
            grown = {n: c - self._seen.get(n, 0) for n, c in counts.items() if c > self._seen.get(n, 0)}
            self._seen = counts
            if grown:
                current = max(grown, key=lambda n: grown[n])
        if current is not None:
            self._set_strategy(current)

    def _set_strategy(self, name: str | None) -> None:
        if name and name != self._strategy:
            self._strategy = name
            self.emit("strategy", name=name)

    def status(self) -> Status:
        now = time.monotonic()
        st = Status(
            self._phase,
            now - self.started,
            self._original,
            self._best,
            self._strategy,
            since_improvement=now - self._last_improvement,
            improvements=self._improvements,
        )
        if self._phase == "checking the original":
            st.detail = self._original_detail(now)
        engine = self._engine
        if engine is not None:
            stats = engine.stats
            try:
                st.checks = sum(dict(stats.outcomes).values())
                st.running = getattr(stats, "running", None) or max(0, stats.oracle_calls - st.checks)
                st.cache_hits = stats.cache_hits
                st.different_bug = stats.outcomes.get("different bug", 0)
                st.invalid = sum(
                    s.rejected["invalid"] + s.rejected["unparsable"] + s.rejected["strategy-error"]
                    for s in list(stats.per_strategy.values())
                )
            except RuntimeError:  # a counter changed while read
                pass
        return st

    def _original_detail(self, now: float) -> str:
        limit = self._original_timeout
        ends = (
            f"a check times out after {limit:g} s (--timeout to change)"
            if limit is not None
            else "it has no time limit (--timeout sets one)"
        )
        return f"the check has run for {now - self._phase_began:.0f} s; {ends}"


class JsonLines:
    """--progress-json: one JSON object per event, flushed at once so a bot can tail it.
    A stream that cannot be written (a full disk, a reader that went away) ends the
    events, not the run, in one line on stderr: the program is what the run is for."""

    def __init__(self, stream: IO[str], started: float, name: str = "-") -> None:
        self.stream = stream
        self.started = started
        self.name = name
        self.failed = False
        self._lock = threading.Lock()

    def __call__(self, kind: str, fields: dict[str, Any]) -> None:
        record = {"schema": SCHEMA, "event": kind, "elapsed": round(time.monotonic() - self.started, 3), **fields}
        with self._lock:
            if self.failed:
                return
            try:
                self.stream.write(json.dumps(record, sort_keys=True) + "\n")
                self.stream.flush()
            except OSError as exc:
                self.failed = True
                stop_writing(self.stream, "--progress-json", self.name, exc, "progress events")


def stop_writing(stream: IO[str], flag: str, name: str, exc: OSError, what: str) -> None:
    """A stream that failed leads to /dev/null from now on (so what it still buffers,
    and its close at the exit, cannot fail again), said once on stderr."""
    with contextlib.suppress(OSError, ValueError):
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, stream.fileno())
        os.close(null)
    why = "its reader went away" if isinstance(exc, BrokenPipeError) else exc.strerror or str(exc)
    err = sys.stderr
    if err is not None:
        with contextlib.suppress(OSError, ValueError):
            err.write(f"ireereduce: warning: cannot write {flag} {name}: {why}; {what} stop here, the run goes on\n")
            err.flush()


class DiffPrinter:
    """--print-diff: each accepted step against the one before, as `diff -u` shows it, on
    stdout. A reader that goes away (`| head -1`) or a full disk ends the printing, not
    the run: stdout then leads to /dev/null, so nothing else fails on it, the exit's
    flush included."""

    def __init__(self, monitor: Monitor) -> None:
        self.monitor = monitor
        self.previous: str | None = None

    def __call__(self, candidate: Any) -> None:
        before = self.previous if self.previous is not None else self.monitor.start_text or ""
        self.previous = candidate.text
        diff = difflib.unified_diff(
            before.splitlines(keepends=True),
            candidate.text.splitlines(keepends=True),
            "before",
            f"after {candidate.strategy}",
        )
        stream = sys.stdout
        if stream is None:  # stdout closed (`>&-`)
            return
        try:
            stream.write("".join(diff))
            stream.flush()
        except OSError as exc:  # a reader gone (said nowhere: it asked for no more), a full disk
            if not isinstance(exc, BrokenPipeError):
                sys.stderr.write(
                    f"ireereduce: --print-diff: stdout cannot be written ({exc.strerror}); no more diffs\n"
                )
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, stream.fileno())
            os.close(null)


class HeartbeatLine:
    """When stderr is not a terminal: a status line after each stretch of silence."""

    def __init__(self, monitor: Monitor, write: Callable[[str], None]) -> None:
        self.monitor = monitor
        self.write = write

    def __call__(self, kind: str, fields: dict[str, Any]) -> None:
        if kind == "heartbeat":
            self.write(f"ireereduce: still working: {self.monitor.status().line()}")


class LiveStatus:
    """The status block under the log on a terminal; names wrap, never get cut."""

    def __init__(self, monitor: Monitor, console: Any) -> None:
        from rich.live import Live

        self.monitor = monitor
        self.live = Live(
            console=console,
            get_renderable=self.render,
            refresh_per_second=4,
            transient=True,
            redirect_stderr=True,
            redirect_stdout=True,
        )

    def render(self) -> Any:
        from rich.text import Text

        s = self.monitor.status()
        if s.best is not None and s.original is not None:
            size = f"{s.best} of {s.original} ({s.percent():.1f}%)"
        else:
            size = "measuring the input"
        checks = (
            s.detail
            if s.detail
            else f"{s.checks} done, {s.running} running, {s.cache_hits} cache hits, "
            f"{s.invalid} invalid, {s.different_bug} different bug"
        )
        lines = [
            f"ireereduce  {s.phase}" + (f"  strategy {s.strategy}" if s.strategy else ""),
            f"  size      {size}",
            f"  checks    {checks}",
            f"  time      last improvement {s.since_improvement:.0f} s ago, elapsed {s.elapsed:.0f} s",
        ]
        return Text("\n".join(lines), overflow="fold", no_wrap=False)

    def __enter__(self) -> LiveStatus:
        self.live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.live.__exit__(*exc)
