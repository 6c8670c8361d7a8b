"""Checks on a Dask distributed cluster: an embedded `LocalCluster`, or a running
scheduler (`--scheduler tcp://HOST:PORT`) whose workers may sit on other machines.

What travels: each task carries its candidate as bytes and its oracle. A check script
travels as its content and its arguments, with the files named by `--check-files`, and
is written once per worker into a directory of its own, so the workers need the tools
the check calls (iree-compile, ...) but not our files.

Dask cannot interrupt a running task (dask/distributed#4694). Each check therefore
watches its own task's state on its worker, and kills its own process group once the
scheduler has released the task: the engine cancelled it, or the client that wanted it
is gone (a main process killed mid-run). A worker lost mid-check is Dask's to retry
elsewhere; a check whose workers keep dying ends as `KilledWorker`, which becomes the
verdict "worker died".
On a worker outside the run's own scope each check has a run directory of its own
(`task_scope`): what a killed worker leaves, the next check using the same temp dir sweeps.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import hashlib
import logging
import multiprocessing.forkserver
import multiprocessing.resource_tracker
import multiprocessing.util
import os
import shutil
import signal
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from typing import Any, ClassVar

import attrs

from reducer.core import processes
from reducer.core.executor import (
    MAX_WORKER_DEATHS,
    Executor,
    ExecutorLost,
    ExecutorStats,
    read_data_file,
    worker_died,
)
from reducer.core.oracle import (
    CANCEL_POLL,
    CancelFn,
    Cancelled,
    Oracle,
    RepeatOracle,
    ScriptOracle,
    Verdict,
    judge,
    never,
    whole,
)
from reducer.core.processes import STOP_SIGNALS, become_subreaper, stops_deferred
from reducer.core.rundirs import RUN_DIR_ENV, note_outside, task_scope

log = logging.getLogger(__name__)

#: The worker states of a task whose result is still wanted; "cancelled" is one it is not.
WANTED = frozenset({"executing", "long-running", "resumed"})
CONNECT_TIMEOUT = "10s"
#: For the embedded LocalCluster. A check that kills its worker twice is not retried a
#: third time. Worker processes come from a fork server (one process that imported
#: Dask once, forking each worker) instead of Dask's default, spawn, where every
#: worker starts a fresh interpreter that imports Dask and re-runs the command's main
#: module: 8 workers took 10-12 s to start and 2 s to close on 2 cores, against 2 s and
#: 0.3 s. The server is single-threaded, so unlike a plain fork of this process it
#: copies none of the client's threads; it starts inside the run's scope, so the run's
#: sweep ends it with the run. The setting holds while the cluster is built: a worker
#: that Dask restarts after a kill is spawned the slow way (it works, only later).
LOCAL_CLUSTER_CONFIG = {
    "distributed.scheduler.allowed-failures": MAX_WORKER_DEATHS - 1,
    "distributed.worker.multiprocessing-method": "forkserver",
}


#: In a worker process: how many checks use each installed copy, and the copies whose run
#: has closed. A check that was cancelled just before its run closed may still be starting
#: when the close's removal arrives (7 embedded-cluster runs in 36 left a copy), so a
#: check of a closed run installs nothing, and the process's last check out removes a
#: closed copy. (Another process sharing the temp dir may remove it sooner; only a closed
#: run's checks, whose verdicts nobody reads, can be using it then.)
_installs_lock = threading.Lock()
_installs_in_use: Counter[str] = Counter()
_installs_closed: set[str] = set()


#: Imported first in the embedded cluster's worker processes (see the module).
WORKER_SETUP = "reducer.core.dask_worker"


def _preload_in_fork_server(module: str) -> None:
    """Add module to what the fork server imports before it forks a worker, after the
    modules distributed puts there (to start workers faster). Read from the fork
    server's state: multiprocessing has no getter, and a setter replaces the list."""
    from distributed.utils import get_mp_context

    context = get_mp_context()
    server = getattr(multiprocessing.forkserver, "_forkserver", None)
    preloaded = list(getattr(server, "_preload_modules", None) or ["distributed"])
    if module not in preloaded:
        context.set_forkserver_preload([module, *preloaded])


