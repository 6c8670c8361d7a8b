"""Numeric mismatches between two configurations: each side's inputs follow its own
signature, user-given inputs, and localising the first dispatch that goes wrong."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest
from conftest import needs_iree
from programs import COMPILE

from reducer.session import Settings, make_oracle
from reducer.session.settings import EXIT_BAD_INPUT, UserError

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


@needs_iree
def test_given_inputs_replace_the_generated_ones_and_travel_with_the_oracle(tmp_path: Path):
    """Zeros give exp(0) = 1 on both sides: no mismatch, where the generated inputs
    overflow f16. The files are read once: a worker needs no copy of them."""
    x, y = tmp_path / "x.npy", tmp_path / "y.npy"
    np.save(x, np.zeros((2, 3), np.float32))
    np.save(y, np.zeros((2, 3), np.float32))
    oracle = make_oracle(demote_settings(tmp_path, inputs=[f"{x},{y}"]), "model.mlir", 120.0)
    x.unlink()
    y.unlink()
    shipped = pickle.loads(pickle.dumps(oracle))
    assert shipped.run(DEMOTE_MODEL.encode()).outcome == "same outputs"
    # iree-run-module's --input syntax, one value filling the tensor
    oracle = make_oracle(demote_settings(tmp_path, inputs=["2x3xf32=2", "2x3xf32=0"]), "model.mlir", 120.0)
    verdict = oracle.run(DEMOTE_MODEL.encode())
    assert verdict.outcome == "interesting" and verdict.signature.first_error == "inf on b only"
    assert "tensor<2x3xf32> = [2., 2., 2., 2., 2., 2.]" in verdict.stderr_tail


def test_inputs_that_cannot_be_read_are_a_usage_error(tmp_path: Path):
    with pytest.raises(UserError) as err:
        make_oracle(demote_settings(tmp_path, inputs=[str(tmp_path / "missing.npy")]), "model.mlir", 10.0)
    assert err.value.code == EXIT_BAD_INPUT and "missing.npy" in str(err.value)
    with pytest.raises(UserError, match="5 values for 6 elements"):
        make_oracle(demote_settings(tmp_path, inputs=["2x3xf32=1 2 3 4 5"]), "model.mlir", 10.0)
