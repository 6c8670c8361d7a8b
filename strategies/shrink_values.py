"""shrink-values: shrink the static dimensions of one constant or one argument, and
carry the new shape through the elementwise ops that use it.

shrink-tensors changes one dimension size in every type at once, which breaks the
verifier (or the bug) as soon as that size is tied to unrelated ops. Here one value
shrinks, and so do the values that must share its shape: elementwise `arith`/`math`
ops, `linalg.generic` with identity maps and only parallel loops, `linalg.fill`, the
`tensor.empty`s, constants and arguments they meet, and the entry function's results.
A user that cannot take the new shape (a matmul, a reshape) makes the candidate void.

A non-splat literal is truncated (the first elements of each dimension) and stays
non-splat, with at least two different elements: IREE lowers splats differently, and
a bug in how a constant is packed goes with its non-splat form.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from iree.compiler import ir

from reducer.core.strategy import Edit, MLIRProgram, Strategy
from strategies._ir.paths import Path, get_attr, is_function, op_at, op_key, walk_paths
from strategies._ir.signatures import set_function_type
from strategies._ir.symbols import Symbols


def _static(t: ir.Type) -> list[int] | None:
    if not isinstance(t, ir.RankedTensorType) or not t.has_static_shape:
        return None
    return list(t.shape)


def _sizes(d: int) -> list[int]:
    """1, half, and 3: a small odd size, for bugs that need an odd element count."""
    return sorted({s for s in (1, 3, d // 2) if 0 < s < d})


class ShrinkValues(Strategy[MLIRProgram]):
    name = "shrink-values"
    summary = "shrink one constant's or argument's dims, and the elementwise ops that share its shape"

    def opportunities(self, program: MLIRProgram) -> list[Edit]:
        fns = program.analysis(Symbols)
        scored: list[tuple[int, Edit]] = []
        for name, fpath in fns.functions.items():
            if fns.called(name):
                continue  # its callers would need arguments of the new shape
            for k, arg in enumerate(op_at(program, fpath).regions[0].blocks[0].arguments):
                arg_shape = _static(arg.type) or []
                for dim, d in enumerate(arg_shape):
                    scored += [(-math.prod(arg_shape), Edit("argument", fpath, (k, dim, s))) for s in _sizes(d)]
        for path, op in walk_paths(program.root):
            if op.name != "arith.constant" or len(path) <= 3:
                continue
            shape = _static(op.results[0].type)
            if shape is None or _literal(op) is None:
                continue
            for dim, d in enumerate(shape):
                scored += [(-math.prod(shape), Edit("constant", path, (dim, s))) for s in _sizes(d)]
        scored.sort(key=lambda item: item)
        return [e for _n, e in scored]

    def apply(self, program: MLIRProgram, edits: Sequence[Edit]) -> ir.Operation | None:
        root = program.clone()
        table = dict(walk_paths(root))
        targets: dict[tuple[Path, int], dict[int, int]] = {}  # (path, argument or -1) -> dim -> size
        for e in edits:
            if e.kind == "argument":
                k, dim, size = e.arg
            else:
                k, (dim, size) = -1, e.arg
            target = targets.setdefault((e.path, k), {})
            target[dim] = min(size, target.get(dim, size))
        shaper = _Shaper(root)
        for (path, k), target in sorted(targets.items()):
            op = table[path]
            value = op.regions[0].blocks[0].arguments[k] if k >= 0 else op.results[0]
            old = _static(value.type)
            if old is None or shaper.touched(value):
                continue  # already reshaped through another root of this subset
            new = [target.get(i, d) for i, d in enumerate(old)]
            if k < 0 and _literal(op) != "splat":
                _at_least_two(new, old, target)
            if not shaper.reshape(value, old, new):
                return None
        shaper.fix_signatures()
        return root


def _at_least_two(new: list[int], old: list[int], target: dict[int, int]) -> None:
    """A non-splat literal keeps two elements: one would print (and lower) as a splat."""
    for i in sorted(target, reverse=True):
        if math.prod(new) >= 2:
            return
        new[i] = min(2, old[i])


class _Shaper:
    """Gives values a new static shape and follows their uses; remembers what it touched."""

    def __init__(self, root: ir.Operation) -> None:
        self.root = root
        self.values: set[tuple[int, int]] = set()
        self.functions: dict[int, ir.Operation] = {}
        self._done_ops: set[int] = set()

    def touched(self, value: ir.Value) -> bool:
        return _key(value) in self.values

    def reshape(self, root: ir.Value, old: list[int], new: list[int]) -> bool:
        self._work: list[ir.Value] = []
        if not self._retype(root, old, new):
            return False
        while self._work:
            value = self._work.pop()
            for use in list(value.uses):
                user = use.owner.operation
                if op_key(user) in self._done_ops:
                    continue
                if user.name in ("func.return", "util.return"):
                    func = user.block.owner.operation
                    if not is_function(func) or func.name != "func.func":
                        return False
                    self.functions[op_key(func)] = func
                    continue
                if not self._follow(user, old, new):
                    return False
        return True

    def _follow(self, op: ir.Operation, old: list[int], new: list[int]) -> bool:
        """op takes the new shape: its other tensor operands and its results too."""
        if not _elementwise(op, old, new):
            return False
        self._done_ops.add(op_key(op))
        for value in list(op.operands) + list(op.results):
            if _static(value.type) == old and not self.touched(value) and not self._retype(value, old, new):
                return False
        return True

    def _retype(self, value: ir.Value, old: list[int], new: list[int]) -> bool:
        """Give value the new shape; a constant's literal is cut to fit."""
        t = ir.RankedTensorType(value.type)
        new_type = ir.RankedTensorType.get(new, t.element_type, t.encoding)
        owner = value.owner
        if isinstance(owner, ir.Block):
            parent = owner.owner.operation
            if not is_function(parent) or owner != parent.regions[0].blocks[0] or parent.name != "func.func":
                return False
            self.functions[op_key(parent)] = parent
        else:
            op = owner.operation
            if op.name == "arith.constant":
                attr = _cut(op, old, new, new_type)
                if attr is None:
                    return False
                op.attributes["value"] = attr
            elif op.name != "tensor.empty" and op_key(op) not in self._done_ops:
                # computed element by element (backwards): its inputs shrink too
                value.set_type(new_type)
                self.values.add(_key(value))
                self._work.append(value)
                return self._follow(op, old, new)
        value.set_type(new_type)
        self.values.add(_key(value))
        self._work.append(value)
        return True

    def fix_signatures(self) -> None:
        """Function types follow their entry block's arguments and their returns."""
        for func in self.functions.values():
            block = func.regions[0].blocks[0]
            term = list(block.operations)[-1].operation
            set_function_type(func, [a.type for a in block.arguments], [v.type for v in term.operands])