def _start_fork_server() -> None:
    """multiprocessing's resource tracker and the fork server, started from this thread,
    whose stop signals are blocked (`stops_deferred`): they start with them blocked, and
    the workers the server forks take them once they leave them to the main process. (A
    fork server started by the cluster's own thread died of a Ctrl-C as it started: the
    tracker's start, there first, unblocks SIGINT and SIGTERM in the thread that starts
    it, hence the block again here after it.)"""
    multiprocessing.resource_tracker.ensure_running()
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    multiprocessing.forkserver.ensure_running()


class ExecutorUnavailable(Exception):
    """The cluster cannot be reached or started."""


class _Installed:
    """Files carried as bytes, written once per worker into a directory of their own,
    and removed there once their run has closed and no check uses them."""

    files: tuple[tuple[str, bytes], ...]  # (file name, content)
    #: The executor that shipped it: each run installs and removes a copy of its own, so
    #: one run's close never takes away the files another run's checks are using.
    owner: str

    @property
    def digest(self) -> str:
        h = hashlib.blake2b(digest_size=8)
        for name, content in self.files:
            h.update(name.encode() + b"\0" + content + b"\0")
        return h.hexdigest()

    @property
    def dirname(self) -> str:
        return f"ireereduce-check-{self.digest}{'-' + self.owner if self.owner else ''}"

    def directory(self) -> str:
        return _installed_dir(self.dirname)

    def install(self) -> str:
        """The files' directory on this machine, written there the first time."""
        directory = self.directory()
        if not os.path.exists(os.path.join(directory, self.files[0][0])):
            staging = tempfile.mkdtemp(prefix="ireereduce-check-", dir=os.path.dirname(directory))
            for name, content in self.files:
                path = os.path.join(staging, name)
                with open(path, "wb") as f:
                    f.write(content)
                os.chmod(path, 0o755)
            try:
                os.rename(staging, directory)
            except OSError:  # another check on this machine installed it first
                shutil.rmtree(staging, ignore_errors=True)
        return directory

    @contextlib.contextmanager
    def _in_use(self) -> Iterator[None]:
        """Hold this run's installed copy; raise `Cancelled` if the run has closed."""
        name = self.dirname
        with _installs_lock:
            if name in _installs_closed:
                raise Cancelled  # its run closed, so nobody reads this check's verdict
            _installs_in_use[name] += 1
        try:
            yield
        finally:
            with _installs_lock:
                left = _installs_in_use[name] - 1
                if left:
                    _installs_in_use[name] = left
                else:
                    del _installs_in_use[name]
                remove = not left and name in _installs_closed
            if remove:
                shutil.rmtree(_installed_dir(name), ignore_errors=True)


@attrs.frozen
class ShippedScript(_Installed, Oracle):
    """The user's check script, carried as bytes: written once per worker, then run the
    way `ScriptOracle` runs it (exit 0 = interesting)."""

    kind: ClassVar[str] = "check-script"  # the user's script, wherever it runs
    files: tuple[tuple[str, bytes], ...]  # (file name, content); the first is the script
    basename: str
    timeout: float | None
    owner: str = ""
    args: tuple[str, ...] = ()  # --test-arg: after the candidate's path, as the local pool passes them

    def run(self, data: bytes, cancel: CancelFn = never) -> Verdict:
        with self._in_use():
            script = os.path.join(self.install(), self.files[0][0])
            return ScriptOracle(script, self.basename, self.timeout, self.args).run(data, cancel)

    def reproducer(self, path: str) -> str:
        return ScriptOracle(self.files[0][0], self.basename, self.timeout, self.args).reproducer(path)


@attrs.frozen
class ShippedFiles(_Installed, Oracle):
    """A built-in oracle with the files of this machine it reads (`Oracle.data_files`, such as
    parameter archives) carried as bytes: written once per worker, and the oracle pointed
    at them there."""

    kind: ClassVar[str] = "shipped"  # never reported: the report reads the oracle the run made
    inner: Oracle
    files: tuple[tuple[str, bytes], ...]  # (file name, content), in the order of `paths`
    paths: tuple[str, ...]  # where each file is on the machine that shipped it
    owner: str = ""

    @property
    def timeout(self) -> float | None:  # type: ignore[override]
        return self.inner.timeout

    def run(self, data: bytes, cancel: CancelFn = never) -> Verdict:
        with self._in_use():
            directory = self.install()
            moved = {path: os.path.join(directory, name) for path, (name, _) in zip(self.paths, self.files)}
            return self.inner.with_data_files(moved).run(data, cancel)

    def reproducer(self, path: str) -> str:
        return self.inner.reproducer(path)


