"""Built-in oracles and IREE workflows on the benchmark corpus: the whole program
versus dispatch isolation, phase-limited checks versus full compiles, starting from a
phase dump. Prints a table; results go to results/workflows.json.

    python benchmarks/workflows.py run [--cases xf-f6,...] [--configs whole,isolate,...] [--cap S]
    python benchmarks/workflows.py table
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import measured  # noqa: E402
from cases import BY_NAME, COMPILE  # noqa: E402

RESULTS = HERE / "results" / "workflows.json"
#: The compile command of each case (the same flags as its check script) and what the bug is.
COMMANDS = {
    "xf-f6": (f"{COMPILE} {{input}} -o /dev/null", []),
    "xf-tf32-crash": (f"{COMPILE} --mlir-disable-threading {{input}} -o /dev/null", ["--expect-crash"]),
    "xf-i4-dynamic": (f"{COMPILE} {{input}} -o /dev/null", []),
    "conv-i4-odd": (f"{COMPILE} {{input}} -o /dev/null", []),
    "xf-powf-mismatch": (None, ["--backends", "llvm-cpu,vmvx"]),
}
#: Names without commas: --configs takes a comma-separated list.
CONFIGS = {
    "whole": [],
    "no-phases": ["--no-phases"],
    "phase-dump": ["--from-phase-dump"],
    "isolate": ["--isolate-dispatch"],
}


def run(case: str, config: str, cap: float, jobs: int, commit: str) -> dict[str, object]:
    command, extra = COMMANDS[case]
    with tempfile.TemporaryDirectory(prefix=f"wf-{case}-") as tmp:
        src = Path(tmp) / "input.mlir"
        src.write_text(BY_NAME[case].make())
        argv = [
            sys.executable,
            "-m",
            "reducer.cli",
            str(src),
            "-j",
            str(jobs),
            "-q",
            "--stats-json",
            f"{tmp}/stats.json",
            "--report-json",
            f"{tmp}/report.json",
            *extra,
            *CONFIGS[config],
        ]
        if command:
            argv += ["--compile", command]
        rc, err, seconds = measured.run_capped(argv, cap)
        row: dict[str, object] = {
            "case": case,
            "config": config,
            "commit": commit,
            "rc": rc,
            "seconds": round(seconds, 1),
            "capped": seconds >= cap,
        }
        try:
            report = json.loads(Path(f"{tmp}/report.json").read_text())
        except FileNotFoundError:
            row["error"] = err.strip().splitlines()[-1:] if err else "no report"
            return row
        row.update(
            ops_in=report["sizes"]["before"]["ops"],
            start_ops=report["sizes"]["reduction_start"]["ops"],
            ops=report["sizes"]["after"]["ops"],
            bytes=report["sizes"]["after"]["bytes"],
            checks=report["oracle_calls"],
            different_bug=report["rejected_as_different_bug"],
            phase=report["phase"],
            dispatch=(report["dispatch"] or {}).get("name"),
            dispatch_seconds=(report["dispatch"] or {}).get("seconds"),
            signature=(report["signature"] or {}).get("summary"),
        )
        return row


def table(rows: list[dict[str, object]]) -> str:
    head = "| case | configuration | final ops (bytes) | wall s | checks | rejected as a different bug | phase / dispatch |"
    lines = [head, "|---|---|---|---:|---:|---:|---|"]
    for r in rows:
        if "ops" not in r:
            lines.append(f"| {r['case']} | {r['config']} | failed: {r.get('error')} | {r['seconds']} | | | |")
            continue
        where = r.get("dispatch") or r.get("phase") or ""
        cap = "+" if r["capped"] else ""
        lines.append(
            f"| {r['case']} | {r['config']} | {r['ops']} ({r['bytes']}) | {r['seconds']}{cap} | {r['checks']} | {r['different_bug']} | {where} |"
        )
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--cases", default="xf-f6,xf-tf32-crash,xf-i4-dynamic")
    r.add_argument("--configs", default=",".join(CONFIGS))
    r.add_argument("--cap", type=float, default=300)
    r.add_argument("-j", type=int, default=2)
    sub.add_parser("table")
    args = p.parse_args()
    old = json.loads(RESULTS.read_text()) if RESULTS.exists() else []
    if args.cmd == "run":
        old = measured.measure_grid(
            RESULTS, args.cases.split(","), args.configs.split(","), lambda c, k, at: run(c, k, args.cap, args.j, at)
        )
    order = {c: i for i, c in enumerate(COMMANDS)}
    corder = {c: i for i, c in enumerate(CONFIGS)}
    print(table(sorted(old, key=lambda o: (order.get(o["case"], 99), corder.get(o["config"], 99)))))


if __name__ == "__main__":
    main()
