"""The commit a benchmark measures, for every results file: the short hash of HEAD, with
"+" when tracked files outside benchmarks/results differ from it (the code measured is
then not exactly that commit), or "unknown" outside a git checkout. Also how a benchmark runs one capped reduction."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def commit(where: Path = HERE) -> str:
    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=where, capture_output=True, text=True)
        if done.returncode != 0:
            raise OSError(done.stderr.strip())
        return done.stdout.strip()

    try:
        head = git("rev-parse", "--short=12", "HEAD")
        changed = git(
            "status", "--porcelain", "--untracked-files=no", "--", ":(top)", ":(top,exclude)benchmarks/results"
        )
    except OSError:
        return "unknown"
    return head + ("+" if changed else "")


def run_capped(argv: list[str], cap: float) -> tuple[int, str, float]:
    """Run a reduction in its own session; past `cap` seconds it gets a Ctrl-C (so it
    writes its stats, as a user's stop would). Its exit code, stderr and seconds."""
    start = time.monotonic()
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _, err = proc.communicate(timeout=cap)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    return proc.returncode, err, time.monotonic() - start


def measure_grid(results: Path, cases: list[str], configs: list[str], run: Any) -> list[dict[str, Any]]:
    """Run `run(case, config, commit)` for every pair, printing each row and keeping the
    results file up to date after each (a long benchmark stopped halfway keeps its rows).
    The rows stored before, with the new ones in place of theirs."""
    old: list[dict[str, Any]] = json.loads(results.read_text()) if results.exists() else []
    at = commit()  # what is measured is the code at the start
    for case in cases:
        for config in configs:
            row = run(case, config, at)
            print(json.dumps(row), flush=True)
            old = [o for o in old if (o["case"], o["config"]) != (case, config)] + [row]
            results.write_text(json.dumps(old, indent=1) + "\n")
    return old
