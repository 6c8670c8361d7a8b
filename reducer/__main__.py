"""The `ireereduce` command's entry point (also `python -m reducer`), importing nothing
until it runs: multiprocessing's spawn and fork-server start methods, which Dask uses
for its worker processes, re-run the main script in every worker, so an import here
would be paid once per worker on top of the run's own start-up."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any


def main() -> None:
    import gc
    import signal
    import sys

    # A stop while the imports below run (half a second) is a stop like any other: exit
    # 130 in one line. Python's defaults were a traceback (SIGINT), a silent 143/129, or,
    # in a background job whose shell ignores SIGINT, a Ctrl-C lost and a run to the end.
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        if signum != signal.SIGHUP or signal.getsignal(signum) is not signal.SIG_IGN:  # nohup: kept ignored
            signal.signal(signum, _interrupt)
    if sys.stderr is not None:  # None: started with stderr closed (2>&-), which Python handles
        setattr(sys, "stderr", _Lossy(sys.stderr))  # noqa: B010  # typed as the TextIO it stands for
    try:
        from reducer.cli import main as command
    except KeyboardInterrupt:
        sys.stderr.write("ireereduce: interrupted before the reduction started\n")
        sys.exit(130)  # session.EXIT_INTERRUPTED, not imported yet
    try:
        command()
    finally:
        # The run is over and has cleaned up after itself (its workers, temp dirs and
        # output are settled in its own finally blocks; atexit handlers still run). The
        # collector's passes over everything it built would only delay the exit: a
        # tenth to a fifth of a second on the parallel benchmark, at the end of every run.
        gc.freeze()
        from reducer.core.processes import ignore_stops

        ignore_stops()  # a supervisor's second SIGTERM while Python shuts down: not exit 143


class _Lossy:
    """stderr that the run cannot fail on: once a write fails (closed, a full disk, its
    reader gone), the rest is dropped. Else the summary's write raised after the run had
    reduced and written its output, and the command exited 1, an internal error's code;
    nothing can be said to a stderr that takes nothing, but the exit code still can."""

    def __init__(self, stream: Any) -> None:
        self._stream, self.lost = stream, False

    def write(self, text: str) -> int:
        if not self.lost:
            try:
                return int(self._stream.write(text))
            except (OSError, ValueError):
                self.lost = True
        return len(text)

    def flush(self) -> None:
        if not self.lost:
            try:
                self._stream.flush()
            except (OSError, ValueError):
                self.lost = True

    def __getattr__(self, name: str) -> object:
        return getattr(self._stream, name)


def _interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


if __name__ == "__main__":
    main()
