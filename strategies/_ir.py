"""IR helpers shared by the op-level strategies: op paths, symbol references, and
erasing an op while giving each use of its results something else to use.

Binding pitfalls handled here (iree-base-compiler 3.13): reading a `complex` dense
attribute raises TypeError, and `Operation.parse` + `move_before` crashes, so ops
are built with `Operation.create` at an insertion point.
"""

from __future__ import annotations

import ctypes
import re
from collections.abc import Iterable, Iterator
from typing import Any

import attrs
import networkx as nx
from iree.compiler import ir

Path = tuple[int, ...]

_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def op_key(op: ir.Operation) -> int:
    """The address of the underlying MLIR operation: a stable dictionary key. (The
    bindings' hash() of an op is that of the Python wrapper, and the wrapper of one op
    can be replaced after edits around it, which made hash-keyed indexes miss.)"""
    capsule = op._CAPIPtr
    return int(_capsule_pointer(capsule, _CAPSULE_NAME))


_CAPSULE_NAME = b"iree.compiler.ir.Operation._CAPIPtr"

_SYMBOL_IN_TEXT = re.compile(r'(?<!:)@("(?:[^"\\]|\\.)*"|[A-Za-z_$.][\w$.\-]*)')


#: Ops whose region the printer hides (named linalg ops): nothing inside is worth editing.
_PRINTED_BODIES = frozenset({"linalg.generic", "linalg.map", "linalg.reduce"})


def opaque(op: ir.Operation) -> bool:
    return op.name.startswith("linalg.") and op.name not in _PRINTED_BODIES


def walk_paths(root: ir.Operation, prefix: Path = ()) -> Iterator[tuple[Path, ir.Operation]]:
    """(path, op) for every op under root, parents first; a path is (region, block, op) triples.

    The implicit bodies of named linalg ops are not entered."""
    for r, region in enumerate(root.regions):
        for b, block in enumerate(region.blocks):
            for i, op in enumerate(block.operations):
                op = op.operation
                path = prefix + (r, b, i)
                yield path, op
                if len(op.regions) and not opaque(op):
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


def referenced_symbols(op: ir.Operation) -> set[str]:
    """Root names of the symbols op's own attributes refer to (not its nested ops')."""
    out: set[str] = set()
    for name in op.attributes:
        if name == "sym_name":
            continue
        attr = get_attr(op, name)
        if attr is not None:
            _refs_in_attr(attr, out)
    return out


def zero_literal(t: ir.Type) -> str | None:
    """Text of a zero attribute of type t, for arith.constant; None if there is none."""
    elem = t
    shaped = isinstance(t, (ir.RankedTensorType, ir.VectorType))
    if shaped:
        if not t.has_static_shape:
            return None
        elem = t.element_type
    elif isinstance(t, ir.ShapedType):
        return None
    if isinstance(elem, ir.IntegerType) and elem.width == 1:
        value = "false" if shaped else "0"  # `false : i1` does not parse as an attribute
    elif isinstance(elem, (ir.IntegerType, ir.IndexType)):
        value = "0"
    elif isinstance(elem, ir.FloatType):
        value = "0.0"
    else:
        return None  # complex dense literals cannot be built through these bindings
    return f"dense<{value}> : {t}" if shaped else f"{value} : {t}"


