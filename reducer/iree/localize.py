"""The first dispatch that goes wrong (shared/seeds/gpu-debugging-playbook.txt: "diff
against the CPU dispatches one by one to isolate the problem").

Both configurations are compiled with --iree-flow-trace-dispatch-tensors and run once on
the same inputs; iree-run-module then prints every dispatch's input and output tensors
to stderr, in execution order:

    === main_dispatch_1::main_dispatch_1_matmul_4x8x8_f32 inputs ===
    4x8xf32=[-1.00499 -0.265305 ...][...]

The culprit is the first dispatch (in side a's order) whose outputs show the original's
worst kind of difference (reducer/iree/signature.py) while its inputs show neither that
kind nor a worse one: the bug is in it, not upstream. Dispatches are paired by order and
shapes; when the two sides form different dispatches, what still pairs is compared and
the result says so. Printed values have six significant digits, which is what a cut
program (reducer/iree/cut.py) is fed.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Hashable, Sequence

import attrs
import numpy as np

from reducer.core.oracle import CancelFn, candidate_dir, never
from reducer.iree import signature
from reducer.iree.inputs import DTYPES
from reducer.iree.oracles.mismatch import MismatchOracle, Side

TRACE_FLAG = "--iree-flow-trace-dispatch-tensors"
#: A data-tiled dispatch's header says how its tensors were printed: "=== NAME inputs
#: with {0, 1, 2} decoded to row major layout ===".
_HEADER = re.compile(r"^=== (\S+) (inputs|outputs)\b.*===\s*$")
_VALUE = re.compile(r"((?:\d+x)*)(\w+)=(.*)")
#: How much longer than a check the traced runs may take. Tracing can make compiles far
#: slower: iree-compile 3.13's ReuseAllocationsPass takes 107 s of 115 on a 24-layer
#: llvm-cpu model with --iree-opt-data-tiling traced, which compiles in 3 s untraced.
TRACE_TIMEOUT_FACTOR = 10.0
#: A trace has every tensor of every dispatch: keep all of iree-run-module's stderr.
_KEEP_ALL = 1 << 40


@attrs.define(eq=False)
class Traced:
    """One dispatch as it ran: its name and the tensors it read and wrote."""

    name: str  # executable::entry point
    inputs: list[np.ndarray] = attrs.Factory(list)
    outputs: list[np.ndarray] = attrs.Factory(list)

    def shapes(self) -> tuple[tuple[tuple[int, ...], ...], tuple[tuple[int, ...], ...]]:
        return tuple(x.shape for x in self.inputs), tuple(x.shape for x in self.outputs)


def parse_value(text: str) -> np.ndarray | None:
    """One printed buffer view: '4x8xf32=[1 2 ...][...]', 'f32=0.5'; None if not one."""
    m = _VALUE.fullmatch(text.strip())
    if m is None:
        return None
    shape = [int(d) for d in m.group(1).split("x") if d]
    words = [w for w in re.split(r"[\s\[\]]+", m.group(3)) if w]
    try:
        values = np.array([float(w) for w in words], dtype=np.float64)
    except ValueError:
        return None
    n = int(np.prod(shape)) if shape else 1
    if values.size != n:
        return None
    dtype = DTYPES.get(m.group(2), np.float64)  # bf16, f8...: kept as float64
    return values.astype(dtype).reshape(shape)


def parse(stderr: str) -> list[Traced]:
    """The dispatches of a traced run, in execution order."""
    out: list[Traced] = []
    where: list[np.ndarray] | None = None
    for line in stderr.splitlines():
        m = _HEADER.match(line)
        if m:
            name, what = m.groups()
            if what == "inputs" or not out or out[-1].name != name or out[-1].outputs:
                out.append(Traced(name))
            where = out[-1].inputs if what == "inputs" else out[-1].outputs
            continue
        value = parse_value(line) if where is not None and line.strip() else None
        if value is not None and where is not None:
            where.append(value)
    return out


def match(a: list[Traced], b: list[Traced]) -> tuple[list[tuple[int, int]], str]:
    """Pairs (i, j) of dispatches taken for the same work: by order and shapes. The
    note says how far the two sides' dispatches differ ('' when they form the same)."""
    ka, kb = [t.shapes() for t in a], [t.shapes() for t in b]
    if ka == kb:
        return [(i, i) for i in range(len(a))], ""
    pairs, by = _aligned(ka, kb), "shapes"
    if len(pairs) < min(len(a), len(b)):  # one side reads more (a data-tiled matmul reads its weights)
        outputs = _aligned([k[1] for k in ka], [k[1] for k in kb])
        if len(outputs) > len(pairs):
            pairs, by = outputs, "output shapes"
    return pairs, (
        f"the two configurations form different dispatches ({len(a)} and {len(b)}"
        + (", reading different tensors" if len(a) == len(b) else "")
        + f"); {len(pairs)} paired by order and {by}"
    )


