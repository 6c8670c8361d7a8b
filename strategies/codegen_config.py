"""codegen-config: drop IREE's codegen configuration from lowered IR.

A pass-level repro of a codegen failure carries the configuration the compiler chose:
`translation_info` on each dispatch function, `lowering_config` on the ops it tiles
(`compilation_info` where the user preset one). The `attributes` strategy leaves them
alone (their names have no dialect prefix), yet a failure often does not need them, and
without them the repro reads like a lit test. Offered: every attribute of one of those
names whose value is in the iree_codegen, iree_cpu or iree_gpu dialect, first each name
everywhere at once (the coarse cut), then each occurrence alone.

They are discardable on the ops that carry them in iree-base-compiler 3.13 (func.func,
linalg ops), so they are deleted through the bindings. Deleting an inherent one there
would leave a null property that crashes the printer (see `attributes`), so an op that
holds one among its properties is not offered.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence

from iree.compiler import ir

from reducer.core.strategy import Edit, MLIRProgram, Strategy
from strategies._ir.paths import Path, Paths, walk_paths

#: The attribute names codegen configuration comes under, in the order they are offered.
NAMES = ("translation_info", "compilation_info", "lowering_config")
_DIALECTS = ("#iree_codegen.", "#iree_cpu.", "#iree_gpu.")
#: Generic form up to its properties: `%r = "op"(%a, %b) [^bb1] <{`.
_PROPS = re.compile(r'^\s*(?:[^"=]*= )?"[^"]+"\([^)]*\)(?: \[[^\]]*\])? <\{')


def _properties(op: ir.Operation) -> str:
    """The text of op's properties (its inherent attributes), '' if it has none."""
    text = op.get_asm(print_generic_op_form=True, skip_regions=True, assume_verified=True)
    m = _PROPS.match(text)
    if not m:
        return ""
    depth, i = 1, m.end()
    while i < len(text) and depth:
        c = text[i]
        if c == '"':
            i = text.index('"', i + 1) if '"' in text[i + 1 :] else len(text)
        elif c == "-" and text.startswith("->", i):
            i += 1
        elif c in "<{[(":
            depth += 1
        elif c in ">}])":
            depth -= 1
        i += 1
    return text[m.end() : i]


def _configs(ops: Iterable[tuple[Path, ir.Operation]]) -> Iterator[tuple[Path, str]]:
    for path, op in ops:
        found = [n for n in NAMES if n in op.attributes and str(op.attributes[n]).startswith(_DIALECTS)]
        if found:
            inherent = _properties(op)
            yield from ((path, n) for n in found if not re.search(rf"\b{n} = ", inherent))


class CodegenConfig(Strategy[MLIRProgram]):
    name = "codegen-config"
    summary = "drop iree_codegen lowering_config, translation_info, compilation_info: each kind, then each one"

    def opportunities(self, program: MLIRProgram) -> list[Edit]:
        found = list(_configs(program.analysis(Paths).items()))  # the walk other strategies share
        kinds = [Edit("all", (), n) for n in NAMES if any(name == n for _, name in found)]
        return kinds + [Edit("drop", path, name) for path, name in found]

    def apply(self, program: MLIRProgram, edits: Sequence[Edit]) -> ir.Operation | None:
        root = program.clone()
        everywhere = {e.arg for e in edits if e.kind == "all"}
        one = {(e.path, e.arg) for e in edits if e.kind == "drop"}
        table = dict(walk_paths(root))
        for path, name in _configs(table.items()):
            if name in everywhere or (path, name) in one:
                del table[path].attributes[name]
        return root
