"""The one symbol analysis of a program: its symbols, functions, who refers to what, and
which function signatures may change. Reading symbol references means printing dialect
attributes, so it is done in one pass over the shared path table, once per program
(`program.analysis(Symbols)`), for every strategy and every subset."""

from __future__ import annotations

import re
from collections.abc import Iterator

import networkx as nx
from iree.compiler import ir

from reducer.core.ir import BodyCache, body_key
from reducer.core.strategy import MLIRProgram
from strategies._ir.paths import Path, Paths, get_attr, is_function, symbol_name, top_level_texts, walk_paths

_SYMBOL_IN_TEXT = re.compile(r'(?<!:)@("(?:[^"\\]|\\.)*"|[A-Za-z_$.][\w$.\-]*)')

#: Calls this module knows how to rewrite when a signature changes.
CALL_OPS = frozenset({"func.call"})


def _refs_in_attr(attr: ir.Attribute, out: set[str]) -> None:
    if isinstance(attr, ir.FlatSymbolRefAttr):
        out.add(attr.value)
    elif isinstance(attr, ir.SymbolRefAttr):
        out.add(attr.value[0])
    elif isinstance(attr, (ir.DenseElementsAttr, ir.StringAttr, ir.IntegerAttr, ir.FloatAttr, ir.TypeAttr)):
        return
    elif isinstance(attr, ir.ArrayAttr):
        for item in attr:
            _refs_in_attr(item, out)
    elif isinstance(attr, ir.DictAttr):
        for i in range(len(attr)):
            _refs_in_attr(attr[i].attr, out)
    else:
        text = str(attr)
        if "@" in text:  # symbol refs nested inside dialect attributes
            out.update(m.group(1).strip('"') for m in _SYMBOL_IN_TEXT.finditer(text))


#: Symbols each attribute refers to. MLIR uniques attributes, so the `fastmath` flags
#: of a hundred thousand ops are a handful of keys; bounded, as it keeps them alive.
_REFS_OF: dict[ir.Attribute, frozenset[str]] = {}
_REFS_OF_LIMIT = 1 << 16


def _refs_of(attr: ir.Attribute) -> frozenset[str]:
    found = _REFS_OF.get(attr)
    if found is None:
        out: set[str] = set()
        _refs_in_attr(attr, out)
        found = frozenset(out)
        if len(_REFS_OF) >= _REFS_OF_LIMIT:
            _REFS_OF.clear()
        _REFS_OF[attr] = found
    return found


def referenced_symbols(op: ir.Operation) -> set[str]:
    """Root names of the symbols op's own attributes refer to (not its nested ops')."""
    attributes = op.attributes
    try:
        # All at once: reading them one by one was most of this analysis's time (issue 13).
        items = attributes.items()
    except TypeError:  # e.g. a complex dense literal cannot be wrapped: read the others by name
        items = []
        for name in attributes.keys():
            try:
                items.append((name, attributes[name]))
            except TypeError:  # (by index, the bindings abort the process instead)
                continue
    out: set[str] = set()
    for name, attr in items:
        if name != "sym_name":
            out |= _refs_of(attr)
    return out


#: What the analysis reads of one op: its path, its symbol name and whether it is a
#: function (for top-level ops), the symbols it refers to, the callee of a call.
_Fact = tuple[Path, "str | None", bool, frozenset[str], "str | None"]


def _fact(path: Path, op: ir.Operation, top: bool) -> _Fact:
    name = symbol_name(op) if top else None
    refs = frozenset(referenced_symbols(op))
    callee = get_attr(op, "callee") if refs and op.name in CALL_OPS else None
    target = ir.FlatSymbolRefAttr(callee).value if callee is not None else None
    return path, name, name is not None and is_function(op), refs, target


#: The facts inside each top-level op, by its body's text (paths relative to it). A program
#: that keeps most of its predecessor's functions (a split-functions commit on a
#: megabyte module) then reads only the new ones: the analysis was a quarter of the
#: engine's time there (issue 13). Bounded, as it keeps the texts alive.
_FACTS: BodyCache[list[_Fact]] = BodyCache()


