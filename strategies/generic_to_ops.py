"""generic-to-ops: an elementwise `linalg.generic` becomes its body's ops on tensors.

What a compiler engineer does by hand with a fused elementwise generic: its body is
scalar `arith`/`math` ops over the inputs' elements, and the same ops on whole tensors
are the same program without the generic, its output operands and its yield. Only
generics with identity maps, parallel loops, a body that does not read the outputs and
uses nothing from outside but the inputs and scalar constants (which become splats),
and whose yield is computed in the body: a yielded input or constant keeps it fused.
Static shapes only: a constant's splat needs one.
"""

from __future__ import annotations

from collections.abc import Sequence

from iree.compiler import ir

from reducer.core.strategy import Edit, MLIRProgram, Strategy
from strategies._ir.paths import attributes_of, get_attr, has_uses, walk_paths
from strategies._ir.rewriter import Rewriter


def _eligible(op: ir.Operation) -> bool:
    if op.name != "linalg.generic" or not len(op.results):
        return False
    maps, iterators = get_attr(op, "indexing_maps"), get_attr(op, "iterator_types")
    if maps is None or iterators is None or "reduction" in str(iterators) or "window" in str(iterators):
        return False
    shape = op.results[0].type
    if not isinstance(shape, ir.RankedTensorType) or not shape.has_static_shape:
        return False  # a splat (`_splat`) needs a static shape: `dense<..> : tensor<?xf32>` is no literal
    rank = shape.rank
    if any(
        ir.AffineMapAttr(m).value != ir.AffineMap.get_identity(rank, context=op.context) for m in ir.ArrayAttr(maps)
    ):
        return False
    if any(not isinstance(v.type, ir.RankedTensorType) or list(v.type.shape) != list(shape.shape) for v in op.operands):
        return False
    block = op.regions[0].blocks[0]
    n_in = len(op.operands) - len(op.results)
    if any(has_uses(a) for a in list(block.arguments)[n_in:]):
        return False
    inside = {a for a in block.arguments}
    ops = [o.operation for o in block.operations]
    for body_op in ops[:-1]:
        if body_op.name.split(".")[0] not in ("arith", "math") or len(body_op.regions):
            return False
        for value in body_op.operands:
            if value not in inside and not _scalar_constant(value):
                return False  # captured from outside the generic, and not a constant
        inside |= set(body_op.results)
    return all(v in inside for v in ops[-1].operands)


def _scalar_constant(value: ir.Value) -> bool:
    """A scalar arith.constant outside the generic (a dispatch's IR hoists them there):
    a splat on tensors, as one inside the body is."""
    owner = value.owner
    return (
        not isinstance(owner, ir.Block)
        and owner.operation.name == "arith.constant"
        and not isinstance(value.type, ir.ShapedType)
    )


def _splat(constant: ir.Operation, shape: list[int], ip: ir.InsertionPoint) -> ir.Value:
    """A scalar constant's value as a tensor of shape, created at ip."""
    attributes = attributes_of(constant)
    scalar = str(attributes["value"])
    literal = scalar[: scalar.rindex(" : ")] if " : " in scalar else scalar
    t = _tensor(constant.results[0].type, shape)
    attributes["value"] = ir.Attribute.parse(f"dense<{literal}> : {t}")
    with constant.location:
        return ir.Operation.create("arith.constant", results=[t], attributes=attributes, ip=ip).results[0]


class GenericToOps(Strategy[MLIRProgram]):
    name = "generic-to-ops"
    summary = "an elementwise linalg.generic becomes its body's arith/math ops on tensors"

    def opportunities(self, program: MLIRProgram) -> list[Edit]:
        return [Edit("unfuse", path) for path, op in walk_paths(program.root) if len(path) > 3 and _eligible(op)]

    def apply(self, program: MLIRProgram, edits: Sequence[Edit]) -> ir.Operation | None:
        rewriter = Rewriter(program)
        root = rewriter.root
        for path in sorted((e.path for e in edits), reverse=True):
            op = rewriter.op(path)
            if op is not None and _eligible(op):
                rewriter.replace_op(path, _unfuse(op))
        rewriter.finish()
        return root


def _tensor(t: ir.Type, shape: list[int]) -> ir.Type:
    return ir.RankedTensorType.get(shape, t)


def _unfuse(op: ir.Operation) -> list[ir.Value]:
    """Create the body's ops on tensors in front of op; the values its results become."""
    shape = list(ir.RankedTensorType(op.results[0].type).shape)
    block = op.regions[0].blocks[0]
    n_in = len(op.operands) - len(op.results)
    tensor_of: dict[ir.Value, ir.Value] = {a: v for a, v in zip(list(block.arguments)[:n_in], op.operands)}
    ops = [o.operation for o in block.operations]
    ip = ir.InsertionPoint(op)
    for body_op in ops[:-1]:
        if body_op.name == "arith.constant":
            tensor_of[body_op.results[0]] = _splat(body_op, shape, ip)
            continue
        for value in body_op.operands:
            if value not in tensor_of:  # a scalar constant from outside (`_eligible`)
                tensor_of[value] = _splat(value.owner.operation, shape, ip)
        attributes = attributes_of(body_op)
        with body_op.location:
            new = ir.Operation.create(
                body_op.name,
                results=[_tensor(r.type, shape) for r in body_op.results],
                operands=[tensor_of[v] for v in body_op.operands],
                attributes=attributes,
                ip=ip,
            )
        for old, value in zip(body_op.results, new.results):
            tensor_of[old] = value
    return [tensor_of[v] for v in ops[-1].operands]
