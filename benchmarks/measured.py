"""The commit a benchmark measures, for every results file: the short hash of HEAD, with
"+" when tracked files outside benchmarks/results differ from it (the code measured is
then not exactly that commit), or "unknown" outside a git checkout."""

from __future__ import annotations

import subprocess
from pathlib import Path

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
