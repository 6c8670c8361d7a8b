"""Issue #2's bar, measured: ireereduce vs iree-reduce (and mlir-reduce, if installed) on
the 200-op chains, plus the real iree-compile failure. Prints a table.

    python benchmarks/bar.py [--skip-e2e]
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from programs import COMPILE, F6_ERROR, chain, mlp  # noqa: E402

IREE_REDUCE_SHIM = """
import ctypes, os, sys, iree.compiler
lib = ctypes.CDLL(os.path.join(os.path.dirname(iree.compiler.__file__), "_mlir_libs", "libIREECompiler.so"))
args = ["iree-reduce"] + sys.argv[1:]
argv = (ctypes.c_char_p * (len(args) + 1))(*[a.encode() for a in args], None)
sys.exit(lib.ireeReduceRunMain(len(args), argv))
"""


def counting_check(work: Path, body: str, invert: bool = False) -> Path:
    """The case's check, wrapped to count calls; invert for mlir-reduce's convention."""
    counter = work / "calls"
    counter.write_text("")
    script = work / "check.sh"
    tail = "; r=$?; [ $r -eq 0 ] && exit 1 || exit 0" if invert else ""
    script.write_text(f'#!/bin/sh\necho x >> {counter}\nf="$1"\n{body}{tail}\n')
    script.chmod(0o755)
    return script


def calls(work: Path) -> int:
    return len((work / "calls").read_text().split())


def ops_in(text: str) -> int:
    return sum(1 for ln in text.splitlines() if re.match(r"\s*(%\S+ = )?[a-z_]+\.[a-z_.]+", ln) and "func.func" not in ln and "return" not in ln)


def run_tool(tool: str, src_text: str, body: str) -> tuple[int, float, int, bool]:
    with tempfile.TemporaryDirectory() as d:
        work = Path(d)
        src = work / "input.mlir"
        src.write_text(src_text)
        out = work / "out.mlir"
        check = counting_check(work, body, invert=tool == "mlir-reduce")
        if tool.startswith("ireereduce"):
            jobs = tool.split("-j")[-1]
            cmd = ["ireereduce", str(src), "--check", str(check), "-o", str(out), "-j", jobs, "-q"]
        elif tool == "iree-reduce":
            shim = work / "shim.py"
            shim.write_text(IREE_REDUCE_SHIM)
            cmd = [sys.executable, str(shim), "-o", str(out), str(check), str(src)]
        else:
            cmd = ["mlir-reduce", str(src), f"-reduction-tree=traversal-mode=0 test={check}", "-o", str(out)]
        start = time.monotonic()
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or [""])[-1]
            print(f"    {tool} exited {proc.returncode}: {last[:200]}", file=sys.stderr)
        seconds = time.monotonic() - start
        text = out.read_text() if out.exists() else src_text
        still = subprocess.run(["sh", "-c", body.replace('"$f"', f'"{out if out.exists() else src}"')]).returncode == 0
        return ops_in(text), seconds, calls(work), still


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--skip-e2e", action="store_true", help="skip the slow real iree-compile case")
    args = parser.parse_args()
    cases = [
        ("chain-1op (200 negf)", chain(200), 'grep -q math.exp "$f"'),
        ("chain-2op (200 addf)", chain(200, binary=True), 'grep -q math.exp "$f"'),
    ]
    if not args.skip_e2e:
        cases.append(("mlp-f6 (iree-compile)", mlp(), f'{COMPILE} "$f" -o /dev/null 2>&1 | grep -q "{F6_ERROR}"'))
    tools = ["ireereduce-j1", "ireereduce-j2", "iree-reduce"] + (["mlir-reduce"] if shutil.which("mlir-reduce") else [])
    print(f"{'case':<24}{'tool':<16}{'ops':>6}{'seconds':>10}{'checks':>8}  still interesting")
    for name, text, body in cases:
        print(f"{name:<24}{'(original)':<16}{ops_in(text):>6}")
        for tool in tools:
            ops, seconds, n, ok = run_tool(tool, text, body)
            print(f"{'':<24}{tool:<16}{ops:>6}{seconds:>10.1f}{n:>8}  {'yes' if ok else 'NO'}")


if __name__ == "__main__":
    main()
