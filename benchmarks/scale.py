"""How ireereduce's time and memory grow with program size (issue 3's scale target).

    python benchmarks/scale.py [--sizes 1000,5000,20000,100000] [-j 2]

Each size is a generated module of dozens of functions calling each other with one
`math.cbrt` deep in the call graph; the check is `iree-opt` verifies and the op is present.
Peak memory is the summed resident set of ireereduce, its workers and their checks,
sampled every 0.1 s (shared copy-on-write pages count once per process: an upper bound).
"""

from __future__ import annotations

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


def measure(ops: int, jobs: int) -> dict:
    with tempfile.TemporaryDirectory() as d:
        work = Path(d)
        src = work / "input.mlir"
        src.write_text(models.scale_module(ops))
        check = work / "check.sh"
        check.write_text(f"#!/bin/sh\n{scale_check()}\n")
        check.chmod(0o755)
        stats = work / "stats.json"
        argv = ["ireereduce", str(src), "-c", str(check), "-o", str(work / "out.mlir"), "-j", str(jobs), "-q", "--stats-json", str(stats)]
        peak = 0
        start = time.monotonic()
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        done = threading.Event()

        def sample() -> None:
            nonlocal peak
            while not done.wait(0.1):
                peak = max(peak, tree_rss(proc.pid))

        sampler = threading.Thread(target=sample)
        sampler.start()
        _, err = proc.communicate()
        done.set()
        sampler.join()
        seconds = time.monotonic() - start
        if proc.returncode:
            raise SystemExit(f"ireereduce failed on {ops} ops: {err.strip().splitlines()[-1]}")
        s = json.loads(stats.read_text())
        return {
            "ops": s["original"]["ops"], "bytes": src.stat().st_size, "final_ops": s["final"]["ops"], "seconds": seconds,
            "checks": s["oracle_calls"], "engine": s["engine_seconds"], "wait": s["wait_seconds"], "peak_mb": peak / 2**20,
            "result": (work / "out.mlir").read_text(),
        }


@click.command()
@click.option("--sizes", default="1000,5000,20000,100000", show_default=True)
@click.option("-j", "jobs", default=2, show_default=True)
def main(sizes: str, jobs: int) -> None:
    click.echo("| ops in | bytes in | ops out (incl. module, func, return) | wall s | checks | engine s | waiting s | peak MB |")
    click.echo("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n in (int(x) for x in sizes.split(",")):
        r = measure(n, jobs)
        click.echo(
            f"| {r['ops']} | {r['bytes']} | {r['final_ops']} | {r['seconds']:.1f} | {r['checks']} | "
            f"{r['engine']:.1f} | {r['wait']:.1f} | {r['peak_mb']:.0f} |"
        )


if __name__ == "__main__":
    main()
