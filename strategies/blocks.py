"""blocks: shrink a control-flow graph the way llvm-reduce's block passes do.

Lowered IR (what a crash reproducer of a codegen pass holds) is `cf` blocks and branches,
where op-level removal cannot help: a `cf.cond_br` becomes a `cf.br` to one of its
destinations, the blocks no longer reachable go, and a block whose only predecessor
branches straight to it is merged into that predecessor. The workspace verifies each
candidate (a merged block's values must still dominate their uses).
"""

from __future__ import annotations

from collections.abc import Sequence

from iree.compiler import ir

from reducer.core.strategy import Edit, MLIRProgram, Strategy
from strategies._ir.paths import walk_paths


class Blocks(Strategy[MLIRProgram]):
    name = "blocks"
    summary = "cf.cond_br -> cf.br to one side (unreachable blocks go); a block merged into its only predecessor"

    def opportunities(self, program: MLIRProgram) -> list[Edit]:
        edits = []
        for path, op in walk_paths(program.root):
            if op.name == "cf.cond_br":
                edits += [Edit("to-true", path), Edit("to-false", path)]
            elif op.name == "cf.br" and len(list(op.successors[0].predecessors)) == 1:
                edits.append(Edit("merge", path))
        return edits

    def apply(self, program: MLIRProgram, edits: Sequence[Edit]) -> ir.Operation | None:
        root = program.clone()
        table = dict(walk_paths(root))
        regions: dict[tuple[int, ...], ir.Region] = {}
        done: set[tuple[int, ...]] = set()
        with root.context, ir.Location.unknown():
            for e in sorted(edits, key=lambda e: e.path, reverse=True):
                op = table.get(e.path)
                if op is None or e.path in done:
                    continue
                done.add(e.path)
                regions.setdefault(e.path[:-2], op.block.region)
                if e.kind == "merge":
                    _merge(op)
                else:
                    _fold(op, e.kind == "to-true")
            # Innermost first: dropping an outer block may take a region listed here with it.
            for key in sorted(regions, key=len, reverse=True):
                _drop_unreachable(regions[key])
        return root


def _fold(op: ir.Operation, true: bool) -> None:
    """cf.cond_br -> cf.br to one destination, with that destination's operands."""
    sizes = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))
    operands = list(op.operands)
    start = 1 if true else 1 + sizes[1]
    taken = operands[start : start + sizes[1 if true else 2]]
    ir.Operation.create("cf.br", operands=taken, successors=[op.successors[0 if true else 1]], ip=ir.InsertionPoint(op))
    op.erase()


def _merge(br: ir.Operation) -> None:
    """The br's destination (whose only predecessor is this block) joins this block."""
    dest = br.successors[0]
    if dest == br.block:
        return
    for arg, value in zip(dest.arguments, br.operands):
        arg.replace_all_uses_with(value)
    for op in list(dest.operations):
        op.operation.move_before(br)
    br.erase()


def _drop_unreachable(region: ir.Region) -> None:
    """Blocks no branch reaches from the entry go (a value they define is used only in
    blocks they dominate, which go too). The bindings cannot erase a block: it moves
    into a detached op that is then erased."""
    blocks = list(region.blocks)
    if len(blocks) < 2:
        return
    reached = [blocks[0]]
    for block in reached:
        ops = list(block.operations)
        for succ in ops[-1].operation.successors if ops else []:
            if not any(succ == b for b in reached):
                reached.append(succ)
    gone = [b for b in blocks if not any(b == r for r in reached)]
    if not gone:
        return
    trash = ir.Operation.create("scf.execute_region", regions=1)
    for block in gone:
        block.append_to(trash.regions[0])
    trash.erase()
