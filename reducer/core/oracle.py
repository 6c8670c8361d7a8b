"""Oracles: decide whether a candidate (bytes) is still interesting, knowing nothing of IR.

The user's check script is one (`ScriptOracle`); the built-in ones in `reducer/iree/oracles/`
run iree-compile / iree-run-module themselves. For scripts the contract is C-Reduce's, C-Vise's, llvm-reduce's and iree-reduce's: the check
exits 0 when the candidate is still interesting. It gets the candidate's path as its
first argument and runs in a fresh temporary directory that also holds the candidate
under the input's own file name. mlir-reduce's convention is the opposite.
"""

from __future__ import annotations

import abc
import contextlib
import contextvars
import logging
import os
import resource
import select
import shlex
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, ClassVar, Protocol

import attrs

from reducer.core import codec, processes
from reducer.core.processes import format_size, no_core_dumps
from reducer.core.rundirs import CHECK_TAG_ENV, check_env, scratch_dir, sweep

log = logging.getLogger(__name__)

#: Seconds between SIGTERM and SIGKILL when a check times out.
KILL_GRACE = 1.0
#: How often a running check looks whether it was cancelled (a commit made it obsolete).
CANCEL_POLL = 0.05

#: Asked while a check runs: has its verdict stopped mattering? Where the check's exit is
#: waited for through a pidfd, one that also has a `fileno()` is asked as soon as that
#: descriptor is readable, not only every CANCEL_POLL.
CancelFn = Callable[[], bool]


def never() -> bool:
    return False


class Cancelled(Exception):
    """The check was stopped because its verdict is no longer needed."""


class Finding(Protocol):
    """What an oracle learned about one failure, e.g. the IREE room's `Signature`. The
    contract only carries it, so the core stays free of any one compiler's diagnostics."""

    @property
    def kind(self) -> str: ...

    def describe(self) -> str: ...


@codec.record()
@attrs.frozen
class Verdict:
    interesting: bool
    returncode: int | None  # negative: killed by that signal; None: timed out
    timed_out: bool = False
    seconds: float = 0.0
    stderr_tail: str = ""
    #: Why, in a word the summary counts: interesting, not interesting, no failure,
    #: different bug, timeout, out of memory, run failed, same outputs, fast.
    outcome: str = ""
    signature: Finding | None = None
    #: What the user should hear of how this was judged, one warning each (given inputs
    #: that do not fit the program, say); kept apart from the log a failure is told from.
    notes: tuple[str, ...] = ()


@attrs.frozen
class Run:
    """One finished command: what the oracles decide from."""

    returncode: int | None
    timed_out: bool
    seconds: float
    stderr: str  # the head and the tail: diagnostics come first, a crash stack last


class Oracle(abc.ABC):
    """Decides whether bytes are still interesting. Picklable (workers get a copy) and
    blind to IR: a candidate is only bytes in a file."""

    timeout: float | None
    #: The fields holding compiler command lines, which flag reduction may shorten; none
    #: for a script oracle. Declared here so callers read it instead of probing with getattr.
    commands: ClassVar[tuple[str, ...]] = ()
    #: What the report calls it: one of docs/report-schema.json's oracle.kind values
    #: (tests/test_report.py checks every oracle's kind against that enum).
    kind: ClassVar[str]
    #: Whether a verdict depends on how long the check takes: such checks run one at a
    #: time where they are compared (the original's), as parallel ones compete for the CPUs.
    measures_time: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: object) -> None:
        """Every oracle may be recorded in a run's start (reducer/core/codec.py)."""
        super().__init_subclass__(**kwargs)
        codec.register(cls)

    @abc.abstractmethod
    def run(self, data: bytes, cancel: CancelFn = never) -> Verdict:
        """Judge one candidate; raise `Cancelled` (its processes killed) once `cancel()` says so."""

    def calibrate(self, original: Verdict) -> Oracle:
        """Learn from the original's verdict (its failure signature); the result judges candidates."""
        return self

    def learns_from_original(self) -> bool:
        """Whether `calibrate` depends on the original's verdict. One that does not (a
        script decides for itself) judges another text the same before that verdict is
        known, so the session checks the re-printed original alongside the original."""
        return type(self).calibrate is not Oracle.calibrate

    def with_timeout(self, timeout: float | None) -> Oracle:
        # Every oracle is an attrs class with a timeout field; the abstract base cannot say so.
        return attrs.evolve(self, timeout=timeout)  # type: ignore[misc]

    @abc.abstractmethod
    def reproducer(self, path: str) -> str:
        """The shell command a bug report gives for reproducing it on path."""

    def script_path(self) -> str | None:
        """The user's check script, which a report shows; None for a built-in oracle."""
        return None

    def data_files(self) -> tuple[str, ...]:
        """Files of this machine the oracle reads besides the candidate (a built-in
        oracle's data, such as parameter archives): an executor whose workers may sit on
        other machines ships them (reducer/core/dask_executor.py `ship`)."""
        return ()

    def with_data_files(self, moved: Mapping[str, str]) -> Oracle:
        """This oracle reading each of its `data_files()` from where `moved` says it is now."""
        return self

    def failure(self) -> Finding | None:
        """The original's failure that candidates must match, once calibrated; None if
        the oracle keeps none (a script decides for itself)."""
        return None

    def why_not(self, verdict: Verdict) -> str:
        """Why the original is not interesting, in words a user can act on."""
        tail = verdict.stderr_tail.strip().splitlines()[-1:] or [""]
        return f"{ended(verdict.returncode, verdict.timed_out)}{'; ' + tail[0] if tail[0] else ''}"


