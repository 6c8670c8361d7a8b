#!/usr/bin/env python3
"""A bot that files bugs: reduce a failing program with the built-in compile oracle and
write the report, using ireereduce's Python API (docs/api.md) rather than its command.

    python examples/bot.py [INPUT.mlir] [--out DIR]

By default it reduces the shipped example (examples/f6-legalize/model.mlir, an MLP that
fails to legalize an f6E2M3FN truncation on the CPU backend) and writes DIR/repro.mlir,
DIR/report.md and DIR/report.json. It prints one line per event, as a bot would log
them, and exits non-zero when the reduction did not end with an interesting program.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import reducer

HERE = Path(__file__).resolve().parent
COMPILE = (
    "iree-compile {input} --iree-hal-target-device=local --iree-hal-local-target-device-backends=llvm-cpu "
    "--iree-llvmcpu-target-cpu=generic -o /dev/null"
)


def log_event(kind: str, fields: dict) -> None:
    if kind in ("start", "improve", "reduced", "interrupted", "stopped", "flaky", "error"):
        print(json.dumps({"event": kind, **fields}, sort_keys=True), flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("input", nargs="?", default=str(HERE / "f6-legalize" / "model.mlir"))
    parser.add_argument("--out", default="bot-out", help="directory for repro.mlir and the reports")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    try:
        done = reducer.reduce(
            Path(args.input),
            compile=COMPILE,
            output=out / "repro.mlir",
            report=str(out / "report.md"),
            report_json=str(out / "report.json"),
            on_event=log_event,
        )
    except reducer.UserError as exc:  # bad input, or the program does not fail
        print(f"bot: cannot reduce {args.input}: {exc}", file=sys.stderr)
        return exc.code
    print(
        f"bot: {done.status}: {done.original} -> {done.final} in {done.checks} checks; "
        f"would file {done.report['title']!r} with {out / 'report.md'}"
    )
    if done.trivial:
        print("bot: the result is trivial; not filing", file=sys.stderr)
        return 1
    return 0 if done.status == "reduced" else 1


if __name__ == "__main__":
    sys.exit(main())