class Rewriter:
    """Erases ops from one module copy, rewiring each use of their results.

    A replacement is, in order of preference: a same-typed operand of the erased op,
    the earliest dominating same-typed value, a zero constant, a new argument of the
    enclosing function (when nothing calls it), and finally `ub.poison`.

    Ops are named by path from one walk made before any change. Binding objects for an
    erased op dangle (and its address may be reused by a new op), so after erasing
    nothing is looked up by object: only by path, through the table made beforehand.
    """

    def __init__(self, root: ir.Operation, called: set[str] | None = None) -> None:
        self.root = root
        self.table: dict[Path, ir.Operation] = dict(walk_paths(root))
        self._path_of: dict[int, Path] = {op_key(op): p for p, op in self.table.items()}
        self._kids: dict[Path, list[Path]] = {}
        for p in self.table:
            self._kids.setdefault(p[:-3], []).append(p)
        self._erased: set[Path] = set()
        self._called = called
        self._zero_cache: dict[str, Any] = {}
        self._first_of_type: dict[Any, tuple[dict[str, ir.Value], dict[int, int]]] = {}
        self._dropping: set[int] = set()
        self._pending: list[Path] = []  # feeders of replaced ops, pruned by finish()

    # -- public -----------------------------------------------------------------
    def op(self, path: Path) -> ir.Operation | None:
        """The op at path (as listed before any change), or None once it is erased."""
        return None if self.is_erased(path) else self.table.get(path)

    def replace_op(self, path: Path, values: Iterable[ir.Value | None]) -> None:
        """Give each use of the op's results the matching value (None: the usual
        replacement), erase it, and remember its feeders for `finish`."""
        op = self.table[path]
        self._pending += self._feeders(op)
        for result, value in zip(op.results, values):
            if has_uses(result):
                result.replace_all_uses_with(value if value is not None else self.replacement(result, op))
        self._erase(path)

    def swap(self, path: Path, new: ir.Operation) -> None:
        """`new` (which took over the op's body and its uses) replaces the op at path:
        the paths of the ops inside stay valid."""
        old = self.table[path]
        self.table[path] = new
        self._path_of[op_key(new)] = path
        old.erase()

    def erase_op(self, op: ir.Operation) -> None:
        """Erase op (results unused) through the table when it is listed there."""
        path = self.path_of(op)
        if path is not None and self.table.get(path) is not None:
            self._erase(path)
        else:
            op.erase()

    def path_of(self, op: ir.Operation) -> Path | None:
        """The table path of a live op (None for ops this rewriter created)."""
        path = self._path_of.get(op_key(op))
        if path is None:
            return None
        known = self.table.get(path)
        return path if known is not None and known == op else None  # an address may be reused

    def note_feeders(self, values: Iterable[ir.Value]) -> None:
        """Values that lose a use: `finish` prunes their definers if nothing else needs them."""
        for value in values:
            owner = value.owner
            if not isinstance(owner, ir.Block):
                path = self.path_of(owner.operation)
                if path is not None:
                    self._pending.append(path)

    def finish(self) -> None:
        """Prune what the replaced ops fed and nothing else uses any more."""
        pending, self._pending = self._pending, []
        self.prune(pending)

    def is_erased(self, path: Path) -> bool:
        return any(path[:n] in self._erased for n in range(3, len(path) + 1, 3))

    def drop(self, paths: list[Path], prune: bool = True) -> None:
        """Erase the ops at paths (in program order) and rewire their uses."""
        paths = outermost(p for p in paths if p in self.table)
        self._dropping = {op_key(self.table[p]) for p in paths}
        feeders: list[Path] = []
        for path in paths:
            if self.is_erased(path):
                continue
            op = self.table[path]
            feeders += self._feeders(op)
            for result in op.results:
                if has_uses(result):
                    result.replace_all_uses_with(self.replacement(result, op))
            self._erase(path)
        if prune:
            self.prune(feeders)

    def erase(self, path: Path) -> None:
        """Erase the op at path as it is (its results must be unused)."""
        self._erase(path)

    def prune(self, paths: list[Path]) -> None:
        """Erase ops whose results all became unused, and then their feeders, transitively."""
        self._first_of_type.clear()  # holds values, hence ops, that may be erased now
        work = list(reversed(paths))
        while work:
            path = work.pop()
            if self.is_erased(path):
                continue
            op = self.table[path]
            if not len(op.results) or is_terminator(op) or symbol_name(op) is not None:
                continue
            if any(has_uses(r) for r in op.results):
                continue
            feeders = self._feeders(op)
            self._erase(path)
            work.extend(reversed(feeders))

    def _feeders(self, op: ir.Operation) -> list[Path]:
        """Paths of the ops defining op's operands (op is live, so they are too)."""
        out = []
        for value in op.operands:
            owner = value.owner
            if isinstance(owner, ir.Block):
                continue
            path = self.path_of(owner.operation)
            if path is not None:  # None: an op this rewriter created
                out.append(path)
        return out

    # -- replacements --------------------------------------------------------------
    def replacement(self, value: ir.Value, op: ir.Operation) -> ir.Value:
        t = value.type
        for operand in op.operands:
            if operand.type == t:
                return operand
        dominating = self._dominating(t, op)
        if dominating is not None:
            return dominating
        zero = self.zero(t, op)
        if zero is not None:
            return zero
        with op.location:
            arg = self.new_argument(t, op)
            if arg is not None:
                return arg
            return ir.Operation.create("ub.poison", results=[t], ip=ir.InsertionPoint(op)).result

    def zero(self, t: ir.Type, before: ir.Operation) -> ir.Value | None:
        """A new `arith.constant` zero of type t in front of `before`; None if t has none."""
        literal = self._zero_attr(t)
        if literal is None:
            return None
        with before.location:
            return ir.Operation.create(
                "arith.constant", results=[t], attributes={"value": literal}, ip=ir.InsertionPoint(before)
            ).result

    def _zero_attr(self, t: ir.Type) -> ir.Attribute | None:
        key = str(t)
        if key not in self._zero_cache:
            literal = zero_literal(t)
            attr = None
            if literal is not None:
                try:
                    attr = ir.Attribute.parse(literal)
                except (ir.MLIRError, TypeError, ValueError):
                    attr = None
            self._zero_cache[key] = attr
        return self._zero_cache[key]

    def _dominating(self, t: ir.Type, op: ir.Operation) -> ir.Value | None:
        """Earliest value of type t visible at op: outermost blocks first, arguments first."""
        levels: list[tuple[ir.Block, ir.Operation]] = []
        cur = op
        while True:
            block = cur.block
            levels.append((block, cur))
            parent = block.owner.operation
            if is_isolated(parent):
                break
            cur = parent
        key = str(t)
        for block, before in reversed(levels):
            found = self._earlier_value(block, before, key)
            if found is None:  # the cached index may predate a change to this block
                self._first_of_type.pop(block, None)
                found = self._earlier_value(block, before, key)
            if found is not None and found is not False:
                return found
        return None

    def _earlier_value(self, block: ir.Block, before: ir.Operation, key: str) -> ir.Value | bool | None:
        """The block's first value of type key if it is defined before `before`; False if
        there is none or it comes later; None if the index does not know one of the ops."""
        first, position = self._block_index(block)
        value = first.get(key)
        if value is None:
            return False
        owner = value.owner
        if isinstance(owner, ir.Block):
            return value
        mine, theirs = position.get(op_key(before)), position.get(op_key(owner.operation))
        if mine is None or theirs is None:
            return None
        return value if theirs < mine else False

    def _block_index(self, block: ir.Block) -> tuple[dict[str, ir.Value], dict[int, int]]:
        """First surviving value of each type in block, and every op's position in it."""
        cached = self._first_of_type.get(block)
        if cached is not None:
            return cached
        first: dict[str, ir.Value] = {}
        for arg in block.arguments:
            first.setdefault(str(arg.type), arg)
        position: dict[int, int] = {}
        for i, child in enumerate(block.operations):
            child = child.operation
            position[op_key(child)] = i
            if op_key(child) in self._dropping:
                continue
            for result in child.results:
                first.setdefault(str(result.type), result)
        self._first_of_type[block] = (first, position)
        return first, position

    def new_argument(self, t: ir.Type, op: ir.Operation) -> ir.Value | None:
        """A new argument of type t for the function around op; None when something calls
        that function (its callers would need a value) or op is not in a function."""
        cur = op
        while True:
            parent = cur.block.owner.operation
            if is_isolated(parent):
                break
            cur = parent
        func = parent  # the nearest isolated ancestor: a new argument there is visible at op
        if not is_function(func):
            return None
        name = symbol_name(func)
        if name is None or name in self._callees():
            return None
        ftype = function_type(func)
        entry = func.regions[0].blocks[0]
        arg = entry.add_argument(t, op.location)
        set_function_type(func, list(ftype.inputs) + [t], list(ftype.results))
        arg_attrs = get_attr(func, "arg_attrs")
        if arg_attrs is not None:
            func.attributes["arg_attrs"] = ir.ArrayAttr.get(list(arg_attrs) + [ir.DictAttr.get({})])
        return arg

    def _callees(self) -> set[str]:
        if self._called is None:
            called: set[str] = set()
            for _path, op in walk_paths(self.root):
                called |= referenced_symbols(op)
            self._called = called
        return self._called

    def _erase(self, path: Path) -> None:
        self._erased.add(path)
        op = self.table.pop(path)
        # The bindings map addresses to live binding objects; an erased op's object must
        # die with it, or a new op at the same address is handed back as "invalidated".
        todo = list(self._kids.get(path, ()))
        while todo:
            nested = todo.pop()
            self.table.pop(nested, None)
            todo += self._kids.get(nested, ())
        op.erase()


