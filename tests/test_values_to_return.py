from conftest import apply_edits, each_edit, program

from strategies.values_to_return import ValuesToReturn, _ranked, _visit_order

TEXT = """
func.func @main(%a: tensor<8xf32>) -> tensor<7xi32> {
  %c = arith.constant dense<[1, 2, 3, 4, 5, 6, 7]> : tensor<7xi4>
  %0 = math.exp %a : tensor<8xf32>
  %1 = tensor.extract_slice %0[0] [7] [1] : tensor<8xf32> to tensor<7xf32>
  %2 = arith.fptosi %1 : tensor<7xf32> to tensor<7xi32>
  %3 = arith.extsi %c : tensor<7xi4> to tensor<7xi32>
  %4 = arith.addi %2, %3 : tensor<7xi32>
  return %4 : tensor<7xi32>
}
"""


def test_returning_the_constant_cuts_everything_else():
    by_op = {(e.kind, e.path[-1:]): c for e, c in each_edit(ValuesToReturn(), TEXT)}
    cand = by_op[("value", (0,))]
    assert "-> tensor<7xi4>" in cand.text and "return %cst : tensor<7xi4>" in cand.text
    assert "math.exp" not in cand.text and "arith.addi" not in cand.text and "extsi" not in cand.text


def test_edits_are_ranked_by_ops_cut_and_stay_in_a_fixed_order():
    p = program(TEXT)
    ranked = sorted(_ranked(p), key=_ranked(p).get)
    assert ranked[0].kind == "argument"  # returning the argument cuts the whole body
    values = [e.path[-1] for e in ranked if e.kind == "value"]
    assert values[:2] == [0, 1]  # the constant and the exp each keep one op
    assert 5 not in values  # the returned addi itself: nothing to cut
    assert ValuesToReturn().opportunities(program(TEXT)) == ValuesToReturn().opportunities(p)


def test_a_sweep_of_halving_chunks_meets_the_values_from_most_to_least_cut():
    """The alternatives exclude each other (a chunk applies its best-ranked one), so the
    list puts them where delta debugging's chunks reach them in rank order: each check
    tries the next most-cut value instead of jumping back and forth."""
    assert _visit_order(8) == [0, 4, 2, 6, 1, 3, 5, 7]
    assert _visit_order(5) == [0, 3, 4, 1, 2]
    p = program(TEXT)
    edits, rank = ValuesToReturn().opportunities(p), _ranked(p)
    met = [rank[edits[slot]] for slot in _visit_order(len(edits))]
    assert met == list(range(len(edits)))


def test_a_subset_returns_its_best_ranked_value():
    # every edit at once: one value per function, the one that cuts most (the argument)
    cand = apply_edits(ValuesToReturn(), TEXT)
    assert "return %arg0 : tensor<8xf32>" in cand.text and "arith.constant" not in cand.text


CALLED = """
func.func private @g(%a: f32) -> f32 {
  %c = arith.constant 2 : i32
  %i = arith.fptosi %a : f32 to i32
  %m = arith.muli %i, %c : i32
  %0 = arith.sitofp %m : i32 to f32
  %1 = math.exp %0 : f32
  return %1 : f32
}
func.func @main(%a: f32) -> f32 {
  %0 = func.call @g(%a) : (f32) -> f32
  %1 = math.log %0 : f32
  return %1 : f32
}
"""


def test_callers_adapt_to_the_new_result_type():
    by_edit = {(e.path, e.arg): c for e, c in each_edit(ValuesToReturn(), CALLED)}
    cand = by_edit[((0, 0, 0, 0, 0, 2), 0)]  # @g returns its muli (i32)
    assert "func.func private @g(%arg0: f32) -> i32" in cand.text
    assert "call @g(%arg0) : (f32) -> i32" in cand.text
    assert "math.exp" not in cand.text and "sitofp" not in cand.text
    # the caller's use of the old f32 result gets a replacement of the right type
    assert "math.log %arg0 : f32" in cand.text


def test_every_call_site_adapts_not_only_the_first():
    """@g is called from two functions and twice in one: each of the three calls takes
    the new result type (one left at the old type would not verify)."""
    text = (
        CALLED
        + """
func.func @other(%a: f32) -> f32 {
  %0 = func.call @g(%a) : (f32) -> f32
  %1 = func.call @g(%0) : (f32) -> f32
  return %1 : f32
}
"""
    )
    by_edit = {(e.path, e.arg): c for e, c in each_edit(ValuesToReturn(), text)}
    cand = by_edit[((0, 0, 0, 0, 0, 2), 0)]  # @g returns its muli (i32)
    assert type(cand).__name__ == "Candidate", cand
    assert cand.text.count("call @g(") == 3
    assert cand.text.count(": (f32) -> i32") == 3 and ": (f32) -> f32" not in cand.text


def test_a_same_typed_result_keeps_the_call_in_use():
    by_edit = {(e.path, e.arg): c for e, c in each_edit(ValuesToReturn(), CALLED)}
    cand = by_edit[((0, 0, 0, 0, 0, 3), 0)]  # @g returns the sitofp (f32)
    assert "math.exp" not in cand.text and "math.log %0 : f32" in cand.text


def test_functions_used_other_than_by_calls_keep_their_signature():
    text = """
func.func private @g(%a: f32) -> f32 {
  %0 = math.exp %a : f32
  %1 = math.log %0 : f32
  return %1 : f32
}
func.func @main() -> ((f32) -> f32) {
  %f = func.constant @g : (f32) -> f32
  return %f : (f32) -> f32
}
"""
    assert all(e.path[:3] != (0, 0, 0) for e in ValuesToReturn().opportunities(program(text)))


def test_side_effects_after_the_value_go_too():
    text = """
util.global private mutable @state = dense<0.0> : tensor<4xf32>
func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = math.exp %a : tensor<4xf32>
  %1 = math.log %0 : tensor<4xf32>
  util.global.store %1, @state : tensor<4xf32>
  return %1 : tensor<4xf32>
}
"""
    by_op = {(e.kind, e.path[-1]): c for e, c in each_edit(ValuesToReturn(), text)}
    cand = by_op[("value", 0)]
    assert "util.global.store" not in cand.text and "math.log" not in cand.text and "return %0" in cand.text


def test_a_returned_call_keeps_its_callee_unchanged_in_the_same_subset():
    from conftest import apply_edits

    def pick(edits):
        mine = [e for e in edits if e.path == (0, 0, 1, 0, 0, 0)]  # @main returns the call
        theirs = [e for e in edits if e.path == (0, 0, 0, 0, 0, 2)]  # @g returns its muli
        return mine + theirs

    cand = apply_edits(ValuesToReturn(), CALLED, pick)
    assert "func.func private @g(%arg0: f32) -> f32" in cand.text and "math.exp" in cand.text
    assert "math.log" not in cand.text and "return %0 : f32" in cand.text


def test_a_long_function_offers_a_few_values_galloping_to_its_end():
    """From the middle of the function towards its end, halving the distance each time:
    a bug that sits late costs a check per halving, not one per spread value."""
    from programs import chain

    p = program(chain(40))
    edits = ValuesToReturn().opportunities(p)
    assert 4 <= len(edits) <= 8
    by_rank = [e.path[-1] for e in sorted(edits, key=_ranked(p).get)]
    assert by_rank == [18, 28, 33, 36, 37, 38]  # cut order; 38 is the last before the returned value
