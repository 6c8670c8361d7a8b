"""The benchmark corpus: each case is a program generated in code plus the check a user
filing that bug would write (the candidate's path is "$1")."""

from __future__ import annotations

import random
import sys
from collections.abc import Callable
from pathlib import Path

import attrs

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE))
import models  # noqa: E402
from programs import COMPILE, chain  # noqa: E402

#: Every check is a POSIX sh body; "$1" is the candidate (cvise/creduce pass none: basename in cwd).
VALID = 'iree-opt "$1" >/dev/null 2>&1'


@attrs.frozen
class Case:
    name: str
    summary: str
    make: Callable[[], str]
    check: str
    upstream: bool = False  # only upstream dialects and syntax mlir-reduce 19 parses
    #: A compiler engineer's reduction of the same bug, in benchmarks/hand/ (the bar: 1.1x its size).
    hand: str | None = None


def _compile_error(pattern: str) -> str:
    return f'{COMPILE} "$1" -o /dev/null 2>&1 | grep -q "{pattern}"'


def upstream_divsi(functions: int = 40, seed: int = 5) -> str:
    """The research notes' hands-on case scaled up: functions of arith, scf.for and
    tensor.extract, one of which divides; only upstream dialects."""
    rng = random.Random(seed)
    bad = functions * 3 // 5
    out = []
    for f in range(functions):
        div = "arith.divsi" if f == bad else rng.choice(["arith.subi", "arith.addi", "arith.muli"])
        out += [
            f"func.func @f{f}(%arg0: i32, %arg1: i32, %t: tensor<4x4xf32>) -> i32 {{",
            "  %c0 = arith.constant 0 : index",
            "  %c1 = arith.constant 1 : index",
            f"  %c4 = arith.constant {rng.randint(2, 9)} : index",
            f"  %k = arith.constant {rng.randint(2, 99)} : i32",
            "  %0 = arith.addi %arg0, %arg1 : i32",
            "  %1 = arith.muli %0, %k : i32",
            f"  %2 = {div} %1, %arg1 : i32",
            "  %3 = scf.for %i = %c0 to %c4 step %c1 iter_args(%acc = %2) -> (i32) {",
            "    %x = arith.xori %acc, %k : i32",
            "    scf.yield %x : i32",
            "  }",
            "  %e = tensor.extract %t[%c0, %c1] : tensor<4x4xf32>",
            "  %5 = arith.fptosi %e : f32 to i32",
            "  %6 = arith.addi %3, %5 : i32",
            "  return %6 : i32",
            "}",
        ]
    return "\n".join(out) + "\n"


CASES = [
    Case(
        "chain-unary",
        "200 negf + one math.exp; answer: the exp",
        lambda: chain(200),
        f'{VALID} && grep -q math.exp "$1"',
        upstream=True,
    ),
    Case(
        "chain-binary",
        "200 addf + one math.exp; answer: the exp",
        lambda: chain(200, binary=True),
        f'{VALID} && grep -q math.exp "$1"',
        upstream=True,
    ),
    Case(
        "upstream-divsi",
        "40 upstream functions (arith/scf/tensor), one arith.divsi that must survive mlir-opt-19 --canonicalize",
        upstream_divsi,
        'mlir-opt-19 --canonicalize "$1" 2>/dev/null | grep -q arith.divsi',
        upstream=True,
    ),
    Case(
        "conv-i4-odd",
        "conv net (10 stages), tensor<7xi4> slice: 'stream.tensor.sizeof' byte-count error",
        lambda: models.convnet(bug="i4odd"),
        _compile_error("'stream.tensor.sizeof' op failed to calculate total byte count"),
        upstream=True,
    ),
    Case(
        "xf-f6",
        "transformer (12 layers), f6E2M3FN multiply: vector.store legalization error",
        lambda: models.transformer(bug="f6"),
        _compile_error("failed to legalize operation 'vector.store'"),
    ),
    Case(
        "xf-tf32-crash",
        "transformer (12 layers), tf32 multiply: segfault in the LLVM lowering (flaky with threads: the check disables them)",
        lambda: models.transformer(bug="tf32"),
        f'{COMPILE} --mlir-disable-threading "$1" -o /dev/null 2>&1 | grep -q "HALDispatchABI::loadBinding"',
        upstream=True,
    ),
    Case(
        "xf-i4-dynamic",
        "transformer (12 layers), i4 on a dynamic slice: vector.maskedload legalization error",
        lambda: models.transformer(bug="i4dyn"),
        _compile_error("failed to legalize operation 'vector.maskedload'"),
        upstream=True,
    ),
    Case(
        "xf-powf-mismatch",
        "transformer (12 layers), math.powf of negative bases: llvm-cpu NaN vs vmvx (numeric mismatch)",
        lambda: models.transformer(bug="powf"),
        f'python3 {HERE / "checks" / "numeric_mismatch.py"} "$1" --a llvm-cpu --b vmvx --kind "NaN on a only"',
        upstream=True,
    ),
    Case(
        "mlp-i4-const",
        "int4 MLP (8 layers, 0.1 MB): an odd-length i4 weight feeds a dequantising generic and two matmuls; returning it is the repro",
        models.quantised_mlp,
        _compile_error("'stream.tensor.constant' op failed to calculate total byte count"),
        upstream=True,
        hand="mlp-i4-const.mlir",
    ),
    Case(
        "mlp-i4-wide",
        "int4 MLP (4 layers of 63x64, 0.3 MB): the same packing bug on a 4095-element literal; only a truncated non-splat literal keeps it small",
        lambda: models.quantised_mlp(layers=4, width=63, hidden=64, bad_layer=2),
        _compile_error("'stream.tensor.constant' op failed to calculate total byte count"),
        upstream=True,
        hand="mlp-i4-wide.mlir",
    ),
    Case(
        "xf-f6-fused",
        "transformer (12 layers), f6E2M3FN round trip in a two-result fused linalg.generic: arith.truncf legalization error",
        lambda: models.transformer(bug="f6fused"),
        _compile_error("failed to legalize operation 'arith.truncf'"),
        hand="xf-f6-fused.mlir",
    ),
    Case(
        "mlp-mismatch-slip",
        "MLP (6 layers) with two llvm-cpu/vmvx mismatches: an out-of-range fptosi, and powf of negatives (NaN on llvm-cpu only: the one filed)",
        models.mismatch_mlp,
        f'python3 {HERE / "checks" / "numeric_mismatch.py"} "$1" --a llvm-cpu --b vmvx --kind "NaN on a only"',
        upstream=True,
        hand="mlp-mismatch-slip.mlir",
    ),
]


def scale_check() -> str:
    return f'{VALID} && grep -q math.cbrt "$1"'


BY_NAME = {c.name: c for c in CASES}
