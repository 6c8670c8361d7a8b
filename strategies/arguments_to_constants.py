"""arguments-to-constants: replace a function argument by a zero constant.

The reverse of values-to-arguments. In a called function the argument then leaves the
signature and every call site, freeing what computed it in the callers; in an entry
point it adds an op, so there it is a move, tried once the program is 1-minimal, that
lets canonicalization fold what the argument fed.
"""

from __future__ import annotations

from collections.abc import Sequence

from iree.compiler import ir

from reducer.core.strategy import Edit, MLIRProgram, Strategy
from strategies._ir.paths import has_uses, op_at
from strategies._ir.rewriter import Rewriter, zero_literal
from strategies._ir.signatures import rewrite_signature
from strategies._ir.symbols import Symbols


class ArgumentsToConstants(Strategy[MLIRProgram]):
    name = "arguments-to-constants"
    summary = "replace a function argument by a zero constant (dropping it from call sites)"
    moves = True

    def opportunities(self, program: MLIRProgram) -> list[Edit]:
        fns = program.analysis(Symbols)
        edits = []
        for name, path in fns.functions.items():
            if fns.fixed_signature(name):
                continue
            func = op_at(program, path)
            for k, arg in enumerate(func.regions[0].blocks[0].arguments):
                if has_uses(arg) and zero_literal(arg.type) is not None:
                    edits.append(Edit("constant", path, (name, k)))
        return edits

    def apply(self, program: MLIRProgram, edits: Sequence[Edit]) -> ir.Operation | None:
        rewriter = Rewriter(program)
        root = rewriter.root
        fns = program.analysis(Symbols)
        by_function: dict[str, set[int]] = {}
        for e in edits:
            name, k = e.arg
            by_function.setdefault(name, set()).add(k)
        for name, ks in sorted(by_function.items()):
            func = rewriter.table[fns.functions[name]]
            entry = func.regions[0].blocks[0]
            first = next(iter(entry.operations)).operation
            for k in sorted(ks):
                arg = entry.arguments[k]
                zero = rewriter.zero(arg.type, first)
                assert zero is not None  # only arguments with a zero literal are listed
                arg.replace_all_uses_with(zero)
            # the arguments leave the signature and every call site
            rewrite_signature(rewriter, func, fns.calls.get(name, []), drop_args=ks, drop_results=set())
        rewriter.finish()
        return root