def _facts(program: MLIRProgram) -> Iterator[_Fact]:
    """The facts of every op in walk order (`Paths`), read again only for top-level ops
    whose text no program had before. What the facts hold (paths, symbol names) does
    not depend on what an alias (`#map3`) stands for, unless an alias spells a symbol:
    then, or when the text cannot be cut into top-level ops, the module is read whole."""
    root = program.root
    cut = top_level_texts(program)
    blocks = root.regions[0].blocks if len(root.regions) == 1 else []
    ops = [op.operation for op in blocks[0].operations] if len(blocks) == 1 else []
    if cut is None or len(ops) != len(cut[1]) or any("@" in line for line in _aliases(cut[0])):
        for path, op in program.analysis(Paths).items():
            yield _fact(path, op, len(path) == 3)
        return
    for i, (op, text) in enumerate(zip(ops, cut[1])):
        top = (0, 0, i)
        yield _fact(top, op, True)  # its own attributes, in its first line (made public, say)
        key = body_key(op, text)
        facts = _FACTS.get(key) if key is not None else None
        if facts is None:
            facts = _inner_facts(op, text) if key is not None else None
            if facts is None:
                facts = [_fact(path[3:], inner, False) for path, inner in walk_paths(op, top)]
            if key is not None:
                _FACTS.put(key, facts)
        for path, name, function, refs, target in facts:
            yield top + path, name, function, refs, target


def _aliases(outside: str) -> list[str]:
    """The alias definitions in the text around the top-level ops."""
    return [line for line in outside.split("\n") if line.startswith(("#", "!"))]


def _inner_facts(op: ir.Operation, text: str) -> list[_Fact] | None:
    """The facts that matter inside a top-level op, read from its text where it can be:
    only ops that refer to a symbol count (the others add nothing to the analysis), and a
    reference prints as `@name`. A body without `@` has none; a body of one op per line
    (one block, then its closing brace) has them on the lines with `@`. None: walk it."""
    body = text.partition("\n")[2]
    if "@" not in body:
        return []
    regions = op.regions
    if len(regions) != 1 or len(regions[0].blocks) != 1:
        return None
    lines = body.split("\n")
    ops = regions[0].blocks[0].operations  # indexed, not listed: a binding object per op cost more
    if len(lines) != len(ops) + 1 or lines[-1].strip() != "}":
        return None
    facts: list[_Fact] = []
    for k, line in enumerate(lines[:-1]):
        if "@" in line:
            inner = ops[k].operation
            if len(inner.regions):  # its ops print on this line too
                return None
            facts.append(_fact((0, 0, k), inner, False))
    return facts


class Symbols:
    """The module's symbols and the references between them.

    A function's signature may change only when every reference to it is a call this
    module can rewrite (func.call); a function with no references at all is an entry
    point, whose signature is the user's to keep or lose as the oracle decides.
    """

    def __init__(self, program: MLIRProgram) -> None:
        self.symbols: dict[str, Path] = {}  # top-level symbol -> its path
        self.functions: dict[str, Path] = {}  # top-level functions (with a body), in order
        self.graph = nx.DiGraph()  # symbol -> symbols it references
        self.users: dict[str, list[Path]] = {}  # symbol -> ops (outside it) that reference it
        self.calls: dict[str, list[Path]] = {}  # function -> its func.call sites
        self.pinned: set[str] = set()  # referenced by something other than a call
        referenced: set[str] = set()
        owner_of: dict[Path, str] = {}
        for path, name, function, refs, target in _facts(program):
            if name is not None:
                self.symbols[name] = path
                owner_of[path] = name
                self.graph.add_node(name)
                if function:
                    self.functions[name] = path
            if not refs:
                continue
            referenced |= refs
            owner = owner_of.get(path[:3])
            for ref in refs:
                if owner is not None:
                    self.graph.add_edge(owner, ref)
                if ref != owner:
                    self.users.setdefault(ref, []).append(path)
                if ref == target:
                    self.calls.setdefault(ref, []).append(path)
                else:
                    self.pinned.add(ref)
        #: Every name anything refers to: a function among them may have callers.
        self.referenced = frozenset(referenced)

    def fixed_signature(self, name: str) -> bool:
        """Something other than a func.call refers to it: its signature must stay."""
        return name in self.pinned

    def called(self, name: str) -> bool:
        return bool(self.calls.get(name)) or name in self.pinned
