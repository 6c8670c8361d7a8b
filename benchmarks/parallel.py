"""Does a worker more buy a shorter run? (issue 11)

    python benchmarks/parallel.py [--case fanout|big] [--configs local:1,...,local:64,dask:8] [--sleep 1.0]

Two cases (`--case`). `fanout` (the default) is `models.fanout()`: 346 ops in 9
functions, the "bug" one `math.atan2` in one callee; 26 checks at -j 1. `big` is
`models.fanout_wide()` (issue 31): 2,122 ops in 41 functions, the bug needing two ops
in two callees, each deep in its chain; at least 80 checks at -j 1. The check sleeps,
then greps, so what is measured is scheduling, not the CPU count of this machine (2
cores here): with a 1 s check, 8 workers can only help if the engine keeps 8 checks in
flight. One row per configuration: wall time, the workers the run used (fewer than
asked if the open-files limit allows no more), checks, speculative checks whose verdict
was not needed, worker utilisation (busy worker-seconds / (workers x wall)), and whether
the output is byte-identical to the first row's. Results go to
benchmarks/results/parallel.json (`fanout`) or parallel-big.json (`big`), with the
commit measured.

`--repeat N` runs every configuration N times and reports the run with the median wall
time (all N walls are kept in the results file): on a 2-core machine one run's wall
varies by a tenth of a second or more. Before the first run, the ireereduce package's
bytecode is compiled once (`compileall`, next to its sources), as Python would have
cached it after the first run anywhere PYTHONDONTWRITEBYTECODE is not set; where it is
set, every run would otherwise compile ireereduce's 50-odd modules again (0.1-0.2 s).
"""

from __future__ import annotations

import compileall
import contextlib
import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import attrs
import click

import reducer

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import measured  # noqa: E402
import models  # noqa: E402

DEFAULT_CONFIGS = "local:1,local:2,local:4,local:8,local:16,local:32,local:64,dask:8,dask:16,local:4:kill"


@attrs.frozen
class Case:
    """A program and the ops its check greps for (all of them: the "bug")."""

    make: Callable[[], str]
    needles: tuple[str, ...]
    results: str  # the default results file in benchmarks/results/


CASES = {
    "fanout": Case(models.fanout, ("math.atan2",), "parallel.json"),
    "big": Case(models.fanout_wide, models.WIDE_MARKERS[:2], "parallel-big.json"),
}


