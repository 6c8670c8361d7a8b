"""Interesting while two configurations compute different numbers for the same inputs.

Both compile and both runs must succeed: a candidate that breaks one side is not the bug
being chased. The original's kind of difference (NaN or inf on one side only, opposite
signs, how far apart: reducer/iree/signature.py) is kept, like a compile failure's signature:
a candidate that differs only some other way has slipped to another bug. The inputs are generated from the compiled module's ABI declaration (read
with iree-dump-module), never from the IR, so they follow the program as the reducer
drops arguments and shrinks shapes: fixed values with negatives, zeros and fractions.
"""

from __future__ import annotations

import os
import re
import subprocess
from typing import ClassVar

import attrs
import numpy as np

from reducer.core.oracle import CancelFn, Oracle, Verdict, candidate_dir, never, run_in
from reducer.iree import signature
from reducer.iree.oracles.command import Command, resolve_tool

DTYPES = {
    "f16": np.float16,
    "f32": np.float32,
    "f64": np.float64,
    "i1": np.bool_,
    "i8": np.int8,
    "i16": np.int16,
    "i32": np.int32,
    "i64": np.int64,
    "si8": np.int8,
    "si16": np.int16,
    "si32": np.int32,
    "si64": np.int64,
    "ui8": np.uint8,
    "ui16": np.uint16,
    "ui32": np.uint32,
    "ui64": np.uint64,
}
#: What a dynamic dimension becomes in the generated inputs.
DYNAMIC_DIM = 4
_DECL = re.compile(r"iree\.abi\.declaration: (?:sync |async )?func @([\w$.-]+)\((.*)\) -> \((.*)\)\s*$", re.MULTILINE)


