"""--pass-level against the input-level --compile run on the corpus's pass failures, and
each failure's local crash reproducer given alone (no check). Prints a table with the
commit it measured; results go to results/pass_level.json.

    python benchmarks/pass_level.py [--cases f6-example,xf-f6,...] [-j 2] [--cap S]

Per row: wall seconds, checks (the summary's count, workflows included), the mean
seconds of the engine's checks (--progress-json's check events), final ops, and whether
the output still shows the original's error: for input level, iree-compile on the output;
for pass level and a reproducer alone, `iree-opt --run-reproducer` on the output (the
resource alone drives it) against iree-compile on the input.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
import measured  # noqa: E402
from cases import BY_NAME, COMPILE  # noqa: E402

from reducer.iree import signature  # noqa: E402

RESULTS = HERE / "results" / "pass_level.json"
CMD = f"{COMPILE} {{input}} -o /dev/null"
LOCAL = "--mlir-pass-pipeline-crash-reproducer={path} --mlir-pass-pipeline-local-reproducer --mlir-disable-threading"
#: The failures in a pass: a codegen legalization (two), a narrow-type emulation, two stream-level ones.
CASES = {
    "f6-example": lambda: (HERE.parent / "examples" / "f6-legalize" / "model.mlir").read_text(),
    "xf-f6": BY_NAME["xf-f6"].make,
    "xf-i4-dynamic": BY_NAME["xf-i4-dynamic"].make,
    "conv-i4-odd": BY_NAME["conv-i4-odd"].make,
    "mlp-i4-const": BY_NAME["mlp-i4-const"].make,
}
CONFIGS = ("input-level", "pass-level", "reproducer-alone")


def first_error(argv: list[str] | str) -> str:
    proc = subprocess.run(argv, shell=isinstance(argv, str), capture_output=True, text=True)
    return signature.of(proc.returncode, proc.stderr).first_error


def run(case: str, config: str, cap: float, jobs: int, commit: str) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix=f"pl-{case}-") as tmp:
        src = Path(tmp) / "model.mlir"
        src.write_text(CASES[case]())
        expected = first_error(f"{COMPILE} {src} -o /dev/null")
        argv = [sys.executable, "-m", "reducer.cli", str(src), "-j", str(jobs), "-q"]
        if config == "reproducer-alone":
            repro = Path(tmp) / "repro.mlir"
            subprocess.run(f"{COMPILE} {src} -o /dev/null {LOCAL.format(path=repro)}", shell=True, capture_output=True)
            argv = [sys.executable, "-m", "reducer.cli", str(repro), "-j", str(jobs), "-q"]
        else:
            argv += ["--compile", CMD] + (["--pass-level"] if config == "pass-level" else [])
        out = Path(tmp) / "out.mlir"
        argv += ["-o", str(out), "--stats-json", f"{tmp}/stats.json", "--progress-json", f"{tmp}/progress.jsonl"]
        rc, err, seconds = measured.run_capped(argv, cap)
        row: dict[str, object] = {"case": case, "config": config, "commit": commit, "rc": rc}
        row["seconds"] = round(seconds, 1)
        try:
            stats = json.loads(Path(f"{tmp}/stats.json").read_text())
        except FileNotFoundError:
            row["error"] = (err.strip().splitlines() or ["no stats"])[-1]
            return row
        checks = [
            e["seconds"]
            for line in Path(f"{tmp}/progress.jsonl").read_text().splitlines()
            if (e := json.loads(line)).get("event") == "check"
        ]
        replayed = (
            first_error(f"{COMPILE} {out} -o /dev/null")
            if config == "input-level"
            else first_error(["iree-opt", "--run-reproducer", str(out), "-o", "/dev/null"])
        )
        row.update(
            ops=stats["final"]["ops"],
            bytes=stats["final"]["bytes"],
            checks=stats["oracle_calls"],
            mean_check_seconds=round(sum(checks) / len(checks), 3) if checks else None,
            same_error=bool(expected) and replayed == expected,
            error_seen=replayed[:120],
        )
        return row


def table(rows: list[dict[str, object]]) -> str:
    lines = [
        "| case | configuration | wall s | vs input level | checks | mean check s | final ops | same error |",
        "|---|---|---:|---:|---:|---:|---:|---|",
    ]
    base = {r["case"]: r["seconds"] for r in rows if r["config"] == "input-level" and "ops" in r}
    for r in rows:
        if "ops" not in r:
            lines.append(f"| {r['case']} | {r['config']} | {r['seconds']} | | | | failed: {r.get('error')} | |")
            continue
        ratio = f"{float(r['seconds']) / float(base[r['case']]):.2f}x" if r["case"] in base else ""  # type: ignore[arg-type]
        lines.append(
            f"| {r['case']} | {r['config']} | {r['seconds']} | {ratio} | {r['checks']} | {r['mean_check_seconds']} "
            f"| {r['ops']} | {'yes' if r['same_error'] else 'no'} |"
        )
    commits = sorted({str(r["commit"]) for r in rows})
    return "\n".join(lines) + f"\n\nmeasured at commit {', '.join(commits)}"


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--cases", default=",".join(CASES))
    p.add_argument("--configs", default=",".join(CONFIGS))
    p.add_argument("--cap", type=float, default=600)
    p.add_argument("-j", type=int, default=2)
    p.add_argument("--table", action="store_true", help="print the stored results only")
    args = p.parse_args()
    old = json.loads(RESULTS.read_text()) if RESULTS.exists() else []
    if not args.table:
        old = measured.measure_grid(
            RESULTS, args.cases.split(","), args.configs.split(","), lambda c, k, at: run(c, k, args.cap, args.j, at)
        )
    order = {c: i for i, c in enumerate(CASES)}
    print(table(sorted(old, key=lambda o: (order.get(o["case"], 99), CONFIGS.index(o["config"])))))


if __name__ == "__main__":
    main()
