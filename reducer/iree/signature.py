"""What a compiler failure looks like, reduced to what stays the same while the program
shrinks: the slippage guard compares these.

Reducers that leave slippage to the user's script end up chasing a different bug
(MozillaSecurity/lithium#72, DeadCodeProductions/dead#2). Only ddSMT compares with the golden run, and only byte for byte. A
compiler's message changes as the program shrinks (file positions, SSA numbers, shapes),
so a signature keeps the kind of failure, the first error with those normalised away,
and the top frames of a crash stack.
"""

from __future__ import annotations

import re
import signal
from typing import TYPE_CHECKING

import attrs

from reducer.core import codec

if TYPE_CHECKING:  # the contract, for annotations only: no cycle at run time
    import numpy as np

    from reducer.core.oracle import Verdict

#: Frames of the crash handler itself, not of the bug.
_HANDLER_FRAMES = re.compile(
    r"llvm::sys::|SignalHandler|__restore_rt|libc\.so|libpthread|abort|raise|__assert|_start\b"
)
_FRAME = re.compile(r"^\s*#\d+\s+0x[0-9a-fA-F]+\s+(.*)$")
_DIAG = re.compile(r"^(?:[^\s:][^:]*:\d+:\d+: |<unknown>:\d+:\d+: |[\w./-]+: )?error: (.*)$")
#: Top frames of a crash stack that must match (below the signal handler).
FRAMES = 1
_PASS = re.compile(r"\b(\w+Pass)(?:<[^>]*>)?::runOn(?:Operation|Function|Module)\(")
_ASSERT = re.compile(r"Assertion `(.*)' failed")


def crash_signal(returncode: int | None) -> int | None:
    """The signal that killed the process, also through a shell (128+N) or a Python
    wrapper such as pip's console scripts (256-N)."""
    if returncode is None:
        return None
    if returncode < 0:
        return -returncode
    for sig in (returncode - 128, 256 - returncode):
        if sig in (signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS, signal.SIGILL, signal.SIGFPE, signal.SIGTRAP):
            return sig
    return None


def normalise(message: str) -> str:
    """Keep what identifies the bug, drop what reduction changes on the way."""
    # An op printed after the message ("... illegal: %3 = "vector.store"(...)") changes with every edit.
    for cut in (': "', ": %", ": '", ": ^", ":\n"):
        i = message.find(cut)
        if i > 20:
            message = message[:i]
    message = re.sub(r"%[\w$.-]+", "%_", message)  # SSA names
    message = re.sub(r"\^bb\d+", "^bb", message)  # block names
    message = re.sub(r"@[\w$.-]+|@\"[^\"]*\"", "@_", message)  # symbol names: functions get split and renamed
    message = re.sub(r"(?:(?:\d+|\?)x)+", "Nx", message)  # static and dynamic dims of shaped types
    message = re.sub(r"(?<![\w.#])\d+(?![\w.])", "N", message)  # other numbers (operand #N keeps its '#')
    return " ".join(message.split())[:300]


@codec.record()
@attrs.frozen
class Signature:
    """kind: 'crash' (a signal or an LLVM stack dump), 'error' (a non-zero exit), 'ok';
    'mismatch' (two configurations' outputs differ: `code` is the first output that
    differs, `errors` the kinds of difference found, the worst first; see `numeric`)."""

    kind: str
    code: int | None = None  # the signal for a crash, the exit code for an error
    errors: tuple[str, ...] = ()  # normalised error diagnostics, in order
    frames: tuple[str, ...] = ()  # top frames of a crash stack, handler frames skipped
    assertion: str = ""
    failing_pass: str = ""  # the pass on the crash stack (...Pass::runOnOperation), when there is one

    @property
    def first_error(self) -> str:
        return self.errors[0] if self.errors else ""

    def matches(self, original: Signature) -> bool:
        """The same bug: same kind, the original's first error is still reported (other
        errors may come and go with the code around it); for a crash the same assertion,
        the same crashing function and the same pass. Deeper frames are not compared:
        the path to the crash changes as the program shrinks (a rank-0 memref takes
        another overload), so comparing them refuses good candidates (benchmarks/README.md)."""
        if self.kind != original.kind:
            return False
        if original.kind == "crash":
            if original.assertion and self.assertion != original.assertion:
                return False
            if original.failing_pass and self.failing_pass != original.failing_pass:
                return False
            n = min(len(original.frames), FRAMES)
            if n and self.frames[:n] != original.frames[:n]:
                return False
            if not n and original.code != self.code:
                return False
        elif original.kind == "mismatch":  # the output's index moves as results are dropped
            return original.first_error in self.errors
        elif original.kind == "error" and self.code != original.code:
            return False
        return not original.first_error or original.first_error in self.errors

    def describe(self) -> str:
        if self.kind == "ok":
            return "no failure"
        if self.kind == "mismatch":
            return f"output {self.code} differs: {', '.join(self.errors)}"
        if self.kind == "crash":
            what = signal.Signals(self.code).name if self.code else "crash"
            where = self.assertion or (self.frames[0] if self.frames else self.first_error)
            during = f" (in {self.failing_pass})" if self.failing_pass else ""
            return f"{what} in {where}{during}" if where else what
        return f"exit {self.code}: {self.first_error or '(no error message)'}"

    def to_json(self) -> dict[str, object]:
        return attrs.asdict(self)