def _aligned(ka: Sequence[Hashable], kb: Sequence[Hashable]) -> list[tuple[int, int]]:
    blocks = difflib.SequenceMatcher(None, ka, kb, autojunk=False).get_matching_blocks()
    return [(blk.a + k, blk.b + k) for blk in blocks for k in range(blk.size)]


def common_inputs(x: Traced, y: Traced) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """x's and y's inputs paired in order by shape: the tensors both read."""
    xs, ys, j = [], [], 0
    for p in x.inputs:
        k = next((k for k in range(j, len(y.inputs)) if y.inputs[k].shape == p.shape), None)
        if k is not None:
            xs.append(p)
            ys.append(y.inputs[k])
            j = k + 1
    return xs, ys


def number(x: float) -> float | str:
    """x for a JSON report: NaN and the infinities as strings ('nan', 'inf', '-inf'),
    which strict JSON readers accept."""
    return x if np.isfinite(x) else str(x)


@attrs.define(eq=False)
class Found:
    """The first dispatch that goes wrong, and its worst element."""

    index: int  # in side a's execution order
    name: str
    index_b: int
    name_b: str
    dispatches: int  # how many side a ran
    kind: str  # the original's worst kind of difference, which this dispatch starts
    output: int  # its first output showing it
    element: tuple[int, ...]  # the worst element's index in that output
    a_value: float
    b_value: float
    inputs_agree: bool  # within rtol/atol too, not only free of the kind
    traced: Traced  # side a's, for a cut program
    note: str = ""
    traced_b: Traced | None = None  # side b's: cut from when a's dispatch cannot be (encodings)

    def summary(self) -> dict[str, object]:
        """What the summary and the report say of it: plain data, no tensors."""
        error = abs(self.a_value - self.b_value)
        return {
            "name": self.name,
            "index": self.index,
            "dispatches": self.dispatches,
            "name_b": self.name_b,
            "index_b": self.index_b,
            "kind": self.kind,
            "output": self.output,
            "element": list(self.element),
            "a": number(self.a_value),
            "b": number(self.b_value),
            "error": error if np.isfinite(error) else None,
            "inputs_agree": self.inputs_agree,
            "note": self.note,
        }

    def describe(self) -> str:
        where = f"dispatch #{self.index} of {self.dispatches}: {self.name}"
        if self.name_b != self.name or self.index_b != self.index:
            where += f" (on b: #{self.index_b} {self.name_b})"
        error = abs(self.a_value - self.b_value)
        worst = (
            f"worst error: {self.kind} at output {self.output} index {list(self.element)}: "
            f"a = {self.a_value!r}, b = {self.b_value!r}" + (f" (|a - b| = {error:g})" if np.isfinite(error) else "")
        )
        inputs = "its inputs agree" if self.inputs_agree else f"its inputs differ, but not by {self.kind} or worse"
        return "\n".join(x for x in (where, worst, inputs, self.note) if x)


@attrs.define
class Localized:
    """What localisation found: the dispatch, or why the whole program stays."""

    found: Found | None
    reason: str = ""  # when found is None
    flow: str = ""  # side a's IR at --compile-to=flow, for cutting
    seconds: float = 0.0


def worst(x: np.ndarray, y: np.ndarray, rtol: float, atol: float) -> tuple[int, ...]:
    """The element of x and y furthest apart: a NaN or inf on one side only counts as infinitely far."""
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    with np.errstate(all="ignore"):
        err = np.abs(x64 - y64)
    err = np.where(np.isnan(x64) != np.isnan(y64), np.inf, np.nan_to_num(err, nan=0.0, posinf=np.inf))
    err = np.where(np.isclose(x64, y64, rtol=rtol, atol=atol, equal_nan=True), -1.0, err)
    return tuple(int(i) for i in np.unravel_index(int(np.argmax(err)), x.shape)) if x.shape else ()


