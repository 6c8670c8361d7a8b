"""attributes: drop attributes one at a time, and strip locations in one step.

Offered: discardable attributes (dialect-prefixed names, e.g. `iree.abi.*`,
`hal.*`), argument and result attribute dictionaries, any attribute of an op that is
not registered (nothing requires it), and the optional flags compilers print inline
(`fastmath<...>`, `overflow<...>`), removed from the text: deleting such an inherent
attribute through the bindings leaves a null property that crashes the printer
(iree-base-compiler 3.13).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from iree.compiler import ir

from reducer.core import ir as irutil
from reducer.core.strategy import Edit, MLIRProgram, Strategy
from strategies._ir.paths import walk_paths

#: Optional inherent flags, removed from the text in one edit per kind.
INLINE_FLAGS = {"fastmath": re.compile(r" fastmath<[^>]*>"), "overflow": re.compile(r" overflow<[^>]*>")}
_LOC = re.compile(r"\bloc\(")


def _droppable(op: ir.Operation, name: str) -> bool:
    if name in irutil.REQUIRED_ATTRIBUTES:
        return False
    return irutil.discardable(name) or not op.context.is_registered_operation(op.name)


class Attributes(Strategy[MLIRProgram]):
    name = "attributes"
    summary = "drop discardable and optional attributes one at a time; strip all locations at once"

    def opportunities(self, program: MLIRProgram) -> list[Edit]:
        edits = []
        if _LOC.search(program.text) and "loc(unknown)" not in program.text:
            edits.append(Edit("strip-locations"))
        edits += [Edit("flag", (), kind) for kind, pattern in INLINE_FLAGS.items() if pattern.search(program.text)]
        for path, op in walk_paths(program.root):
            edits += [Edit("drop", path, name) for name in op.attributes if _droppable(op, name)]
        return edits

    def apply(self, program: MLIRProgram, edits: Sequence[Edit]) -> ir.Operation | str | None:
        root = program.clone()
        table = dict(walk_paths(root))
        for e in edits:
            if e.kind == "drop" and e.arg in table[e.path].attributes:
                del table[e.path].attributes[e.arg]
        flags = [INLINE_FLAGS[e.arg] for e in edits if e.kind == "flag"]
        strip = any(e.kind == "strip-locations" for e in edits)
        if not flags and not strip:
            return root
        # printed without locations, the text re-parses with every location unknown
        text = root.get_asm(enable_debug_info=not strip and bool(_LOC.search(program.text)))
        for pattern in flags:
            text = pattern.sub("", text)
        return text
