"""Oracles: decide whether a candidate (bytes) is still interesting, knowing nothing of IR.

The user's check script is one (`ScriptOracle`); the built-in ones in `reducer/oracles/`
run iree-compile / iree-run-module themselves. For scripts the contract is C-Reduce's, C-Vise's, llvm-reduce's and iree-reduce's: the check
exits 0 when the candidate is still interesting. It gets the candidate's path as its
first argument and runs in a fresh temporary directory that also holds the candidate
under the input's own file name. mlir-reduce's convention is the opposite.
"""

from __future__ import annotations

import abc
import contextlib
import logging
import os
import resource
import shlex
import signal
import subprocess
import tempfile
import time

from collections.abc import Iterator

import attrs

from reducer.signature import Signature

log = logging.getLogger(__name__)

#: Seconds between SIGTERM and SIGKILL when a check times out.
KILL_GRACE = 1.0


@attrs.frozen
class Verdict:
    interesting: bool
    returncode: int | None  # negative: killed by that signal; None: timed out
    timed_out: bool = False
    seconds: float = 0.0
    stderr_tail: str = ""
    #: Why, in a word the summary counts: interesting, not interesting, no failure,
    #: different bug, timeout, run failed, same outputs, fast.
    outcome: str = ""
    signature: Signature | None = None


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

    @abc.abstractmethod
    def run(self, data: bytes) -> Verdict:
        """Judge one candidate."""

    def calibrate(self, original: Verdict) -> Oracle:
        """Learn from the original's verdict (its failure signature); the result judges candidates."""
        return self

    def with_timeout(self, timeout: float | None) -> Oracle:
        return attrs.evolve(self, timeout=timeout)  # type: ignore[misc]

    @abc.abstractmethod
    def reproducer(self, path: str) -> str:
        """The shell command a bug report gives for reproducing it on path."""

    def why_not(self, verdict: Verdict) -> str:
        """Why the original is not interesting, in words a user can act on."""
        tail = verdict.stderr_tail.strip().splitlines()[-1:] or [""]
        rc = verdict.returncode
        how = f"exit code {rc}" if rc is None or rc >= 0 else f"signal {-rc}"
        return f"{how}{'; ' + tail[0] if tail[0] else ''}"


@contextlib.contextmanager
def candidate_dir(data: bytes, basename: str) -> Iterator[tuple[str, str]]:
    """A fresh temporary directory holding the candidate under the input's file name."""
    with tempfile.TemporaryDirectory(prefix="ireereduce-") as tmp:
        path = os.path.join(tmp, basename)
        with open(path, "wb") as f:
            f.write(data)
        yield tmp, path


def run_in(argv: list[str], tmp: str, timeout: float | None, keep: int = 65536) -> Run:
    """Run argv in tmp, in its own process group so a timeout takes all of it down."""
    err_path = os.path.join(tmp, ".ireereduce-stderr")
    start = time.monotonic()
    with open(err_path, "wb") as err:
        proc = subprocess.Popen(
            argv,
            cwd=tmp,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            start_new_session=True,  # its own process group, so we can kill all of it
            preexec_fn=_no_core_dumps,
        )
        _current.append(proc.pid)
        timed_out = False
        try:
            rc: int | None = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out, rc = True, None
            _kill_group(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=KILL_GRACE)
            except subprocess.TimeoutExpired:
                pass
        finally:
            # Whatever the check left behind (background children) goes too.
            _kill_group(proc.pid, signal.SIGKILL)
            proc.wait()
            _current.remove(proc.pid)
    seconds = time.monotonic() - start
    size = os.path.getsize(err_path)
    with open(err_path, "rb") as f:
        if size <= keep:
            stderr = f.read()
        else:
            head = f.read(keep // 2)
            f.seek(size - keep // 2)
            stderr = head + b"\n[...]\n" + f.read()
    log.debug("%s: rc=%s timed_out=%s %.2fs", os.path.basename(argv[0]), rc, timed_out, seconds)
    return Run(rc, timed_out, seconds, stderr.decode(errors="replace"))


@attrs.frozen
class ScriptOracle(Oracle):
    """The user's check script: exit 0 = interesting."""

    script: str  # absolute path
    basename: str  # the input's file name, reused for every candidate
    timeout: float | None
    args: tuple[str, ...] = ()  # --test-arg: after the candidate's path, as llvm-reduce passes them

    def run(self, data: bytes) -> Verdict:
        with candidate_dir(data, self.basename) as (tmp, path):
            r = run_in([self.script, path, *self.args], tmp, self.timeout, keep=4000)
        interesting = r.returncode == 0
        outcome = "interesting" if interesting else "timeout" if r.timed_out else "not interesting"
        return Verdict(interesting, r.returncode, r.timed_out, r.seconds, r.stderr, outcome)

    def reproducer(self, path: str) -> str:
        # Relative names: the report is read on another machine, next to the files it names.
        argv = [f"./{os.path.basename(self.script)}", path, *self.args]
        return f"{shlex.join(argv)}  # exits 0 while the bug is there"


_current: list[int] = []


def _no_core_dumps() -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _kill_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def kill_running_checks(*_args: object) -> None:
    """Signal handler for workers: take the running check's whole process group down too."""
    for pid in list(_current):
        _kill_group(pid, signal.SIGKILL)
    os._exit(1)
