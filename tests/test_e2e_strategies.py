"""End to end, one case per strategy where it is the one that makes the difference: the
reduction with every strategy ends strictly smaller than the same reduction without
it. The checks call the real iree-opt (the program must stay valid) and grep."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest
from conftest import make_script, needs_iree

from reducer.core.workspace import Size
from reducer.session import Settings, reduce_file

pytestmark = [pytest.mark.e2e, needs_iree]


@attrs.frozen
class Case:
    strategy: str
    program: str
    needs: tuple[str, ...]  # what the check greps for (all of them), besides iree-opt accepting it
    expect: str  # a line fragment only the reduction using the strategy reaches


CASES = [
    Case(
        "forward-operands",
        """func.func @main(%x: f32, %y: f32) -> f32 {
  %0 = math.exp %x : f32
  %1 = math.log %y : f32
  %2 = arith.addf %0, %1 : f32
  %3 = math.sqrt %2 : f32
  return %3 : f32
}""",
        ("math.sqrt", "math.log"),
        "math.sqrt %0",
    ),
    Case(
        "values-to-arguments",
        """func.func @main(%a: tensor<8xf32>) -> tensor<7xi4> {
  %0 = math.exp %a : tensor<8xf32>
  %1 = tensor.extract_slice %0[0] [7] [1] : tensor<8xf32> to tensor<7xf32>
  %2 = arith.fptosi %1 : tensor<7xf32> to tensor<7xi4>
  %3 = arith.addi %2, %2 : tensor<7xi4>
  return %3 : tensor<7xi4>
}""",
        ("arith.addi .*tensor<7xi4>",),
        "arith.addi %arg0, %arg0",
    ),
    Case(
        "values-to-return",
        """func.func @main(%a: tensor<7xf32>) -> tensor<7xf32> {
  %c = arith.constant dense<[1, 2, 3, 4, 5, 6, 7]> : tensor<7xi4>
  %0 = math.exp %a : tensor<7xf32>
  %1 = arith.sitofp %c : tensor<7xi4> to tensor<7xf32>
  %2 = arith.mulf %0, %1 : tensor<7xf32>
  %3 = math.log %2 : tensor<7xf32>
  return %3 : tensor<7xf32>
}""",
        ("dense<\\[1, 2, 3, 4, 5, 6, 7\\]> : tensor<7xi4>",),
        "return %cst : tensor<7xi4>",
    ),
    Case(
        "remove-results-and-arguments",
        """func.func @main(%a: f32, %b: f32) -> (f32, f32) {
  %0 = math.exp %a : f32
  %1 = math.log %b : f32
  return %0, %1 : f32, f32
}""",
        ("math.exp",),
        "@main(%arg0: f16) -> f16",
    ),
    Case(
        "regions",
        """func.func @main(%x: f32, %n: index) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %x) -> f32 {
    %y = math.exp %acc : f32
    scf.yield %y : f32
  }
  return %r : f32
}""",
        ("math.exp",),
        "math.exp %arg0",
    ),
    Case(
        "unused-results",
        """#b = affine_map<(d0, d1) -> (d1)>
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @main(%a: tensor<4xf32>) -> tensor<3x4xf32> {
  %e = tensor.empty() : tensor<3x4xf32>
  %e2 = tensor.empty() : tensor<3x4xf32>
  %r:2 = linalg.generic {indexing_maps = [#b, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<4xf32>) outs(%e, %e2 : tensor<3x4xf32>, tensor<3x4xf32>) {
  ^bb0(%x: f32, %o: f32, %p: f32):
    %y = math.exp %x : f32
    %z = math.log %x : f32
    linalg.yield %y, %z : f32, f32
  } -> (tensor<3x4xf32>, tensor<3x4xf32>)
  return %r#0 : tensor<3x4xf32>
}""",
        ("math.exp",),
        "outs(%0 : tensor<1x1xf16>)",  # a broadcast: generic-to-ops cannot take it apart
    ),
    Case(
        "shrink-values",
        """func.func @main(%b: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %c = arith.constant dense<[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 1.0]> : tensor<8xf32>
  %r = math.exp %b : tensor<8xf32>
  return %c, %r : tensor<8xf32>, tensor<8xf32>
}""",
        ("arith.constant dense<\\[", "math.exp .*tensor<8x"),
        "-> (tensor<2xf16>",
    ),
    Case(
        "generic-to-ops",
        """#id = affine_map<(d0) -> (d0)>
func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
  %e = tensor.empty() : tensor<4xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%a : tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%x: f32, %o: f32):
    %y = math.exp %x : f32
    linalg.yield %y : f32
  } -> tensor<4xf32>
  return %r : tensor<4xf32>
}""",
        ("math.exp",),
        "math.exp %arg0 : tensor<",
    ),
    Case(
        "types",
        """func.func @main(%x: tensor<4xf64>) -> tensor<4xf64> {
  %0 = math.exp %x : tensor<4xf64>
  return %0 : tensor<4xf64>
}""",
        ("math.exp",),
        "f16>",
    ),
    Case(
        "attributes",
        """func.func @main(%x: f32 {iree.abi.name = "input"}) -> f32 attributes {iree.abi.reflection = {model = "m"}} {
  %0 = math.exp %x fastmath<fast> {my.note = "hot"} : f32
  return %0 : f32
}""",
        ("math.exp",),
        "math.exp %arg0 :",
    ),
    Case(
        "globals",
        """util.global private mutable @state = dense<2.5> : tensor<4xf32>
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %s = util.global.load @state : tensor<4xf32>
  %0 = arith.mulf %x, %s : tensor<4xf32>
  util.global.store %0, @state : tensor<4xf32>
  return %0 : tensor<4xf32>
}""",
        ("arith.mulf", "dense<2.5"),
        "arith.constant dense<2.500000e+00>",
    ),
]


def _reduce(tmp_path: Path, case: Case, skip: tuple[str, ...]) -> tuple[str, Size]:
    src = tmp_path / "in.mlir"
    src.write_text(case.program + "\n")
    greps = "".join(f" && grep -q -E '{g}' \"$1\"" for g in case.needs)
    check = make_script(tmp_path / "check.sh", f'iree-opt "$1" > /dev/null 2>&1{greps}')
    out = tmp_path / f"out-{len(skip)}.mlir"
    result = reduce_file(Settings(str(src), str(check), str(out), jobs=2, skip_strategies=skip))
    return out.read_text(), result.stats.final


@pytest.mark.parametrize("case", CASES, ids=[c.strategy for c in CASES])
def test_the_strategy_makes_the_difference(tmp_path: Path, case: Case):
    with_all, size_all = _reduce(tmp_path, case, ())
    without, size_without = _reduce(tmp_path, case, (case.strategy,))
    assert case.expect in with_all, with_all
    assert case.expect not in without, without
    assert size_all.smaller_than(size_without), (size_all, size_without)
