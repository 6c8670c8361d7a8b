"""The `ireereduce` command's entry point (also `python -m reducer`), importing nothing
until it runs: multiprocessing's spawn and fork-server start methods, which Dask uses
for its worker processes, re-run the main script in every worker, so an import here
would be paid once per worker on top of the run's own start-up."""

from __future__ import annotations


def main() -> None:
    import gc

    from reducer.cli import main as command

    try:
        command()
    finally:
        # The run is over and has cleaned up after itself (its workers, temp dirs and
        # output are settled in its own finally blocks; atexit handlers still run). The
        # collector's passes over everything it built would only delay the exit: a
        # tenth to a fifth of a second on the parallel benchmark, at the end of every run.
        gc.freeze()


if __name__ == "__main__":
    main()
