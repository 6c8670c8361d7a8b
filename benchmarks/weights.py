"""Big inline weights (issue 30): a module whose weights are one `dense_resource` blob.

    python benchmarks/weights.py [--sizes 100,400] [-j 2] [--keep-blob] [--no-save]

Each size N (MB of file) is a module built at test time, never committed: one function
whose weights are one inline blob of N/2 MiB (hex doubles it in the file) used by a few
ops (a matmul-like chain: add, multiply, a reduction), plus unrelated ops, one of them a
`math.atan2`. The check greps for the `math.atan2`, so the result needs no weights; with
`--keep-blob` it also needs the blob (`grep dense_resource`), so the result keeps one
use and its bytes. Measured: wall time, checks, the result's ops and bytes, and the peak
resident set summed over ireereduce, its workers and their checks (sampled every 0.05 s;
shared copy-on-write pages count once per process: an upper bound) against the file's
size. Results go to benchmarks/results/weights.json with the commit measured.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path

import click

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from measured import commit  # noqa: E402
from scale import run_sampled  # noqa: E402

#: The check of the default case: the unrelated op is the bug.
CHECK = 'grep -q "math.atan2" "$1"'
#: With --keep-blob: the bug needs the weights too.
CHECK_BLOB = 'grep -q "math.atan2" "$1" && grep -q "dense_resource" "$1"'

_CHUNK = 1 << 22  # bytes of blob written at a time: the generator stays small too


def write_module(path: Path, megabytes: float, seed: int = 0) -> int:
    """Write a module of about `megabytes` MB to path; its blob's size in bytes."""
    elements = max(4, int(megabytes * 1e6 / 2) // 4)  # f32 elements; hex doubles the bytes
    n = elements
    head = f"""module {{
  func.func @main(%x: tensor<{n}xf32>, %a: tensor<4xf32>, %b: tensor<4xf32>) -> (tensor<f32>, tensor<4xf32>) {{
    %w = arith.constant dense_resource<weights> : tensor<{n}xf32>
    %s = arith.addf %x, %w : tensor<{n}xf32>
    %p = arith.mulf %s, %w : tensor<{n}xf32>
    %init = arith.constant dense<0.0> : tensor<f32>
    %r = linalg.reduce ins(%p : tensor<{n}xf32>) outs(%init : tensor<f32>) dimensions = [0]
      (%in: f32, %acc: f32) {{
        %t = arith.addf %in, %acc : f32
        linalg.yield %t : f32
      }}
    %e = math.exp %a : tensor<4xf32>
    %l = math.log %b : tensor<4xf32>
    %q = arith.subf %e, %l : tensor<4xf32>
    %t = math.atan2 %q, %b : tensor<4xf32>
    %u = arith.divf %t, %e : tensor<4xf32>
    return %r, %u : tensor<f32>, tensor<4xf32>
  }}
}}

{{-#
  dialect_resources: {{
    builtin: {{
      weights: "0x04000000"""
    tail = '"\n    }\n  }\n#-}\n'
    rng = hashlib.sha256(str(seed).encode()).digest()
    with open(path, "w") as f:
        f.write(head)
        left = elements * 4
        counter = 0
        while left:
            take = min(left, _CHUNK)
            # Non-splat, cheap, deterministic bytes: a short digest repeated with a counter.
            block = (rng + counter.to_bytes(8, "little")) * (take // 40 + 1)
            f.write(block[:take].hex())
            left -= take
            counter += 1
        f.write(tail)
    return elements * 4


def measure(megabytes: float, jobs: int, keep_blob: bool, extra: list[str]) -> dict:
    with tempfile.TemporaryDirectory() as d:
        work = Path(d)
        src = work / "model.mlir"
        blob = write_module(src, megabytes)
        os.sync()  # the model is on disk, as a user's is: its writeback is not the run's
        check = work / "check.sh"
        check.write_text(f"#!/bin/sh\n{CHECK_BLOB if keep_blob else CHECK}\n")
        check.chmod(0o755)
        stats = work / "stats.json"
        out = work / "out.mlir"
        argv = ["ireereduce", str(src), "-c", str(check), "-o", str(out), "-j", str(jobs), "-q"]
        argv += ["--stats-json", str(stats), *extra]
        rc, err, seconds, peak = run_sampled(argv, 0.05)
        if rc:
            lines = err.strip().splitlines() or ["(nothing on stderr)"]
            raise SystemExit(f"ireereduce failed on {megabytes} MB (exit {rc}): {lines[-1]}")
        s = json.loads(stats.read_text())
        result = out.read_bytes()
        size = src.stat().st_size
        return {
            "input_mb": megabytes,
            "bytes": size,
            "blob_bytes": blob,
            "keep_blob": keep_blob,
            "ops": s["original"]["ops"],
            "final_ops": s["final"]["ops"],
            "final_bytes": len(result),
            "seconds": round(seconds, 2),
            "checks": s["oracle_calls"],
            "engine": round(s["engine_seconds"], 2),
            "wait": round(s["wait_seconds"], 2),
            "peak_mb": round(peak / 1e6),
            "peak_x_file": round(peak / size, 2),
            "output_sha": hashlib.sha256(result).hexdigest()[:12],
        }


def row(r: dict) -> str:
    return (
        f"| {r['input_mb']:g} MB{' (blob kept)' if r['keep_blob'] else ''} | {r['bytes']} | {r['ops']} | "
        f"{r['final_ops']} | {r['final_bytes']} | {r['seconds']:.1f} | {r['checks']} | {r['peak_mb']} | "
        f"{r['peak_x_file']:.2f}x |"
    )


@click.command()
@click.option("--sizes", default="100,400", show_default=True, help="File sizes in MB.")
@click.option("-j", "jobs", default=2, show_default=True)
@click.option(
    "--keep-blob/--no-keep-blob", default=False, show_default=True, help="Also rows whose check needs the blob."
)
@click.option("--save/--no-save", default=True, show_default=True, help="Write the results file.")
@click.option("--results", default="weights.json", show_default=True, help="Its name in benchmarks/results/.")
@click.option("--label", default="", help="What the rows measure (e.g. 'before'), kept in the file.")
def main(sizes: str, jobs: int, keep_blob: bool, save: bool, results: str, label: str) -> None:
    measured = commit()
    click.echo(f"commit {measured}; -j {jobs}\n")
    click.echo("| input | bytes | ops in | ops out | bytes out | wall s | checks | peak MB | peak / file |")
    click.echo("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    rows = []
    for mb in (float(x) for x in sizes.split(",") if x):
        for keep in (False, True) if keep_blob else (False,):
            rows.append(measure(mb, jobs, keep, []))
            click.echo(row(rows[-1]))
    if save:
        path = HERE / "results" / results
        old = json.loads(path.read_text()) if path.exists() else {}
        runs = old.get("runs", [])
        runs.append({"commit": measured, "jobs": jobs, "label": label, "rows": rows})
        path.write_text(json.dumps({"commit": measured, "runs": runs}, indent=1) + "\n")
        click.echo(f"\nwritten to {path}")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    main()
