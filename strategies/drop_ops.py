"""drop-ops: erase any op inside a function, giving its results' uses a replacement.

mlir-reduce can only delete ops whose uses vanish too and iree-reduce only forwards
operands; rewiring every use first is what lets ddmin remove arbitrary chunks.
"""

from __future__ import annotations

from collections.abc import Sequence

from iree.compiler import ir

from reducer.core.strategy import Edit, MLIRProgram, Strategy
from strategies._ir.paths import body_ops
from strategies._ir.rewriter import Rewriter


class DropOps(Strategy[MLIRProgram]):
    name = "drop-ops"
    summary = "erase ops, replacing uses by an operand, a dominating value, zero, a new argument or poison"

    def opportunities(self, program: MLIRProgram) -> list[Edit]:
        return [Edit("drop", path) for path, _op in body_ops(program.root)]

    def apply(self, program: MLIRProgram, edits: Sequence[Edit]) -> ir.Operation | None:
        rewriter = Rewriter(program)
        rewriter.drop(sorted(e.path for e in edits))
        return rewriter.root
