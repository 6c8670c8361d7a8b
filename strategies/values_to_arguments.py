"""values-to-arguments: turn an op's results into new arguments of its function.

Everything that only fed the op goes with it, so one candidate can cut the whole
backward slice of a value: the move that takes a compiler bug "at the boundary"
(e.g. IREE's `tensor<7xi4>` byte-count error fires on an argument as well as on a
computed value). Only in functions nothing calls, whose callers need no new value.
"""

from __future__ import annotations

from collections.abc import Sequence

from iree.compiler import ir

from reducer.core.strategy import Edit, MLIRProgram, Strategy
from strategies._ir.paths import body_ops, cuts_nothing
from strategies._ir.rewriter import Rewriter
from strategies._ir.symbols import Symbols


class ValuesToArguments(Strategy[MLIRProgram]):
    name = "values-to-arguments"
    summary = "make an op's results new function arguments, cutting what computed them"

    def opportunities(self, program: MLIRProgram) -> list[Edit]:
        fns = program.analysis(Symbols)
        entry = {path for name, path in fns.functions.items() if not fns.called(name)}
        edits = []
        for path, op in body_ops(program.root):
            if path[:3] not in entry or not len(op.results):
                continue
            if op.name != "arith.constant" and cuts_nothing(op):  # drop-ops tries these
                continue
            edits.append(Edit("to-argument", path))
        edits.reverse()  # later values have the larger backward slices
        return edits

    def apply(self, program: MLIRProgram, edits: Sequence[Edit]) -> ir.Operation | None:
        rewriter = Rewriter(program)
        root = rewriter.root
        done = False
        for path in sorted(e.path for e in edits):
            op = rewriter.op(path)
            if op is None:
                continue
            args = [rewriter.new_argument(r.type, op) for r in op.results]
            if any(a is None for a in args):
                continue  # nested in an isolated region that is not a function
            rewriter.replace_op(path, args)
            done = True
        rewriter.finish()
        return root if done else None
