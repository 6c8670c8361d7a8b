"""Erasing ops from a module copy while giving each use of their results something else:
the rewriting every op-level strategy shares.

Binding pitfall handled here (iree-base-compiler 3.13): `Operation.parse` + `move_before`
crashes, so ops are built with `Operation.create` at an insertion point.
"""

from __future__ import annotations

from collections.abc import Iterable, Set
from typing import Any

from iree.compiler import ir

from reducer.core.strategy import MLIRProgram
from strategies._ir.paths import (
    Path,
    attributes_of,
    get_attr,
    has_uses,
    is_function,
    is_isolated,
    is_terminator,
    op_key,
    outermost,
    symbol_name,
    walk_paths,
)
from strategies._ir.signatures import function_type, set_function_type
from strategies._ir.symbols import Symbols


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
    `within` limits that walk to the top-level ops (always listed) and the insides of
    those named: on a megabyte module, walking every op costs more than the edit.
    """

    def __init__(self, program: MLIRProgram, within: Set[Path] | None = None, keep: Set[int] | None = None) -> None:
        """Rewrite a fresh clone of program, `self.root` (what the strategy returns).
        `keep`: the positions of the only top-level ops to copy; the others count as
        erased already (split-functions keeping a few functions of a megabyte module
        copies those, not the module, which cost as much as the rest of the candidate)."""
        self._erased: set[Path] = set()
        if keep is None:
            self.root = root = program.clone()
            self.table: dict[Path, ir.Operation] = dict(walk_paths(root, within=within))
        else:
            self.root = root = _module_like(program.root)
            self.table = {}
            body = root.regions[0].blocks[0]
            for i, op in enumerate(program.root.regions[0].blocks[0].operations):
                path = (0, 0, i)
                if i not in keep:
                    self._erased.add(path)
                    continue
                copy = op.operation.clone(ip=ir.InsertionPoint(body))
                self.table[path] = copy
                if within is None or path in within:
                    self.table.update(walk_paths(copy, path))
        self._path_of: dict[int, Path] = {op_key(op): p for p, op in self.table.items()}
        self._kids: dict[Path, list[Path]] = {}
        for p in self.table:
            self._kids.setdefault(p[:-3], []).append(p)
        # A function anything refers to may have callers, which a new argument would leave
        # without a value. Read from the program's one symbol analysis, not a walk of the clone.
        self._called: Set[str] = program.analysis(Symbols).referenced
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
        if not self.is_erased(path):
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
        if name is None or name in self._called:
            return None
        ftype = function_type(func)
        entry = func.regions[0].blocks[0]
        arg = entry.add_argument(t, op.location)
        set_function_type(func, list(ftype.inputs) + [t], list(ftype.results))
        arg_attrs = get_attr(func, "arg_attrs")
        if arg_attrs is not None:
            func.attributes["arg_attrs"] = ir.ArrayAttr.get(list(arg_attrs) + [ir.DictAttr.get({})])
        return arg

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


def _module_like(module: ir.Operation) -> ir.Operation:
    """An empty module with module's attributes and location."""
    new = ir.Operation.create(
        "builtin.module", attributes=dict(module.attributes.items()), regions=1, loc=module.location
    ).operation
    new.regions[0].blocks.append()
    return new


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
