from conftest import each_edit, program

from strategies.forward_operands import ForwardOperands

TEXT = """
func.func @f(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %0 = arith.subf %a, %b : tensor<4xf32>
  %1 = math.exp %0 : tensor<4xf32>
  return %1 : tensor<4xf32>
}
"""


def test_offers_every_same_typed_operand_position():
    edits = ForwardOperands().opportunities(program(TEXT))
    assert [(e.path[-1], e.arg) for e in edits] == [(0, 0), (0, 1), (1, 0)]


def test_the_second_operand_is_a_candidate_too():
    results = {e.arg: c for e, c in each_edit(ForwardOperands(), TEXT) if e.path[-1] == 0}
    assert "math.exp %arg0" in results[0].text
    assert "math.exp %arg1" in results[1].text and "subf" not in results[1].text


def test_skips_ops_without_a_same_typed_operand():
    text = """
func.func @f(%a: i32) -> f32 {
  %0 = arith.sitofp %a : i32 to f32
  return %0 : f32
}
"""
    assert ForwardOperands().opportunities(program(text)) == []


def test_forwarding_inside_a_loop_body_keeps_the_loop_valid():
    text = """
func.func @f(%x: f32, %n: index) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %x) -> f32 {
    %y = arith.mulf %acc, %x : f32
    scf.yield %y : f32
  }
  return %r : f32
}
"""
    outs = [c for e, c in each_edit(ForwardOperands(), text)]
    assert outs and all(hasattr(c, "text") for c in outs)
    assert any("mulf" not in c.text and "scf.yield %arg3" in c.text for c in outs)
