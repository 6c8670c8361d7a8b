"""A numeric mismatch reduced with and without localisation (reducer/iree/localize.py,
cut.py): wall time, checks and final ops on models.mismatch_mlp (powf of negative bases
in layer 1: NaN on llvm-cpu only), llvm-cpu against vmvx. Results go to
results/localize.json with the commit measured.

    python benchmarks/localize.py run [--layers 40] [--jobs 2] [--cap 900] [--configs localize,whole]
    python benchmarks/localize.py table
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
import measured  # noqa: E402

from benchmarks.models import mismatch_mlp  # noqa: E402

RESULTS = HERE / "results" / "localize.json"
CONFIGS = {"localize": [], "whole": ["--no-localize"]}
#: The hand-reduced size: round, powf (and the function and its return).
HAND_OPS = 4


def run_one(layers: int, config: str, jobs: int, cap: float) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="bench-localize-") as tmp:
        src, out, stats = Path(tmp, "model.mlir"), Path(tmp, "out.mlir"), Path(tmp, "stats.json")
        src.write_text(mismatch_mlp(layers=layers))
        argv = [sys.executable, "-m", "reducer", str(src), "-o", str(out), "--backends", "llvm-cpu,vmvx"]
        argv += ["-j", str(jobs), "--max-time", str(cap), "--stats-json", str(stats), "-q", *CONFIGS[config]]
        began = time.monotonic()
        proc = subprocess.run(argv, capture_output=True, text=True, cwd=HERE.parent)
        wall = time.monotonic() - began
        data = json.loads(stats.read_text()) if stats.exists() else {}
        text = out.read_text() if out.exists() else ""
        return {
            "config": config,
            "layers": layers,
            "jobs": jobs,
            "cap": cap,
            "exit": proc.returncode,
            "wall": round(wall, 1),
            "checks": data.get("oracle_calls"),
            "start_ops": (data.get("original") or {}).get("ops"),
            "final_ops": (data.get("final") or {}).get("ops"),
            "powf_kept": "math.powf" in text,
            "notes": [ln for ln in proc.stdout.splitlines() + proc.stderr.splitlines() if "locali" in ln][:2],
        }


def table(rows: list[dict[str, object]]) -> str:
    head = "| config | ops at start | exit | wall (s) | checks | final ops (hand: 4) | powf kept | commit |"
    lines = [head, "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(
            f"| {r['config']} | {r['start_ops']} | {r['exit']} | {r['wall']} | {r['checks']} | "
            f"{r['final_ops']} | {r['powf_kept']} | {r['commit']} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=["run", "table"])
    parser.add_argument("--layers", type=int, default=40)  # 692 ops
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--cap", type=float, default=900.0)
    parser.add_argument("--configs", default="localize,whole")
    args = parser.parse_args()
    rows = json.loads(RESULTS.read_text()) if RESULTS.exists() else []
    if args.what == "run":
        for config in args.configs.split(","):
            row = run_one(args.layers, config, args.jobs, args.cap) | {"commit": measured.commit()}
            rows = [r for r in rows if (r["config"], r["layers"]) != (config, args.layers)] + [row]
            RESULTS.write_text(json.dumps(rows, indent=1) + "\n")
            print(table([row]).splitlines()[-1], flush=True)
    print(table(rows))


if __name__ == "__main__":
    main()
