"""unused-results: drop the unused results of multi-result ops, with what their bodies yield.

A fused `linalg.generic` or a loop often computes several values of which the bug needs
one; drop-ops cannot take one result away (it erases the whole op) and the pruner never
touches an op that still has a used result. So: a `linalg.generic` loses the output
(operand, indexing map, block argument, yielded value) of an unused result whose block
argument the body does not read; an `scf.for` loses the iter_arg; an `scf.while` stops
forwarding the value (`scf.condition` operand and `do` block argument). What computed
the dropped yielded value is pruned.
"""

from __future__ import annotations

from collections.abc import Sequence

from iree.compiler import ir

from reducer.core.strategy import Edit, MLIRProgram, Strategy
from strategies._ir.paths import Path, attributes_of, has_uses, walk_paths
from strategies._ir.rewriter import Rewriter, drop_for_iter_args


def _droppable(op: ir.Operation) -> list[int]:
    """Indices of results this op can lose."""
    if op.name not in ("linalg.generic", "scf.for", "scf.while") or len(op.results) < 2 and op.name != "scf.for":
        return []
    unused = [k for k, r in enumerate(op.results) if not has_uses(r)]
    if op.name != "scf.for" and len(unused) == len(op.results):
        return []  # nothing uses the op: drop-ops and the pruner erase it whole
    if op.name == "linalg.generic":
        block = op.regions[0].blocks[0]
        n_in = len(op.operands) - len(op.results)
        if len(block.arguments) != len(op.operands):
            return []
        return [k for k in unused if not has_uses(block.arguments[n_in + k])]
    if op.name == "scf.while":
        after = op.regions[1].blocks[0]
        return [k for k in unused if not has_uses(after.arguments[k])]
    return unused


class UnusedResults(Strategy[MLIRProgram]):
    name = "unused-results"
    summary = "drop unused results of linalg.generic / scf.for / scf.while with the values their bodies yield"

    def opportunities(self, program: MLIRProgram) -> list[Edit]:
        return [
            Edit("result", path, k) for path, op in walk_paths(program.root) if len(path) > 3 for k in _droppable(op)
        ]

    def apply(self, program: MLIRProgram, edits: Sequence[Edit]) -> ir.Operation | None:
        rewriter = Rewriter(program)
        root = rewriter.root
        plan: dict[Path, set[int]] = {}
        for e in edits:
            plan.setdefault(e.path, set()).add(e.arg)
        for path in sorted(plan, reverse=True):  # inner ops first: swapping an outer one keeps inner paths
            op = rewriter.op(path)
            if op is None:
                continue
            drop = plan[path] & set(_droppable(op))
            if not drop:
                continue
            if op.name == "scf.for":
                drop_for_iter_args(rewriter, path, op, drop)
            elif op.name == "linalg.generic":
                _drop_generic_outputs(rewriter, path, op, drop)
            else:
                _drop_while_results(rewriter, path, op, drop)
        rewriter.finish()
        return root


def _keep(items: list, drop: set[int]) -> list:
    return [x for k, x in enumerate(items) if k not in drop]


def _rebuild_terminator(rewriter: Rewriter, block: ir.Block, drop: set[int], offset: int = 0) -> None:
    """Replace block's terminator by one without operands offset+k (k in drop)."""
    term = list(block.operations)[-1].operation
    operands = list(term.operands)
    shifted = {offset + k for k in drop}
    rewriter.note_feeders(operands[k] for k in shifted)
    with term.location:
        ir.Operation.create(
            term.name, operands=_keep(operands, shifted), attributes=attributes_of(term), ip=ir.InsertionPoint(term)
        )
    rewriter.erase_op(term)


def _move_body(rewriter: Rewriter, path: Path, old: ir.Operation, new: ir.Operation, drop: set[int]) -> None:
    """Hand the regions over, rewire the kept results and put new in old's place."""
    for region, target in zip(old.regions, new.regions):
        for block in list(region.blocks):
            block.append_to(target)
    kept = iter(new.results)
    for k, result in enumerate(old.results):
        if k not in drop:
            result.replace_all_uses_with(next(kept))
    rewriter.swap(path, new)


def _drop_generic_outputs(rewriter: Rewriter, path: Path, op: ir.Operation, drop: set[int]) -> None:
    operands = list(op.operands)
    n_out = len(op.results)
    n_in = len(operands) - n_out
    block = op.regions[0].blocks[0]
    _rebuild_terminator(rewriter, block, drop)
    for k in sorted(drop, reverse=True):
        block.erase_argument(n_in + k)
    rewriter.note_feeders(operands[n_in + k] for k in drop)
    attributes = attributes_of(op)
    maps = list(ir.ArrayAttr(attributes["indexing_maps"]))
    attributes["indexing_maps"] = ir.ArrayAttr.get(maps[:n_in] + _keep(maps[n_in:], drop))
    attributes["operandSegmentSizes"] = ir.DenseI32ArrayAttr.get([n_in, n_out - len(drop)])
    with op.location:
        new = ir.Operation.create(
            op.name,
            results=_keep([r.type for r in op.results], drop),
            operands=operands[:n_in] + _keep(operands[n_in:], drop),
            attributes=attributes,
            regions=1,
            ip=ir.InsertionPoint(op),
        )
    _move_body(rewriter, path, op, new, drop)


def _drop_while_results(rewriter: Rewriter, path: Path, op: ir.Operation, drop: set[int]) -> None:
    before, after = op.regions[0].blocks[0], op.regions[1].blocks[0]
    _rebuild_terminator(rewriter, before, drop, offset=1)  # scf.condition(%cond) %forwarded...
    for k in sorted(drop, reverse=True):
        after.erase_argument(k)
    with op.location:
        new = ir.Operation.create(
            op.name,
            results=_keep([r.type for r in op.results], drop),
            operands=list(op.operands),
            attributes=attributes_of(op),
            regions=2,
            ip=ir.InsertionPoint(op),
        )
    _move_body(rewriter, path, op, new, drop)
