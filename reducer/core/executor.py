"""Where oracle calls run. The engine and the workflows only submit bytes, cancel what a
commit made obsolete, and read verdicts, so a distributed executor replaces the local
pool without touching either.

The contract (an `Executor`):

* built from `(oracle, workers)`: `workers` checks may run at once;
* `submit(data, oracle=None)` runs `oracle` (default: the executor's) on `data` and
  returns a `concurrent.futures.Future[Verdict]`;
* `submit_keyed(data, key, oracle=None)` is `submit` told data's cache key (for an
  executor that keys verdicts, like the journal; by default it is plain `submit`);
* `cancel(future)` makes a check obsolete: a queued one never starts, a running one
  has its process group killed; its future is cancelled and carries no verdict;
* a check whose worker dies (OOM killer, `kill -9`, a check that kills its parent) is
  run again on a fresh worker; a candidate that kills its worker twice gets the
  verdict "worker died" (not interesting);
* `close(abort)` waits for running checks, or with abort kills them; either way no
  worker process and no temp dir of a check is left;
* `stats` (busy worker-seconds, lost workers) for the utilisation figure;
* `submit` raises `DataFileUnreadable` when an executor that ships an oracle's files
  (`Oracle.data_files`) to its workers cannot read one.
"""

from __future__ import annotations

import abc
import atexit
import collections
import concurrent.futures
import contextlib
import errno
import itertools
import logging
import mmap
import multiprocessing
import multiprocessing.connection
import os
import resource
import struct
import threading
import time
import warnings
from typing import Any

import attrs

from reducer.core import processes
from reducer.core.oracle import Cancelled, Oracle, Verdict, judge
from reducer.core.processes import (
    become_subreaper,
    leave_stops_to_parent,
    no_core_dumps,
    stops_deferred,
)

log = logging.getLogger(__name__)


class DataFileUnreadable(Exception):
    """A file a built-in oracle reads (`Oracle.data_files`) could not be read to ship it:
    the session says which, as one line (it was there when the run started)."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path, self.reason = path, reason


def read_data_file(path: str) -> bytes:
    """A data file's bytes, or DataFileUnreadable (deleted or moved since the run started)."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise DataFileUnreadable(path, exc.strerror or str(exc)) from None


#: A check may kill its worker this many times before it counts as not interesting.
MAX_WORKER_DEATHS = 2
#: Open files kept free beyond what the pool's workers hold: for the main process during
#: the run (the state journal, the output, logs, a scan of /proc) and for a worker's
#: check (its pidfd, stderr file and pipes; a worker inherits the main process's files).
FD_RESERVE = 32
#: Open files a worker needs free to start a check (the candidate's file, the check's
#: stderr file, its pidfd, /dev/null, the pipe that reports a failed exec, a scan of
#: /proc); below that the pool does not start (`OpenFilesLimit`).
FD_CHECK = 8
#: What one worker holds in the main process (its pipes), for the estimate in the message.
FD_WORKER = 4


class ExecutorLost(ConnectionError):
    """A check's verdict will never come: the executor lost what runs it (a Dask
    scheduler gone away cancels every check). Not the check's failure, nor ireereduce's."""


class OpenFilesLimit(Exception):
    """The open-files limit (ulimit -n) leaves no room for even one worker and its check."""

    def __init__(self, limit: int, needed: int) -> None:
        super().__init__(
            f"the open-files limit (ulimit -n) is {limit}, too low to run a check: ireereduce needs "
            f"about {needed} open files for one worker; raise it (ulimit -n {max(needed, 64)})"
        )
        self.limit = limit
        self.needed = needed


@attrs.define
class ExecutorStats:
    checks: int = 0  # submitted: the one count of every check a run makes through the executor
    busy_seconds: float = 0.0  # summed over workers: from a check's start to its verdict
    lost_workers: int = 0  # worker processes that died under a check
    cancelled: int = 0  # checks made obsolete before their verdict


def worker_died(deaths: int) -> Verdict:
    """The verdict of a candidate that killed its worker every time it ran."""
    return Verdict(
        False, None, outcome="worker died", stderr_tail=f"the check killed the process running it {deaths} times"
    )


