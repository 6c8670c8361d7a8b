"""Runs the user's interestingness check on one candidate.

The contract is C-Reduce's, C-Vise's, llvm-reduce's and iree-reduce's: the check
exits 0 when the candidate is still interesting. It gets the candidate's path as its
first argument and runs in a fresh temporary directory that also holds the candidate
under the input's own file name. mlir-reduce's convention is the opposite.
"""

from __future__ import annotations

import logging
import os
import resource
import signal
import subprocess
import tempfile
import time

import attrs

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


@attrs.frozen
class Oracle:
    """Everything needed to run the check, and nothing about MLIR: picklable for workers."""

    script: str  # absolute path
    basename: str  # the input's file name, reused for every candidate
    timeout: float | None
    keep_stderr: bool = False

    def run(self, data: bytes) -> Verdict:
        with tempfile.TemporaryDirectory(prefix="ireereduce-") as tmp:
            path = os.path.join(tmp, self.basename)
            with open(path, "wb") as f:
                f.write(data)
            err_path = os.path.join(tmp, ".ireereduce-stderr")
            start = time.monotonic()
            with open(err_path, "wb") as err:
                proc = subprocess.Popen(
                    [self.script, path],
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
                    rc: int | None = proc.wait(timeout=self.timeout)
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
            tail = ""
            if self.keep_stderr:
                with open(err_path, "rb") as f:
                    f.seek(max(0, os.path.getsize(err_path) - 4000))
                    tail = f.read().decode(errors="replace")
        verdict = Verdict(rc == 0, rc, timed_out, seconds, tail)
        log.debug("check: rc=%s timed_out=%s %.2fs", rc, timed_out, seconds)
        return verdict


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
