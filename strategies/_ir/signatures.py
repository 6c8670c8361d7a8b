"""Changing a function's signature together with its returns and every call of it: what
remove-results-and-arguments, arguments-to-constants and values-to-return share."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeVar

from iree.compiler import ir

from strategies._ir.paths import Path, attributes_of, get_attr, is_terminator

if TYPE_CHECKING:  # pragma: no cover  (the rewriter uses function_type: no import cycle at run time)
    from strategies._ir.rewriter import Rewriter

X = TypeVar("X")


def function_type(func: ir.Operation) -> ir.FunctionType:
    return ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)


def set_function_type(func: ir.Operation, inputs: list[ir.Type], results: list[ir.Type]) -> None:
    func.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(inputs, results))


def _without(items: Sequence[X], drop: set[int]) -> list[X]:
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
