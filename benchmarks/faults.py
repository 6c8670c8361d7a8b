"""Issue 12's bar for unattended runs: resume after kill -9, and flaky checks.

    python benchmarks/faults.py [--kills 5] [--flaky-runs 10] [-j 2] [--save]

resume: one uninterrupted run, then N runs each killed with SIGKILL (its whole process
group) at a random point and rerun with the same command. Passes when every rerun's
output is byte-identical to the uninterrupted one and the killed run's checks plus the
rerun's are at most the uninterrupted run's plus -j.

flaky: N runs with a check that inverts its verdict 20% of the time. Passes when every
output passes the deterministic check and every run that did not exit 0 says the check
is flaky.

Checks are counted by the check script itself (one line per call in a counter file).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import click

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import measured  # noqa: E402

#: A chain of 40 ops with the interesting one at the end, and a few functions.
PROGRAM = (
    "func.func @f(%a: f32) -> f32 {\n"
    + "".join(f"  %v{i} = arith.negf {'%a' if i == 0 else f'%v{i - 1}'} : f32\n" for i in range(40))
    + "  %e = math.exp %v39 : f32\n  return %e : f32\n}\n"
    + "".join(
        f"func.func @g{i}(%x: i32) -> i32 {{\n  %c = arith.addi %x, %x : i32\n  return %c : i32\n}}\n" for i in range(8)
    )
)

CHECK = """#!/bin/sh
echo x >> {counter}
sleep {delay}
grep -q math.exp "$1" && grep -q arith.addi "$1"
"""

FLAKY = """#!/bin/sh
echo x >> {counter}
if grep -q math.exp "$1"; then ok=0; else ok=1; fi
if [ $(od -An -N1 -tu1 /dev/urandom) -lt 51 ]; then ok=$((1 - ok)); fi
exit $ok
"""


def _setup(work: Path, body: str, delay: float) -> tuple[Path, Path]:
    (work / "input.mlir").write_text(PROGRAM)
    counter = work / "calls"
    check = work / "check.sh"
    check.write_text(body.format(counter=counter, delay=delay))
    check.chmod(0o755)
    return counter, check


def _calls(counter: Path) -> int:
    return len(counter.read_text().splitlines()) if counter.exists() else 0


def _cmd(jobs: int) -> list[str]:
    return [sys.executable, "-m", "reducer.cli", "input.mlir", "--check", "./check.sh", "-j", str(jobs), "-q"]


def _run(work: Path, jobs: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(_cmd(jobs), cwd=work, capture_output=True, text=True, timeout=900)


def resume(kills: int, jobs: int, delay: float, seed: int) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    with tempfile.TemporaryDirectory() as d:
        work = Path(d) / "whole"
        work.mkdir()
        counter, _ = _setup(work, CHECK, delay)
        t0 = time.monotonic()
        proc = _run(work, jobs)
        whole_seconds = time.monotonic() - t0
        assert proc.returncode == 0, proc.stderr
        expected = (work / "input.reduced.mlir").read_bytes()
        whole = _calls(counter)
        rows.append(
            {
                "run": "uninterrupted",
                "rc": proc.returncode,
                "checks": whole,
                "seconds": round(whole_seconds, 1),
                "bytes": len(expected),
            }
        )
        for i in range(kills):
            work = Path(d) / f"kill{i}"
            work.mkdir()
            counter, _ = _setup(work, CHECK, delay)
            at = rng.uniform(0.1, 0.9) * whole_seconds
            killed = subprocess.Popen(
                _cmd(jobs), cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
            )
            time.sleep(at)
            os.killpg(killed.pid, signal.SIGKILL)
            killed.wait()
            time.sleep(0.2)
            before = _calls(counter)
            proc = _run(work, jobs)
            after = _calls(counter) - before
            out = (work / "input.reduced.mlir").read_bytes()
            rows.append(
                {
                    "run": f"killed at {at:.1f} s",
                    "rc": proc.returncode,
                    "killed_checks": before,
                    "rerun_checks": after,
                    "checks": before + after,
                    "within": before + after <= whole + jobs,
                    "identical": out == expected,
                    "resumed": "continuing the interrupted run" in proc.stderr,
                }
            )
    return rows


def flaky(runs: int, jobs: int) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for i in range(runs):
            work = Path(d) / f"flaky{i}"
            work.mkdir()
            counter, _ = _setup(work, FLAKY, 0)
            proc = _run(work, jobs)
            out = work / "input.reduced.mlir"
            good = out.exists() and "math.exp" in out.read_text()
            says = "flaky" in proc.stderr
            rows.append(
                {
                    "run": i,
                    "rc": proc.returncode,
                    "output_interesting": good,
                    "says_flaky": says,
                    "checks": _calls(counter),
                    "ok": good and (proc.returncode == 0 or says),
                    "message": next((ln for ln in proc.stderr.splitlines() if "error" in ln), "")[:160],
                }
            )
    return rows


@click.command()
@click.option("--kills", default=5, show_default=True)
@click.option("--flaky-runs", default=10, show_default=True)
@click.option("-j", "jobs", default=2, show_default=True)
@click.option("--delay", default=0.05, show_default=True, help="Seconds each deterministic check sleeps.")
@click.option("--seed", default=12, show_default=True)
@click.option("--save", is_flag=True, help="Write benchmarks/results/faults.json.")
def main(kills: int, flaky_runs: int, jobs: int, delay: float, seed: int, save: bool) -> None:
    r = resume(kills, jobs, delay, seed)
    print(f"{'run':<18} {'rc':>3} {'killed':>7} {'rerun':>6} {'total':>6} {'<= whole+j':>10} {'identical':>9}")
    for row in r:
        print(
            f"{row['run']:<18} {row['rc']:>3} {row.get('killed_checks', ''):>7} {row.get('rerun_checks', ''):>6} "
            f"{row['checks']:>6} {str(row.get('within', '')):>10} {str(row.get('identical', '')):>9}"
        )
    f = flaky(flaky_runs, jobs)
    print(f"\n{'flaky run':<10} {'rc':>3} {'output ok':>9} {'says flaky':>10} {'checks':>6}  message")
    for row in f:
        print(
            f"{row['run']:<10} {row['rc']:>3} {str(row['output_interesting']):>9} {str(row['says_flaky']):>10} "
            f"{row['checks']:>6}  {row['message']}"
        )
    passed = all(x["within"] and x["identical"] for x in r[1:]) and all(x["ok"] for x in f)
    print(f"\nbar met: {passed}")
    if save:
        data = {"commit": measured.commit(), "jobs": jobs, "resume": r, "flaky": f, "bar_met": passed}
        (HERE / "results" / "faults.json").write_text(json.dumps(data, indent=1) + "\n")


if __name__ == "__main__":
    main()