def first_wrong(
    a: list[Traced], b: list[Traced], pairs: list[tuple[int, int]], kind: str, rtol: float, atol: float
) -> Found | None:
    """The first pair whose outputs show `kind` while its inputs show neither it nor worse."""
    rank = signature.DIFFERENCES.index(kind)
    for i, j in pairs:
        x, y = a[i], b[j]
        ins = signature.numeric(*common_inputs(x, y), rtol, atol)
        if ins.kind == "mismatch" and any(signature.DIFFERENCES.index(k) <= rank for k in ins.errors):
            continue
        outs = signature.numeric(x.outputs, y.outputs, rtol, atol)
        if outs.kind != "mismatch" or kind not in outs.errors:
            continue
        k = next(n for n, (p, q) in enumerate(zip(x.outputs, y.outputs)) if kind in signature.kinds(p, q, rtol, atol))
        p, q = x.outputs[k], y.outputs[k]
        element = worst(p, q, rtol, atol)
        return Found(
            i,
            x.name,
            j,
            y.name,
            len(a),
            kind,
            k,
            element,
            float(p[element]),
            float(q[element]),
            ins.kind == "ok",
            x,
            traced_b=y,
        )
    return None


@attrs.define
class Traces:
    """Both sides compiled with tracing and run once on the same inputs, or why not."""

    sides: list[Side] = attrs.Factory(list)
    failed: str = ""  # why there is no trace to read
    seconds: float = 0.0

    def agrees(self, oracle: MismatchOracle, original: object) -> bool:
        """Whether the traced programs mismatch the way the untraced original did (its
        verdict's signature): then the traced run is a second look at the original, as
        good as checking it again."""
        if self.failed or len(self.sides) != 2 or not isinstance(original, signature.Signature):
            return False
        a, b = self.sides[0].outputs, self.sides[1].outputs
        return bool(a) and signature.numeric(a, b, oracle.rtol, oracle.atol).matches(original)


def trace(oracle: MismatchOracle, data: bytes, basename: str, cancel: CancelFn = never) -> Traces:
    """Run both sides traced on the oracle's inputs (side b on side a's values)."""
    if oracle.timeout is not None:  # tracing is done once, and may compile far slower
        oracle = attrs.evolve(oracle, timeout=oracle.timeout * TRACE_TIMEOUT_FACTOR)
    done = Traces()
    with candidate_dir(data, basename) as (tmp, path):
        values = oracle.values()
        for side, command in (("a", oracle.compile), ("b", oracle.against)):
            ran = oracle.side(side, command.plus(TRACE_FLAG), path, tmp, values, cancel, keep=_KEEP_ALL)
            done.sides.append(ran)
            done.seconds += ran.seconds
            if ran.failed is not None:
                if ran.failed[0] == "timeout":
                    done.failed = f"side {side}'s traced run timed out after {oracle.timeout:.0f} s"
                else:
                    last = ran.failed[2].strip().splitlines()[-1:] or [ran.failed[0]]
                    done.failed = f"the traced run failed ({last[0][:200]})"
                return done
            values = ran.values
    return done


def localize(oracle: MismatchOracle, data: bytes, basename: str) -> Localized:
    """Run both sides traced on the oracle's inputs and find the first dispatch that goes
    wrong the original's way (the oracle's calibrated signature, else the traced run's)."""
    return find(trace(oracle, data, basename), oracle)


def find(traces: Traces, oracle: MismatchOracle) -> Localized:
    """The first dispatch of the traced run that goes wrong the original's way."""
    seconds, sides = traces.seconds, traces.sides
    if traces.failed:
        return Localized(None, traces.failed, seconds=seconds)
    final = signature.numeric(sides[0].outputs, sides[1].outputs, oracle.rtol, oracle.atol)
    if final.kind != "mismatch":
        return Localized(None, "the traced programs give the same outputs", seconds=seconds)
    kind = oracle.expected.first_error if oracle.expected is not None else final.first_error
    ta, tb = parse(sides[0].stderr), parse(sides[1].stderr)
    if not ta or not tb:
        return Localized(None, "iree-run-module traced no dispatch", seconds=seconds)
    pairs, note = match(ta, tb)
    if not pairs:
        return Localized(None, f"{note}; none pairs with the other side", seconds=seconds)
    found = first_wrong(ta, tb, pairs, kind, oracle.rtol, oracle.atol)
    if found is None:
        why = f"no dispatch starts the difference ({kind}) from inputs without it"
        return Localized(None, f"{note}; {why}" if note else why, seconds=seconds)
    found.note = note
    return Localized(found, seconds=seconds)
