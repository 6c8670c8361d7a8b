"""replace-with-zero: replace an op's results by zero constants (splats for tensors).

Unlike drop-ops, which prefers an operand or an earlier value of the same type, this
always cuts the op's inputs, so a whole producer chain (a `flow.dispatch`, a matmul of
constants) goes in one candidate and the consumer sees a plain splat.
"""

from __future__ import annotations

from collections.abc import Sequence

from iree.compiler import ir

from reducer.core.strategy import Edit, MLIRProgram, Strategy
from strategies._ir.paths import body_ops, cuts_nothing
from strategies._ir.rewriter import Rewriter, zero_literal


class ReplaceWithZero(Strategy[MLIRProgram]):
    name = "replace-with-zero"
    summary = "replace an op's results by zero constants / zero splats, cutting its inputs"

    def opportunities(self, program: MLIRProgram) -> list[Edit]:
        edits = []
        for path, op in body_ops(program.root):
            if not len(op.results) or cuts_nothing(op) or any(zero_literal(r.type) is None for r in op.results):
                continue
            edits.append(Edit("zero", path))
        edits.reverse()  # later values first: their inputs are the larger slices
        return edits

    def apply(self, program: MLIRProgram, edits: Sequence[Edit]) -> ir.Operation | None:
        rewriter = Rewriter(program)
        root = rewriter.root
        for path in sorted(e.path for e in edits):
            op = rewriter.op(path)
            if op is not None:
                rewriter.replace_op(path, [rewriter.zero(r.type, op) for r in op.results])
        rewriter.finish()
        return root
