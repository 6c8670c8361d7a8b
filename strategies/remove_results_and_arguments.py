"""remove-results-and-arguments: shrink function signatures and their call sites.

llvm-reduce's arguments and return-values passes for MLIR: an argument nothing uses
goes from the function and from every func.call; a result goes from every return and
call (a caller that used it gets the usual replacement), and what computed it is
pruned. Functions referenced other than by func.call keep their signature.
"""

from __future__ import annotations

from collections.abc import Sequence

from iree.compiler import ir

from reducer.core.strategy import Edit, MLIRProgram, Strategy
from strategies._ir.paths import has_uses, op_at
from strategies._ir.rewriter import Rewriter
from strategies._ir.signatures import function_type, rewrite_signature
from strategies._ir.symbols import Symbols


class RemoveResultsAndArguments(Strategy[MLIRProgram]):
    name = "remove-results-and-arguments"
    summary = "drop unused function arguments and function results, updating callers"

    def opportunities(self, program: MLIRProgram) -> list[Edit]:
        fns = program.analysis(Symbols)
        args, results = [], []
        for name, path in fns.functions.items():
            if fns.fixed_signature(name):
                continue
            func = op_at(program, path)
            for k, arg in enumerate(func.regions[0].blocks[0].arguments):
                if not has_uses(arg):
                    args.append(Edit("argument", path, (name, k)))
            n = len(function_type(func).results)
            if fns.called(name) or n > 1:  # an entry point's only result is all it computes
                results += [Edit("result", path, (name, k)) for k in range(n)]
        return args + results

    def apply(self, program: MLIRProgram, edits: Sequence[Edit]) -> ir.Operation | None:
        rewriter = Rewriter(program)
        root = rewriter.root
        fns = program.analysis(Symbols)
        plan: dict[str, tuple[set[int], set[int]]] = {}
        for e in edits:
            name, k = e.arg
            drop_args, drop_results = plan.setdefault(name, (set(), set()))
            (drop_args if e.kind == "argument" else drop_results).add(k)
        for name, (drop_args, drop_results) in sorted(plan.items()):
            func = rewriter.table[fns.functions[name]]
            rewrite_signature(rewriter, func, fns.calls.get(name, []), drop_args, drop_results)
        rewriter.finish()
        return root