def inline_block(op: ir.Operation, block: ir.Block, args: Iterable[ir.Value]) -> list[ir.Value]:
    """Move block's ops (not its terminator) in front of op, with its arguments bound to
    args; return the terminator's operands, the values op's results become."""
    for arg, value in zip(block.arguments, args):
        arg.replace_all_uses_with(value)
    ops = [o.operation for o in block.operations]
    for child in ops[:-1]:
        child.move_before(op)
    return list(ops[-1].operands) if ops else []


def drop_for_iter_args(rewriter: Rewriter, path: Path, loop: ir.Operation, drop: set[int]) -> None:
    """Rebuild the scf.for without iter_args `drop`; their uses get the initial value."""
    operands = list(loop.operands)
    inits = operands[3:]
    block = loop.regions[0].blocks[0]
    for k in drop:
        block.arguments[1 + k].replace_all_uses_with(inits[k])
    kept = [k for k in range(len(inits)) if k not in drop]
    with loop.location:
        new = ir.Operation.create(
            "scf.for",
            results=[loop.results[k].type for k in kept],
            operands=operands[:3] + [inits[k] for k in kept],
            attributes=attributes_of(loop),
            regions=1,
            ip=ir.InsertionPoint(loop),
        )
        block.append_to(new.regions[0])
        for k in sorted(drop, reverse=True):
            block.erase_argument(1 + k)
        term = list(block.operations)[-1].operation
        yielded = list(term.operands)
        rewriter.note_feeders(yielded[k] for k in drop)
        ir.Operation.create(term.name, operands=[yielded[k] for k in kept], ip=ir.InsertionPoint(term))
        rewriter.erase_op(term)
    new_results = iter(new.results)
    for k, result in enumerate(loop.results):
        result.replace_all_uses_with(inits[k] if k in drop else next(new_results))
    rewriter.swap(path, new)