def _key(value: ir.Value) -> tuple[int, int]:
    owner = value.owner
    if isinstance(owner, ir.Block):
        for k, arg in enumerate(owner.arguments):
            if arg == value:
                return (op_key(owner.owner.operation), -1 - k)
        return (0, 0)
    op = owner.operation
    for k, result in enumerate(op.results):
        if result == value:
            return (op_key(op), k)
    return (0, 0)


def _elementwise(op: ir.Operation, shape: list[int], new: list[int]) -> bool:
    """Every tensor it touches has this shape (or the new one, given already), and it
    computes element by element."""
    dialect = op.name.split(".")[0]
    if dialect in ("arith", "math"):
        pass
    elif op.name == "linalg.fill":
        pass
    elif op.name == "linalg.generic":
        iterators = get_attr(op, "iterator_types")
        maps = get_attr(op, "indexing_maps")
        if iterators is None or maps is None or "reduction" in str(iterators) or "window" in str(iterators):
            return False
        rank = len(shape)
        if any(
            ir.AffineMapAttr(m).value != ir.AffineMap.get_identity(rank, context=op.context) for m in ir.ArrayAttr(maps)
        ):
            return False
    else:
        return False
    shaped = [v for v in list(op.operands) + list(op.results) if isinstance(v.type, ir.ShapedType)]
    return bool(shaped) and all(_static(v.type) in (shape, new) for v in shaped)


