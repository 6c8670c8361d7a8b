from conftest import each_edit

from strategies.iree_simplify import IreeSimplify

TEXT = """
#map = affine_map<(d0) -> (d0)>
func.func @f(%a: tensor<?xf32>, %b: tensor<?xf32>) -> tensor<?xf32> {
  %p = util.optimization_barrier %a : tensor<?xf32>
  %0 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]}
      ins(%p : tensor<?xf32>) outs(%b : tensor<?xf32>) {
  ^bb0(%in: f32, %out: f32):
    %e = math.exp %in : f32
    linalg.yield %e : f32
  } -> tensor<?xf32>
  return %0 : tensor<?xf32>
}
"""


def outcomes() -> dict:
    return {e.kind: c for e, c in each_edit(IreeSimplify(), TEXT)}


def test_a_dynamic_linalg_op_becomes_a_fill_of_its_init():
    text = outcomes()["fill"].text
    assert "linalg.generic" not in text and "optimization_barrier" not in text  # its only user went
    assert "linalg.fill ins(%cst : f32) outs(%arg1 : tensor<?xf32>)" in text


def test_an_optimization_barrier_is_forwarded():
    text = outcomes()["unbarrier"].text
    assert "optimization_barrier" not in text and "ins(%arg0 : tensor<?xf32>)" in text
