"""Numeric mismatches between two configurations: each side's inputs follow its own
signature, user-given inputs, and localising the first dispatch that goes wrong."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import needs_iree
from programs import COMPILE

from reducer.session import Settings, make_oracle

pytestmark = pytest.mark.e2e

#: f32 inputs; exp(8x) passes f16's largest value (65504) where x >= 1.39.
DEMOTE_MODEL = """func.func @main(%x: tensor<2x3xf32>, %y: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %k = arith.constant dense<8.0> : tensor<2x3xf32>
  %0 = arith.mulf %x, %k : tensor<2x3xf32>
  %1 = math.exp %0 : tensor<2x3xf32>
  %2 = arith.addf %1, %y : tensor<2x3xf32>
  return %2 : tensor<2x3xf32>
}
"""
DEMOTE = "--iree-input-demote-f32-to-f16"


def demote_settings(tmp_path: Path, **more: object) -> Settings:
    src = tmp_path / "model.mlir"
    src.write_text(DEMOTE_MODEL)
    return Settings(
        str(src),
        compile=f"{COMPILE} {{input}} -o {{output}}",
        against=f"{COMPILE} {DEMOTE} {{input}} -o {{output}}",
        mismatch=True,
        **more,  # type: ignore[arg-type]
    )


@needs_iree
def test_a_demoted_side_gets_the_same_values_in_its_own_types(tmp_path: Path):
    """The README's demote example: the f16 module is fed f16 casts of the f32 inputs,
    and the outputs (f32 and f16) are compared; f16 overflows to inf where f32 does not."""
    settings = demote_settings(tmp_path)
    oracle = make_oracle(settings, "model.mlir", 120.0)
    verdict = oracle.run(DEMOTE_MODEL.encode())
    assert verdict.outcome == "interesting", verdict.stderr_tail
    assert verdict.signature.first_error == "inf on b only"
    assert "tensor<2x3xf32> = [" in verdict.stderr_tail  # side a's inputs, as a report shows them
