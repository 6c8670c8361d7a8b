from conftest import each_edit, program

from strategies.shrink_values import ShrinkValues

TEXT = """
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @main(%a: tensor<4x6xf32>, %w: tensor<6x3xf32>, %b: tensor<4x6xf32>) -> (tensor<4x6xf32>, tensor<4x3xf32>) {
  %c = arith.constant dense<[[1, 2, 3, 4, 5, 6], [1, 1, 1, 1, 1, 1], [7, 7, 7, 7, 7, 7], [1, 2, 3, 4, 5, 6]]> : tensor<4x6xi4>
  %f = arith.sitofp %c : tensor<4x6xi4> to tensor<4x6xf32>
  %e = tensor.empty() : tensor<4x6xf32>
  %g = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%f, %b : tensor<4x6xf32>, tensor<4x6xf32>) outs(%e : tensor<4x6xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %m = arith.mulf %x, %y : f32
    linalg.yield %m : f32
  } -> tensor<4x6xf32>
  %z = arith.constant 0.0 : f32
  %e2 = tensor.empty() : tensor<4x3xf32>
  %acc = linalg.fill ins(%z : f32) outs(%e2 : tensor<4x3xf32>) -> tensor<4x3xf32>
  %mm = linalg.matmul ins(%a, %w : tensor<4x6xf32>, tensor<6x3xf32>) outs(%acc : tensor<4x3xf32>) -> tensor<4x3xf32>
  return %g, %mm : tensor<4x6xf32>, tensor<4x3xf32>
}
"""


def _outcomes(text: str) -> dict:
    return {(e.kind, e.arg): c for e, c in each_edit(ShrinkValues(), text)}


def test_a_constant_shrinks_with_the_elementwise_ops_it_feeds_and_nothing_else():
    cand = _outcomes(TEXT)[("constant", (0, 1))]
    assert "dense<[[1, 2, 3, 4, 5, 6]]> : tensor<1x6xi4>" in cand.text
    assert "arith.sitofp %cst : tensor<1x6xi4> to tensor<1x6xf32>" in cand.text
    assert "ins(%0, %arg2 : tensor<1x6xf32>, tensor<1x6xf32>) outs(%1 : tensor<1x6xf32>)" in cand.text
    # the function's result and the other argument follow; the matmul's operands do not
    assert "%arg2: tensor<1x6xf32>) -> (tensor<1x6xf32>, tensor<4x3xf32>)" in cand.text
    assert "linalg.matmul ins(%arg0, %arg1 : tensor<4x6xf32>, tensor<6x3xf32>)" in cand.text


def test_an_argument_tied_to_a_matmul_keeps_its_shape():
    out = _outcomes(TEXT)
    assert all(
        getattr(c, "reason", None) == "no-op"
        for (kind, arg), c in out.items()
        if kind == "argument" and arg[0] in (0, 1)
    )
    assert "tensor<4x1xf32>" in out[("argument", (2, 1, 1))].text  # %b, through the generic, back to the constant


def test_a_truncated_literal_stays_non_splat():
    out = _outcomes(TEXT)
    column = out[("constant", (1, 1))].text  # first column: 1, 1, 7, 1
    assert "dense<[[1], [1], [7], [1]]> : tensor<4x1xi4>" in column
    rows = out[("constant", (0, 2))].text  # rows 0-1 keep their differing values
    assert "dense<[[1, 2, 3, 4, 5, 6], [1, 1, 1, 1, 1, 1]]> : tensor<2x6xi4>" in rows


def test_a_cut_that_would_be_a_splat_takes_another_value_of_the_literal():
    text = TEXT.replace(
        "[1, 2, 3, 4, 5, 6], [1, 1, 1, 1, 1, 1], [7, 7, 7, 7, 7, 7], [1, 2, 3, 4, 5, 6]",
        "[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1], [7, 7, 7, 7, 7, 7], [1, 2, 3, 4, 5, 6]",
    )
    cand = _outcomes(text)[("constant", (0, 2))]
    assert "dense<[[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 7]]> : tensor<2x6xi4>" in cand.text
    both = each_edit(ShrinkValues(), text)
    ws_edits = [e for e, _c in both if e.kind == "constant" and e.arg in ((0, 1), (1, 1))]
    from conftest import apply_edits

    one = apply_edits(ShrinkValues(), text, lambda edits: [e for e in edits if e in ws_edits])
    assert "tensor<1x2xi4>" in one.text or "tensor<2x1xi4>" in one.text  # two elements, never one


def test_edits_list_the_biggest_values_first_in_a_fixed_order():
    edits = ShrinkValues().opportunities(program(TEXT))
    assert edits == ShrinkValues().opportunities(program(TEXT))
    assert {e.kind for e in edits[:12]} == {"argument", "constant"}  # the 24-element values
    assert edits[-1].arg[:1] == (1,) and edits[-1].kind == "argument"  # %w, 18 elements
    # each dim: to 1, to a small odd size (bugs of odd element counts) and to half
    assert [e.arg[1] for e in edits if e.kind == "constant" and e.arg[0] == 0] == [1, 2, 3]


def test_ops_that_do_not_compute_element_by_element_stop_it():
    square = """
#id = affine_map<(d0, d1) -> (d0, d1)>
#t = affine_map<(d0, d1) -> (d1, d0)>
func.func @main(%a: tensor<4x4xf32>, %b: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %e = tensor.empty() : tensor<4x4xf32>
  %mm = linalg.matmul ins(%a, %a : tensor<4x4xf32>, tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) -> tensor<4x4xf32>
  %e2 = tensor.empty() : tensor<4x4xf32>
  %tr = linalg.generic {indexing_maps = [#t, #id], iterator_types = ["parallel", "parallel"]} ins(%b : tensor<4x4xf32>) outs(%e2 : tensor<4x4xf32>) {
  ^bb0(%x: f32, %o: f32):
    linalg.yield %x : f32
  } -> tensor<4x4xf32>
  return %mm, %tr : tensor<4x4xf32>, tensor<4x4xf32>
}
"""
    assert all(getattr(c, "reason", None) == "no-op" for _e, c in each_edit(ShrinkValues(), square))


def test_a_big_literal_printed_as_hex_is_cut_slot_by_slot():
    data = "".join(f"{(i * 7 + i // 16) % 100:02X}" for i in range(32 * 16))  # i8: one byte per element
    text = f"""func.func @main() -> tensor<32x16xi8> {{
  %c = arith.constant dense<"0x{data}"> : tensor<32x16xi8>
  return %c : tensor<32x16xi8>
}}"""
    out = _outcomes(text)
    row = out[("constant", (0, 1))].text
    assert "dense<[[0, 7, 14, 21, 28, 35, 42, 49, 56, 63, 70, 77, 84, 91, 98, 5]]> : tensor<1x16xi8>" in row
    half = out[("constant", (0, 16))].text
    assert '"0x' + data[: 16 * 16 * 2] + '"> : tensor<16x16xi8>' in half
