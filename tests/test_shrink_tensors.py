from conftest import workspace

from strategies.shrink_tensors import ShrinkTensors, find_dims, find_literals

MODULE = """
util.global private @w = dense<[[1.5, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]]> : tensor<2x4xf32>
func.func @f(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %c = arith.constant dense<[[1, 2, 3, 4], [5, 6, 7, 8]]> : tensor<2x4xi32>
  %z = arith.constant dense<[(1.0, 2.0), (3.0, 4.0)]> : tensor<2xcomplex<f32>>
  %s = arith.constant dense<7.0> : tensor<2x4xf32>
  %f = arith.sitofp %c : tensor<2x4xi32> to tensor<2x4xf32>
  %w = util.global.load @w : tensor<2x4xf32>
  %0 = arith.addf %x, %f : tensor<2x4xf32>
  %1 = arith.addf %0, %w : tensor<2x4xf32>
  %2 = arith.addf %1, %s : tensor<2x4xf32>
  return %2 : tensor<2x4xf32>
}
"""


def test_finds_non_splat_literals_with_their_first_element():
    lits = find_literals(workspace(MODULE).program.text)
    assert [lit.element for lit in lits] == ["f32", "i32", "complex<f32>"]
    assert [lit.splat_value for lit in lits] == ["1.500000e+00", "1", "(1.000000e+00,2.000000e+00)"]


def test_splats_every_literal_including_complex():
    ws = workspace(MODULE)
    s = ShrinkTensors()
    edits = [e for e in s.opportunities(ws.program) if e.kind == "splat"]
    cand = ws.materialize(s, edits)
    assert "dense<[" not in cand.text
    assert "dense<(1.000000e+00,2.000000e+00)> : tensor<2xcomplex<f32>>" in cand.text


def test_shrinks_a_dimension_everywhere_at_once():
    ws = workspace(MODULE)
    s = ShrinkTensors()
    edits = s.opportunities(ws.program)
    splats = [e for e in edits if e.kind == "splat"]
    four = [e for e in edits if e.kind == "dim" and e.arg == (4, 1)]
    cand = ws.materialize(s, splats + four)
    assert "tensor<2x1xf32>" in cand.text and "x4x" not in cand.text and "2x4" not in cand.text


def test_a_dimension_that_cannot_change_is_rejected_not_raised():
    text = """
func.func @f(%x: tensor<8xf32>) -> tensor<2x4xf32> {
  %0 = tensor.expand_shape %x [[0, 1]] output_shape [2, 4] : tensor<8xf32> into tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}
"""
    ws = workspace(text)
    s = ShrinkTensors()
    edits = [e for e in s.opportunities(ws.program) if e.arg == (8, 1)]
    assert type(ws.materialize(s, edits)).__name__ == "Rejected"
    assert set(find_dims(ws.program.text)) == {8, 2, 4}


def test_two_targets_for_one_dimension_take_the_smaller():
    """A chunk may hold both edits for one size (to 1 and to 2): the smaller wins, in
    either order; keeping the larger would try a smaller step than the chunk names."""
    ws = workspace(MODULE)
    s = ShrinkTensors()
    edits = s.opportunities(ws.program)
    splats = [e for e in edits if e.kind == "splat"]
    fours = [e for e in edits if e.kind == "dim" and e.arg[0] == 4]
    assert sorted(e.arg for e in fours) == [(4, 1), (4, 2)]
    for both in (fours, fours[::-1]):
        cand = ws.materialize(s, splats + both)
        assert "tensor<2x1xf32>" in cand.text and "2x2" not in cand.text and "2x4" not in cand.text
