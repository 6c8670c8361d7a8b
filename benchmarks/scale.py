"""How ireereduce's time and memory grow with program size (issues 3 and 13's scale targets).

    python benchmarks/scale.py [--sizes 1000,5000,20000,100000] [--megabyte/--no-megabyte] [-j 2]

Each size is a generated module of dozens of functions calling each other with one
`math.cbrt` deep in the call graph; the check is `iree-opt` verifies and the op is present.
`--megabyte` adds a weight-heavy input of about 0.9 MB (the 12-layer transformer of the
corpus at 16 layers of width 32, inline weights, one f6E2M3FN multiply) under a check
that sleeps 0.2 s and greps the f6 type: a torch-export-sized model with a check of
known cost.
Peak memory is the summed resident set of ireereduce, its workers and their checks,
sampled every 0.1 s (shared copy-on-write pages count once per process: an upper bound).
The engine share is the main process's time in the engine not spent waiting on a check
(listing edits, applying, verifying, printing, hashing, forking) over wall time; issue
13's bar: at most 10% on any input up to 1 MB with a check of 0.2 s or more, at most 15%
on the scale module at 100k ops. Results go to benchmarks/results/scale.json with the
commit measured.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import click

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import models  # noqa: E402
from cases import scale_check  # noqa: E402
from measured import commit  # noqa: E402

#: The megabyte case's check: 0.2 s of "compiling", then the bug's marker.
MEGABYTE_CHECK = 'sleep 0.2; grep -q f6E2M3FN "$1"'


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        tree.setdefault(int(fields[1]), []).append(int(entry))
    return tree


def tree_rss(root: int) -> int:
    """Bytes resident in root and all its descendants right now."""
    tree, total, todo = _children(), 0, [root]
    while todo:
        pid = todo.pop()
        todo += tree.get(pid, [])
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
        except OSError:
            pass
    return total


def run_sampled(argv: list[str], every: float) -> tuple[int, str, float, int]:
    """Run argv to its end, its process tree's resident memory sampled every `every`
    seconds: exit code, stderr, seconds, peak bytes."""
    peak = 0
    start = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.wait(every):
            peak = max(peak, tree_rss(proc.pid))

    sampler = threading.Thread(target=sample)
    sampler.start()
    _, err = proc.communicate()
    done.set()
    sampler.join()
    return proc.returncode, err, time.monotonic() - start, peak


def measure(name: str, text: str, check_body: str, jobs: int) -> dict:
    with tempfile.TemporaryDirectory() as d:
        work = Path(d)
        src = work / "input.mlir"
        src.write_text(text)
        check = work / "check.sh"
        check.write_text(f"#!/bin/sh\n{check_body}\n")
        check.chmod(0o755)
        stats = work / "stats.json"
        argv = [
            "ireereduce",
            str(src),
            "-c",
            str(check),
            "-o",
            str(work / "out.mlir"),
            "-j",
            str(jobs),
            "-q",
            "--stats-json",
            str(stats),
        ]
        rc, err, seconds, peak = run_sampled(argv, 0.1)
        if rc:
            raise SystemExit(f"ireereduce failed on {name}: {err.strip().splitlines()[-1]}")
        s = json.loads(stats.read_text())
        result = (work / "out.mlir").read_text()
        return {
            "input": name,
            "ops": s["original"]["ops"],
            "bytes": src.stat().st_size,
            "final_ops": s["final"]["ops"],
            "final_bytes": s["final"]["bytes"],
            "seconds": round(seconds, 2),
            "checks": s["oracle_calls"],
            "cache_hits": s["cache_hits"],
            "engine": round(s["engine_seconds"], 2),
            "wait": round(s["wait_seconds"], 2),
            "share": round(s["engine_seconds"] / seconds, 3),
            "peak_mb": round(peak / 2**20),
            "output_sha": hashlib.sha256(result.encode()).hexdigest()[:12],
        }


def row(r: dict) -> str:
    return (
        f"| {r['input']} | {r['ops']} | {r['bytes']} | {r['final_ops']} | {r['seconds']:.1f} | {r['checks']} | "
        f"{r['engine']:.1f} | {r['wait']:.1f} | {100 * r['share']:.0f}% | {r['peak_mb']:.0f} |"
    )


@click.command()
@click.option("--sizes", default="1000,5000,20000,100000", show_default=True)
@click.option(
    "--megabyte/--no-megabyte", default=True, show_default=True, help="Also the 0.9 MB transformer, 0.2 s check."
)
@click.option("-j", "jobs", default=2, show_default=True)
@click.option("--save/--no-save", default=True, show_default=True, help="Write the results file.")
@click.option("--results", default="scale.json", show_default=True, help="Its name in benchmarks/results/.")
def main(sizes: str, megabyte: bool, jobs: int, save: bool, results: str) -> None:
    measured = commit()
    click.echo(f"commit {measured}; -j {jobs}\n")
    click.echo(
        "| input | ops in | bytes in | ops out (incl. module, func, return) | wall s | checks | engine s | waiting s | engine share | peak MB |"
    )
    click.echo("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    cases = [(f"scale {n}", models.scale_module(n), scale_check()) for n in (int(x) for x in sizes.split(",") if x)]
    if megabyte:
        cases.append(("transformer 0.9 MB, check 0.2 s", models.transformer(layers=16, dim=32), MEGABYTE_CHECK))
    rows = []
    for name, text, check in cases:
        rows.append(measure(name, text, check, jobs))
        click.echo(row(rows[-1]))
    if save:
        path = HERE / "results" / results
        path.write_text(json.dumps({"commit": measured, "jobs": jobs, "rows": rows}, indent=1) + "\n")
        click.echo(f"\nwritten to {path}")


if __name__ == "__main__":
    main()