def ended(returncode: int | None, timed_out: bool = False) -> str:
    """How a command ended, in words: exit code N, signal N (a negative code), timed out."""
    if timed_out or returncode is None:
        return "timed out"
    return f"exit code {returncode}" if returncode >= 0 else f"signal {-returncode}"


@contextlib.contextmanager
def candidate_dir(data: bytes, basename: str) -> Iterator[tuple[str, str]]:
    """A fresh temporary directory holding the candidate under the input's file name,
    inside the run's directory when there is one."""
    with scratch_dir() as tmp:
        path = os.path.join(tmp, basename)
        with open(path, "wb") as f:
            write_data(f, data)
        yield tmp, path


def write_data(f: Any, data: bytes) -> None:
    """Write a candidate's file. Most candidates are their bytes; one that holds more
    than it carries (`reducer.core.resources.Attached`: big weights the kernel copies from
    the input file) writes itself, so no process holds those bytes."""
    writer = getattr(data, "write_to", None)
    if writer is not None:
        writer(f)
    else:
        f.write(data)


def whole(data: bytes) -> bytes:
    """A candidate's file as bytes, for what must carry it whole (a Dask task)."""
    get = getattr(data, "whole", None)
    return get() if get is not None else data


def run_in(argv: list[str], tmp: str, timeout: float | None, keep: int = 65536, cancel: CancelFn = never) -> Run:
    """Run argv in tmp, in its own process group so a timeout or a cancel takes all of it
    down; then whatever it left behind goes too (`_end_leftovers`). Under `judge`'s
    memory limit, the memory its processes use together is measured at every wake-up
    (each CANCEL_POLL), and past the limit the check is killed (SIGKILL, no grace)."""
    if cancel():
        raise Cancelled
    # The check's stderr goes to a file with no name: one in tmp could be the candidate's own
    # (an input named .ireereduce-stderr was overwritten by it), or a file the check removes.
    with tempfile.TemporaryFile(dir=tmp) as err:
        return _run_capturing(argv, tmp, timeout, keep, cancel, err)


