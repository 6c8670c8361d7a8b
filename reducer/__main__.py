"""The `ireereduce` command's entry point (also `python -m reducer`), importing nothing
until it runs: multiprocessing's spawn and fork-server start methods, which Dask uses
for its worker processes, re-run the main script in every worker, so an import here
would be paid once per worker on top of the run's own start-up."""

from __future__ import annotations


def main() -> None:
    from reducer.cli import main as command

    command()


if __name__ == "__main__":
    main()
