#!/usr/bin/env python3
"""Check: exit 0 while the program compiles and runs on two backends and their outputs differ.

The inputs are generated from the entry function's signature (deterministic values with
negatives and zeros), so the check keeps working while the reducer shrinks shapes and
drops arguments. Both compiles and both runs must succeed: a candidate that breaks one
backend is not the bug being chased.

    numeric_mismatch.py FILE [--a llvm-cpu] [--b vmvx] [--rtol 1e-3] [--atol 1e-4] [--kind KIND]

--kind asks that the outputs still differ that way ("NaN on a only", one of
reducer.iree.signature.DIFFERENCES), as the built-in --mismatch oracle does on its own:
without it, a reduction may slip to any other difference between the backends.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from reducer.iree import signature
from reducer.iree.oracles.mismatch import split_top

FLAGS = {
    "llvm-cpu": [
        "--iree-hal-target-device=local",
        "--iree-hal-local-target-device-backends=llvm-cpu",
        "--iree-llvmcpu-target-cpu=generic",
    ],
    "vmvx": ["--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=vmvx"],
}
DTYPES = {
    "f32": np.float32,
    "f16": np.float16,
    "f64": np.float64,
    "i8": np.int8,
    "i16": np.int16,
    "i32": np.int32,
    "i64": np.int64,
}


def entry(text: str) -> tuple[str, list[str], int]:
    """The public function to run (main if present), its argument types and result count."""
    found = []
    for m in re.finditer(r"func\.func\s+(?:public\s+)?@([\w$.-]+)\s*\(", text):
        if "private" in text[text.rfind("\n", 0, m.start()) : m.start() + 10]:
            continue
        depth, i = 1, m.end()
        while depth and i < len(text):
            depth += text[i] == "("
            depth -= text[i] == ")"
            i += 1
        args = [a.split(":", 1)[1].split("{")[0].split(" loc(")[0].strip() for a in split_top(text[m.end() : i - 1])]
        sig = text[i : text.find("{", i)].strip()
        results = sig[2:].strip() if sig.startswith("->") else ""
        n_results = len(split_top(results[1:-1])) if results.startswith("(") else int(bool(results))
        found.append((m.group(1), args, n_results))
    if not found:
        sys.exit(1)
    return next((f for f in found if f[0] == "main"), found[0])


def make_input(t: str, k: int, tmp: Path) -> str:
    if t == "index" or re.fullmatch(r"i\d+", t):
        return "--input=5" if t == "index" else f"--input={t}=3"
    if t in DTYPES:
        return f"--input={t}=0.5"
    m = re.fullmatch(r"tensor<(?:(.*)x)?(\w+)>", t)
    if not m or m.group(2) not in DTYPES:
        sys.exit(1)
    dims = [4 if d == "?" else int(d) for d in m.group(1).split("x")] if m.group(1) else []
    dtype = DTYPES[m.group(2)]
    n = int(np.prod(dims)) if dims else 1
    vals = ((np.arange(n) * 37 + 11 * k) % 17 - 8) / 4.0
    arr = vals.astype(dtype).reshape(dims)
    path = tmp / f"in{k}.npy"
    np.save(path, arr)
    return f"--input=@{path}"


def run(backend: str, src: str, fn: str, inputs: list[str], tmp: Path, n_out: int) -> list[np.ndarray]:
    vmfb = tmp / f"{backend}.vmfb"
    if subprocess.run(["iree-compile", src, *FLAGS[backend], "-o", str(vmfb)], capture_output=True).returncode:
        sys.exit(1)
    outs = [tmp / f"{backend}-out{i}.npy" for i in range(n_out)]
    proc = subprocess.run(
        [
            "iree-run-module",
            f"--module={vmfb}",
            "--device=local-task",
            f"--function={fn}",
            *inputs,
            *[f"--output=@{o}" for o in outs],
        ],
        capture_output=True,
        text=True,
    )
    if proc.returncode:
        sys.exit(1)
    return [np.load(o) for o in outs if o.exists()]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("file")
    p.add_argument("--a", default="llvm-cpu")
    p.add_argument("--b", default="vmvx")
    p.add_argument("--rtol", type=float, default=1e-3)
    p.add_argument("--atol", type=float, default=1e-4)
    p.add_argument("--kind", choices=signature.DIFFERENCES, help="the kind of difference that must remain")
    args = p.parse_args()
    text = Path(args.file).read_text()
    fn, types, n_out = entry(text)
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        inputs = [make_input(t, k, tmp) for k, t in enumerate(types)]
        a = run(args.a, args.file, fn, inputs, tmp, n_out)
        b = run(args.b, args.file, fn, inputs, tmp, n_out)
    if len(a) != len(b) or not a:
        sys.exit(1)
    sig = signature.numeric(a, b, args.rtol, args.atol)
    sys.exit(0 if sig.kind == "mismatch" and (args.kind is None or args.kind in sig.errors) else 1)


if __name__ == "__main__":
    main()