def _literal(op: ir.Operation) -> str | None:
    """'splat', 'list' (a nested list the text form spells out), 'hex' (the raw buffer
    the printer uses for big literals), 'resource' (a `dense_resource` blob: the file
    written for a check holds as many of its first elements as the new type does) or
    None (i1 bit-packed buffers, what else the text does not spell out)."""
    text = str(op.attributes["value"]) if "value" in op.attributes else ""
    if text.startswith("dense_resource<") and "xi1>" not in str(op.results[0].type):
        return "resource"
    if not text.startswith("dense<"):
        return None
    body = text[len("dense<") : text.rindex("> :")]
    if body.startswith('"0x'):
        shape = _static(op.results[0].type)
        n = math.prod(shape) if shape is not None else 0
        digits = len(body) - 4
        if not n or digits % (2 * n) or "xi1>" in str(op.results[0].type):
            return None  # a splat's single element, or bits packed: not one element per slot
        return "hex"
    if body.startswith('"'):
        return None
    return "list" if body.startswith("[") else "splat"


def _parse(body: str) -> object:
    """A dense literal's nested list, scalars kept as text (complex as '(a,b)')."""
    pos = 0

    def value() -> object:
        nonlocal pos
        while body[pos] == " ":
            pos += 1
        if body[pos] == "[":
            pos += 1
            items: list[object] = []
            while True:
                while body[pos] in " ,":
                    pos += 1
                if body[pos] == "]":
                    pos += 1
                    return items
                items.append(value())
        start = pos
        depth = 0
        while pos < len(body) and (depth or body[pos] not in ",]"):
            depth += body[pos] == "("
            depth -= body[pos] == ")"
            pos += 1
        return body[start:pos].strip()

    return value()


def _take(items: Any, shape: list[int]) -> Any:
    if not shape:
        return items
    return [_take(x, shape[1:]) for x in items[: shape[0]]]


def _flat(items: Any) -> list[str]:
    return [y for x in items for y in _flat(x)] if isinstance(items, list) else [items]


def _spell(items: Any) -> str:
    return "[" + ", ".join(_spell(x) for x in items) + "]" if isinstance(items, list) else str(items)


def _cut(op: ir.Operation, old: list[int], new: list[int], new_type: ir.Type) -> ir.Attribute | None:
    """The constant's literal for the new shape: a splat stays, a list keeps its first
    elements and stays non-splat."""
    text = str(op.attributes["value"])
    kind = _literal(op)
    if kind is None:
        return None
    if kind == "resource":  # the same blob, fewer of its elements
        try:
            return ir.Attribute.parse(f"{text[: text.rindex(' :')]} : {new_type}")
        except (ir.MLIRError, ValueError):
            return None
    body = text[len("dense<") : text.rindex("> :")]
    if kind == "hex":  # one fixed-width slot per element: regroup the digits by shape
        data = body[3:-1]
        width = len(data) // math.prod(old)
        slots = [data[i : i + width] for i in range(0, len(data), width)]
        items: Any = slots
        for d in reversed(old[1:]):
            items = [items[i : i + d] for i in range(0, len(items), d)]
        cut = _take(items, new)
        flat = _flat(cut)
        if len(flat) >= 2 and len(set(flat)) == 1:
            other = next((x for x in slots if x != flat[0]), None)
            if other is not None:
                flat[-1] = other
        body = '"0x' + "".join(flat) + '"'
    elif kind == "list":
        items = _parse(body)
        cut = _take(items, new)
        flat = _flat(cut)
        if len(flat) >= 2 and len(set(flat)) == 1:  # keep it non-splat
            other = next((x for x in _flat(items) if x != flat[0]), None)
            if other is not None:
                last: Any = cut
                while isinstance(last[-1], list):
                    last = last[-1]
                last[-1] = other
        body = _spell(cut)
    try:
        return ir.Attribute.parse(f"dense<{body}> : {new_type}")
    except (ir.MLIRError, ValueError):
        return None
