"""Where oracle calls run. The engine only submits bytes and waits for verdicts, so a
distributed executor can replace the local pool without touching the engine."""

from __future__ import annotations

import abc
import concurrent.futures
import contextlib
import multiprocessing
import os
import signal
import threading
import time
from typing import Any

from reducer.oracle import Oracle, Verdict, kill_running_checks


class Executor(abc.ABC):
    @abc.abstractmethod
    def submit(self, data: bytes) -> concurrent.futures.Future[Verdict]:
        """Run the oracle on data somewhere; the future holds its verdict."""

    @abc.abstractmethod
    def close(self, abort: bool = False) -> None:
        """Release the workers; with abort, kill running checks instead of waiting."""

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close(abort=exc[0] is not None)


_worker_oracle: Oracle | None = None


def _init_worker(oracle: Oracle) -> None:
    global _worker_oracle
    _worker_oracle = oracle
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    signal.signal(signal.SIGTERM, kill_running_checks)


def _run(data: bytes) -> Verdict:
    assert _worker_oracle is not None
    return _worker_oracle.run(data)


class LocalExecutor(Executor):
    """A pool of forked worker processes on this machine.

    Forked (not spawned) so that multiprocessing-logging's handler reaches them; create
    it before any MLIR context exists so no native threads are forked.
    """

    def __init__(self, oracle: Oracle, jobs: int) -> None:
        self.jobs = jobs
        self._pool = multiprocessing.get_context("fork").Pool(jobs, initializer=_init_worker, initargs=(oracle,))

    def submit(self, data: bytes) -> concurrent.futures.Future[Verdict]:
        future: concurrent.futures.Future[Verdict] = concurrent.futures.Future()
        self._pool.apply_async(_run, (data,), callback=future.set_result, error_callback=future.set_exception)
        return future

    def close(self, abort: bool = False) -> None:
        if not abort:
            self._pool.close()
            self._pool.join()
            return
        # Pool.terminate() can hang when a worker dies holding a queue lock; stop the
        # workers ourselves first (each takes its running check's process group with it),
        # and give terminate() a bounded time.
        workers = list(getattr(self._pool, "_pool", []))
        for w in workers:
            if w.pid is not None and w.is_alive():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(w.pid, signal.SIGTERM)
        deadline = time.monotonic() + 3.0
        for w in workers:
            w.join(max(0.0, deadline - time.monotonic()))
            if w.is_alive() and w.pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(w.pid, signal.SIGKILL)
        stopper = threading.Thread(target=self._pool.terminate, daemon=True)
        stopper.start()
        stopper.join(5.0)
