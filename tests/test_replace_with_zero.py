from conftest import each_edit, program

from strategies.replace_with_zero import ReplaceWithZero

TEXT = """
func.func @f(%a: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %w = arith.constant dense<1.5> : tensor<4x4xf32>
  %z = arith.constant dense<0.0> : tensor<4x4xf32>
  %x = math.absf %a : tensor<4x4xf32>
  %m = linalg.matmul ins(%x, %w : tensor<4x4xf32>, tensor<4x4xf32>) outs(%z : tensor<4x4xf32>) -> tensor<4x4xf32>
  %e = math.exp %m : tensor<4x4xf32>
  return %e : tensor<4x4xf32>
}
"""


def test_a_producer_chain_becomes_one_splat():
    results = {e.path[-1]: c for e, c in each_edit(ReplaceWithZero(), TEXT)}
    text = results[3].text  # the matmul
    assert "linalg.matmul" not in text and "dense<1.5" not in text and "math.absf" not in text
    assert "math.exp %cst" in text and "dense<0.000000e+00> : tensor<4x4xf32>" in text


def test_constants_ops_that_cut_nothing_and_dynamic_results_are_not_offered():
    text = "func.func @f(%a: tensor<?xf32>) -> tensor<?xf32> {\n  %0 = math.exp %a : tensor<?xf32>\n  return %0 : tensor<?xf32>\n}\n"
    assert ReplaceWithZero().opportunities(program(text)) == []
    assert [e.path[-1] for e in ReplaceWithZero().opportunities(program(TEXT))] == [4, 3]  # not absf(%arg0)
