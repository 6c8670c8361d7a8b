"""Interesting while two configurations compute different numbers for the same inputs.

Both compile and both runs must succeed: a candidate that breaks one side is not the bug
being chased. The original's kind of difference (NaN or inf on one side only, opposite
signs, how far apart: reducer/iree/signature.py) is kept, like a compile failure's signature:
a candidate that differs only some other way has slipped to another bug. The inputs are generated from the compiled module's ABI declaration (read
with iree-dump-module), never from the IR, so they follow the program as the reducer
drops arguments and shrinks shapes: fixed values with negatives, zeros and fractions,
or the user's (--inputs, or a cut program's traced tensors) fitted to the candidate's
signature (a shrunk argument gets the leading block of its value). Each side gets them
cast to its own signature's types (a demoted module takes f16 where the other takes
f32), and the outputs are compared as float64 (reducer/iree/inputs.py).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from collections.abc import Mapping
from typing import ClassVar

import attrs
import numpy as np

from reducer.core.oracle import CancelFn, Oracle, Run, Verdict, candidate_dir, ended, never, run_in
from reducer.iree import inputs, signature
from reducer.iree.oracles.command import Command, resolve_tool

#: Kept here for callers from before reducer/iree/inputs.py.
DTYPES = inputs.DTYPES
DYNAMIC_DIM = inputs.DYNAMIC_DIM
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
    value = inputs.generated(t, k)
    return None if value is None else inputs.flag(value, t, os.path.join(tmp, f"input{k}.npy"))


def _fit_note(
    given: list[np.ndarray], pairs: list[tuple[np.ndarray, int | None]], function: str, types: list[str]
) -> str:
    """What `inputs.fitted` made of given values that do not fit @function(types) (pairs:
    per argument, its value and the given one it comes from); "" if they fit."""
    n, m = len(given), len(types)
    placed = [k for _, k in pairs]
    made = placed.count(None)
    unused = [k for k in range(n) if k not in placed]
    parts = [f"{'one gets' if made == 1 else f'{made} get'} generated values"] if made else []
    if unused:
        which = ", ".join(f"#{k + 1} ({_shape(given[k])})" for k in unused)
        parts.append(f"{which} {'goes' if len(unused) == 1 else 'go'} unused")
    if n != m:
        told = "; ".join(parts) + (" (give one --inputs per argument)" if n < m else "")
        return f"--inputs gives {n} value{'s' if n != 1 else ''} for @{function}'s {m} arguments: {told}"
    if parts:
        return f"--inputs do not fit @{function}({', '.join(types)}): {'; '.join(parts)}"
    if any(k is not None and v.shape != given[k].shape for v, k in pairs):
        shapes = ", ".join("x".join(map(str, v.shape)) or "scalar" for v in given)
        return f"--inputs ({shapes}) are cut to @{function}({', '.join(types)})'s shapes"
    return ""


def _shape(value: np.ndarray) -> str:
    """A value's shape in words: `4` alone reads as the number four."""
    return f"shape {'x'.join(map(str, value.shape))}" if value.shape else "a scalar"


def _said(r: Run) -> str:
    """A failed command's stderr; a silent one's exit, so a reason is never empty."""
    return r.stderr if r.stderr.strip() else f"{ended(r.returncode, r.timed_out)}, nothing on stderr"


#: The outcome of a run whose --function the module does not export (`_entry`).
NO_SUCH_FUNCTION = "no such function"


def _some(names: list[str], most: int = 20) -> str:
    """names for one line: a module of thousands of exports would fill a screen, and a
    verdict's detail that long is cut in the middle."""
    return ", ".join(names[:most]) + (f" and {len(names) - most} more" if len(names) > most else "")


def wrong_function(verdict: Verdict) -> str | None:
    """The line for an original run whose --function the module does not export: a value
    of the command line given wrong (exit 2), not a verdict on the input."""
    if verdict.outcome != NO_SUCH_FUNCTION:
        return None
    return f"{verdict.stderr_tail.strip()}; give one of those"


