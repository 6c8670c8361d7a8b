from conftest import each_edit, program

from reducer.core.ir import PrintOptions
from reducer.core.workspace import MLIRWorkspace
from strategies.attributes import Attributes

TEXT = """
func.func @f(%a: f32 {iree.abi.name = "x"}) -> f32 attributes {iree.reflection = {k = "v"}} {
  %0 = arith.addf %a, %a fastmath<fast> : f32
  %1 = arith.constant {my.tag} 1.0 : f32
  %2 = arith.mulf %0, %1 : f32
  return %2 : f32
}
"""


def test_offers_discardable_and_optional_attributes_but_not_required_ones():
    names = sorted(e.arg for e in Attributes().opportunities(program(TEXT)))
    assert names == ["arg_attrs", "fastmath", "iree.reflection", "my.tag"]  # fastmath: a text edit


def test_each_drop_is_a_smaller_valid_candidate():
    out = {e.arg: c for e, c in each_edit(Attributes(), TEXT)}
    assert all(hasattr(c, "text") for c in out.values()), out
    assert "fastmath" not in out["fastmath"].text and "my.tag" not in out["my.tag"].text
    assert "iree.abi.name" not in out["arg_attrs"].text


def test_strips_every_location_in_one_candidate():
    text = 'func.func @f(%a: f32) -> f32 {\n  %0 = math.exp %a : f32 loc("model.py":3:4)\n  return %0 : f32 loc("model.py":5:1)\n}\n'
    ws = MLIRWorkspace(text, PrintOptions(debug_info=True))
    s = Attributes()
    edits = ws.opportunities(s)
    assert edits[0].kind == "strip-locations"
    cand = ws.materialize(s, edits[:1])
    assert "model.py" not in cand.text and "loc(" in cand.text  # still printed, all unknown


def test_unregistered_ops_may_lose_any_attribute():
    text = 'func.func @f() {\n  "vendor.op"() {size = 3 : i64, mode = "x"} : () -> ()\n  return\n}\n'
    assert sorted(e.arg for e in Attributes().opportunities(program(text))) == ["mode", "size"]
