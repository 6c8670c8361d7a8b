"""Op paths and walks: how a strategy names an op so the name survives a clone.

A path is (region, block, op) index triples from the module down; it means the same op
in the current module and in any clone of it. `Paths` is the table of one walk, made once
per program and shared by every strategy.

Binding pitfall handled here (iree-base-compiler 3.13): reading a `complex` dense
attribute raises TypeError (`get_attr` returns None instead).
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterable, Iterator, Set

from iree.compiler import ir

from reducer.core.ir import module_cut, split_module
from reducer.core.strategy import MLIRProgram

Path = tuple[int, ...]

_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_CAPSULE_NAME = b"iree.compiler.ir.Operation._CAPIPtr"


def op_key(op: ir.Operation) -> int:
    """The address of the underlying MLIR operation: a stable dictionary key. (The
    bindings' hash() of an op is that of the Python wrapper, and the wrapper of one op
    can be replaced after edits around it, which made hash-keyed indexes miss.)"""
    capsule = op._CAPIPtr
    return int(_capsule_pointer(capsule, _CAPSULE_NAME))


#: Ops whose region the printer hides (named linalg ops): nothing inside is worth editing.
_PRINTED_BODIES = frozenset({"linalg.generic", "linalg.map", "linalg.reduce"})


def opaque(op: ir.Operation) -> bool:
    return op.name.startswith("linalg.") and op.name not in _PRINTED_BODIES


def walk_paths(
    root: ir.Operation, prefix: Path = (), within: Set[Path] | None = None
) -> Iterator[tuple[Path, ir.Operation]]:
    """(path, op) for every op under root, parents first. `within`: enter only those of
    root's own ops (the rest are listed, not entered), e.g. the top-level functions an
    edit touches on a megabyte module.

    The implicit bodies of named linalg ops are not entered."""
    for r, region in enumerate(root.regions):
        for b, block in enumerate(region.blocks):
            for i, op in enumerate(block.operations):
                op = op.operation
                path = prefix + (r, b, i)
                yield path, op
                if len(op.regions) and not opaque(op) and (within is None or path in within):
                    yield from walk_paths(op, path)


def body_ops(root: ir.Operation) -> Iterator[tuple[Path, ir.Operation]]:
    """(path, op) for the ops a strategy may remove: inside a top-level symbol (the
    symbols themselves are split-functions' job), not terminators, not symbols."""
    for path, op in walk_paths(root):
        if len(path) > 3 and not is_terminator(op) and symbol_name(op) is None:
            yield path, op


def outermost(paths: Iterable[Path]) -> list[Path]:
    """Drop paths nested inside another path of the set: erasing the parent erases them."""
    ordered = sorted(set(paths))
    kept: list[Path] = []
    chosen: set[Path] = set()
    for p in ordered:
        if any(p[:n] in chosen for n in range(3, len(p), 3)):
            continue
        kept.append(p)
        chosen.add(p)
    return kept


def is_terminator(op: ir.Operation) -> bool:
    return op.has_trait(ir.IsTerminatorTrait)


def is_isolated(op: ir.Operation) -> bool:
    return op.name == "builtin.module" or op.has_trait(ir.IsIsolatedFromAboveTrait)


def get_attr(op: ir.Operation, name: str) -> ir.Attribute | None:
    try:
        return op.attributes[name] if name in op.attributes else None
    except TypeError:  # e.g. complex dense literals cannot be wrapped
        return None


def symbol_name(op: ir.Operation) -> str | None:
    attr = get_attr(op, "sym_name")
    return ir.StringAttr(attr).value if attr is not None else None


def is_function(op: ir.Operation) -> bool:
    return get_attr(op, "function_type") is not None and len(op.regions) > 0 and len(op.regions[0].blocks) > 0


def attributes_of(op: ir.Operation) -> dict[str, ir.Attribute]:
    """op's attributes, to give a rebuilt op (fewer operands, results or iter_args)."""
    return {name: get_attr(op, name) for name in op.attributes}


def has_uses(value: ir.Value) -> bool:
    # The bindings have no has_uses/use_empty; `uses` is an iterator, so look at one.
    return next(iter(value.uses), None) is not None


def cuts_nothing(op: ir.Operation) -> bool:
    """True when op's operands are all block arguments or constants: replacing op by a
    fresh value cuts no computation, so only dropping it (drop-ops) is worth a check."""
    for value in op.operands:
        owner = value.owner
        if not isinstance(owner, ir.Block) and owner.operation.name != "arith.constant":
            return False
    return True


def _cut_top_level(program: MLIRProgram) -> tuple[str, list[str]] | None:
    root = program.root
    if len(root.regions) != 1 or len(root.regions[0].blocks) != 1:
        return None
    ops = [op.operation for op in root.regions[0].blocks[0].operations]
    text = program.text
    start = 0 if text.startswith("module") else text.find("\nmodule") + 1  # after the aliases
    if start:
        plain = split_module(text[start:])
    else:  # the workspace's cut of the same text, made once per program
        plain = program.analysis(module_cut) if text.startswith("module") else None
    if plain is not None and len(plain[1]) == len(ops):
        # The printer's usual shape (most big modules): the same cut as the loop below
        # makes, at a tenth of its cost (issue 13).
        outside, texts = f"{text[:start]}{plain[0]}\n}}\n", plain[1]
    else:
        cut = _cut_lines(program.text)
        if cut is None:
            return None
        outside, texts = cut
    if len(texts) != len(ops):
        return None
    names = [symbol_name(op) for op in ops]
    if not all(n is None or f"@{n}" in t.split("\n", 1)[0] or f'@"{n}"' in t for n, t in zip(names, texts)):
        return None
    return outside, texts


def _cut_lines(text: str) -> tuple[str, list[str]] | None:
    lines = text.split("\n")
    starts = [i for i in range(len(lines)) if lines[i].startswith("module")]
    chunks: list[list[str]] = []
    outside: list[str] = []
    inside = False
    for i, line in enumerate(lines):
        if starts and i == starts[0]:
            inside = True
            outside.append(line)
        elif inside and line == "}":
            inside = False
            outside.append(line)
        elif inside and line.startswith("  ") and line[2:3] not in (" ", "}", "^", ")", ""):
            chunks.append([line])
        elif inside and chunks and line.startswith("  "):  # its insides, labels, closing brace
            chunks[-1].append(line)
        else:
            outside.append(line)
    if len(starts) != 1 or inside:
        return None
    return "\n".join(outside), ["\n".join(c) for c in chunks]


def top_level_texts(program: MLIRProgram) -> tuple[str, list[str]] | None:
    """The program's text cut into what surrounds its top-level ops (aliases, the module
    line, the closing brace) and each top-level op's own text, in order; once per
    program. None when the text does not have the printer's usual shape (a top-level op
    starts a line indented by two spaces; its insides are indented further)."""
    return program.analysis(_cut_top_level)


class Paths(dict[Path, ir.Operation]):
    """Every op of the program's (immutable) current module by path, in walk order: one
    walk per program, shared through `program.analysis(Paths)`."""

    def __init__(self, program: MLIRProgram) -> None:
        super().__init__(walk_paths(program.root))


def top_level_op(program: MLIRProgram, path: Path) -> ir.Operation:
    """The top-level op at path (region, block, op) without the walk `op_at` shares."""
    r, b, i = path
    return program.root.regions[r].blocks[b].operations[i].operation


def op_at(program: MLIRProgram, path: Path) -> ir.Operation:
    """The op at path in the program's current module (through the shared table)."""
    return program.analysis(Paths)[path]
