"""inline-parameters: put an external parameter's value inline, so the program needs no archive.

A `util.global` whose initial value is `#stream.parameter.named<"scope"::"key"> : tensor<...>`
gets the bytes of that key as a `dense<...>` literal of its type (a splat when every
element is equal), which shrink-tensors and shrink-values then cut like any other. The
archives are the run's (`wants`): the strategy is handed something that looks a key up
and gives its bytes, and knows nothing of files. A key it is not given, or whose bytes
are not exactly the global's type, is left alone. Such a candidate is smaller although
its text is longer: `Size.outside` counts what a program needs from files beside it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from iree.compiler import ir

from reducer.core.strategy import Edit, MLIRProgram, Strategy
from strategies._ir.paths import get_attr

if TYPE_CHECKING:
    import numpy as np

#: `#stream.parameter.named<"scope"::"key">`, or `<"key">` in the default scope "";
#: either may go on with a config dict, `<"scope"::"key", {...}>`.
_NAMED = re.compile(r'^#stream\.parameter\.named<"((?:[^"\\]|\\.)*)"(?:::"((?:[^"\\]|\\.)*)")?(?=\s*[,>])')


class Archive(Protocol):
    """What the run hands the strategy: an entry's byte length, and its bytes as uint8
    (one dimension; or two, (count, pattern), for a splat); None for a key it does not have."""

    def length(self, scope: str, key: str) -> int | None: ...

    def lookup(self, scope: str, key: str) -> np.ndarray | None: ...


class InlineParameters(Strategy[MLIRProgram]):
    name = "inline-parameters"
    summary = "put external parameters inline (their values read from --parameters), so the result needs no archive"
    wants = ("parameters",)

    def __init__(self, parameters: Archive | None = None) -> None:
        self.parameters = parameters

    def opportunities(self, program: MLIRProgram) -> list[Edit]:
        if self.parameters is None or "#stream.parameter.named<" not in program.text:
            return []
        edits = []
        for i, op in enumerate(program.root.regions[0].blocks[0].operations):  # globals are top-level
            op = op.operation
            found = _named(op) if op.name == "util.global" else None
            if found is not None and self._fits(op, *found):
                edits.append(Edit("inline", (0, 0, i), found))
        return edits

    def apply(self, program: MLIRProgram, edits: Sequence[Edit]) -> ir.Operation | None:
        root = program.clone()
        top = root.regions[0].blocks[0].operations
        for e in edits:
            op = top[e.path[2]].operation
            value = self._value(op, *e.arg) if op.name == "util.global" else None
            if value is None:
                return None
            op.attributes["initial_value"] = value
        return root

    def _fits(self, op: ir.Operation, scope: str, key: str) -> bool:
        """Whether the archive has the key with exactly the bytes of the global's type:
        read from the archive's index alone. Building the value here would copy every
        weight into the MLIR context just to offer it, and keep it there."""
        assert self.parameters is not None
        t = _static_tensor(op)
        width = _width(t.element_type) if t is not None else None
        if t is None or width is None:
            return False
        return self.parameters.length(scope, key) == math.prod(t.shape) * width // 8

    def _value(self, op: ir.Operation, scope: str, key: str) -> ir.Attribute | None:
        """The global's value from the archive, or None: no such key, or not its size."""
        import numpy as np  # only a run given archives needs it, after they are read

        assert self.parameters is not None
        if not self._fits(op, scope, key):
            return None
        t = _static_tensor(op)
        width = _width(t.element_type) if t is not None else None
        raw = self.parameters.lookup(scope, key)
        if t is None or width is None or raw is None or raw.size != math.prod(t.shape) * width // 8:
            return None
        unsigned = np.dtype(f"<u{width // 8}")
        if raw.ndim == 2 and raw.strides[0] == 0 and raw.shape[1] == width // 8:
            first = np.ascontiguousarray(raw[0]).view(unsigned)  # an archive splat of one element
            return ir.DenseElementsAttr.get(first, type=t.element_type, shape=t.shape)
        values = np.ascontiguousarray(raw).reshape(-1).view(unsigned)
        if values.size and bool((values == values[0]).all()):  # bitwise: NaNs and -0.0 as they are
            values = values[:1]  # one element makes a splat
        return ir.DenseElementsAttr.get(values, type=t.element_type, shape=t.shape)


def _named(op: ir.Operation) -> tuple[str, str] | None:
    """(scope, key) of a global whose initial value is a named parameter."""
    initial = get_attr(op, "initial_value")
    m = _NAMED.match(str(initial)) if initial is not None else None
    if m is None:
        return None
    scope, key = (m.group(1), m.group(2)) if m.group(2) is not None else ("", m.group(1))
    return _unescape(scope), _unescape(key)


def _unescape(s: str) -> str:
    return re.sub(r"\\(.)", r"\1", s)


def _static_tensor(op: ir.Operation) -> ir.RankedTensorType | None:
    attr = get_attr(op, "type")
    t = attr.value if isinstance(attr, ir.TypeAttr) else None
    return t if isinstance(t, ir.RankedTensorType) and t.has_static_shape else None


def _width(element: ir.Type) -> int | None:
    """Bits of an element whose bytes are its own (integers, floats); None otherwise."""
    if not isinstance(element, (ir.IntegerType, ir.FloatType)):
        return None
    width = int(element.width)
    return width if width % 8 == 0 and width <= 64 else None