def ship(
    oracle: Oracle, check_files: Sequence[str] = (), owner: str = "", read: Callable[[str], bytes] = read_data_file
) -> Oracle:
    """What can run on another machine: a check script becomes its bytes, with its
    arguments; a built-in oracle carries its commands, and the files it reads
    (`Oracle.data_files`) as bytes, as `read` gives them (the executor's cache: each
    calibrated or flag-reduced oracle would read a gigabyte archive again).
    `--repeat` wraps the script, so the wrapper ships what it wraps: else a worker on
    another machine would look for the script, and its files, at this machine's paths."""
    if isinstance(oracle, RepeatOracle):
        return attrs.evolve(oracle, inner=ship(oracle.inner, check_files, owner, read))
    if not isinstance(oracle, ScriptOracle):
        paths = oracle.data_files()
        if not paths:
            return oracle
        return ShippedFiles(oracle, _named(paths, unique=True, read=read), paths, owner)
    files = _named([oracle.script, *check_files])  # by their names: the script finds them so
    return ShippedScript(files, oracle.basename, oracle.timeout, owner, oracle.args)


def _named(
    paths: Sequence[str], unique: bool = False, read: Callable[[str], bytes] | None = None
) -> tuple[tuple[str, bytes], ...]:
    """Each file's content under its own name; `unique`: a name met again gets its
    position in front (two archives may share a name in different directories)."""
    files, seen = [], set()
    for k, path in enumerate(paths):
        name = os.path.basename(path)
        if unique and name in seen:
            name = f"{k}-{name}"
        seen.add(name)
        if read is not None:
            files.append((name, read(path)))
            continue
        with open(path, "rb") as f:
            files.append((name, f.read()))
    return tuple(files)


def _installed_dir(dirname: str) -> str:
    """Where a copy is installed on this machine: in the worker's temp dir, not the client's;
    in the run's directory for a worker inside the run's scope (the embedded cluster), so
    that whatever stops the run (a kill -9 included) the copy goes with that directory."""
    run_dir = os.environ.get(RUN_DIR_ENV)
    base = run_dir if run_dir is not None and os.path.isdir(run_dir) else tempfile.gettempdir()
    return os.path.join(base, dirname)


def _remove_installed(dirname: str) -> None:
    """On a worker, as its run closes: remove the installed copy now, or as its last
    running check ends."""
    with _installs_lock:
        _installs_closed.add(dirname)
        if _installs_in_use[dirname]:  # (a Counter: 0 for a copy no check holds)
            return
    shutil.rmtree(_installed_dir(dirname), ignore_errors=True)


def _run_task(data: bytes, oracle: Oracle, memory: int = 0) -> Verdict | None:
    """On a worker: judge data, each of its checks killed once its processes together use
    more than `memory` bytes (0: no limit); None when the task was released meanwhile. A worker with one thread runs one
    check at a time, so it becomes a subreaper, and kills what each check left behind
    (see `become_subreaper`); one with several leaves that to the environment tag.

    The worker marks a running task "cancelled" once the scheduler releases it, whether
    the engine cancelled it or its client died; reading that is local, so it neither
    waits on the scheduler nor fails while the worker's own client (re)connects, as a
    `distributed.Event` read did."""
    from distributed import get_worker

    # A thread started before the worker's preload may have the stop signals blocked
    # (`stops_deferred`): its checks would inherit that through exec.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    try:
        worker = get_worker()
    except ValueError:  # not in a worker's thread (a process-pool executor): no way to know
        cancelled: CancelFn = never
    else:
        key = worker.get_current_task()
        if worker.state.nthreads == 1:
            become_subreaper()

        def cancelled() -> bool:
            task = worker.state.tasks.get(key)
            return task is None or task.state not in WANTED

    try:
        with task_scope():  # a worker killed mid-check leaves nothing behind for long
            return judge(oracle, data, cancelled, memory)
    except Cancelled:
        return None