def cuts_nothing(op: ir.Operation) -> bool:
    """True when op's operands are all block arguments or constants: replacing op by a
    fresh value cuts no computation, so only dropping it (drop-ops) is worth a check."""
    for value in op.operands:
        owner = value.owner
        if not isinstance(owner, ir.Block) and owner.operation.name != "arith.constant":
            return False
    return True


def function_type(func: ir.Operation) -> ir.FunctionType:
    return ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)


def set_function_type(func: ir.Operation, inputs: list[ir.Type], results: list[ir.Type]) -> None:
    func.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(inputs, results))


def attributes_of(op: ir.Operation) -> dict[str, ir.Attribute]:
    """op's attributes, to give a rebuilt op (fewer operands, results or iter_args)."""
    return {name: get_attr(op, name) for name in op.attributes}


def has_uses(value: ir.Value) -> bool:
    for _use in value.uses:
        return True
    return False


CALL_OPS = frozenset({"func.call"})


class Functions:
    """The module's functions and their call sites: which signatures may change.

    A signature may change only when every reference to the function is a call this
    module can rewrite (func.call); a function with no references at all is an entry
    point, whose signature is the user's to keep or lose as the oracle decides.
    """

    def __init__(self, root: ir.Operation) -> None:
        self.paths: dict[str, Path] = {}
        self.calls: dict[str, list[Path]] = {}
        self.pinned: set[str] = set()  # referenced by something other than a call
        for path, op in walk_paths(root):
            if len(path) == 3 and is_function(op):
                name = symbol_name(op)
                if name is not None:
                    self.paths[name] = path
            refs = referenced_symbols(op)
            callee = get_attr(op, "callee") if op.name in CALL_OPS else None
            target = ir.FlatSymbolRefAttr(callee).value if callee is not None else None
            for ref in refs:
                if ref == target:
                    self.calls.setdefault(ref, []).append(path)
                else:
                    self.pinned.add(ref)

    def fixed_signature(self, name: str) -> bool:
        """Something other than a func.call refers to it: its signature must stay."""
        return name in self.pinned

    def called(self, name: str) -> bool:
        return bool(self.calls.get(name)) or name in self.pinned


def op_at(program: Any, path: Path) -> ir.Operation:
    """The op at path in a program's (immutable) current module, through a table made once
    and shared by every strategy in the program's memo."""
    table = program.memo.get("paths")
    if table is None:
        table = program.memo["paths"] = dict(walk_paths(program.root))
    return table[path]


def functions(program_memo: dict, root: ir.Operation) -> Functions:
    """Functions of a program, computed once per program (strategies share the memo)."""
    found = program_memo.get("functions")
    if found is None:
        found = program_memo["functions"] = Functions(root)
    return found


@attrs.frozen
class SymbolInfo:
    """The module's symbols, computed once on the current program and shared by every
    strategy and every subset (split-functions, globals)."""

    symbols: dict[str, Path]  # top-level symbol -> its path
    functions: list[str]
    graph: nx.DiGraph  # symbol -> symbols it references
    users: dict[str, list[Path]]  # symbol -> ops (outside it) that reference it


def analyse(program: Any) -> SymbolInfo:
    """Top-level symbols, the reference graph and each symbol's users, once per program."""
    cached = program.memo.get("symbols")
    if cached is not None:
        return cached
    assert program.root is not None
    symbols: dict[str, Path] = {}
    functions: list[str] = []
    owner_of: dict[Path, str] = {}
    graph = nx.DiGraph()
    users: dict[str, list[Path]] = {}
    for path, op in walk_paths(program.root):
        if len(path) == 3:
            name = symbol_name(op)
            if name is not None:
                symbols[name] = path
                owner_of[path] = name
                graph.add_node(name)
                if is_function(op):
                    functions.append(name)
        owner = owner_of.get(path[:3])
        for ref in referenced_symbols(op):
            if owner is not None:
                graph.add_edge(owner, ref)
            if ref != owner:
                users.setdefault(ref, []).append(path)
    info = SymbolInfo(symbols, functions, graph, users)
    program.memo["symbols"] = info
    return info
