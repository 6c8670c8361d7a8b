"""values-to-return: make an intermediate value the function's only result.

llvm-reduce's values-to-return for MLIR. Returning a value drops everything after it in
the function's body and whatever only fed the old results, in one candidate: a bug in
how a constant or a matmul is compiled survives, the rest of the model does not. The
function's result type becomes the value's; every `func.call` of it adapts (old
results of the new type use the new one, the others get the usual replacement). Only
single-block functions whose every reference is a call (or that nothing references).

The values exclude each other, so a sweep of them is a search for how much of a function
can go: a few probes per function, galloping from half of it towards its end, listed so
that the engine's halving chunks meet them in that order; after a commit the next round
gallops again on the shorter function (`exclusive`).
"""

from __future__ import annotations

from collections.abc import Sequence

from iree.compiler import ir

from reducer.core.strategy import Edit, MLIRProgram, Strategy
from strategies._ir.paths import Path, attributes_of, get_attr, has_uses, is_terminator, op_at, op_key, walk_paths
from strategies._ir.rewriter import Rewriter
from strategies._ir.signatures import function_type, set_function_type
from strategies._ir.symbols import Symbols


class ValuesToReturn(Strategy[MLIRProgram]):
    name = "values-to-return"
    summary = "return an intermediate value (or an argument) from its function, dropping everything after it"

    #: Its edits are alternatives per function: a sweep stops at its first commit, and the
    #: next round probes the shorter function afresh.
    exclusive = True

    def opportunities(self, program: MLIRProgram) -> list[Edit]:
        return list(program.analysis(_listed))

    def apply(self, program: MLIRProgram, edits: Sequence[Edit]) -> ir.Operation | None:
        rank = _ranked(program)
        fns = program.analysis(Symbols)
        chosen: dict[Path, Edit] = {}  # function -> its best-ranked edit in this subset
        for e in sorted(edits, key=lambda e: rank.get(e, len(rank))):
            chosen.setdefault(e.path[:3], e)
        if not chosen:
            return None
        rewriter = Rewriter(program)
        root = rewriter.root
        name_of = {path: name for name, path in fns.functions.items()}
        # A returned call to a function that changes too would change type under it: keep the caller's edit.
        for fpath, e in list(chosen.items()):
            if e.kind == "value":
                op = op_at(program, e.path)
                callee = get_attr(op, "callee") if op.name == "func.call" else None
                target = fns.functions.get(ir.FlatSymbolRefAttr(callee).value) if callee is not None else None
                if target is not None and target != fpath:
                    chosen.pop(target, None)
        new_types: dict[str, ir.Type] = {}
        for fpath, e in sorted(chosen.items()):
            func = rewriter.table[fpath]
            new_types[name_of[fpath]] = _truncate(rewriter, func, e)
        for name, t in sorted(new_types.items()):
            for path in fns.calls.get(name, []):
                _adapt_call(rewriter, path, t)
        rewriter.finish()
        return root


def _ranked(program: MLIRProgram) -> dict[Edit, int]:
    """Every edit with its position, once per program (apply reads it for every subset)."""
    return program.analysis(_ranking)


def _ranking(program: MLIRProgram) -> dict[Edit, int]:
    """Every edit with its position: most ops cut first, then program order."""
    fns = program.analysis(Symbols)
    scored: list[tuple[int, Edit]] = []
    for name, fpath in fns.functions.items():
        if fns.fixed_signature(name):
            continue
        func = op_at(program, fpath)
        if len(func.regions[0].blocks) != 1:
            continue  # a return in the entry block would leave the other blocks' returns behind
        scored += _spread(_candidates(fpath, func))
    scored.sort(key=lambda item: (-item[0], item[1].path, item[1].kind, item[1].arg))  # tuples: cheap to compare
    return {e: i for i, (_cut, e) in enumerate(scored)}


def _listed(program: MLIRProgram) -> list[Edit]:
    """The edits in the order a sweep should meet them: per function, its probes placed
    so that delta debugging's halving chunks (each applying its best-ranked value) try
    them from most to least cut, i.e. galloping from half the function to its end."""
    rank = _ranked(program)
    by_function: dict[Path, list[Edit]] = {}
    for e in rank:
        by_function.setdefault(e.path[:3], []).append(e)
    out: list[Edit] = []
    for probes in by_function.values():
        slots: list[Edit | None] = [None] * len(probes)
        for e, slot in zip(probes, _visit_order(len(probes))):
            slots[slot] = e
        out += [e for e in slots if e is not None]
    return out


def _visit_order(m: int) -> list[int]:
    """The positions of a list of m alternatives in the order a sweep of halving chunks
    first reaches them, when a chunk costs a check only if no position in it was reached."""
    order: list[int] = []
    reached: set[int] = set()
    chunk = m
    while chunk >= 1:
        for offset in range(0, m, chunk):
            if reached.isdisjoint(range(offset, min(offset + chunk, m))):
                order.append(offset)
                reached.add(offset)
        if chunk == 1:
            break
        chunk = (chunk + 1) // 2
    return order