def of_verdict(verdict: Verdict) -> Signature | None:
    """The Signature a built-in oracle put in its verdict (the contract types it loosely)."""
    sig = verdict.signature
    return sig if isinstance(sig, Signature) else None


def of(returncode: int | None, stderr: str) -> Signature:
    """The signature of one run of a command, from its exit status and its stderr."""
    errors: list[str] = []
    for line in stderr.splitlines():
        m = _DIAG.match(line)
        if m and len(errors) < 20:
            errors.append(normalise(m.group(1)))
    assertion = ""
    m = _ASSERT.search(stderr)
    if m:
        assertion = normalise(m.group(1))
    frames: list[str] = []
    failing_pass = ""
    for line in stderr.splitlines():
        m = _FRAME.match(line)
        if not m:
            continue
        frame = re.sub(r"\s+\S+\.(?:cpp|c|h|cc):\d+(?::\d+)?$", "", m.group(1)).strip()
        p = _PASS.search(frame)
        if p and not failing_pass:
            failing_pass = p.group(1)
        frame = re.sub(r"\s*\(/[^)]*\+0x[0-9a-f]+\)$", "", frame)
        if not frame or _HANDLER_FRAMES.search(frame):
            continue
        if len(frames) < 5:
            frames.append(frame)
        if len(frames) == 5 and failing_pass:
            break
    sig = crash_signal(returncode)
    if sig is not None or "Stack dump:" in stderr or assertion:
        return Signature("crash", sig, tuple(errors), tuple(frames), assertion, failing_pass)
    if returncode == 0:
        return Signature("ok", 0, tuple(errors))
    return Signature("error", returncode, tuple(errors))


#: Kinds of numeric difference, the worst first: a candidate must show the original's worst.
DIFFERENCES = (
    "shapes differ",
    "NaN on a only",
    "NaN on b only",
    "inf on a only",
    "inf on b only",
    "opposite signs",
    "off by 2x or more",
    "off by under 2x",
)


def _kinds(x: np.ndarray, y: np.ndarray, rtol: float, atol: float) -> list[str]:
    """Which kinds of difference the elements of x and y show beyond rtol/atol."""
    import numpy as np  # only the mismatch oracle compares outputs: the start-up of every other run skips it

    if x.shape != y.shape:
        return ["shapes differ"]
    x, y = x.astype(np.float64).ravel(), y.astype(np.float64).ravel()
    differ = ~np.isclose(x, y, rtol=rtol, atol=atol, equal_nan=True)
    if not differ.any():
        return []
    x, y = x[differ], y[differ]
    found = set()
    nan_x, nan_y, inf_x, inf_y = np.isnan(x), np.isnan(y), np.isinf(x), np.isinf(y)
    found |= {"NaN on a only"} if (nan_x & ~nan_y).any() else set()
    found |= {"NaN on b only"} if (nan_y & ~nan_x).any() else set()
    found |= {"inf on a only"} if (inf_x & ~inf_y & ~nan_y).any() else set()
    found |= {"inf on b only"} if (inf_y & ~inf_x & ~nan_x).any() else set()
    finite = np.isfinite(x) & np.isfinite(y)
    fx, fy = x[finite], y[finite]
    if fx.size:
        if ((np.abs(fx) > atol) & (np.abs(fy) > atol) & (np.sign(fx) != np.sign(fy))).any():
            found.add("opposite signs")
        big, small = np.maximum(np.abs(fx), np.abs(fy)), np.minimum(np.abs(fx), np.abs(fy))
        far = big >= 2 * small
        found |= {"off by 2x or more"} if far.any() else set()
        found |= {"off by under 2x"} if (~far).any() else set()
    return [k for k in DIFFERENCES if k in found]


def numeric(a: list[np.ndarray], b: list[np.ndarray], rtol: float, atol: float) -> Signature:
    """The 'mismatch' signature of two runs' outputs ('ok' when they agree): the first
    output that differs, and every kind of difference any output shows, worst first, so
    that a candidate matches while it still shows the original's worst kind."""
    first, found = None, set()
    for i, (x, y) in enumerate(zip(a, b)):
        kinds = _kinds(x, y, rtol, atol)
        if kinds and first is None:
            first = i
            found.add(kinds[0])  # the first output's worst leads
            head = kinds[0]
        found |= set(kinds)
    if first is None:
        return Signature("ok", 0)
    rest = [k for k in DIFFERENCES if k in found and k != head]
    return Signature("mismatch", first, (head, *rest))


#: Which kinds of difference two arrays show (the localisation compares dispatches with it).
kinds = _kinds
