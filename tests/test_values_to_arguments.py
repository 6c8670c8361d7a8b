from conftest import apply_edits, each_edit, program

from strategies.values_to_arguments import ValuesToArguments

TEXT = """
func.func @main(%a: tensor<8xf32>) -> tensor<7xi4> {
  %0 = math.exp %a : tensor<8xf32>
  %1 = tensor.extract_slice %0[0] [7] [1] : tensor<8xf32> to tensor<7xf32>
  %2 = arith.fptosi %1 : tensor<7xf32> to tensor<7xi4>
  %3 = arith.addi %2, %2 : tensor<7xi4>
  return %3 : tensor<7xi4>
}
"""


def test_cuts_the_whole_backward_slice_of_a_value():
    # the latest value first: it has the largest slice
    cand = apply_edits(ValuesToArguments(), TEXT, lambda edits: edits[:1])
    assert "func.func @main(%arg0: tensor<8xf32>, %arg1: tensor<7xi4>)" in cand.text
    assert "math.exp" not in cand.text and "fptosi" not in cand.text and "return %arg1" in cand.text


def test_an_inner_value_keeps_what_it_does_not_feed():
    by_op = {e.path[-1]: c for e, c in each_edit(ValuesToArguments(), TEXT)}
    cand = by_op[2]  # the fptosi
    assert "math.exp" not in cand.text and "arith.addi %arg1, %arg1" in cand.text


def test_leaves_called_functions_alone():
    text = """
func.func private @g(%a: f32) -> f32 {
  %0 = math.exp %a : f32
  return %0 : f32
}
func.func @main(%a: f32) -> f32 {
  %e = math.exp %a : f32
  %0 = func.call @g(%e) : (f32) -> f32
  return %0 : f32
}
"""
    edits = ValuesToArguments().opportunities(program(text))
    assert [e.path for e in edits] == [(0, 0, 1, 0, 0, 1)]  # only the call in @main (exp cuts nothing)


def test_a_constant_becomes_an_argument_but_an_op_of_arguments_is_left_to_drop_ops():
    text = "func.func @f(%a: f32) -> f32 {\n  %c = arith.constant 1.0 : f32\n  %0 = arith.addf %a, %c : f32\n  return %0 : f32\n}\n"
    (edit,) = ValuesToArguments().opportunities(program(text))  # not the addf: it cuts nothing
    cand = apply_edits(ValuesToArguments(), text)
    assert "arith.constant" not in cand.text and "arith.addf %arg0, %arg1" in cand.text
