from conftest import each_edit, program

from strategies.types import Types


def outcomes(text: str) -> dict:
    return {(e.kind, e.arg): c for e, c in each_edit(Types(), text)}


def test_demotes_element_types_everywhere_and_counts_it_as_progress():
    text = "func.func @f64_user(%a: tensor<4xf64>, %b: f64) -> tensor<4xf64> {\n  %0 = math.exp %a : tensor<4xf64>\n  return %0 : tensor<4xf64>\n}\n"
    out = outcomes(text)
    cand = out[("demote", ("f64", "f32"))]
    assert "f64" not in cand.text.replace("@f64_user", "") and "@f64_user" in cand.text
    assert ("demote", ("f32", "f16")) not in out  # no f32 yet in this program


def test_makes_a_dynamic_shape_static_where_nothing_needs_the_size():
    text = "func.func @f(%a: tensor<?x4xf32>) -> tensor<?x4xf32> {\n  %0 = math.exp %a : tensor<?x4xf32>\n  return %0 : tensor<?x4xf32>\n}\n"
    cand = outcomes(text)[("static", "tensor<?x4xf32>")]
    assert "tensor<1x4xf32>" in cand.text and "?" not in cand.text


def test_a_dynamic_size_operand_left_behind_is_rejected_before_any_check():
    text = "func.func @f(%n: index) -> tensor<?xf32> {\n  %0 = tensor.empty(%n) : tensor<?xf32>\n  return %0 : tensor<?xf32>\n}\n"
    assert outcomes(text)[("static", "tensor<?xf32>")].reason in ("invalid", "unparsable")


def test_drops_unit_dimensions_of_a_type():
    text = "func.func @f(%a: tensor<1x4x1xf32>) -> tensor<1x4x1xf32> {\n  %0 = math.exp %a : tensor<1x4x1xf32>\n  return %0 : tensor<1x4x1xf32>\n}\n"
    cand = outcomes(text)[("unit-dims", "tensor<1x4x1xf32>")]
    assert "tensor<4xf32>" in cand.text


def test_nothing_to_offer_on_static_f32_code():
    text = "func.func @f(%a: tensor<4xf16>) -> tensor<4xf16> {\n  return %a : tensor<4xf16>\n}\n"
    assert Types().opportunities(program(text)) == []
