"""Numeric mismatches reduced with and without localisation (reducer/iree/localize.py,
cut.py): wall time, checks, final ops, whether the culprit (math.powf) and the numeric
signature survive. Each case is a models.mismatch_mlp with powf of negative bases in
one layer (NaN on llvm-cpu only). Results go to results/localize.json with the commit
measured.

    python benchmarks/localize.py run [--cases deep,tiled] [--jobs 2] [--cap 600] [--configs localize,whole]
    python benchmarks/localize.py table

Localisation pays when whole-program checks are dear and the bug is deep ('deep': 0.44x
the wall of the whole program), not when checks are cheap ('mlp40') nor when tracing one
side compiles far slower than a check ('tiled': the traced data-tiled compile takes 115 s;
with --mlir-timing, 165 s of a 175 s traced compile under load went to the stream
ReuseAllocationsPass, against 6.6 s for the whole untraced compile, and
--iree-stream-partitioning-favor=debug does not change it).
The cut programs' reductions spend more checks than the whole programs' (the dispatch's
body is a fused linalg.generic) and end one op above the hand size (math.round kept).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import attrs

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
import measured  # noqa: E402

from benchmarks.models import mismatch_mlp  # noqa: E402

RESULTS = HERE / "results" / "localize.json"
CONFIGS = {"localize": [], "whole": ["--no-localize"]}
_C = "iree-compile --iree-hal-target-device=local --iree-llvmcpu-target-cpu=generic --iree-hal-local-target-device-backends="


@attrs.frozen
class Case:
    model: dict[str, object]  # mismatch_mlp's arguments
    sides: list[str]  # how the two configurations are given
    hand: str | None  # benchmarks/hand/, the hand-reduced size
    about: str


CASES = {
    # The first case: the bug in dispatch #1 of 40 small ones; checks take a second or two.
    "mlp40": Case({"layers": 40}, ["--backends", "llvm-cpu,vmvx"], None, "40 layers of 4x8, powf in layer 1"),
    # Several seconds a check (64-wide layers, 1.4 MB of weights), the bug deep: layer 30 of 40.
    "deep": Case(
        {"layers": 40, "batch": 16, "width": 64, "bug_layer": 30, "slip": False},
        ["--backends", "llvm-cpu,vmvx"],
        "mlp-deep-powf.mlir",
        "40 layers of 16x64, powf in layer 30",
    ),
    # llvm-cpu data-tiles its matmuls (dispatches read the weights and carry encodings), vmvx
    # does not: the two form different dispatches.
    "tiled": Case(
        {"layers": 24, "batch": 8, "width": 32, "bug_layer": 18, "slip": False},
        ["--mismatch", "--compile", _C + "llvm-cpu --iree-opt-data-tiling {input} -o {output}"]
        + ["--against", _C + "vmvx {input} -o {output}"],
        "mlp-tiled-powf.mlir",
        "24 layers of 8x32, powf in layer 18; llvm-cpu data-tiled against vmvx",
    ),
}


def ops(path: Path) -> int | None:
    """Ops as the run's statistics count them."""
    from reducer.session.start import size_of

    return size_of(path.read_text()).ops


def run_one(name: str, config: str, jobs: int, cap: float) -> dict[str, object]:
    case = CASES[name]
    with tempfile.TemporaryDirectory(prefix="bench-localize-") as tmp:
        src, out, stats, rep = (Path(tmp, n) for n in ("model.mlir", "out.mlir", "stats.json", "report.json"))
        src.write_text(mismatch_mlp(**case.model))  # type: ignore[arg-type]
        argv = [sys.executable, "-m", "reducer", str(src), "-o", str(out), *case.sides, "--report-json", str(rep)]
        argv += ["-j", str(jobs), "--max-time", str(cap), "--stats-json", str(stats), "-q", *CONFIGS[config]]
        began = time.monotonic()
        proc = subprocess.run(argv, capture_output=True, text=True, cwd=HERE.parent)
        wall = time.monotonic() - began
        data = json.loads(stats.read_text()) if stats.exists() else {}
        report = json.loads(rep.read_text()) if rep.exists() else {}
        text = out.read_text() if out.exists() else ""
        return {
            "case": name,
            "config": config,
            "jobs": jobs,
            "cap": cap,
            "exit": proc.returncode,
            "wall": round(wall, 1),
            "checks": data.get("oracle_calls"),
            "model_ops": ops(src),
            "start_ops": (data.get("original") or {}).get("ops"),
            "final_ops": (data.get("final") or {}).get("ops"),
            "hand_ops": ops(HERE / "hand" / case.hand) if case.hand else None,
            "powf_kept": "math.powf" in text,
            "signature": (report.get("signature") or {}).get("summary"),
            "notes": [ln.strip() for ln in proc.stdout.splitlines() + proc.stderr.splitlines() if "locali" in ln][:2],
        }


def table(rows: list[dict[str, object]]) -> str:
    head = "| case | config | model ops | start ops | exit | wall (s) | checks | final ops | hand | powf kept | signature | commit |"
    lines = [head, "|" + "---|" * 12]
    for r in rows:
        lines.append(
            f"| {r.get('case', 'mlp40')} | {r['config']} | {r.get('model_ops', r['start_ops'])} | {r['start_ops']} | "
            f"{r['exit']} | {r['wall']} | {r['checks']} | {r['final_ops']} | {r.get('hand_ops')} | {r['powf_kept']} | "
            f"{r.get('signature')} | {r['commit']} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=["run", "table"])
    parser.add_argument("--cases", default="deep,tiled")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--cap", type=float, default=600.0)
    parser.add_argument("--configs", default="localize,whole")
    args = parser.parse_args()
    rows = json.loads(RESULTS.read_text()) if RESULTS.exists() else []
    if args.what == "run":
        for name in args.cases.split(","):
            for config in args.configs.split(","):
                row = run_one(name, config, args.jobs, args.cap) | {"commit": measured.commit()}
                rows = [r for r in rows if (r.get("case", "mlp40"), r["config"]) != (name, config)] + [row]
                RESULTS.write_text(json.dumps(rows, indent=1) + "\n")
                print(table([row]).splitlines()[-1], flush=True)
    print(table(rows))


if __name__ == "__main__":
    main()
