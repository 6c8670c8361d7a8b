"""Oracle verdicts by content: the same candidate text is never tested twice.

Strategies converge on the same program often (Tian et al. found 24-62% duplicates),
and the final no-progress round re-derives many
candidates that were already judged.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import errno
import hashlib
import json
import os
import stat
import threading
from collections.abc import Callable
from typing import Any

from reducer.core.executor import Executor
from reducer.core.oracle import Oracle, Verdict


def key(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=20).digest()


class VerdictCache:
    """Verdicts by content hash, decided or speculative alike: a text is checked once.
    (The engine counts hits itself, in its per-strategy statistics.)"""

    def __init__(self) -> None:
        self._verdicts: dict[bytes, bool] = {}

    def get(self, k: bytes) -> bool | None:
        return self._verdicts.get(k)

    def put(self, k: bytes, interesting: bool) -> None:
        self._verdicts[k] = interesting


def read_regular(path: str) -> bytes:
    """A file of a state directory, never through a link and never waiting on a FIFO:
    anything but a regular file (put there after the directory was checked) is an OSError."""
    with os.fdopen(os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK), "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", path)
        return f.read()


class VerdictJournal:
    """The verdicts of one run, appended to a file as they arrive, so a run killed with
    SIGKILL can be continued: the engine is deterministic, so replaying the recorded
    verdicts from the same start walks the same path and checks nothing twice.

    One JSON object a line, flushed per record: {"k": key, "i": interesting, "o": outcome,
    "t": timed out} for a candidate, {"r": key, "i": interesting} for a re-check of a
    committed program (the final confirmation). A torn last line (the kill came in the
    middle of a write) is dropped and cut off before appending.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.verdicts: dict[bytes, Verdict] = {}
        self.rechecks: list[tuple[bytes, bool]] = []
        good = 0
        if os.path.lexists(path):
            # never through a link planted in the state directory: that file is not ours
            data = read_regular(path)
            for line in data.splitlines(keepends=True):
                try:
                    if not line.endswith(b"\n"):
                        raise ValueError("torn")
                    rec = json.loads(line)
                    # only what record() writes: a verdict of another type is not ours to trust
                    if not isinstance(rec["i"], bool) or not isinstance(rec.get("t", False), bool):
                        raise TypeError("not a verdict")
                    if "k" in rec:
                        self.verdicts[bytes.fromhex(rec["k"])] = _verdict(
                            rec["i"], str(rec.get("o", "")), rec.get("t", False)
                        )
                    else:
                        self.rechecks.append((bytes.fromhex(rec["r"]), rec["i"]))
                except (ValueError, KeyError, TypeError):
                    break
                good += len(line)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK, 0o666)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise OSError(errno.EINVAL, "not a regular file", path)
        self._file = os.fdopen(fd, "ab")
        self._file.truncate(good)
        self._lock = threading.Lock()

    def record(self, k: bytes, verdict: Verdict) -> None:
        self._append({"k": k.hex(), "i": verdict.interesting, "o": verdict.outcome, "t": verdict.timed_out})

    def record_recheck(self, k: bytes, interesting: bool) -> None:
        self._append({"r": k.hex(), "i": interesting})

    def _append(self, rec: dict[str, object]) -> None:
        with self._lock:
            try:
                self._file.write(json.dumps(rec, separators=(",", ":")).encode() + b"\n")
                self._file.flush()
            except OSError as exc:  # a full disk names no file: say it is the journal
                raise OSError(exc.errno, exc.strerror, self.path) from None

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._file.close()


def _verdict(interesting: bool, outcome: str, timed_out: bool) -> Verdict:
    rc = None if timed_out else 0 if interesting else 1
    return Verdict(bool(interesting), rc, bool(timed_out), 0.0, "", outcome)


class JournaledExecutor(Executor):
    """Answers recorded candidates from the journal and records the rest.

    Replay sits here, not in the VerdictCache, on purpose: the engine counts a cache hit
    differently from an oracle call and ranks strategies by oracle calls, so verdicts
    served as cache hits would send a resumed run down another path. Served as finished
    oracle calls, the resumed run's statistics and choices are the uninterrupted run's.
    `after` sees each new verdict first (the session's check on the user's files); an
    exception from it or from writing the journal fails that candidate's future, so it
    surfaces in the main thread.
    """

    def __init__(
        self, inner: Executor, journal: VerdictJournal | None, after: Callable[[Verdict], None] | None = None
    ) -> None:
        self.inner = inner
        self.journal = journal
        self.after = after
        self.replayed = 0
        self._inner: dict[concurrent.futures.Future[Verdict], concurrent.futures.Future[Verdict]] = {}
        self.workers = inner.workers
        self.stats = inner.stats

    def submit(self, data: bytes, oracle: Oracle | None = None) -> concurrent.futures.Future[Verdict]:
        return self.submit_keyed(data, key(data), oracle)

    def submit_keyed(self, data: bytes, k: bytes, oracle: Oracle | None = None) -> concurrent.futures.Future[Verdict]:
        """`submit` when data's key is known already (the engine's cache key): hashing
        each megabyte candidate once more here was a few percent of the engine's time."""
        out: concurrent.futures.Future[Verdict] = concurrent.futures.Future()
        recorded = self.journal.verdicts.get(k) if self.journal is not None else None
        if recorded is not None:
            self.replayed += 1
            out.set_result(recorded)
            return out
        inner = self.inner.submit(data, oracle)
        self._inner[out] = inner

        def done(f: concurrent.futures.Future[Verdict]) -> None:
            self._inner.pop(out, None)
            if f.cancelled():
                out.cancel()
                return
            try:
                verdict = f.result()
                self._record(k, verdict)
            except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
                if out.set_running_or_notify_cancel():
                    out.set_exception(exc)
                return
            if out.set_running_or_notify_cancel():
                out.set_result(verdict)

        inner.add_done_callback(done)
        return out

    def record(self, data: bytes, verdict: Verdict) -> None:
        """Take a verdict reached on the inner executor before the journal existed (the
        re-printed original's, checked alongside the original) as if it had run here."""
        self._record(key(data), verdict)

    def _record(self, k: bytes, verdict: Verdict) -> None:
        """A new verdict: the check on the user's files first, then the journal."""
        if self.after is not None:
            self.after(verdict)
        if self.journal is not None:
            self.journal.record(k, verdict)
            self.journal.verdicts[k] = verdict

    def cancel(self, future: concurrent.futures.Future[Verdict]) -> None:
        """Cancel the inner check; its done callback then cancels future. A check that
        finished first is not cancelled: its verdict is recorded and still reaches future
        (cancelling future here would drop a verdict that was paid for)."""
        inner = self._inner.pop(future, None)
        if inner is not None:
            self.inner.cancel(inner)

    def close(self, abort: bool = False) -> None:
        self.inner.close(abort)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