class Executor(abc.ABC):
    workers: int
    stats: ExecutorStats

    @abc.abstractmethod
    def submit(self, data: bytes, oracle: Oracle | None = None) -> concurrent.futures.Future[Verdict]:
        """Run the oracle on data somewhere; the future holds its verdict."""

    @abc.abstractmethod
    def cancel(self, future: concurrent.futures.Future[Verdict]) -> None:
        """The verdict is no longer needed: stop the check and free its worker."""

    @abc.abstractmethod
    def close(self, abort: bool = False) -> None:
        """Release the workers; with abort, kill running checks instead of waiting."""

    def submit_keyed(self, data: bytes, k: bytes, oracle: Oracle | None = None) -> concurrent.futures.Future[Verdict]:
        """`submit`, told data's key (the engine's cache key) so that an executor that keys
        its verdicts (the journal) does not hash a megabyte candidate again."""
        return self.submit(data, oracle)

    def expired(self) -> bool:
        """Whether its checks must stop (`limits.Bounded`: --max-time's end): the `cancel`
        of a compile a workflow step runs in this process."""
        return False

    def result(self, future: concurrent.futures.Future[Verdict]) -> Verdict:
        """A submitted check's verdict, waited for (`limits.Bounded`: until its deadline)."""
        return future.result()

    def run(self, data: bytes, oracle: Oracle | None = None) -> Verdict:
        """One check, waited for (the workflows' sequential steps)."""
        return self.submit(data, oracle).result()

    def map(self, items: list[bytes], oracle: Oracle | None = None) -> list[Verdict]:
        """Several checks at once, verdicts in order (dispatch isolation, flags)."""
        return [f.result() for f in [self.submit(d, oracle) for d in items]]

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close(abort=exc[0] is not None)


# -- the local pool ----------------------------------------------------------------------


class _Slot:
    """The id of the task a worker should stop: 8 bytes of anonymous shared memory, which
    a forked worker shares with the parent (no file, so it works with a full temp dir),
    and a pipe whose byte wakes the worker's wait on its check at once (`run_in`), so a
    cancelled check frees its worker for the next one without a polling delay."""

    def __init__(self) -> None:
        self._memory = mmap.mmap(-1, 8)
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)

    @property
    def value(self) -> int:
        return int(struct.unpack_from("q", self._memory)[0])

    @value.setter
    def value(self, task_id: int) -> None:
        struct.pack_into("q", self._memory, 0, task_id)
        with contextlib.suppress(OSError):  # full: a wake-up is pending anyway
            os.write(self._wake_w, b"x")

    def close_reader(self) -> None:
        """In the parent, once the worker is forked: only the worker reads the pipe."""
        if self._wake_r >= 0:
            os.close(self._wake_r)
            self._wake_r = -1

    def close(self) -> None:
        for fd in (self._wake_r, self._wake_w):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._wake_r = self._wake_w = -1


@attrs.frozen
class _Cancel:
    """The cancel callback for one task: bound to its id, not the loop's current one.
    `fileno` is readable once the parent may have cancelled something; calling it
    drains that (a wake-up meant for an earlier task is read here and ignored)."""

    slot: _Slot
    task_id: int
    parent: int | None = None  # the pool's process: a check outliving it is stopped too

    def fileno(self) -> int:
        return self.slot._wake_r

    def __call__(self) -> bool:
        with contextlib.suppress(OSError):
            while os.read(self.slot._wake_r, 4096):
                pass
        return self.slot.value == self.task_id or (self.parent is not None and os.getppid() != self.parent)


