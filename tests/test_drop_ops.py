from conftest import workspace

from strategies.drop_ops import DropOps

CHAIN = """
func.func @f(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %0 = arith.addf %a, %b : tensor<4xf32>
  %1 = math.exp %0 : tensor<4xf32>
  %2 = arith.mulf %1, %b : tensor<4xf32>
  return %2 : tensor<4xf32>
}
"""


def drop(text: str, *indices: int) -> str:
    ws = workspace(text)
    s = DropOps()
    edits = s.opportunities(ws.program)
    cand = ws.materialize(s, [edits[i] for i in indices])
    assert hasattr(cand, "text"), cand
    return cand.text


def test_lists_every_non_terminator_op_in_functions():
    ws = workspace(CHAIN)
    edits = DropOps().opportunities(ws.program)
    assert [e.kind for e in edits] == ["drop"] * 3  # not func.func, not return


def test_forwards_a_same_typed_operand():
    out = drop(CHAIN, 1)  # math.exp
    assert "math.exp" not in out
    assert "arith.mulf %0, %arg1" in out


def test_dropping_everything_leaves_a_valid_function():
    out = drop(CHAIN, 0, 1, 2)
    assert "arith" not in out and "math" not in out
    assert "return %arg0" in out


def test_prunes_ops_that_became_dead():
    text = """
func.func @f(%a: f32, %i: i32) -> f32 {
  %c = arith.constant 2 : i32
  %s = arith.addi %i, %c : i32
  %x = arith.sitofp %s : i32 to f32
  %y = arith.addf %a, %x : f32
  return %y : f32
}
"""
    out = drop(text, 3)  # the addf: %x, %s and %c become dead and go too
    assert "arith" not in out


def test_uses_a_dominating_value_when_no_operand_fits():
    text = """
func.func @f(%t: tensor<4xf32>, %g: f32) -> f32 {
  %c0 = arith.constant 0 : index
  %e = tensor.extract %t[%c0] : tensor<4xf32>
  %r = arith.mulf %e, %e : f32
  return %r : f32
}
"""
    out = drop(text, 1)
    assert "tensor.extract" not in out
    assert "arith.mulf %arg1, %arg1" in out


def test_uses_a_zero_constant_when_nothing_dominates():
    text = """
func.func @f(%a: f32) -> i32 {
  %x = arith.mulf %a, %a : f32
  %i = arith.fptosi %x : f32 to i32
  return %i : i32
}
"""
    out = drop(text, 1)  # one op for a constant is only progress because the mulf dies too
    assert "arith.constant 0 : i32" in out


def test_poison_for_types_without_zero():
    """complex<f32> has no zero literal, no operand or dominating value of its type, and
    @g is called, so a new argument would break its caller: only ub.poison is left."""
    text = """
func.func private @g() -> complex<f32> {
  %c = complex.constant [1.0 : f32, 2.0 : f32] : complex<f32>
  return %c : complex<f32>
}
func.func @main() -> complex<f32> {
  %r = call @g() : () -> complex<f32>
  return %r : complex<f32>
}
"""
    out = drop(text, 0)
    assert "%0 = ub.poison : complex<f32>" in out and "complex.constant" not in out
    assert "func.func private @g() -> complex<f32>" in out  # no argument was added


def test_new_argument_when_the_function_is_not_called():
    text = """
func.func @f() -> !hal.buffer_view {
  %v = "test.make"() : () -> !hal.buffer_view
  return %v : !hal.buffer_view
}
"""
    out = drop(text, 0)
    assert "@f(%arg0: !hal.buffer_view)" in out


def test_region_ops_and_their_bodies():
    text = """
func.func @f(%a: f32, %n: index) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %a) -> f32 {
    %m = arith.mulf %acc, %acc : f32
    scf.yield %m : f32
  }
  return %r : f32
}
"""
    ws = workspace(text)
    s = DropOps()
    edits = s.opportunities(ws.program)
    loop = next(i for i, e in enumerate(edits) if len(e.path) == 6 and e.path[-1] == 2)
    inner = [i for i, e in enumerate(edits) if len(e.path) > 6]
    cand = ws.materialize(s, [edits[loop]] + [edits[i] for i in inner])  # nested ones are ignored
    assert "scf.for" not in cand.text and "return %arg0" in cand.text
    body_only = ws.materialize(s, [edits[i] for i in inner])
    assert "arith.mulf" not in body_only.text and "scf.yield %arg" in body_only.text


def test_every_subset_of_a_linalg_function_verifies_or_is_rejected():
    """Regression: erased ops' binding objects used to dangle and crash the process. Every
    chunk the engine would try gives a candidate that parses and verifies again, or a
    rejection the workspace names; never a strategy error, and some chunks do succeed."""
    import sys

    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    from programs import mlp

    from reducer.core import ir as irutil
    from reducer.core.workspace import Candidate, Rejected

    text = mlp(layers=1, bad_layer=0)
    ws = workspace(text)
    s = DropOps()
    edits = s.opportunities(ws.program)
    n = len(edits)
    results = []
    for size in (n, n // 2, 3, 2, 1):
        for start in range(0, n, max(size, 1)):
            results.append(ws.materialize(s, edits[start : start + size]))
    for r in results:
        if isinstance(r, Rejected):
            assert r.reason in ("invalid", "no-op", "not-smaller"), r
        else:
            assert isinstance(r, Candidate)
            irutil.verify(irutil.parse(r.text, ws.ctx).operation)
    assert sum(isinstance(r, Candidate) for r in results) >= n // 2


def test_dropping_chunks_of_a_conv_stage_never_fails_on_a_stale_block_index():
    """Dropping ops inside a block whose index was built before earlier drops used to raise
    KeyError (5 of 35 chunks here), costing valid candidates as strategy errors."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    import models

    ws = workspace(models.convnet(stages=1, bug="i4odd", bug_stage=0))
    s = DropOps()
    edits = s.opportunities(ws.program)
    for size in (64, 32, 16, 8):
        for i in range(0, len(edits), size):
            with ws.scope():
                s.apply(ws.program, edits[i : i + size])  # raises on a stale index
