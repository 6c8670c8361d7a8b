"""remove-results-and-arguments: shrink function signatures and their call sites.

llvm-reduce's arguments and return-values passes for MLIR: an argument nothing uses
goes from the function and from every func.call; a result goes from every return and
call (a caller that used it gets the usual replacement), and what computed it is
pruned. Functions referenced other than by func.call keep their signature.
"""

from __future__ import annotations

from collections.abc import Sequence

from iree.compiler import ir

from reducer.core.strategy import Edit, Program, Strategy
from strategies._ir import (
    Path,
    Rewriter,
    attributes_of,
    function_type,
    functions,
    get_attr,
    has_uses,
    is_terminator,
    op_at,
    set_function_type,
)


class RemoveResultsAndArguments(Strategy):
    name = "remove-results-and-arguments"
    summary = "drop unused function arguments and function results, updating callers"

    def opportunities(self, program: Program) -> list[Edit]:
        assert program.root is not None
        fns = functions(program.memo, program.root)
        args, results = [], []
        for name, path in fns.paths.items():
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

    def apply(self, program: Program, edits: Sequence[Edit]) -> ir.Operation | None:
        root = program.clone()
        fns = functions(program.memo, program.root)
        rewriter = Rewriter(root)
        plan: dict[str, tuple[set[int], set[int]]] = {}
        for e in edits:
            name, k = e.arg
            drop_args, drop_results = plan.setdefault(name, (set(), set()))
            (drop_args if e.kind == "argument" else drop_results).add(k)
        for name, (drop_args, drop_results) in sorted(plan.items()):
            func = rewriter.table[fns.paths[name]]
            rewrite_signature(rewriter, func, fns.calls.get(name, []), drop_args, drop_results)
        rewriter.finish()
        return root


def _without(items: list, drop: set[int]) -> list:
    return [x for i, x in enumerate(items) if i not in drop]


def rewrite_signature(
    rewriter: Rewriter, func: ir.Operation, calls: list[Path], drop_args: set[int], drop_results: set[int]
) -> None:
    """Remove arguments drop_args (which must be unused) and results drop_results from
    func, its returns and every call."""
    entry = func.regions[0].blocks[0]
    for k in sorted(drop_args, reverse=True):
        entry.erase_argument(k)
    ftype = function_type(func)
    set_function_type(func, _without(list(ftype.inputs), drop_args), _without(list(ftype.results), drop_results))
    for attr_name, drop in (("arg_attrs", drop_args), ("res_attrs", drop_results)):
        attr = get_attr(func, attr_name)
        if attr is not None and drop:
            func.attributes[attr_name] = ir.ArrayAttr.get(_without(list(ir.ArrayAttr(attr)), drop))
    if drop_results:
        for block in func.regions[0].blocks:
            ops = [o.operation for o in block.operations]
            if not ops or not is_terminator(ops[-1]):
                continue
            term = ops[-1]
            operands = list(term.operands)
            rewriter.note_feeders(operands[k] for k in drop_results if k < len(operands))
            with term.location:
                ir.Operation.create(
                    term.name,
                    operands=_without(operands, drop_results),
                    attributes=attributes_of(term),
                    ip=ir.InsertionPoint(term),
                )
            rewriter.erase_op(term)
    for path in calls:
        call = rewriter.op(path)
        if call is None:
            continue
        operands = list(call.operands)
        rewriter.note_feeders(operands[k] for k in drop_args)
        results = list(call.results)
        with call.location:
            new = ir.Operation.create(
                call.name,
                results=[r.type for r in _without(results, drop_results)],
                operands=_without(operands, drop_args),
                attributes=attributes_of(call),
                ip=ir.InsertionPoint(call),
            )
        kept = iter(new.results)
        values = [None if k in drop_results else next(kept) for k in range(len(results))]
        rewriter.replace_op(path, values)