@attrs.define
class Side:
    """One configuration compiled and run: its outputs, or why it failed."""

    seconds: float = 0.0
    failed: tuple[str, int | None, str] | None = None  # outcome, exit code, detail
    function: str = ""
    types: list[str] = attrs.Factory(list)  # its ABI's argument types
    values: list[np.ndarray] | None = None  # the inputs, before the cast to this side's types
    described: str = ""
    outputs: list[np.ndarray] = attrs.Factory(list)
    stderr: str = ""  # iree-run-module's
    note: str = ""  # given inputs that do not fit the signature: what was made of them


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
    given: tuple[bytes, ...] = ()  # --inputs, as .npy bytes: they travel with the oracle
    #: --parameters: (scope, absolute path) of each archive, given to every run of a module.
    parameters: tuple[tuple[str, str], ...] = ()

    def run(self, data: bytes, cancel: CancelFn = never) -> Verdict:
        sides: list[Side] = []
        verdict = self._judged(data, cancel, sides)
        # What side a made of the given inputs goes beside the verdict, never in its log.
        return attrs.evolve(verdict, notes=(sides[0].note,)) if sides and sides[0].note else verdict

    def _judged(self, data: bytes, cancel: CancelFn, sides: list[Side]) -> Verdict:
        """Both sides compiled and run (each appended to sides as it ends), compared."""
        with candidate_dir(data, self.basename) as (tmp, path):
            values = self.values()
            for side, command in (("a", self.compile), ("b", self.against)):
                ran = self.side(side, command, path, tmp, values, cancel)
                sides.append(ran)
                if ran.failed is not None:
                    outcome, rc, detail = ran.failed
                    return self._verdict(outcome, rc, sum(s.seconds for s in sides), detail)
                values = ran.values
        seconds = sum(s.seconds for s in sides)
        function, described = sides[0].function, sides[0].described
        a, b = sides[0].outputs, sides[1].outputs  # compared as float64, whatever each side's types
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

    def values(self) -> list[np.ndarray] | None:
        """The user's inputs (--inputs), or None: made from the first side's signature."""
        return [inputs.from_bytes(b) for b in self.given] if self.given else None

    def side(
        self,
        side: str,
        command: Command,
        path: str,
        tmp: str,
        values: list[np.ndarray] | None,
        cancel: CancelFn = never,
        extra: tuple[str, ...] = (),
        keep: int = 65536,
    ) -> Side:
        """Compile and run one configuration on values, cast to ITS signature's types
        (made from that signature when None); `extra` goes to iree-run-module, whose
        stderr (`keep` bytes of it) the result holds."""
        done = Side()
        vmfb = os.path.join(tmp, f"{side}.vmfb")
        r = run_in(command.render(input=path, output=vmfb, tmp=tmp), tmp, self.timeout, cancel=cancel)
        done.seconds += r.seconds
        if r.returncode != 0:
            done.failed = ("timeout" if r.timed_out else "run failed", r.returncode, f"compile {side}: {_said(r)}")
            return done
        entry = self._entry(vmfb, tmp)
        if isinstance(entry, str):  # --function naming none: the command line's, if the original's
            done.failed = (NO_SUCH_FUNCTION if entry.startswith("--function ") else "run failed", r.returncode, entry)
            return done
        done.function, types, n_out = entry
        done.types = types
        made = values is None
        if values is None:
            generated = [inputs.generated(t, k) for k, t in enumerate(types)]
            if any(v is None for v in generated):
                done.failed = ("run failed", 1, f"cannot make inputs for {types}")
                return done
            values = [v for v in generated if v is not None]
        try:
            if not made:  # a candidate's signature may have changed since they were made
                pairs = inputs.fitted(values, types)
                done.note = _fit_note(values, pairs, done.function, types)
                values = [v for v, _ in pairs]
            flags = [
                inputs.flag(v, t, os.path.join(tmp, f"{side}-input{k}.npy"))
                for k, (t, v) in enumerate(zip(types, values))
            ]
        except inputs.Unfit as exc:
            done.failed = ("run failed", 1, f"run {side}: @{done.function}({', '.join(types)}): {exc}")
            return done
        done.values = values
        done.described = "; ".join(inputs.describe(t, inputs.cast(v, t), not made) for t, v in zip(types, values))
        files = [os.path.join(tmp, f"{side}-out{i}.npy") for i in range(n_out)]
        argv = self.runner.render(tmp=tmp) + [f"--module={vmfb}", f"--function={done.function}", *flags]
        argv += [f"--output=@{f}" for f in files] + self._parameter_flags() + list(extra)
        r = run_in(argv, tmp, self.timeout, keep, cancel=cancel)
        done.seconds += r.seconds
        done.stderr = r.stderr
        if r.returncode != 0 or not all(os.path.exists(f) for f in files):
            done.failed = ("timeout" if r.timed_out else "run failed", r.returncode, f"run {side}: {_said(r)}")
            return done
        done.outputs = [np.load(f) for f in files]
        return done

    def _parameter_flags(self) -> list[str]:
        from reducer.iree.parameters import flag

        return [flag(scope, path) for scope, path in self.parameters]

    def run_shell(self) -> str:
        """The run command as a report gives it, with the archives --parameters named."""
        return " ".join([self.runner.shell(), *map(shlex.quote, self._parameter_flags())])

    def data_files(self) -> tuple[str, ...]:
        return tuple(path for _scope, path in self.parameters)

    def with_data_files(self, moved: Mapping[str, str]) -> MismatchOracle:
        return attrs.evolve(self, parameters=tuple((s, moved.get(p, p)) for s, p in self.parameters))

    def calibrate(self, original: Verdict) -> MismatchOracle:
        return attrs.evolve(self, expected=signature.of_verdict(original))

    def _verdict(
        self, outcome: str, rc: int | None, seconds: float, detail: str, sig: signature.Signature | None = None
    ) -> Verdict:
        """The verdict, keeping the detail's head (a compile's first `error:`) and tail (a
        crash stack)."""
        if len(detail) > 4000:
            detail = f"{detail[:2000]}\n...\n{detail[-2000:]}"
        return Verdict(outcome == "interesting", rc, outcome == "timeout", seconds, detail, outcome, sig)

    def _entry(self, vmfb: str, tmp: str) -> tuple[str, list[str], int] | str:
        """The function to run: its name, argument types and result count; else why none."""
        try:
            dump = subprocess.run(
                [resolve_tool("iree-dump-module"), vmfb], capture_output=True, text=True, timeout=self.timeout, cwd=tmp
            ).stdout
        except subprocess.TimeoutExpired:
            return "no exported function to run (iree-dump-module timed out)"
        found = declarations(dump)
        if not found:
            return "no exported function to run"
        name = self.function if self.function in found else "main" if "main" in found else next(iter(found))
        if self.function and self.function != name:
            return f"--function {self.function}: the module exports no such function (it has {_some(list(found))})"
        return (name, *found[name])

    def failure(self) -> signature.Signature | None:
        return self.expected

    def reproducer(self, path: str) -> str:
        a = self.compile.shell(input=path, output="a.vmfb")
        b = self.against.shell(input=path, output="b.vmfb")
        run = self.run_shell()
        given = " ".join(f"--input=@input{k}.npy" for k in range(len(self.given)))  # the --inputs, in order
        return f"{a}\n{b}\n{run} --module=a.vmfb {given or '<inputs>'}  # and the same with b.vmfb; outputs differ beyond rtol={self.rtol:g}, atol={self.atol:g}"

    def why_not(self, verdict: Verdict) -> str:
        if verdict.outcome == "different bug" and self.expected is not None:
            return f"the outputs differ another way than the original's ({self.expected.describe()})"
        if verdict.outcome == "same outputs":
            return f"both configurations give the same outputs (rtol={self.rtol:g}, atol={self.atol:g})"
        lines = [ln.strip() for ln in verdict.stderr_tail.splitlines() if ln.strip()]
        # A compiler's last line is often a caret under the source line: its error line says why.
        said = next((ln for ln in lines if "error:" in ln), lines[-1] if lines else "(nothing said)")
        said = re.sub(r"\S*/(?=[^/\s]+:\d+:\d+: )", "", said)  # the candidate's temp dir: its name is the input's
        side = lines[0].split(":", 1)[0] if lines and lines[0].startswith(("compile ", "run ")) else ""
        return f"{verdict.outcome}: " + (f"{side}: " if side and not said.startswith(side) else "") + said
