"""forward-operands: replace an op by one of its operands of the same type.

iree-reduce's one trick, but for every operand
position, not only the first: on `%y = arith.subf %a, %b` both `%a` and `%b` are
candidates, and which one keeps the bug is the oracle's call. drop-ops already tries
the first same-typed operand; this strategy offers the others and multi-result ops.
"""

from __future__ import annotations

from collections.abc import Sequence

from iree.compiler import ir

from reducer.core.strategy import Edit, MLIRProgram, Strategy
from strategies._ir.paths import body_ops
from strategies._ir.rewriter import Rewriter


class ForwardOperands(Strategy[MLIRProgram]):
    name = "forward-operands"
    summary = "replace an op's results by same-typed operands, for every operand position"

    def opportunities(self, program: MLIRProgram) -> list[Edit]:
        edits = []
        for path, op in body_ops(program.root):
            if not len(op.results):
                continue
            operands = list(op.operands)
            result_types = [r.type for r in op.results]
            for k, value in enumerate(operands):
                # every result must find a same-typed operand; this one serves the first
                if value.type == result_types[0] and all(any(o.type == t for o in operands) for t in result_types[1:]):
                    edits.append(Edit("forward", path, k))
        return edits

    def apply(self, program: MLIRProgram, edits: Sequence[Edit]) -> ir.Operation | None:
        rewriter = Rewriter(program)
        root = rewriter.root
        chosen: dict[tuple[int, ...], int] = {}
        for e in sorted(edits):
            chosen.setdefault(e.path, e.arg)  # two positions of one op: the first wins
        for path, k in sorted(chosen.items()):
            op = rewriter.op(path)
            if op is None:
                continue
            operands = list(op.operands)
            first = operands[k]
            values = [first] + [next(o for o in operands if o.type == r.type) for r in list(op.results)[1:]]
            rewriter.replace_op(path, values)
        rewriter.finish()
        return root
