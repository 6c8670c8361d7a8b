"""What lets an unattended run be stopped, killed or repeated safely: the lock on the
output, and the state directory a killed run continues from.

The state directory holds the run's settings fingerprint (settings, input and check
hashes), the start (the program after the original was checked and the workflows ran,
the calibrated oracle with its timeout and the original's verdict) and the verdict
journal (cache.VerdictJournal). The engine's position is not stored: the engine is
deterministic, so replaying the journal from the start reaches it again.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import pickle
import shutil
from typing import Any

from reducer.core.cache import VerdictJournal

#: Settings that do not change which program the run ends with (or name files only).
#: Where checks run never changes the result (the engine is deterministic for any -j and
#: executor), so a run killed on a cluster can continue locally and the other way round.
_NOT_FINGERPRINTED = {
    "output",
    "report",
    "report_json",
    "stats_json",
    "log_file",
    "jobs",
    "state_dir",
    "no_state",
    "fresh",
    "executor",
    "scheduler",
    "resources",
    "check_files",
    "max_time",
    "max_checks",
}  # limits say where a run stops, not what it finds


class Busy(Exception):
    def __init__(self, pid: str) -> None:
        super().__init__(pid)
        self.pid = pid


class OutputLock:
    """An fcntl lock on OUTPUT.lock, holding the owner's PID. The kernel drops it when the
    owner dies, SIGKILL included, so a stale file never blocks a rerun."""

    def __init__(self, output: str) -> None:
        self.path = output + ".lock"
        self._fd: int | None = None

    def acquire(self) -> None:
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    os.close(fd)
                    raise
                pid = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
                os.close(fd)
                raise Busy(pid) from None
            try:  # the holder may have removed the file between our open and our lock
                same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            os.unlink(self.path)
        os.close(self._fd)
        self._fd = None


def digest(path: str | None) -> str | None:
    if path is None:
        return None
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None


def fingerprint(settings: Any, input_bytes: bytes) -> dict[str, Any]:
    """What must be equal for a recorded run to be continued: the settings that decide
    the result, the input's bytes and the check script's bytes."""
    import attrs

    fields = {k: v for k, v in attrs.asdict(settings).items() if k not in _NOT_FINGERPRINTED}
    fields = json.loads(json.dumps(fields, default=list))
    return {
        "settings": fields,
        "input": hashlib.sha256(input_bytes).hexdigest(),
        "check": digest(settings.check),
    }


def differences(old: dict[str, Any], new: dict[str, Any]) -> str:
    """The first thing that differs, in the user's words."""
    if old.get("input") != new.get("input"):
        return "the input changed"
    if old.get("check") != new.get("check"):
        return "the check script changed"
    a, b = old.get("settings", {}), new.get("settings", {})
    names = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
    return "other settings (" + ", ".join("--" + n.replace("_", "-") for n in names) + ")"


class RunState:
    """One run's state directory."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.journal: VerdictJournal | None = None

    @property
    def _run(self) -> str:
        return os.path.join(self.path, "run.json")

    @property
    def _start(self) -> str:
        return os.path.join(self.path, "start.pickle")

    def load(self) -> tuple[dict[str, Any], Any] | None:
        """The recorded fingerprint and start, or None when there is no complete record."""
        try:
            with open(self._run) as f:
                recorded = json.load(f)
            with open(self._start, "rb") as f:
                start = pickle.load(f)
        except (OSError, ValueError, EOFError, pickle.UnpicklingError, AttributeError, ImportError):
            return None
        return recorded, start

    def exists(self) -> bool:
        return os.path.exists(self.path)

    def create(self, fp: dict[str, Any], start: Any) -> None:
        """Record a new run (the start is written before the fingerprint: a run.json
        always has its start)."""
        self.remove()
        os.makedirs(self.path)
        with open(self._start, "wb") as f:
            pickle.dump(start, f)
        with open(self._run + ".tmp", "w") as f:
            json.dump(fp, f, indent=1, sort_keys=True)
        os.replace(self._run + ".tmp", self._run)

    def open_journal(self) -> VerdictJournal:
        self.journal = VerdictJournal(os.path.join(self.path, "verdicts.jsonl"))
        return self.journal

    def remove(self) -> None:
        if self.journal is not None:
            self.journal.close()
            self.journal = None
        shutil.rmtree(self.path, ignore_errors=True)