def _kill_a_worker(ppids: Path, main_pid: int, after: int, killed: list[int]) -> None:
    """SIGKILL the worker that ran the after-th check (as the OOM killer would)."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not killed:
        seen = [int(p) for p in (ppids.read_text().split() if ppids.exists() else []) if int(p) != main_pid]
        if len(seen) >= after:
            with contextlib.suppress(ProcessLookupError):
                os.kill(seen[-1], signal.SIGKILL)
                killed.append(seen[-1])
            return
        time.sleep(0.05)


def run(config: str, sleep: float, extra: list[str], case: Case = CASES["fanout"]) -> dict:
    """config: local:N, dask:N, or local:N:kill (one worker killed after 10 checks)."""
    kind, jobs, *rest = config.split(":")
    kill = rest == ["kill"]
    with tempfile.TemporaryDirectory(prefix="parallel-bench-") as d:
        work = Path(d)
        src = work / "input.mlir"
        src.write_text(case.make())
        check = work / "check.sh"
        ppids = work / "ppids"
        greps = " && ".join(f'grep -q {needle} "$1"' for needle in case.needles)
        check.write_text(f"#!/bin/sh\necho $PPID >> {ppids}\nsleep {sleep}\n{greps}\n")
        check.chmod(0o755)
        stats, out = work / "stats.json", work / "out.mlir"
        argv = ["ireereduce", str(src), "-c", str(check), "-o", str(out), "-j", jobs, "-q", "--stats-json", str(stats)]
        if kind == "dask":
            argv += ["--executor", "dask"]
        argv += extra
        start = time.monotonic()
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        killed: list[int] = []
        killer = threading.Thread(target=_kill_a_worker, args=(ppids, proc.pid, 10, killed)) if kill else None
        if killer is not None:
            killer.start()
        _, stderr = proc.communicate()
        seconds = time.monotonic() - start
        if killer is not None:
            killer.join()
            if not killed:
                raise SystemExit(f"{config}: no worker was killed")
        if proc.returncode:
            raise SystemExit(f"{config}: exit {proc.returncode}: {stderr.strip()[-500:]}")
        s = json.loads(stats.read_text())
        text = out.read_text()
        return {
            "config": config,
            "seconds": round(seconds, 2),
            "workers": s["workers"],
            "checks": s["oracle_calls"],
            "wasted": s["wasted_checks"],
            "lost_workers": s["lost_workers"],
            "utilisation": round(s["utilisation"], 3),
            "final_ops": s["final"]["ops"],
            "output_sha": hashlib.sha256(text.encode()).hexdigest()[:12],
        }


@click.command()
@click.option("--case", "case_name", type=click.Choice(sorted(CASES)), default="fanout", show_default=True)
@click.option("--configs", default=DEFAULT_CONFIGS, show_default=True, help="kind:workers, comma-separated.")
@click.option("--sleep", default=1.0, show_default=True, help="Seconds each check sleeps.")
@click.option("--save/--no-save", default=True, show_default=True, help="Write the results file.")
@click.option(
    "--results",
    default=None,
    help="Its name in benchmarks/results/ (default: parallel.json, parallel-big.json for big).",
)
@click.option(
    "--repeat",
    default=1,
    show_default=True,
    type=click.IntRange(1),
    help="Runs per configuration; the median one is reported (odd N: the middle one).",
)
@click.option("--note", default=None, help="Kept in the results file: what the measured code is, say.")
@click.argument("extra", nargs=-1)
def main(
    case_name: str,
    configs: str,
    sleep: float,
    save: bool,
    results: str | None,
    repeat: int,
    note: str | None,
    extra: tuple[str, ...],
) -> None:
    case = CASES[case_name]
    rows = []
    package = Path(reducer.__file__).resolve().parent.parent
    for name in ("reducer", "strategies"):
        compileall.compile_dir(str(package / name), quiet=1)
    click.echo(f"commit {measured.commit()}; case {case_name}; check: sleep {sleep}; grep {' '.join(case.needles)}\n")
    click.echo(
        "| configuration | wall s | vs first | workers | checks | wasted speculative | utilisation | lost workers | final ops | same output |"
    )
    click.echo("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for config in configs.split(","):
        runs = sorted(
            (run(config.strip(), sleep, list(extra), case) for _ in range(repeat)), key=lambda r: r["seconds"]
        )
        if len({r["output_sha"] for r in runs}) > 1:
            raise SystemExit(f"{config}: the output differs between runs")
        r = dict(runs[(len(runs) - 1) // 2], walls=[x["seconds"] for x in runs])
        rows.append(r)
        base = rows[0]
        click.echo(
            f"| {r['config']} | {r['seconds']:.1f} | {r['seconds'] / base['seconds']:.2f}x | {r['workers']} | {r['checks']} | {r['wasted']} | "
            f"{100 * r['utilisation']:.0f}% | {r['lost_workers']} | {r['final_ops']} | {'yes' if r['output_sha'] == base['output_sha'] else 'NO'} |"
        )
    if save:
        path = HERE / "results" / (results or case.results)
        data = {"commit": measured.commit(), "case": case_name, "sleep": sleep, "repeat": repeat, "rows": rows}
        if note:
            data["note"] = note
        path.write_text(json.dumps(data, indent=1) + "\n")
        click.echo(f"\nwritten to {path.relative_to(HERE.parent)}")


if __name__ == "__main__":
    main()
