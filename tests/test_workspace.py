"""The workspace is where the verifier sits: a strategy's output that does not verify
never becomes a candidate, so the oracle never sees it."""

from __future__ import annotations

from conftest import workspace
from iree.compiler import ir

from reducer.core.strategy import Edit, Program, Strategy
from reducer.core.workspace import Rejected

TEXT = """
func.func @f(%a: f32) -> f32 {
  %b = math.exp %a : f32
  return %b : f32
}
"""


class _DropReturnOperand(Strategy):
    """Returns IR that prints, and is smaller, but does not verify: the return loses its
    operand while the function still declares an f32 result."""

    name, summary = "drop-return-operand", "a strategy that breaks the IR"

    def opportunities(self, program: Program) -> list[Edit]:
        return [Edit("break", (0, 0, 0, 0, 0, 1))]

    def apply(self, program: Program, edits) -> object:
        root = program.clone()
        func = root.regions[0].blocks[0].operations[0]
        ret = list(func.regions[0].blocks[0].operations)[-1].operation
        with ret.location:
            ir.Operation.create("func.return", ip=ir.InsertionPoint(ret))
        ret.erase()
        return root


def test_ir_that_does_not_verify_is_rejected_before_the_oracle():
    ws = workspace(TEXT)
    strategy = _DropReturnOperand()
    result = ws.materialize(strategy, strategy.opportunities(ws.program))
    assert isinstance(result, Rejected) and result.reason == "invalid", result
