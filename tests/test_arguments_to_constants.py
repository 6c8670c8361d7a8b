from conftest import apply_edits, each_edit, program

from strategies.arguments_to_constants import ArgumentsToConstants

CALLED = """
func.func private @g(%x: f32, %y: f32) -> f32 {
  %0 = arith.addf %x, %y : f32
  return %0 : f32
}
func.func @main(%a: f32) -> f32 {
  %e = math.exp %a : f32
  %0 = func.call @g(%a, %e) : (f32, f32) -> f32
  return %0 : f32
}
"""


def test_in_a_called_function_the_argument_leaves_every_call_site():
    results = dict(each_edit(ArgumentsToConstants(), CALLED))
    (edit,) = [e for e in results if e.arg == ("g", 1)]
    cand = results[edit]
    assert "func.func private @g(%arg0: f32) -> f32" in cand.text
    assert "call @g(%arg0) : (f32) -> f32" in cand.text
    assert "math.exp" not in cand.text  # what computed it in the caller is pruned
    assert "arith.constant 0.000000e+00 : f32" in cand.text


def test_in_an_entry_point_it_is_a_move_not_a_shrink():
    text = "func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {\n  %0 = math.exp %a : tensor<4xf32>\n  return %0 : tensor<4xf32>\n}\n"
    assert apply_edits(ArgumentsToConstants(), text).reason == "not-smaller"
    moved = apply_edits(ArgumentsToConstants(), text, grow=True)
    assert "func.func @f() -> tensor<4xf32>" in moved.text and "dense<0.000000e+00>" in moved.text
    assert ArgumentsToConstants.moves


def test_skips_arguments_without_a_zero_of_their_type():
    text = "func.func @f(%a: tensor<?xf32>) -> tensor<?xf32> {\n  return %a : tensor<?xf32>\n}\n"
    assert ArgumentsToConstants().opportunities(program(text)) == []