def _run_capturing(argv: list[str], tmp: str, timeout: float | None, keep: int, cancel: CancelFn, err: Any) -> Run:
    env, check_tag = check_env()
    # What the check's tools leave in their temp dir (iree-compile's objects, when it is
    # killed) goes with the candidate's directory, not into the user's.
    env["TMPDIR"] = env["TMP"] = env["TEMP"] = tmp
    limits = _limits.get()
    memory = limits.memory if limits is not None else 0
    earlier = processes.children() if processes.reaping() else frozenset()
    start = time.monotonic()
    proc = _start(argv, tmp, env, err)
    exited: int | None = None
    timed_out = cancelled = too_big = False
    deadline = None if timeout is None else start + timeout
    rc: int | None = None
    try:
        exited = _exit_watch(proc.pid)
        while True:
            step = CANCEL_POLL if deadline is None else max(0.0, min(CANCEL_POLL, deadline - time.monotonic()))
            rc = _wait_exit(proc, exited, step, cancel)
            if rc is not None:
                break
            if cancel():
                cancelled = True
                break
            if memory and processes.memory_in_use(proc.pid, earlier) > memory:
                too_big = True  # killed as it ends, with the rest of its group
                break
            if deadline is not None and time.monotonic() >= deadline:
                timed_out = True
                _kill_group(proc.pid, signal.SIGTERM)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=KILL_GRACE)
                break
    finally:
        if exited is not None:
            os.close(exited)
        _end_leftovers(proc, check_tag, earlier)
    if cancelled:
        raise Cancelled
    if too_big and limits is not None:
        limits.reached = True
        rc = proc.returncode
    seconds = time.monotonic() - start
    size = err.seek(0, os.SEEK_END)
    err.seek(0)
    if size <= keep:
        stderr = err.read()
    else:
        head = err.read(keep // 2)
        err.seek(size - keep // 2)
        stderr = head + b"\n[...]\n" + err.read()
    log.debug("%s: rc=%s timed_out=%s %.2fs", os.path.basename(argv[0]), rc, timed_out, seconds)
    return Run(rc, timed_out, seconds, stderr.decode(errors="replace"))


def _start(argv: list[str], tmp: str, env: dict[str, str], err: Any) -> subprocess.Popen[bytes]:
    """The check's process, in a session of its own (a process group we can kill whole).

    A function to run between fork and exec makes Python fork the whole process instead
    of vfork-ing it: 5 ms per check in a 130 MB process. The local pool's workers forbid
    core dumps for themselves once, and their checks inherit that; elsewhere the function
    does it. (Memory is measured while the check runs, not limited here: see `run_in`.)"""
    cores_off = resource.getrlimit(resource.RLIMIT_CORE) == (0, 0)
    return subprocess.Popen(
        argv,
        cwd=tmp,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=err,
        start_new_session=True,
        preexec_fn=None if cores_off else no_core_dumps,
    )


def _end_leftovers(proc: subprocess.Popen[bytes], check_tag: str, earlier: frozenset[int]) -> None:
    """Kill what the check left behind, and reap it. Its process group goes first. A
    process that left the group (setsid) is found, in a process that is a subreaper,
    among this process's children once its parent has gone; elsewhere by the run's
    environment tag, which a process may clear (`env -i`)."""
    _kill_group(proc.pid, signal.SIGKILL)
    _reap(proc, block=True)
    if processes.reaping():
        processes.end_orphans(earlier)
    else:
        sweep(CHECK_TAG_ENV, check_tag)


@attrs.frozen
class ScriptOracle(Oracle):
    kind: ClassVar[str] = "check-script"
    """The user's check script: exit 0 = interesting."""

    script: str  # absolute path
    basename: str  # the input's file name, reused for every candidate
    timeout: float | None
    args: tuple[str, ...] = ()  # --test-arg: after the candidate's path, as llvm-reduce passes them

    def run(self, data: bytes, cancel: CancelFn = never) -> Verdict:
        with candidate_dir(data, self.basename) as (tmp, path):
            r = run_in([self.script, path, *self.args], tmp, self.timeout, keep=4000, cancel=cancel)
        interesting = r.returncode == 0
        outcome = "interesting" if interesting else "timeout" if r.timed_out else "not interesting"
        return Verdict(interesting, r.returncode, r.timed_out, r.seconds, r.stderr, outcome)

    def script_path(self) -> str | None:
        return self.script

    def reproducer(self, path: str) -> str:
        # Relative names: the report is read on another machine, next to the files it names.
        argv = [f"./{os.path.basename(self.script)}", path, *self.args]
        return f"{shlex.join(argv)}  # exits 0 while the bug is there"


@attrs.frozen
class RepeatOracle(Oracle):
    """`--repeat N`: interesting only if the inner oracle says so N times in a row
    (Shrink Ray's and ClusterFuzz's answer to nondeterministic checks). Stops at the
    first rejection, so an uninteresting candidate usually costs one run."""

    inner: Oracle
    times: int

    @property
    def kind(self) -> str:  # type: ignore[override]  # a wrapper reports what it wraps
        return self.inner.kind

    @property
    def measures_time(self) -> bool:  # type: ignore[override]  # a wrapper times what it wraps
        return self.inner.measures_time

    @property
    def timeout(self) -> float | None:  # type: ignore[override]  # read-only: the inner oracle's
        return self.inner.timeout

    def run(self, data: bytes, cancel: CancelFn = never) -> Verdict:
        verdict = self.inner.run(data, cancel)
        for _ in range(self.times - 1):
            if not verdict.interesting:
                break
            verdict = self.inner.run(data, cancel)
        return verdict

    def script_path(self) -> str | None:
        return self.inner.script_path()

    def failure(self) -> Finding | None:
        return self.inner.failure()

    def calibrate(self, original: Verdict) -> Oracle:
        return attrs.evolve(self, inner=self.inner.calibrate(original))

    def learns_from_original(self) -> bool:
        return self.inner.learns_from_original()

    def with_timeout(self, timeout: float | None) -> Oracle:
        return attrs.evolve(self, inner=self.inner.with_timeout(timeout))

    def reproducer(self, path: str) -> str:
        return self.inner.reproducer(path)

    def why_not(self, verdict: Verdict) -> str:
        return self.inner.why_not(verdict)


def _exit_watch(pid: int) -> int | None:
    """A descriptor that becomes readable when pid exits (Linux 5.3 and later), so the
    verdict is read the moment the check ends; None where there is none."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _wait_exit(proc: subprocess.Popen[bytes], exited: int | None, step: float, cancel: CancelFn) -> int | None:
    """proc's exit code once it exits within step seconds, else None; sooner if cancel
    has a `fileno` that becomes readable (the local pool's workers: a cancelled check
    frees its worker at once). Without a pidfd it polls in sleeps growing to 20 ms, as
    Popen.wait does (about 7 ms of delay on average, for every check and so for every
    wave of dependent checks), and a cancel is seen only at the next step.
    poll(), not select(): a descriptor numbered 1024 or more (hundreds of workers) is
    out of select's range."""
    if exited is None:
        deadline, delay = time.monotonic() + step, 0.0005
        while (done := _reap(proc, block=False)) is None:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            time.sleep(min(delay, left))
            delay = min(2 * delay, 0.02)
        return done
    watch = select.poll()
    watch.register(exited, select.POLLIN)
    wake = getattr(cancel, "fileno", None)
    if wake is not None:
        watch.register(wake(), select.POLLIN)
    watch.poll(step * 1000)
    return _reap(proc, block=False)


def _reap(proc: subprocess.Popen[bytes], block: bool) -> int | None:
    """proc's exit code once it has exited, or None; None also once it was reaped before."""
    if proc.returncode is not None:
        return None
    try:
        pid, status = os.waitpid(proc.pid, 0 if block else os.WNOHANG)
    except ChildProcessError:  # reaped elsewhere: Popen knows what to say
        return proc.wait()
    if pid == 0:
        return None
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode


# -- what a check may use, and what it leaves ----------------------------------------------

#: The outcome of a check killed because its processes together used more memory than
#: it may (`run_in` measures them every CANCEL_POLL: `processes.memory_in_use`). Such a
#: candidate is not interesting, whatever the oracle would have made of the killed check.
OUT_OF_MEMORY = "out of memory"


@attrs.define
class CheckLimits:
    """What `judge` puts on the checks of one candidate: the memory each check's
    processes may use together (bytes), and whether one was killed for using more."""

    memory: int
    reached: bool = False


_limits: contextvars.ContextVar[CheckLimits | None] = contextvars.ContextVar("check_limits", default=None)


def judge(oracle: Oracle, data: bytes, cancel: CancelFn = never, memory: int = 0) -> Verdict:
    """oracle.run(data), each of its checks killed once its processes together use more
    than `memory` bytes (0: no limit). Then the verdict is not interesting, its outcome
    is OUT_OF_MEMORY, and its last line says so (what `why_not` shows): a killed check
    says nothing about the candidate, as a timed-out one does not."""
    if not memory:
        return oracle.run(data, cancel)
    limits = CheckLimits(memory)
    token = _limits.set(limits)
    try:
        verdict = oracle.run(data, cancel)
    finally:
        _limits.reset(token)
    if not limits.reached:
        return verdict
    note = f"ireereduce: the check was killed at its memory limit ({format_size(memory)}; --memory-limit)"
    tail = f"{verdict.stderr_tail.rstrip()}\n{note}".lstrip("\n")
    return attrs.evolve(verdict, interesting=False, outcome=OUT_OF_MEMORY, stderr_tail=tail)


def _kill_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass
