"""Cut a model at the dispatch that goes wrong (reducer/iree/localize.py): a standalone
program computing only that dispatch's work, fed with the tensors it read in the traced
run. Everything upstream goes; this is hlo_bisect's "constants from a reference run" and
PyTorch's accuracy minifier feeding a cut graph its real intermediate tensors.

The dispatch's body comes from side a's IR at --compile-to=flow, where each executable's
function reads and writes whole tensors through bindings:

    %0 = iree_tensor_ext.dispatch.tensor.load %arg0, offsets = [0, 0], sizes = [4, 8], ...
    iree_tensor_ext.dispatch.tensor.store %4, %arg1, offsets = [0, 0], sizes = [4, 8], ...

A load becomes a tensor.extract_slice of a function argument (the traced input), a store
a tensor.insert_slice into the returned tensor. Only static shapes and tensor bindings
are cut; anything else keeps the whole program, with the reason.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable

import attrs

from reducer.core import ir as irutil
from reducer.core.oracle import CancelFn, Verdict, candidate_dir, never, run_in
from reducer.iree import inputs, localize
from reducer.iree.oracles.mismatch import MismatchOracle, split_top

_BINDING = re.compile(r"!iree_tensor_ext\.dispatch\.tensor<(readonly|writeonly|readwrite):(tensor<[^>]*>)>")
_SLICE = r"offsets = (\[[^\]]*\]), sizes = (\[[^\]]*\]), strides = (\[[^\]]*\])"
_LOAD = re.compile(rf"^(\s*)(%[\w$.-]+) = iree_tensor_ext\.dispatch\.tensor\.load (%\w+), {_SLICE} : \S+ -> (.+?)\s*$")
_STORE = re.compile(
    rf"^(\s*)iree_tensor_ext\.dispatch\.tensor\.store (%[\w$.#-]+), (%\w+), {_SLICE} : (\S+) -> \S+\s*$"
)


class NotCut(Exception):
    """Why a dispatch cannot be cut out: the whole program is reduced instead."""

    def __init__(self, why: str, checks: int = 0) -> None:
        super().__init__(why)
        self.checks = checks  # the cut program's checks spent before giving up


def flow_ir(oracle: MismatchOracle, data: bytes, basename: str, side: str = "a", cancel: CancelFn = never) -> str:
    """A side's program after dispatch formation (--compile-to=flow), traced like the run;
    `Cancelled` once `cancel()` says so (--max-time's end)."""
    with candidate_dir(data, basename) as (tmp, path):
        out = os.path.join(tmp, "flow.mlir")
        command = (oracle.compile if side == "a" else oracle.against).plus(localize.TRACE_FLAG, "--compile-to=flow")
        r = run_in(command.render(input=path, output=out, tmp=tmp), tmp, oracle.timeout, cancel=cancel)
        if r.timed_out:
            raise NotCut(f"--compile-to=flow timed out after {oracle.timeout:.0f} s")
        if r.returncode != 0 or not os.path.exists(out):
            raise NotCut(f"--compile-to=flow failed: {(r.stderr.strip().splitlines() or ['?'])[-1][:200]}")
        with open(out) as f:
            return f.read()


def _function(flow: str, name: str) -> tuple[list[str], int]:
    """The lines of executable::entry's function in the flow IR, signature to closing brace."""
    executable, _, entry = name.partition("::")
    lines = flow.splitlines()
    start = next(
        (i for i, ln in enumerate(lines) if ln.strip().startswith(f"flow.executable private @{executable} ")), None
    )
    if start is None:
        raise NotCut(f"no flow.executable @{executable} in the flow IR")
    head = next((i for i in range(start, len(lines)) if lines[i].strip().startswith(f"func.func @{entry}(")), None)
    if head is None:
        raise NotCut(f"no function @{entry} in @{executable}")
    indent = lines[head][: len(lines[head]) - len(lines[head].lstrip())]
    end = next((i for i in range(head + 1, len(lines)) if lines[i] == indent + "}"), None)
    if end is None:
        raise NotCut(f"cannot find the end of @{entry}")
    return lines[head : end + 1], len(indent)


def _full(offsets: str, sizes: str, strides: str, t: str) -> bool:
    dims, _ = inputs.parse(t)
    return (
        set(split_top(offsets[1:-1])) <= {"0"}
        and set(split_top(strides[1:-1])) <= {"1"}
        and split_top(sizes[1:-1]) == [str(d) for d in dims or []]
    )


def program(flow: str, name: str) -> tuple[str, list[str]]:
    """The standalone program for dispatch `name` and its argument types, in the order
    the trace lists the dispatch's inputs."""
    lines, indent = _function(flow, name)
    m = re.match(r"\s*func\.func @[\w$.-]+\((.*)\)\s*\{\s*$", lines[0])
    if m is None:
        raise NotCut("the dispatch function's signature does not fit on one line")
    args: list[str] = []  # what the cut program takes
    results: dict[str, str] = {}  # binding -> its tensor type, for the ones written
    current: dict[str, str] = {}  # binding -> the SSA value holding it now
    body = []
    for arg in split_top(m.group(1)):
        ssa, _, t = arg.partition(":")
        b = _BINDING.fullmatch(t.strip())
        if b is None:
            raise NotCut(f"the dispatch takes {t.strip()} (only static tensor bindings are cut)")
        access, tensor = b.groups()
        if "?" in tensor:
            raise NotCut(f"the dispatch takes a dynamic shape ({tensor})")
        if access != "writeonly":
            args.append(f"{ssa.strip()}: {tensor}")
        if access != "readonly":
            results[ssa.strip()] = tensor
            current[ssa.strip()] = ssa.strip()
            if access == "writeonly":
                current[ssa.strip()] = f"{ssa.strip()}_cut"
                body.append(f"  {ssa.strip()}_cut = tensor.empty() : {tensor}")
    types = {a.partition(":")[0]: a.partition(": ")[2] for a in args} | results
    for n, line in enumerate(lines[1:-1]):
        load, store = _LOAD.match(line), _STORE.match(line)
        if load:
            _, value, binding, offsets, sizes, strides, t = load.groups()
            body.append(
                f"  {value} = tensor.extract_slice {binding}{offsets} {sizes} {strides} : {types[binding]} to {t}"
            )
        elif store:
            _, value, binding, offsets, sizes, strides, t = store.groups()
            if _full(offsets, sizes, strides, types[binding]) and t == types[binding]:
                current[binding] = value
            else:
                into = f"{binding}_cut{n}"
                body.append(
                    f"  {into} = tensor.insert_slice {value} into {current[binding]}{offsets} {sizes} {strides} : "
                    f"{t} into {types[binding]}"
                )
                current[binding] = into
        elif line.strip() == "return":
            values = ", ".join(current[b] for b in results)
            body.append(f"  return {values} : {', '.join(results.values())}")
        elif "iree_tensor_ext.dispatch" in line or "hal.interface" in line:
            raise NotCut(f"the dispatch uses {line.strip().split(' ')[2 if '=' in line else 0]}")
        else:
            body.append(line[indent:])
    aliases = [ln for ln in flow.splitlines() if ln.startswith("#")]
    outs = ", ".join(results.values())
    text = "\n".join([*aliases, f"func.func @main({', '.join(args)}) -> ({outs}) {{", *body, "}", ""])
    return text, [a.partition(": ")[2] for a in args]


@attrs.define
class Cut:
    """A cut that reproduces: its program, the oracle that judges it, and the verdict."""

    text: str
    oracle: MismatchOracle
    verdict: Verdict
    checks: int = 1  # two when MLIR's print of it did not reproduce and the text as cut did


def cut(
    oracle: MismatchOracle,
    data: bytes,
    basename: str,
    found: localize.Found,
    check: Callable[[bytes, MismatchOracle], Verdict],
    cancel: CancelFn = never,
) -> Cut:
    """The dispatch alone, judged by `check` (the run's executor): it must still
    mismatch the original's way (NotCut says why not). It is cut from side a's IR, or
    from side b's when a's dispatch cannot be (a data-tiled side's tensors carry
    encodings); the cut program runs on both configurations either way."""
    try:
        text, types = program(flow_ir(oracle, data, basename, "a", cancel), found.name)
        traced = found.traced.inputs
    except NotCut as exc:
        if found.traced_b is None:
            raise
        try:
            text, types = program(flow_ir(oracle, data, basename, "b", cancel), found.name_b)
        except NotCut:
            raise exc from None
        traced = found.traced_b.inputs
    if len(traced) != len(types):
        raise NotCut(f"the trace has {len(traced)} inputs for {len(types)} arguments")
    given = tuple(inputs.to_bytes(x) for x in traced)
    judge = attrs.evolve(oracle, given=given, function=None)
    # Checked as MLIR prints it, as the reduction's workspace does: the reduction then
    # needs no check that its re-print still mismatches (a compile and a run of each side).
    # The text as cut is checked too only if that print does not reproduce (the bindings'
    # IREE is not --compile's, say), as the reduction would fall back to it.
    shown = irutil.reprinted(text)
    verdict = check(shown.encode(), judge)
    checks = 1
    if not verdict.interesting and shown != text:
        shown, verdict, checks = text, check(text.encode(), judge), 2
    if not verdict.interesting:
        raise NotCut(f"the cut program does not reproduce ({judge.why_not(verdict)})", checks=checks)
    return Cut(shown, judge.calibrate(verdict), verdict, checks)