#: Values offered per function and round. The alternatives exclude each other and most of
#: them fail when the bug sits late (they cut it), so offering every value costs a check
#: per value (benchmarks/README.md). Probes galloping from the middle of the cut order
#: to its end find how much of the body can go in a few checks (about one per halving);
#: the next round, on the shorter function, gallops again.
PER_FUNCTION = 8


def _spread(found: list[tuple[int, Edit]]) -> list[tuple[int, Edit]]:
    """At most PER_FUNCTION of a function's candidates, galloping from the middle of the
    cut order to its end (1/2, 3/4, 7/8, ... the last)."""
    found = sorted(found, key=lambda item: (-item[0], item[1].path, item[1].kind, item[1].arg))
    if len(found) <= PER_FUNCTION:
        return found
    last = len(found) - 1
    picked: list[int] = []
    for k in range(PER_FUNCTION - 1):
        i = round(last * (1 - 0.5 ** (k + 1)))
        if i not in picked:
            picked.append(i)
    if last not in picked:
        picked.append(last)
    return [found[i] for i in picked]


def _candidates(fpath: Path, func: ir.Operation) -> list[tuple[int, Edit]]:
    """(ops cut, edit) for each argument and each result of a top-level op of func.

    What stays is the value's backward slice plus the ops before it that have no results
    (side effects the rewriter does not prune) and their slices; everything else goes."""
    block = func.regions[0].blocks[0]
    ops = [o.operation for o in block.operations]
    if not ops or not is_terminator(ops[-1]):
        return []
    body = ops[:-1]
    index = {op_key(op): i for i, op in enumerate(body)}
    weight = [1 + sum(1 for _ in walk_paths(op)) for op in body]
    total = sum(weight)
    returned = list(ops[-1].operands)
    slices: list[int] = []  # bitset of the top-level ops each op needs
    for i, op in enumerate(body):
        need = 1 << i
        for inner in [op] + [o for _p, o in walk_paths(op)]:
            for value in inner.operands:
                owner = value.owner
                if not isinstance(owner, ir.Block):
                    j = index.get(op_key(owner.operation))
                    if j is not None and j != i:
                        need |= slices[j]
        slices.append(need)

    nested = {i: w - 1 for i, w in enumerate(weight) if w > 1}  # ops with regions weigh more

    def cut(kept: int) -> int:  # a popcount: this runs once per op of a function
        return total - kept.bit_count() - sum(extra for i, extra in nested.items() if kept >> i & 1)

    out: list[tuple[int, Edit]] = []
    for k, arg in enumerate(block.arguments):
        if returned != [arg]:
            out.append((total, Edit("argument", fpath, k)))
    effects = 0  # slices of the result-less ops so far: they stay
    for i, op in enumerate(body):
        n = cut(slices[i] | effects)
        for k, result in enumerate(op.results):
            if n > 0 and returned != [result]:
                out.append((n, Edit("value", fpath + (0, 0, i), k)))
        if not len(op.results):
            effects |= slices[i]
    return out


def _truncate(rewriter: Rewriter, func: ir.Operation, e: Edit) -> ir.Type:
    """Return e's value from func, erasing every op after it; the new result type."""
    block = func.regions[0].blocks[0]
    ops = [o.operation for o in block.operations]
    term = ops[-1]
    if e.kind == "argument":
        value, after = block.arguments[e.arg], ops
    else:
        op = rewriter.table[e.path]
        value = op.results[e.arg]
        after = ops[next(i for i, o in enumerate(ops) if op_key(o) == op_key(op)) + 1 :]
    name = term.name
    for op in after:
        rewriter.note_feeders(op.operands)
        rewriter.note_feeders(v for _p, inner in walk_paths(op) for v in inner.operands)
    for op in reversed(after):
        for result in op.results:  # only erased later ops used it; a graph region might not
            if has_uses(result):
                result.replace_all_uses_with(rewriter.replacement(result, op))
        rewriter.erase_op(op)
    with func.location:
        ir.Operation.create(name, operands=[value], ip=ir.InsertionPoint(block))
    set_function_type(func, list(function_type(func).inputs), [value.type])
    if get_attr(func, "res_attrs") is not None:
        func.attributes["res_attrs"] = ir.ArrayAttr.get([ir.DictAttr.get({})])
    return value.type


def _adapt_call(rewriter: Rewriter, path: Path, t: ir.Type) -> None:
    """The call now yields one value of type t: old results of that type use it."""
    call = rewriter.op(path)
    if call is None:
        return  # erased with what followed a returned value
    with call.location:
        new = ir.Operation.create(
            call.name,
            results=[t],
            operands=list(call.operands),
            attributes=attributes_of(call),
            ip=ir.InsertionPoint(call),
        )
    rewriter.replace_op(path, [new.result if r.type == t else None for r in call.results])
