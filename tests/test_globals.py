from conftest import each_edit

from strategies.globals import Globals

TEXT = """
util.global private mutable @state = dense<2.5> : tensor<4xf32>
util.global private @scale : tensor<4xf32>
func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %s = util.global.load @state : tensor<4xf32>
  %k = util.global.load @scale : tensor<4xf32>
  %0 = arith.mulf %a, %s : tensor<4xf32>
  %1 = arith.addf %0, %k : tensor<4xf32>
  util.global.store %1, @state : tensor<4xf32>
  return %1 : tensor<4xf32>
}
"""


def outcomes() -> dict:
    return {e.arg: c for e, c in each_edit(Globals(), TEXT)}


def test_a_global_becomes_its_initial_value_and_its_stores_go():
    text = outcomes()["state"].text
    assert "@state" not in text and "arith.constant dense<2.500000e+00> : tensor<4xf32>" in text
    assert "util.global.store" not in text and "@scale" in text


def test_a_global_without_initial_value_becomes_a_zero():
    text = outcomes()["scale"].text
    assert "@scale" not in text and "dense<0.000000e+00>" in text


def test_globals_used_by_other_ops_are_left_to_split_functions():
    text = TEXT + 'func.func @g() {\n  "test.use"() {g = @scale} : () -> ()\n  return\n}\n'
    assert set(e.arg for e, _c in each_edit(Globals(), text)) == {"state"}


def test_drops_executable_variants_after_the_first():
    text = """
hal.executable private @ex {
  hal.executable.variant public @a target(#hal.executable.target<"llvm-cpu", "embedded-elf-x86_64">) {
    builtin.module {}
  }
  hal.executable.variant public @b target(#hal.executable.target<"vmvx", "vmvx-bytecode-fb">) {
    builtin.module {}
  }
}
"""
    ((edit, cand),) = each_edit(Globals(), text)
    assert edit.kind == "drop-variant" and "@b" not in cand.text and "@a" in cand.text
