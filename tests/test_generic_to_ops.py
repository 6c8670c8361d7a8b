from conftest import each_edit, program

from strategies.generic_to_ops import GenericToOps

GENERIC = """
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @f(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %e = tensor.empty() : tensor<2x3xf32>
  %r = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a, %b : tensor<2x3xf32>, tensor<2x3xf32>) outs(%e : tensor<2x3xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %h = arith.constant 0.5 : f32
    %q = arith.truncf %x : f32 to f6E2M3FN
    %w = arith.extf %q : f6E2M3FN to f32
    %m = arith.mulf %w, %h fastmath<fast> : f32
    %s = arith.addf %m, %y : f32
    linalg.yield %s : f32
  } -> tensor<2x3xf32>
  return %r : tensor<2x3xf32>
}
"""


def test_an_elementwise_generic_becomes_its_body_on_tensors():
    ((edit, cand),) = each_edit(GenericToOps(), GENERIC)
    assert "linalg.generic" not in cand.text and "tensor.empty" not in cand.text
    assert "arith.truncf %arg0 : tensor<2x3xf32> to tensor<2x3xf6E2M3FN>" in cand.text
    assert "arith.constant dense<5.000000e-01> : tensor<2x3xf32>" in cand.text
    assert "arith.mulf %1, %cst fastmath<fast> : tensor<2x3xf32>" in cand.text
    assert "arith.addf %2, %arg1 : tensor<2x3xf32>" in cand.text and "return %3" in cand.text


def test_generics_that_are_not_elementwise_stay():
    transposed = GENERIC.replace(
        "indexing_maps = [#id, #id, #id]", "indexing_maps = [affine_map<(d0, d1) -> (d1, d0)>, #id, #id]"
    )
    transposed = transposed.replace("%a: tensor<2x3xf32>", "%a: tensor<3x2xf32>").replace(
        "ins(%a, %b : tensor<2x3xf32>", "ins(%a, %b : tensor<3x2xf32>"
    )
    reads_output = GENERIC.replace("%s = arith.addf %m, %y : f32", "%s = arith.addf %m, %o : f32")
    reduction = GENERIC.replace(
        'iterator_types = ["parallel", "parallel"]', 'iterator_types = ["parallel", "reduction"]'
    )
    captured = GENERIC.replace("%b: tensor<2x3xf32>)", "%b: tensor<2x3xf32>, %k: f32)").replace(
        "%s = arith.addf %m, %y : f32", "%s = arith.addf %m, %k : f32"
    )
    computed = GENERIC.replace(
        "%e = tensor.empty() : tensor<2x3xf32>",
        "%e = tensor.empty() : tensor<2x3xf32>\n  %c = arith.constant 2.0 : f32\n  %k = arith.addf %c, %c : f32",
    ).replace("%s = arith.addf %m, %y : f32", "%s = arith.addf %m, %k : f32")
    for text in (transposed, reads_output, reduction, captured, computed):
        assert GenericToOps().opportunities(program(text)) == [], text


def test_a_scalar_constant_from_outside_becomes_a_splat():
    """A dispatch cut out of the flow IR (localisation) has its constants hoisted out of
    the generic's body: they are splats on tensors, as the body's own are."""
    hoisted = GENERIC.replace(
        "%e = tensor.empty() : tensor<2x3xf32>",
        "%e = tensor.empty() : tensor<2x3xf32>\n  %k = arith.constant 2.0 : f32",
    ).replace("%s = arith.addf %m, %y : f32", "%s = arith.addf %m, %k : f32")
    ((edit, cand),) = each_edit(GenericToOps(), hoisted)
    assert "linalg.generic" not in cand.text
    assert "arith.constant dense<2.000000e+00> : tensor<2x3xf32>" in cand.text
    assert "arith.addf %2, %cst_1 : tensor<2x3xf32>" in cand.text and "return %3" in cand.text, cand.text


def test_a_dynamic_shape_stays_fused():
    """A splat of `tensor<?x3xf32>` is no literal: the rewrite would fail, and with it
    every edit of its batch."""
    dynamic = GENERIC.replace("tensor<2x3xf32>", "tensor<?x3xf32>").replace(
        "%e = tensor.empty() : tensor<?x3xf32>",
        "%z = arith.constant 0 : index\n  %d = tensor.dim %a, %z : tensor<?x3xf32>\n"
        "  %e = tensor.empty(%d) : tensor<?x3xf32>",
    )
    assert GenericToOps().opportunities(program(dynamic)) == []
