"""Where oracle calls run. The engine only submits bytes and waits for verdicts, so a
distributed executor can replace the local pool without touching the engine."""

from __future__ import annotations

import abc
import concurrent.futures
import multiprocessing
import signal
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
        if abort:
            self._pool.terminate()
        else:
            self._pool.close()
        self._pool.join()