def _worker_main(
    oracle: Oracle | None,
    conn: multiprocessing.connection.Connection,
    cancel_slot: _Slot,
    inherited: list[multiprocessing.connection.Connection],
    parent: int,
) -> None:
    """A worker: run tasks from conn until told to stop. `cancel_slot` holds the id of
    the task the parent wants stopped; the oracle polls it while its commands run.

    If the parent dies (the OOM killer picks the largest process, which is the one
    holding the MLIR), the worker must not outlive it: it holds the run's locks, so a
    rerun would find the output busy for good. `inherited` are the parent's ends of the
    pool's pipes, copied here by the fork: closed, they let recv see the parent go, and
    a running check is stopped as if cancelled when this process's parent is no longer
    `parent` (its pid, passed in: read here, it may already be the reaper's).

    A task names the memory each of its checks may use (0: no limit). The worker is a
    child subreaper: what a check leaves running becomes its child, and is killed (and
    while the check runs, counted in its memory)."""
    for end in inherited:
        end.close()
    # Ctrl-C, SIGTERM and SIGHUP sent to the process group are the parent's to handle: a
    # worker that died of one would have its check's death read as a verdict.
    leave_stops_to_parent()
    no_core_dumps()  # once here, inherited by every check (see `run_in`)
    become_subreaper()
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        task_id, data, task_oracle, memory = message
        if cancel_slot.value == task_id:
            try:
                conn.send((task_id, "cancelled", None))
            except (OSError, ValueError):
                return
            continue
        chosen = task_oracle or oracle
        assert chosen is not None, "a task names its oracle when the executor has none"
        try:
            verdict = judge(chosen, data, _Cancel(cancel_slot, task_id, parent), memory)
            reply: tuple[int, str, Any] = (task_id, "ok", verdict)
        except Cancelled:
            reply = (task_id, "cancelled", None)
        except BaseException as exc:  # reported to the parent, which raises it from the future
            reply = (task_id, "error", exc)
        try:
            conn.send(reply)
        except (OSError, ValueError):
            return


def _raise_open_files_limit() -> int | None:
    """The soft RLIMIT_NOFILE, raised to the hard one where allowed (the checks inherit
    it); None where there is no such limit."""
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (AttributeError, OSError, ValueError):
        return None
    # An unlimited hard limit cannot be the soft one (Linux caps it at fs.nr_open, macOS at
    # OPEN_MAX): try what those usually allow.
    for target in [hard] if hard != resource.RLIM_INFINITY else [1 << 20, 10240]:
        if soft != resource.RLIM_INFINITY and target > soft:
            try:
                resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            except (OSError, ValueError):
                continue
            return target
    return None if soft == resource.RLIM_INFINITY else soft


def check_open_files(held: int = 0) -> None:
    """Before a run: OpenFilesLimit if the open-files limit (its soft value raised to the
    hard one) leaves no room for `held` more files of the run's own and one worker with
    its check. Said at the start in one line: run out of files later, a run could not
    even remove its temp dir."""
    limit = _raise_open_files_limit()
    now = _open_files()
    if limit is not None and now is not None and now + held + FD_WORKER + FD_CHECK > limit:
        raise OpenFilesLimit(limit, now + held + FD_WORKER + FD_CHECK)


def _open_files() -> int | None:
    """How many files this process has open; None where that cannot be seen."""
    for where in ("/proc/self/fd", "/dev/fd"):
        try:
            return len(os.listdir(where)) - 1  # listdir's own descriptor is listed too
        except OSError:
            continue
    return None


@attrs.define(eq=False)
class _Task:
    id: int
    data: bytes
    oracle: Oracle | None
    future: concurrent.futures.Future[Verdict]
    deaths: int = 0
    started: float = 0.0


@attrs.define(eq=False)
class _Worker:
    process: Any
    conn: multiprocessing.connection.Connection
    cancel_slot: _Slot
    task: _Task | None = None


