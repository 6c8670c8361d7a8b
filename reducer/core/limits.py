"""--max-time and --max-checks: the engine stops at its next scheduling point with the best
program so far (its `should_stop` hook), without knowing what the limits are. And
--memory-limit: what a check's processes may use together (the executors pass it on)."""

from __future__ import annotations

import concurrent.futures
import re
import resource
import time

import attrs

from reducer.core.engine import Stopped
from reducer.core.executor import Executor
from reducer.core.oracle import Oracle, Verdict

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


class Bounded(Executor):
    """An executor whose waits end at a deadline (--max-time's end), for the checks outside
    the engine's loop: the original's, IREE's triage steps (a dispatch isolation compiles
    every executable, a phase search several stops: told to stop at 6 s, a run went on
    isolating for 47), the start's, and flags and --for-upstream after the engine. At the
    deadline the checks still running are cancelled and `Stopped` says why; the inner
    executor stays the caller's."""

    def __init__(self, inner: Executor, deadline: float, reason: str) -> None:
        self.inner, self.deadline, self.reason = inner, deadline, reason
        self.workers, self.stats = inner.workers, inner.stats

    def expired(self) -> bool:
        return time.monotonic() >= self.deadline

    def submit(self, data: bytes, oracle: Oracle | None = None) -> concurrent.futures.Future[Verdict]:
        if self.expired():
            raise Stopped(self.reason)
        return self.inner.submit(data, oracle)

    def cancel(self, future: concurrent.futures.Future[Verdict]) -> None:
        self.inner.cancel(future)

    def close(self, abort: bool = False) -> None:
        """The inner executor is closed by whoever made it."""

    def result(self, future: concurrent.futures.Future[Verdict]) -> Verdict:
        return self._wait([future])[0]

    def run(self, data: bytes, oracle: Oracle | None = None) -> Verdict:
        return self._wait([self.submit(data, oracle)])[0]

    def map(self, items: list[bytes], oracle: Oracle | None = None) -> list[Verdict]:
        if self.expired():
            raise Stopped(self.reason)
        return self._wait([self.inner.submit(d, oracle) for d in items])

    def _wait(self, futures: list[concurrent.futures.Future[Verdict]]) -> list[Verdict]:
        _, waiting = concurrent.futures.wait(futures, timeout=max(0.0, self.deadline - time.monotonic()))
        if waiting:
            for future in futures:
                self.inner.cancel(future)
            raise Stopped(self.reason)
        return [f.result() for f in futures]


#: Below this a check's shell or interpreter cannot even start (`--memory-limit 100` meant 100M).
MIN_MEMORY_LIMIT = 16 << 20
#: 4 EiB: more than any machine has (and than a C long holds).
MAX_MEMORY_LIMIT = 1 << 62
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_size(text: str) -> int:
    """--memory-limit's value: bytes, or a number with K, M, G or T (powers of 1024;
    "2G", "1.5g", "512MiB"); 0 means no limit. ValueError says what is wrong."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([KMGT]?)(?:I?B)?\s*", text, re.IGNORECASE)
    if match is None:
        raise ValueError(f"{text!r} is not a size like 4G, 512M or 0 (no limit)")
    size = int(float(match[1]) * _UNITS[match[2].upper()])
    if 0 < size < MIN_MEMORY_LIMIT:
        raise ValueError(f"{text!r} is too little to start a check: give at least 16M, or 0 for no limit")
    if size >= MAX_MEMORY_LIMIT:  # no machine has it, and a typo (99999999T) should not mean "none"
        raise ValueError(f"{text!r} is more memory than a process can be given: give less, or 0 for no limit")
    return size


#: The address space (`ulimit -v`) a run needs at the least: Python, the MLIR and IREE
#: libraries it maps (the compiler's alone is hundreds of MiB) and OpenBLAS's thread
#: buffers. Measured: a small run needs about 700 MiB on a 2-core VM; below it, the
#: loads fail deep inside a library (an ImportError, or OpenBLAS exiting the process).
#: A Dask LocalCluster's workers need more: at 1.1 GiB they failed to load the compiler,
#: at 1.6 GiB they ran. One floor for both, with room for more cores.
MIN_ADDRESS_SPACE = 2 << 30


def address_space_short() -> str | None:
    """Why the address-space limit is too low for a run, or None: said before the run
    starts, as one line, instead of a library failing to load halfway through it."""
    soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    if soft == resource.RLIM_INFINITY or soft >= MIN_ADDRESS_SPACE:
        return None
    return (
        f"the address-space limit (ulimit -v) is {soft >> 20} MiB; a run loads the MLIR and IREE libraries "
        f"and needs at least {MIN_ADDRESS_SPACE >> 20} MiB: raise it (ulimit -v {MIN_ADDRESS_SPACE >> 10})"
    )


def no_file_size() -> str | None:
    """Why no file can be written (`ulimit -f 0`), or None: said before logging starts,
    whose queue needs a file of its own and failed there with a traceback."""
    if resource.getrlimit(resource.RLIMIT_FSIZE)[0] != 0:
        return None
    return "the file-size limit (ulimit -f) is 0: no file can be written, not even the output; raise it"
