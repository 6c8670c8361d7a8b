"""--for-upstream: the user's names, locations, discardable attributes and blobs go,
each only while the program stays interesting."""

from __future__ import annotations

from reducer.iree import upstream

PROGRAM = """module attributes {torch.debug_module_name = "AcmeSecretNet"} {
  util.global private @acme_weight = dense_resource<acme_blob> : tensor<4xf32>
  func.func private @acme_layer(%a: tensor<4xf32> {iree.abi.name = "x"}) -> tensor<4xf32> attributes {acme.tag = 1} {
    %w = util.global.load @acme_weight : tensor<4xf32>
    %0 = arith.addf %a, %w : tensor<4xf32> loc("acme/model.py":3:1)
    return %0 : tensor<4xf32>
  }
  func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
    %0 = call @acme_layer(%a) : (tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
{-#
  dialect_resources: {
    builtin: {
      acme_blob: "0x040000000000803F0000803F0000803F0000803F"
    }
  }
#-}
"""


def test_all_steps_at_once_when_that_stays_interesting():
    calls = []
    text, done = upstream.clean(PROGRAM, lambda t: calls.append(t) or True)
    assert len(calls) == 1 and done == [name for name, _ in upstream.STEPS]
    assert "acme" not in text.lower() and "loc(" not in text and "dense_resource" not in text
    assert "@f0" in text and "@f1" in text and "@g0" in text and "call @f0" in text
    assert text == upstream.clean(PROGRAM, lambda t: True)[0]  # deterministic


def test_a_step_the_bug_needs_is_left_out():
    def interesting(text: str) -> bool:
        return "@main" in text  # say the check runs @main by name

    text, done = upstream.clean(PROGRAM, interesting)
    assert "rename symbols" not in done and "@main" in text
    assert "strip discardable attributes" in done and "acme.tag" not in text and "dense_resource" not in text
