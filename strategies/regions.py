"""regions: simplify ops with regions the way an engineer does by hand.

`scf.if` becomes one of its branches; `scf.for` runs its body once or not at all, or
loses an iter_arg (its uses inside and after the loop get the initial value);
`scf.while` and `scf.forall` are skipped; `scf.execute_region` and IREE's
`flow.dispatch.region` are unwrapped into plain ops; a `linalg.generic` body yields one
of its block arguments instead of computing. No MLIR reducer does these today,
yet a bug "deep inside a loop" needs them to surface.
"""

from __future__ import annotations

from collections.abc import Sequence

from iree.compiler import ir

from reducer.core.strategy import Edit, MLIRProgram, Strategy
from strategies._ir.paths import has_uses, walk_paths
from strategies._ir.rewriter import Rewriter, drop_for_iter_args, inline_block

#: op name -> edit kinds offered for it (checked further in `_kinds`)
_KINDS: dict[str, tuple[str, ...]] = {
    "scf.if": ("then", "else"),
    "scf.for": ("skip", "once"),
    "scf.while": ("skip",),
    "scf.forall": ("skip",),
    "scf.execute_region": ("unwrap",),
    "flow.dispatch.region": ("unwrap",),
}


def _kinds(op: ir.Operation) -> list[tuple[str, object]]:
    kinds = list(_KINDS.get(op.name, ()))
    results = [r.type for r in op.results]
    if op.name == "scf.while" and [o.type for o in op.operands] != results:
        kinds.remove("skip")
    if op.name in ("scf.execute_region", "flow.dispatch.region") and len(op.regions[0].blocks) != 1:
        kinds.remove("unwrap")
    out: list[tuple[str, object]] = [(k, None) for k in kinds]
    if op.name == "scf.for":
        # an unused result goes with unused-results; here a used one takes its initial value
        out += [("drop-iter-arg", k) for k, r in enumerate(op.results) if has_uses(r)]
    if op.name == "linalg.generic":
        block = op.regions[0].blocks[0]
        term = list(block.operations)[-1].operation
        for j, yielded in enumerate(term.operands):
            if yielded.owner != block:  # not already a block argument
                for k, arg in enumerate(block.arguments):
                    if arg.type == yielded.type:
                        out.append(("yield-argument", (j, k)))
    return out


class Regions(Strategy[MLIRProgram]):
    name = "regions"
    summary = "scf.if -> a branch, loops -> once or never, unwrap regions, linalg body -> yield an input"

    def opportunities(self, program: MLIRProgram) -> list[Edit]:
        return [
            Edit(kind, path, arg)
            for path, op in walk_paths(program.root)
            if len(op.regions) and len(path) > 3
            for kind, arg in _kinds(op)
        ]

    def apply(self, program: MLIRProgram, edits: Sequence[Edit]) -> ir.Operation | None:
        rewriter = Rewriter(program)
        root = rewriter.root
        done: set[tuple[int, ...]] = set()
        dropped_iter_args: dict[tuple[int, ...], set[int]] = {}
        for e in edits:
            if e.kind == "drop-iter-arg":
                dropped_iter_args.setdefault(e.path, set()).add(e.arg)
        # innermost first: unwrapping an outer op moves the inner ones out of the table's paths
        for e in sorted(edits, key=lambda e: e.path, reverse=True):
            if e.path in done:
                continue  # one edit per op in a subset: the first listed wins
            op = rewriter.op(e.path)
            if op is None:
                continue
            done.add(e.path)
            if e.kind == "drop-iter-arg":
                drop_for_iter_args(rewriter, e.path, op, dropped_iter_args[e.path])
                continue
            values = _simplify(rewriter, op, e)
            if values is not None:
                rewriter.replace_op(e.path, values)
        rewriter.finish()
        return root


def _simplify(rewriter: Rewriter, op: ir.Operation, e: Edit) -> list[ir.Value] | None:
    """Rewrite op per edit; return the values its results become (None: op stays)."""
    operands = list(op.operands)
    if e.kind in ("then", "else"):
        region = op.regions[0 if e.kind == "then" else 1]
        if not len(region.blocks):
            return []  # no else branch (and so no results): the if goes
        return inline_block(op, region.blocks[0], [])
    if e.kind == "skip":  # the loop runs zero times: results are the initial values
        n = len(op.results)
        return operands[len(operands) - n :] if n else []
    if e.kind == "once":
        lower, inits = operands[0], operands[3:]
        return inline_block(op, op.regions[0].blocks[0], [lower, *inits])
    if e.kind == "unwrap":
        return inline_block(op, op.regions[0].blocks[0], [])
    if e.kind == "yield-argument":
        j, k = e.arg
        block = op.regions[0].blocks[0]
        term = list(block.operations)[-1].operation
        rewriter.note_feeders([term.operands[j]])
        term.operands[j] = block.arguments[k]
        return None
    return None