class LocalExecutor(Executor):
    """Worker processes on this machine, each running one check at a time.

    Hand-written rather than `multiprocessing.Pool` or `ProcessPoolExecutor` because
    neither can stop one running task, and a dead worker hangs the first and breaks the
    second whole (every task in flight fails, so the culprit cannot be told apart).
    Here each worker has its own pipe: the parent always knows which candidate a dead
    worker was running. Workers are forked, first before any MLIR context exists in
    this process (so no native threads are copied); a replacement for a dead worker is
    forked later, and runs nothing but Python and the check's subprocess.

    There are fewer workers than asked for when the open-files limit allows no more
    (`_start_pool`). A check whose processes together use more than `memory_limit` bytes
    is killed (None: `processes.default_memory_limit` for the workers there are; 0: no
    limit).
    """

    memory_limit: int  # bytes each check's processes may use together; 0: no limit

    def __init__(self, oracle: Oracle | None, workers: int, memory_limit: int | None = None) -> None:
        self.oracle = oracle
        self.workers = max(1, workers)
        self.stats = ExecutorStats()
        self._ctx = multiprocessing.get_context("fork")
        self._lock = threading.Lock()
        self._queue: collections.deque[_Task] = collections.deque()
        self._by_future: dict[concurrent.futures.Future[Verdict], _Task] = {}
        self._ids = itertools.count(1)
        self._wake_r = self._wake_w = -1
        self._closing = False
        self._ends: list[multiprocessing.connection.Connection] = []  # the parent's ends of the workers' pipes
        self._pool: list[_Worker] = []
        self._thread = threading.Thread(target=self._loop, name="ireereduce-executor", daemon=True)
        try:
            self._wake_r, self._wake_w = os.pipe()
            self._start_pool(memory_limit)
            self._thread.start()
            # The workers ignore SIGTERM, which multiprocessing sends its daemons at exit before
            # it joins them: a pool never closed would hang the exit.
            atexit.register(self.close, abort=True)
        except BaseException as exc:  # Ctrl-C while they start, too: none of them outlives this
            if self._thread.ident is not None:  # the loop runs (audit 17: a stop here hung the exit)
                self.close(abort=True)
            else:
                self._abandon()
            if isinstance(exc, OSError) and exc.errno == errno.EMFILE:
                limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
                raise OpenFilesLimit(limit, (_open_files() or 3) + FD_WORKER + FD_CHECK) from None
            raise

    # -- the engine's side ------------------------------------------------------------
    def submit(self, data: bytes, oracle: Oracle | None = None) -> concurrent.futures.Future[Verdict]:
        future: concurrent.futures.Future[Verdict] = concurrent.futures.Future()
        task = _Task(next(self._ids), data, oracle, future)
        with self._lock:
            if self._closing:
                raise RuntimeError("the executor is closed")
            self.stats.checks += 1
            self._by_future[future] = task
            self._queue.append(task)
            # Hand it to an idle worker from this thread: the dispatcher thread would
            # first need the GIL, which this process's MLIR calls hold for 10-20 ms at a
            # time while the engine speculates. (It is woken to watch that worker.)
            self._dispatch()
        self._wake()
        return future

    def cancel(self, future: concurrent.futures.Future[Verdict]) -> None:
        with self._lock:
            task = self._by_future.pop(future, None)
            if task is None or future.done():
                return
            self.stats.cancelled += 1
            if task in self._queue:
                self._queue.remove(task)
            else:
                for w in self._pool:
                    if w.task is task:
                        w.cancel_slot.value = task.id  # the worker kills the check's group
            future.cancel()

    def close(self, abort: bool = False) -> None:
        if self._closing:
            return
        if not abort:
            while True:
                with self._lock:
                    if not self._queue and all(w.task is None for w in self._pool):
                        break
                time.sleep(0.02)
        with self._lock:
            self._closing = True
            for task in list(self._queue):
                task.future.cancel()
            self._queue.clear()
            for w in self._pool:
                if w.task is not None:
                    w.cancel_slot.value = w.task.id
        self._wake()
        self._thread.join(5.0)
        # Stop the workers: a polite word first (a cancelled check's worker removes its
        # temp dir on the way out), then force.
        for w in self._pool:
            with contextlib.suppress(OSError, ValueError):
                w.conn.send(None)
        deadline = time.monotonic() + 2.0
        for w in self._pool:
            w.process.join(max(0.0, deadline - time.monotonic()))
            if w.process.is_alive():
                w.process.kill()
                w.process.join(1.0)
            w.conn.close()
            w.cancel_slot.close()
        for task in self._by_future.values():
            task.future.cancel()
        os.close(self._wake_r)
        os.close(self._wake_w)
        atexit.unregister(self.close)

    def _abandon(self) -> None:
        """A pool that failed to start: kill what it started, close what it opened."""
        for w in self._pool:
            w.process.kill()
        for w in self._pool:
            w.process.join()
            w.conn.close()
            w.cancel_slot.close()
        for fd in (self._wake_r, self._wake_w):
            if fd >= 0:
                os.close(fd)

    # -- the dispatcher thread --------------------------------------------------------
    def _start_pool(self, memory_limit: int | None) -> None:
        """The workers, as many as the open-files limit allows. Its soft value is raised
        to the hard one (the soft one, often 1024, is a default for programs that use
        select(); this one polls). What one worker costs is measured on the first. The
        default memory limit shares the machine among the workers there are."""
        limit = _raise_open_files_limit()
        before = _open_files()
        self._add_worker()
        after = _open_files()
        if limit is not None and after is not None and after + FD_CHECK > limit:
            raise OpenFilesLimit(limit, after + FD_CHECK)
        if limit is not None and before is not None and after is not None:
            cost = max(1, after - before)
            room = 1 + max(0, limit - after - FD_RESERVE) // cost
            if room < self.workers:
                log.warning(
                    "-j %d needs about %d open files and the limit (ulimit -n) is %d: running %d checks at once",
                    self.workers,
                    before + cost * self.workers + FD_RESERVE,
                    limit,
                    room,
                )
                self.workers = room
        self.memory_limit, line = processes.memory_limit(memory_limit, self.workers)
        log.info("%s", line)
        while len(self._pool) < self.workers:
            self._add_worker()

    def _add_worker(self, index: int | None = None) -> None:
        """A new worker in the pool (at `index`: in place of a dead one). A stop signal
        that comes meanwhile is raised once the worker is in the pool, where it is
        stopped with the others (`stops_deferred`)."""
        with stops_deferred():
            if index is None:
                self._pool.append(self._spawn())
            else:
                self._pool[index] = self._spawn()

    def _spawn(self) -> _Worker:
        parent, child = self._ctx.Pipe()
        opened: list[Any] = [parent, child]
        try:  # out of open files (`OpenFilesLimit`): none of them is left open
            slot = _Slot()
            opened.append(slot)
            inherited = [*self._ends, parent]  # the worker closes its copies (`_worker_main`)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)  # 3.12: fork with threads
                process = self._ctx.Process(
                    target=_worker_main,
                    args=(self.oracle, child, slot, inherited, os.getpid()),
                    daemon=True,
                    name="ireereduce-worker",
                )
                process.start()
        except BaseException:
            for each in opened:
                each.close()
            raise
        child.close()
        slot.close_reader()
        self._ends.append(parent)
        return _Worker(process, parent, slot)

    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"x")

    def _loop(self) -> None:
        while True:
            with self._lock:
                if self._closing and all(w.task is None for w in self._pool):
                    return
                self._dispatch()
                waits: list[Any] = [self._wake_r]
                for w in self._pool:
                    if w.task is not None:
                        waits += [w.conn, w.process.sentinel]
            ready = multiprocessing.connection.wait(waits)
            if self._wake_r in ready:
                with contextlib.suppress(OSError):
                    os.read(self._wake_r, 4096)
            with self._lock:
                for w in list(self._pool):
                    if w.task is None:
                        continue
                    if w.conn in ready and w.conn.poll():
                        try:
                            task_id, status, payload = w.conn.recv()
                        except (EOFError, OSError):
                            self._lost(w)
                            continue
                        self._finish(w, status, payload)
                    elif w.process.sentinel in ready:
                        self._lost(w)

    def _dispatch(self) -> None:
        for w in self._pool:
            if w.task is None and self._queue and not self._closing:
                task = self._queue.popleft()
                w.task, task.started = task, time.monotonic()
                try:
                    w.conn.send((task.id, task.data, task.oracle, self.memory_limit))
                except (OSError, ValueError):
                    self._lost(w)

    def _finish(self, w: _Worker, status: str, payload: Any) -> None:
        task = w.task
        assert task is not None
        w.task = None
        self.stats.busy_seconds += time.monotonic() - task.started
        self._by_future.pop(task.future, None)
        if task.future.done():  # cancelled meanwhile
            return
        if status == "ok":
            task.future.set_result(payload)
        elif status == "error":
            task.future.set_exception(payload)
        else:
            task.future.cancel()

    def _lost(self, w: _Worker) -> None:
        """The worker died under its check: replace it, and run the check once more."""
        task = w.task
        w.task = None
        with contextlib.suppress(OSError):
            w.conn.close()
        if w.conn in self._ends:
            self._ends.remove(w.conn)
        w.cancel_slot.close()
        w.process.join(0.1)
        self.stats.lost_workers += 1
        index = self._pool.index(w)
        if not self._closing:
            self._add_worker(index)
        else:
            self._pool.pop(index)
        if task is None or task.future.done():
            return
        self.stats.busy_seconds += time.monotonic() - task.started
        task.deaths += 1
        log.warning(
            "a worker died (exit %s) under a check; %s",
            w.process.exitcode,
            "running it again" if task.deaths < MAX_WORKER_DEATHS else "the candidate counts as not interesting",
        )
        if task.deaths >= MAX_WORKER_DEATHS or self._closing:
            self._by_future.pop(task.future, None)
            task.future.set_result(worker_died(task.deaths))
        else:
            self._queue.appendleft(task)
