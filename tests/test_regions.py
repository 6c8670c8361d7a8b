import pytest
from conftest import each_edit, program

from strategies.regions import Regions

IF = """
func.func @f(%c: i1, %a: f32) -> f32 {
  %r = scf.if %c -> f32 {
    %x = math.exp %a : f32
    scf.yield %x : f32
  } else {
    %y = math.log %a : f32
    scf.yield %y : f32
  }
  return %r : f32
}
"""

FOR = """
func.func @f(%x: f32, %n: index) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %x) -> f32 {
    %y = math.exp %acc : f32
    scf.yield %y : f32
  }
  return %r : f32
}
"""

GENERIC = """
#map = affine_map<(d0) -> (d0)>
func.func @f(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %0 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]}
      ins(%a : tensor<4xf32>) outs(%b : tensor<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %e = math.exp %in : f32
    %m = arith.mulf %e, %out : f32
    linalg.yield %m : f32
  } -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
"""

DISPATCH = """
func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = flow.dispatch.region -> (tensor<4xf32>) {
    %1 = math.exp %a : tensor<4xf32>
    flow.return %1 : tensor<4xf32>
  }
  return %0 : tensor<4xf32>
}
"""


def outcomes(text: str) -> dict:
    return {(e.kind, e.arg): c for e, c in each_edit(Regions(), text)}


@pytest.mark.parametrize("branch,kept,gone", [("then", "math.exp", "math.log"), ("else", "math.log", "math.exp")])
def test_if_becomes_one_branch(branch: str, kept: str, gone: str):
    out = outcomes(IF)[(branch, None)].text
    assert "scf.if" not in out and kept in out and gone not in out
    assert "%arg0" not in out.split("{", 2)[2]  # the condition is no longer used


def test_loop_runs_once_or_never():
    out = outcomes(FOR)
    once, skip = out[("once", None)].text, out[("skip", None)].text
    assert "scf.for" not in once and "math.exp %arg0" in once
    assert "scf.for" not in skip and "math.exp" not in skip and "return %arg0" in skip


def test_a_loop_run_once_binds_its_index_to_the_lower_bound():
    """The one iteration left is the first: the index is the lower bound, never the
    upper one (a loop from %lo to %hi never runs with %i == %hi)."""
    looped = """
func.func @f(%x: f32, %lo: index, %hi: index) -> f32 {
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %lo to %hi step %c1 iter_args(%acc = %x) -> f32 {
    %k = arith.index_cast %i : index to i64
    %f = arith.sitofp %k : i64 to f32
    %y = arith.addf %acc, %f : f32
    scf.yield %y : f32
  }
  return %r : f32
}
"""
    once = outcomes(looped)[("once", None)].text
    assert "scf.for" not in once
    assert "arith.index_cast %arg1 : index to i64" in once  # %lo
    assert "%arg2" not in once.split("{", 2)[2]  # %hi: the function body uses it no more


def test_a_loop_loses_an_iter_arg_and_what_only_it_computed():
    two = """
func.func @f(%x: f32, %y: f32, %n: index) -> (f32, f32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%a = %x, %b = %y) -> (f32, f32) {
    %p = math.exp %a : f32
    %q = math.log %b : f32
    scf.yield %p, %q : f32, f32
  }
  return %r#0, %r#1 : f32, f32
}
"""
    text = outcomes(two)[("drop-iter-arg", 1)].text
    assert "iter_args(%arg4 = %arg0) -> (f32)" in text and "math.log" not in text
    assert "return %0, %arg1 : f32, f32" in text


def test_generic_body_yields_an_argument_and_loses_its_computation():
    out = outcomes(GENERIC)
    assert set(out) == {("yield-argument", (0, 0)), ("yield-argument", (0, 1))}
    text = out[("yield-argument", (0, 0))].text
    assert "math.exp" not in text and "arith.mulf" not in text and "linalg.yield %in" in text


def test_dispatch_region_is_unwrapped_into_plain_ops():
    text = outcomes(DISPATCH)[("unwrap", None)].text
    assert "flow.dispatch.region" not in text and "math.exp %arg0" in text


def test_nested_edits_in_one_subset_apply_inner_first():
    nested = FOR.replace(
        "%y = math.exp %acc : f32",
        "%y = scf.if %b -> f32 {\n %e = math.exp %acc : f32\n scf.yield %e : f32\n } else {\n scf.yield %acc : f32\n }",
    ).replace("%n: index", "%n: index, %b: i1")
    from conftest import apply_edits

    cand = apply_edits(Regions(), nested, lambda edits: [e for e in edits if e.kind in ("once", "then")])
    assert "scf." not in cand.text.replace("scf.yield", "") and "math.exp %arg0" in cand.text


def test_lists_nothing_for_ops_without_regions():
    assert Regions().opportunities(program("func.func @f(%a: f32) -> f32 {\n  return %a : f32\n}\n")) == []
