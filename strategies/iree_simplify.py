"""iree-simplify: IREE-specific simplifications from the debugging playbook.

A linalg op becomes `linalg.fill` of zero into its own init (works for dynamic shapes,
where a zero splat constant cannot be spelled), and `util.optimization_barrier` is
removed by forwarding its operands. (A `flow.dispatch` result becomes a zero splat
through replace-with-zero; a linalg op becomes its same-typed input through
forward-operands.)
"""

from __future__ import annotations

from collections.abc import Sequence

from iree.compiler import ir

from reducer.core.strategy import Edit, MLIRProgram, Strategy
from strategies._ir.paths import walk_paths
from strategies._ir.rewriter import Rewriter

_NOT_FILLABLE = frozenset({"linalg.fill", "linalg.yield", "linalg.index"})


def _fillable(op: ir.Operation) -> bool:
    if not op.name.startswith("linalg.") or op.name in _NOT_FILLABLE or not len(op.results):
        return False
    inits = list(op.operands)[-len(op.results) :]
    return all(
        isinstance(r.type, ir.RankedTensorType)
        and i.type == r.type
        and isinstance(r.type.element_type, (ir.IntegerType, ir.FloatType))
        for r, i in zip(op.results, inits)
    )


class IreeSimplify(Strategy[MLIRProgram]):
    name = "iree-simplify"
    summary = "linalg op -> linalg.fill of zero into its init; remove util.optimization_barrier"
    #: The linalg dialect's Python DSL takes 0.15 s to load: not on the way to the first check.
    deferred_imports = ("iree.compiler.dialects.linalg",)

    def opportunities(self, program: MLIRProgram) -> list[Edit]:
        edits = []
        for path, op in walk_paths(program.root):
            if op.name == "util.optimization_barrier":
                edits.append(Edit("unbarrier", path))
            elif len(path) > 3 and _fillable(op):
                edits.append(Edit("fill", path))
        return edits

    def apply(self, program: MLIRProgram, edits: Sequence[Edit]) -> ir.Operation | None:
        rewriter = Rewriter(program)
        root = rewriter.root
        for e in sorted(edits, key=lambda e: e.path, reverse=True):  # inner ops first
            op = rewriter.op(e.path)
            if op is None:
                continue
            if e.kind == "unbarrier":
                rewriter.replace_op(e.path, list(op.operands))
                continue
            from iree.compiler.dialects import linalg  # deferred (see below)

            inits = list(op.operands)[-len(op.results) :]
            fills = []
            for init in inits:
                zero = rewriter.zero(ir.RankedTensorType(init.type).element_type, op)
                with op.location, ir.InsertionPoint(op):
                    fills.append(linalg.fill(zero, outs=[init]))
            rewriter.replace_op(e.path, fills)
        rewriter.finish()
        return root
