from conftest import each_edit, program

from strategies.remove_results_and_arguments import RemoveResultsAndArguments

TEXT = """
func.func private @g(%x: f32, %unused: f32) -> (f32, f32) {
  %0 = math.exp %x : f32
  %1 = math.log %x : f32
  return %0, %1 : f32, f32
}
func.func @main(%a: f32, %b: f32) -> f32 {
  %s = math.sqrt %b : f32
  %0:2 = func.call @g(%a, %s) : (f32, f32) -> (f32, f32)
  return %0#0 : f32
}
"""


def results() -> dict:
    return {(e.kind, e.arg): c for e, c in each_edit(RemoveResultsAndArguments(), TEXT)}


def test_lists_unused_arguments_and_every_result():
    kinds = {(e.kind, e.arg) for e in RemoveResultsAndArguments().opportunities(program(TEXT))}
    assert kinds == {
        ("argument", ("g", 1)),
        ("result", ("g", 0)),
        ("result", ("g", 1)),
    }  # not main's only result: it is all main computes


def test_an_unused_argument_leaves_the_callee_and_its_callers():
    cand = results()[("argument", ("g", 1))]
    assert "@g(%arg0: f32) -> (f32, f32)" in cand.text and "call @g(%arg0) : (f32) -> (f32, f32)" in cand.text
    assert "math.sqrt" not in cand.text  # it only fed the dropped argument


def test_a_result_nobody_uses_goes_with_what_computed_it():
    cand = results()[("result", ("g", 1))]
    assert "math.log" not in cand.text and "-> f32" in cand.text.split("\n")[1]


def test_a_used_result_is_replaced_at_the_call_site():
    cand = results()[("result", ("g", 0))]
    assert "math.exp" not in cand.text and "math.log" in cand.text
    assert "call @g(%arg0, %0) : (f32, f32) -> f32" in cand.text and "return %arg0 : f32" in cand.text


def test_functions_referenced_other_than_by_calls_keep_their_signature():
    text = TEXT + "util.global private @fp = @g\n"
    edits = RemoveResultsAndArguments().opportunities(
        program(text.replace("util.global private @fp = @g\n", "") + '"test.use"() {fn = @g} : () -> ()\n')
    )
    assert all(e.arg[0] != "g" for e in edits)
