"""globals: fold a global into its uses, and drop extra executable variants.

A `util.global` / `ml_program.global` goes together with its stores; each load becomes
a constant of the global's initial value (a zero when it has none), so the ops that
read it stay fed. split-functions can delete a global too, but then every load becomes
a zero, which loses a bug that needs the real value. `hal.executable.variant`s beyond
the first of an executable are offered one by one.
"""

from __future__ import annotations

from collections.abc import Sequence

from iree.compiler import ir

from reducer.core.strategy import Edit, MLIRProgram, Strategy
from strategies._ir.paths import get_attr, op_at, symbol_name, walk_paths
from strategies._ir.rewriter import Rewriter
from strategies._ir.symbols import Symbols

#: global op -> (attribute holding its initial value, load ops, store ops)
GLOBALS = {
    "util.global": ("initial_value", {"util.global.load"}, {"util.global.store"}),
    "ml_program.global": (
        "value",
        {"ml_program.global_load", "ml_program.global_load_const"},
        {"ml_program.global_store"},
    ),
}


class Globals(Strategy[MLIRProgram]):
    name = "globals"
    summary = "fold a global into its loads (as constants) and drop its stores; drop extra executable variants"

    def opportunities(self, program: MLIRProgram) -> list[Edit]:
        users = program.analysis(Symbols).users
        edits = []
        variants_seen: dict[tuple[int, ...], int] = {}
        for path, op in walk_paths(program.root):
            if op.name in GLOBALS and len(path) == 3:
                name = symbol_name(op)
                _attr, loads, stores = GLOBALS[op.name]
                if name is not None and all(op_at(program, p).name in loads | stores for p in users.get(name, [])):
                    edits.append(Edit("fold", path, name))
            elif op.name == "hal.executable.variant":
                parent = path[:-3]
                variants_seen[parent] = variants_seen.get(parent, 0) + 1
                if variants_seen[parent] > 1:
                    edits.append(Edit("drop-variant", path))
        return edits

    def apply(self, program: MLIRProgram, edits: Sequence[Edit]) -> ir.Operation | None:
        rewriter = Rewriter(program)
        root = rewriter.root
        users = program.analysis(Symbols).users
        for e in sorted(edits, key=lambda e: e.path, reverse=True):
            op = rewriter.op(e.path)
            if op is None:
                continue
            if e.kind == "drop-variant":
                rewriter.erase(e.path)
                continue
            attr_name, loads, _stores = GLOBALS[op.name]
            initial = get_attr(op, attr_name)
            for path in users.get(e.arg, []):
                user = rewriter.op(path)
                if user is None:
                    continue
                if user.name in loads:
                    t = user.results[0].type
                    value = None
                    if initial is not None and _typed(initial) == t:
                        with user.location:
                            value = ir.Operation.create(
                                "arith.constant",
                                results=[t],
                                attributes={"value": initial},
                                ip=ir.InsertionPoint(user),
                            ).result
                    rewriter.replace_op(path, [value if value is not None else rewriter.zero(t, user)])
                else:
                    rewriter.replace_op(path, [])
            rewriter.erase(e.path)
        rewriter.finish()
        return root


def _typed(attr: ir.Attribute) -> ir.Type | None:
    try:
        return attr.type
    except (AttributeError, ValueError, TypeError):
        return None
