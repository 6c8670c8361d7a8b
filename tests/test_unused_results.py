from conftest import each_edit, program

from strategies.unused_results import UnusedResults

GENERIC = """
#id = affine_map<(d0) -> (d0)>
func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %e = tensor.empty() : tensor<4xf32>
  %e2 = tensor.empty() : tensor<4xf32>
  %r:2 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
      ins(%a : tensor<4xf32>) outs(%e, %e2 : tensor<4xf32>, tensor<4xf32>) {
  ^bb0(%x: f32, %o: f32, %p: f32):
    %y = math.exp %x : f32
    %z = math.log %x : f32
    linalg.yield %y, %z : f32, f32
  } -> (tensor<4xf32>, tensor<4xf32>)
  return %r#0 : tensor<4xf32>
}
"""


def test_a_generic_loses_an_unused_output_and_its_body_value():
    ((edit, cand),) = each_edit(UnusedResults(), GENERIC)
    assert edit.arg == 1
    assert "math.log" not in cand.text and "math.exp" in cand.text
    assert "outs(%0 : tensor<4xf32>)" in cand.text and cand.text.count("tensor.empty") == 1
    assert "^bb0(%in: f32, %out: f32)" in cand.text and "-> tensor<4xf32>" in cand.text


def test_an_output_the_body_reads_stays():
    text = GENERIC.replace("%z = math.log %x : f32", "%z = math.log %p : f32")
    assert UnusedResults().opportunities(program(text)) == []


def test_a_used_result_stays():
    text = GENERIC.replace(
        "return %r#0 : tensor<4xf32>", "%s = arith.addf %r#0, %r#1 : tensor<4xf32>\n  return %s : tensor<4xf32>"
    )
    assert UnusedResults().opportunities(program(text)) == []


FOR = """
func.func @f(%x: f32, %y: f32, %n: index) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%a = %x, %b = %y) -> (f32, f32) {
    %p = math.exp %a : f32
    %q = math.log %b : f32
    scf.yield %p, %q : f32, f32
  }
  return %r#0 : f32
}
"""


def test_a_for_loses_an_unused_iter_arg_and_its_body_value():
    ((edit, cand),) = each_edit(UnusedResults(), FOR)
    assert edit.arg == 1
    assert "math.log" not in cand.text and "iter_args(%arg4 = %arg0) -> (f32)" in cand.text


WHILE = """
func.func @f(%x: f32, %n: i32) -> i32 {
  %r:2 = scf.while (%a = %x, %i = %n) : (f32, i32) -> (f32, i32) {
    %z = arith.constant 0 : i32
    %c = arith.cmpi sgt, %i, %z : i32
    %e = math.exp %a : f32
    scf.condition(%c) %e, %i : f32, i32
  } do {
  ^bb0(%a2: f32, %i2: i32):
    %one = arith.constant 1 : i32
    %j = arith.subi %i2, %one : i32
    %s = arith.constant 1.0 : f32
    scf.yield %s, %j : f32, i32
  }
  return %r#1 : i32
}
"""


def test_a_while_stops_forwarding_an_unused_value():
    ((edit, cand),) = each_edit(UnusedResults(), WHILE)
    assert edit.arg == 0
    assert "math.exp" not in cand.text and "scf.condition(%1) %arg3 : i32" in cand.text
    assert ": (f32, i32) -> i32 {" in cand.text and "^bb0(%arg2: i32):" in cand.text