class DaskExecutor(Executor):
    def __init__(
        self,
        oracle: Oracle | None,
        workers: int,
        scheduler: str | None = None,
        resources: dict[str, float] | None = None,
        check_files: Sequence[str] = (),
        memory_limit: int | None = None,
    ) -> None:
        from distributed import Client

        for name in ("distributed", "tornado", "bokeh"):
            logging.getLogger(name).setLevel(logging.ERROR)
        self.stats = ExecutorStats()
        self.resources = dict(resources or {})
        self.check_files = tuple(check_files)
        self._cluster: Any = None
        self._lock = threading.Lock()
        self._tasks: dict[concurrent.futures.Future[Verdict], Any] = {}
        self._shipped: dict[int, tuple[Oracle, Oracle]] = {}
        self._data: dict[str, bytes] = {}  # the data files shipped, by path: each read once
        self._installed: set[str] = set()
        self._owner = uuid.uuid4().hex[:12]
        self._scratch: str | None = None
        try:
            if scheduler is None:
                # Ctrl-C while it starts is taken once it has: half started, nobody closes it.
                # Its processes (the fork server, the resource tracker) start with the stop
                # signals blocked, and its workers take them once they leave them to this
                # process (`dask_worker`): one that died of one as it started printed a traceback.
                with stops_deferred():
                    self._start_local_cluster(workers)
                    self.client = Client(self._cluster, timeout=CONNECT_TIMEOUT)
            else:
                self.client = Client(scheduler, timeout=CONNECT_TIMEOUT)
        except BaseException as exc:  # OSError, TimeoutError, a LocalCluster that failed to start; Ctrl-C
            self._close_cluster()
            if not isinstance(exc, Exception):
                raise
            where = f"the Dask scheduler at {scheduler}" if scheduler else "a local Dask cluster"
            raise ExecutorUnavailable(f"cannot reach {where}: {exc}") from None
        slots = sum(self.client.nthreads().values())
        if self.resources:
            info = self.client.scheduler_info().get("workers", {})
            for name, amount in self.resources.items():
                have = sum(w.get("resources", {}).get(name, 0) for w in info.values())
                slots = min(slots, int(have // amount)) if amount else slots
        if slots < 1:
            self.close()
            raise ExecutorUnavailable(
                f"the Dask cluster has no worker that can run a check (resources {self.resources})"
            )
        self.workers = slots
        self.oracle = oracle
        log.info("dask: %d workers (%s)", slots, scheduler or "local cluster")
        # The default shares this machine's memory: only for the cluster started on it.
        if scheduler is not None and memory_limit is None:
            self.memory_limit = 0
            log.info("checks on the cluster's workers have no memory limit unless --memory-limit gives one")
        else:
            self.memory_limit, line = processes.memory_limit(memory_limit, slots)
            log.info("%s", line)

    def _start_local_cluster(self, workers: int) -> None:
        """An embedded cluster whose workers keep their scratch space (`dask-scratch-space`,
        which Dask leaves in TMPDIR) in a directory of this executor's own: inside the
        run's directory, so a run killed before its close leaves it to the next run's
        sweep, and removed on close."""
        import dask
        from distributed import LocalCluster

        # The fork server's socket goes in this process's multiprocessing temp dir, outside
        # the run's: noted before anything starts (get_temp_dir makes it), so a run killed
        # with SIGKILL at any point of the cluster's start leaves it to the next run's sweep.
        note_outside(multiprocessing.util.get_temp_dir())
        run_dir = os.environ.get(RUN_DIR_ENV)
        parent = run_dir if run_dir is not None and os.path.isdir(run_dir) else None
        self._scratch = tempfile.mkdtemp(prefix="ireereduce-dask-", dir=parent)
        # The scheduler's and the workers' (restarted ones too) scratch space follow it.
        with dask.config.set(LOCAL_CLUSTER_CONFIG, temporary_directory=self._scratch):
            _preload_in_fork_server(WORKER_SETUP)
            _start_fork_server()
            self._cluster = LocalCluster(
                n_workers=max(1, workers),
                threads_per_worker=1,
                processes=True,
                host="127.0.0.1",
                dashboard_address=None,
                # A worker closing with the cluster may log a heartbeat that failed
                # meanwhile as an error (with its traceback): nothing a user can act on.
                silence_logs=logging.CRITICAL,
                resources=self.resources or None,
                preload=[WORKER_SETUP],
                # No dashboard, and its HTTP server on a free port: on 8787, taken by another
                # run, it printed a warning.
                scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
            )

    def _shipped_form(self, oracle: Oracle) -> Oracle:
        """Each oracle's shipped form, read from disk once. Every task carries it inline,
        not as a scattered copy: that copy was lost once every worker holding it had died
        (one worker killed by its check, or two for a candidate killed twice); Dask then
        cancelled every later check, and a -j 1 run hung at its first such candidate.
        Inline, a killed worker's task is Dask's to retry like any other."""
        entry = self._shipped.get(id(oracle))
        if entry is None:
            shipped = ship(oracle, self.check_files, self._owner, self._read_data)
            script = shipped.inner if isinstance(shipped, RepeatOracle) else shipped
            if isinstance(script, _Installed):
                self._installed.add(script.dirname)
            entry = (oracle, shipped)
            self._shipped[id(oracle)] = entry  # keeps the oracle alive, so its id stays its own
        return entry[1]

    def _read_data(self, path: str) -> bytes:
        """A data file's bytes, read the first time an oracle ships it: the oracles a run
        derives (calibrated, flag-reduced) carry the same bytes, not copies of their own."""
        if path not in self._data:
            self._data[path] = read_data_file(path)
        return self._data[path]

    def submit(self, data: bytes, oracle: Oracle | None = None) -> concurrent.futures.Future[Verdict]:
        result: concurrent.futures.Future[Verdict] = concurrent.futures.Future()
        with self._lock:
            judge = oracle or self.oracle
            assert judge is not None, "submit names its oracle when the executor has none"
            remote = self._shipped_form(judge)
        try:
            task = self.client.submit(
                _run_task, whole(data), remote, self.memory_limit, pure=False, resources=self.resources or None
            )
        except Exception as exc:  # ClosedClientError: the client gave up reconnecting to a lost scheduler
            if getattr(self.client, "status", None) not in ("closing", "closed"):
                raise
            raise ExecutorLost("the Dask client lost its scheduler and closed; no check can run") from exc
        with self._lock:
            self._tasks[result] = task
            self.stats.checks += 1

        def done(f: Any) -> None:
            with self._lock:
                asked = self._tasks.pop(result, None) is None  # `cancel` took it out first
            if result.done():
                return
            try:
                self._settle(result, f, asked)
            except OSError as exc:  # CommClosedError: the scheduler went as the verdict was fetched
                if not result.done():
                    result.set_exception(ExecutorLost(f"the connection to the Dask scheduler was lost ({exc})"))

        task.add_done_callback(done)
        return result

    def _settle(self, result: concurrent.futures.Future[Verdict], f: Any, asked: bool) -> None:
        """result, from the Dask future f that ended (`asked`: cancelled by `cancel`)."""
        if f.status == "finished":
            verdict = f.result()
            if verdict is None:
                result.cancel()
            else:
                self.stats.busy_seconds += verdict.seconds
                result.set_result(verdict)
        elif f.status == "cancelled" and asked:
            result.cancel()
        elif f.status == "cancelled":  # the client closed under it: no verdict will ever come
            result.set_exception(
                ExecutorLost("the Dask cluster cancelled a check: the connection to its scheduler was lost")
            )
        else:
            exc = f.exception()
            if type(exc).__name__ == "KilledWorker":
                self.stats.lost_workers += MAX_WORKER_DEATHS
                result.set_result(worker_died(MAX_WORKER_DEATHS))
            else:
                result.set_exception(exc)

    def cancel(self, future: concurrent.futures.Future[Verdict]) -> None:
        with self._lock:
            task = self._tasks.pop(future, None)
        if task is None or future.done():
            return
        self.stats.cancelled += 1
        future.cancel()
        with contextlib.suppress(Exception):
            # Released: a queued check never starts, a running one kills its process group.
            self.client.cancel(task)

    def close(self, abort: bool = False) -> None:
        if getattr(self, "_closed", False):
            return
        self._closed = True
        with self._lock:
            pending = list(self._tasks)
        if abort:
            for future in pending:
                self.cancel(future)
            time.sleep(CANCEL_POLL + 0.2)  # the released checks kill their groups
        else:
            concurrent.futures.wait(pending)
        with contextlib.suppress(Exception):
            for dirname in self._installed:
                self.client.run(_remove_installed, dirname)
        with contextlib.suppress(Exception):
            self.client.close()
        self._close_cluster()

    def _close_cluster(self) -> None:
        if self._cluster is not None:
            with contextlib.suppress(Exception):
                self._cluster.close()
            self._cluster = None
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None