def split_top(text: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in text:
        depth += ch in "<([{"
        depth -= ch in ">)]}"
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    return [p.strip() for p in parts + [cur] if p.strip()]


def declarations(dump: str) -> dict[str, tuple[list[str], int]]:
    """Exported functions: their argument types and result count, in module order."""
    out = {}
    for m in _DECL.finditer(dump):
        args = [a.split(":", 1)[1].strip() for a in split_top(m.group(2))]
        out[m.group(1)] = (args, len(split_top(m.group(3))))
    return out


def input_flag(t: str, k: int, tmp: str) -> str | None:
    """An --input for type t (the k-th argument): deterministic, varied values."""
    if t == "index":
        return "--input=5"
    m = re.fullmatch(r"tensor<(?:(.*)x)?(\w+)>", t)
    dims_text, element = (m.group(1), m.group(2)) if m else (None, t)
    if element not in DTYPES:
        return None
    dims = [DYNAMIC_DIM if d == "?" else int(d) for d in dims_text.split("x")] if dims_text else []
    n = int(np.prod(dims)) if dims else 1
    values: np.ndarray = ((np.arange(n) * 37 + 11 * k) % 17 - 8) / 4.0
    if element == "i1":
        values = values > 0
    elif not element.startswith("f"):
        values = np.round(values * 4) % 7 + (0 if element.startswith("ui") else -3)
    if m is None:  # a scalar
        return f"--input={element}={values[0] if element.startswith('f') else int(values[0])}"
    path = os.path.join(tmp, f"input{k}.npy")
    np.save(path, values.astype(DTYPES[element]).reshape(dims))
    return f"--input=@{path}"


def _describe(t: str, flag: str) -> str:
    """An input as a report shows it: the values when few, else how they were made."""
    if flag.startswith("--input=@"):
        values = np.load(flag[len("--input=@") :])
        if values.size <= 16:
            return f"{t} = {np.array2string(values.ravel(), separator=', ')}"
        return f"{t} = ((i * 37 + 11 * k) % 17 - 8) / 4"
    return f"{t} = {flag.split('=', 2)[-1]}"


@attrs.frozen
class MismatchOracle(Oracle):
    #: The command fields whose flags flag reduction may remove.
    commands: ClassVar[tuple[str, ...]] = ("compile", "against")
    kind: ClassVar[str] = "numeric-mismatch"
    compile: Command  # configuration A, writes {output}
    against: Command  # configuration B
    basename: str
    timeout: float | None
    runner: Command = Command(("iree-run-module", "--device=local-task"))
    function: str | None = None  # default: 'main' if exported, else the first export
    rtol: float = 1e-3
    atol: float = 1e-4
    allow_slippage: bool = False  # any difference counts, not only the original's kind
    expected: signature.Signature | None = None  # the original's, once calibrated

    def run(self, data: bytes, cancel: CancelFn = never) -> Verdict:
        with candidate_dir(data, self.basename) as (tmp, path):
            outputs = []
            seconds = 0.0
            for side, command in (("a", self.compile), ("b", self.against)):
                vmfb = os.path.join(tmp, f"{side}.vmfb")
                r = run_in(command.render(input=path, output=vmfb, tmp=tmp), tmp, self.timeout, cancel=cancel)
                seconds += r.seconds
                if r.returncode != 0:
                    return self._verdict(
                        "timeout" if r.timed_out else "run failed", r.returncode, seconds, f"compile {side}: {r.stderr}"
                    )
                if side == "a":
                    entry = self._entry(vmfb, tmp)
                    if entry is None:
                        return self._verdict("run failed", r.returncode, seconds, "no exported function to run")
                    function, types, n_out = entry
                    made = [input_flag(t, k, tmp) for k, t in enumerate(types)]
                    inputs = [flag for flag in made if flag is not None]
                    if len(inputs) < len(made):
                        return self._verdict("run failed", 1, seconds, f"cannot make inputs for {types}")
                    described = "; ".join(_describe(t, flag) for t, flag in zip(types, inputs))
                files = [os.path.join(tmp, f"{side}-out{i}.npy") for i in range(n_out)]
                argv = self.runner.render(tmp=tmp) + [f"--module={vmfb}", f"--function={function}", *inputs]
                argv += [f"--output=@{f}" for f in files]
                r = run_in(argv, tmp, self.timeout, cancel=cancel)
                seconds += r.seconds
                if r.returncode != 0 or not all(os.path.exists(f) for f in files):
                    return self._verdict(
                        "timeout" if r.timed_out else "run failed", r.returncode, seconds, f"run {side}: {r.stderr}"
                    )
                outputs.append([np.load(f) for f in files])
        a, b = outputs
        if not a:
            return self._verdict("same outputs", 0, seconds, "the function returns nothing")
        sig = signature.numeric(a, b, self.rtol, self.atol)
        if sig.kind == "ok":
            return self._verdict("same outputs", 0, seconds, "", sig)
        i = sig.code or 0
        x, y = a[i], b[i]
        if x.shape != y.shape:
            detail = f"output {i}: shapes {x.shape} and {y.shape}"
        else:
            x64, y64 = x.astype(np.float64), y.astype(np.float64)
            close = np.isclose(x64, y64, rtol=self.rtol, atol=self.atol, equal_nan=True)
            k = int(np.argmin(close.ravel()))
            detail = (
                f"output {i} differs in {int((~close).sum())} of {close.size} elements ({', '.join(sig.errors)}); "
                f"first at flat index {k}: {float(x64.ravel()[k])} vs {float(y64.ravel()[k])}\n"
                f"function @{function} on inputs {described}\n"
                f"a: {x.ravel()[:8]}\nb: {y.ravel()[:8]}"
            )
        if self.expected is not None and not self.allow_slippage and not sig.matches(self.expected):
            return self._verdict("different bug", 0, seconds, f"{detail}\nnot {self.expected.describe()}", sig)
        return self._verdict("interesting", 0, seconds, detail, sig)

    def calibrate(self, original: Verdict) -> MismatchOracle:
        return attrs.evolve(self, expected=signature.of_verdict(original))

    def _verdict(
        self, outcome: str, rc: int | None, seconds: float, detail: str, sig: signature.Signature | None = None
    ) -> Verdict:
        return Verdict(outcome == "interesting", rc, outcome == "timeout", seconds, detail[-4000:], outcome, sig)

    def _entry(self, vmfb: str, tmp: str) -> tuple[str, list[str], int] | None:
        try:
            dump = subprocess.run(
                [resolve_tool("iree-dump-module"), vmfb], capture_output=True, text=True, timeout=self.timeout, cwd=tmp
            ).stdout
        except subprocess.TimeoutExpired:
            return None
        found = declarations(dump)
        if not found:
            return None
        name = self.function if self.function in found else "main" if "main" in found else next(iter(found))
        if self.function and self.function != name:
            return None
        return (name, *found[name])

    def failure(self) -> signature.Signature | None:
        return self.expected

    def reproducer(self, path: str) -> str:
        a = self.compile.shell(input=path, output="a.vmfb")
        b = self.against.shell(input=path, output="b.vmfb")
        run = self.runner.shell()
        return f"{a}\n{b}\n{run} --module=a.vmfb <inputs>  # and the same with b.vmfb; outputs differ beyond rtol={self.rtol:g}, atol={self.atol:g}"

    def why_not(self, verdict: Verdict) -> str:
        if verdict.outcome == "different bug" and self.expected is not None:
            return f"the outputs differ another way than the original's ({self.expected.describe()})"
        if verdict.outcome == "same outputs":
            return f"both configurations give the same outputs (rtol={self.rtol:g}, atol={self.atol:g})"
        return f"{verdict.outcome}: {verdict.stderr_tail.strip().splitlines()[-1:] or ''}"
