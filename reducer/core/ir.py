"""Thin wrappers over the MLIR Python bindings shipped in iree-base-compiler.

Imported lazily so that worker processes are forked before any MLIR state exists.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterator
from types import CodeType
from typing import TYPE_CHECKING, Any, TypeVar

import attrs

from reducer.core.processes import NATIVE_CALLBACKS, stops_held

if TYPE_CHECKING:  # pragma: no cover
    from iree.compiler import ir


_V = TypeVar("_V")


class ParseError(Exception):
    """The text is not MLIR that these bindings (with IREE's dialects) understand."""


class VerifyError(Exception):
    """The IR parsed but the verifier rejected it."""


@attrs.frozen
class PrintOptions:
    """How candidates are printed; chosen once per run so every candidate is comparable."""

    debug_info: bool = False
    generic: bool = False


#: Optional attributes that are safe to delete through the bindings (not properties).
OPTIONAL_ATTRIBUTES = frozenset({"arg_attrs", "res_attrs", "__inplace_operands_attr__"})
#: What a symbol or a function cannot do without.
REQUIRED_ATTRIBUTES = frozenset({"sym_name", "function_type", "sym_visibility"})


def discardable(name: str) -> bool:
    """Dialect-prefixed attributes (iree.abi.*, torch.*) and the optional dictionaries:
    ops verify without them. Shared by the attributes strategy and --for-upstream."""
    return name not in REQUIRED_ATTRIBUTES and ("." in name or name in OPTIONAL_ATTRIBUTES)


def new_context() -> ir.Context:
    """A context for one workspace. Loading the bindings (the first call) and making a
    context run Python code from C++ (the native module's init, the context's hooks): a
    stop signal's KeyboardInterrupt raised there aborted the process or was swallowed, so
    the stop signals wait until both are done (`stops_held`)."""
    with stops_held():
        from iree.compiler import ir

        ctx = ir.Context()
    ctx.allow_unregistered_dialects = True
    # The verifier checks isolated ops (functions, executables) on the context's threads,
    # and one that fails calls the Python handler below from its thread, which waits for
    # the GIL the parsing thread holds: the run hung in ir.Module.parse on lowered IR.
    ctx.enable_multithreading(False)
    # Diagnostics still reach MLIRError exceptions; this only keeps them off stderr.
    ctx.attach_diagnostic_handler(_taken)
    return ctx


def _taken(_diagnostic: ir.Diagnostic) -> bool:
    """The context's diagnostic handler: every diagnostic is taken, none printed."""
    return True


NATIVE_CALLBACKS.add(_taken.__code__)


def first_line(message: str) -> str:
    lines = [ln.strip() for ln in message.splitlines() if ln.strip()]
    useful = [ln for ln in lines if "error" in ln] or lines
    return useful[0] if useful else message


def parse(text: str, ctx: ir.Context) -> ir.Module:
    from iree.compiler import ir

    try:
        return ir.Module.parse(text, ctx)
    except ir.MLIRError as exc:
        raise ParseError(first_line(str(exc).replace("Unable to parse module assembly:", ""))) from None


def verify(op: ir.Operation) -> None:
    from iree.compiler import ir

    try:
        op.verify()
    except ir.MLIRError as exc:
        raise VerifyError(first_line(str(exc).replace("Verification failed:", ""))) from None


def to_text(op: ir.Operation, options: PrintOptions, verified: bool = True) -> str:
    return op.get_asm(
        enable_debug_info=options.debug_info,
        print_generic_op_form=options.generic,
        assume_verified=verified,
    )


def reprinted(text: str) -> str:
    """text as an MLIR workspace prints it (`MLIRWorkspace`, default options, no blobs);
    unchanged if it does not parse."""
    try:
        return to_text(parse(text, new_context()).operation, PrintOptions(), verified=False)
    except ParseError:
        return text


def same_ir(lhs: ir.Operation, rhs: ir.Operation) -> bool:
    """Whether two ops are equal down to their regions, attributes and locations: then
    they print the same text, and comparing them costs a tenth of printing one."""
    return bool(lhs.is_structurally_equivalent(rhs))


#: A line of a module's body that starts a top-level op: indented by two, and not the
#: closing brace, block label or parenthesis of the op before it.
_TOP_LEVEL_START = re.compile(r"\n(?=  [^ })^\n])")
#: A line of a module's body that is not indented by two (an empty line, say).
_OUTDENTED = re.compile(r"\n(?!  )")


def split_module(text: str) -> tuple[str, list[str]] | None:
    """A printed module cut into its first line and each top-level op's text (indented as
    printed), when the text is only `module ... {`, the ops and `}`: no alias definitions
    before it, no resource section after it. Then the module's text is `join_module` of
    the two, and an op that did not change keeps its text in a candidate (issue 13)."""
    head, sep, rest = text.partition("\n")
    if not (sep and head.startswith("module") and head.endswith("{") and rest.endswith("}\n")):
        return None
    body = rest[:-2]  # each op's lines, each ending in a newline
    if not body:
        return head, []
    if (
        not body.endswith("\n")
        or _OUTDENTED.search(body, 0, len(body) - 1)
        or _TOP_LEVEL_START.match("\n" + body[:3]) is None
    ):
        return None
    starts = [0, *(m.end() for m in _TOP_LEVEL_START.finditer(body))]
    ends = [*(s - 1 for s in starts[1:]), len(body) - 1]
    return head, [body[s:e] for s, e in zip(starts, ends)]


def module_cut(program: Any) -> tuple[str, list[str]] | None:
    """`split_module` of a program's text, as an analysis (`program.analysis(module_cut)`):
    the workspace and the strategies cut the same megabyte once per program. Shared:
    read it, never change it."""
    return split_module(program.text)


def join_module(head: str, texts: list[str]) -> str:
    """The inverse of `split_module`."""
    return head + "\n" + "".join(t + "\n" for t in texts) + "}\n"


#: What an op printed alone spells differently inside a module: attributes and types a
#: module prints as aliases (`#map`, dialect attributes, `!` types), resources, distinct
#: attributes (numbered module-wide). Printed alone, maps are spelled inline, so a text
#: with none of these (a `#` in a string is refused too) prints the same in the module.
_MODULE_WIDE = ("#", "!", "affine_map<", "affine_set<", "dense_resource<", "distinct[", "\n\n")


def _module_wide(text: str) -> bool:
    return any(spelling in text for spelling in _MODULE_WIDE)  # a regex took 4x longer


def op_text(op: ir.Operation, options: PrintOptions, verified: bool) -> str | None:
    """op's text as it prints inside a module without aliases (indented by two), when
    printing it alone gives that: no results (their names would be the module's), its own
    value names (no region, or isolated from above), nothing module-wide in it."""
    from iree.compiler import ir

    if options.debug_info or options.generic or len(op.results):
        return None
    if len(op.regions) and not op.has_trait(ir.IsIsolatedFromAboveTrait):
        return None
    # Local scope: the names of an isolated op are its own, and the printer then does not
    # walk the whole module for each op (twice the cost of printing the module).
    text = op.get_asm(assume_verified=verified, use_local_scope=True)
    if not text or _module_wide(text):
        return None
    return "  " + text.rstrip("\n").replace("\n", "\n  ")


def body_key(op: ir.Operation, text: str) -> tuple[str, str] | None:
    """What the ops inside a top-level op are made of, from its text in a module of the
    plain shape: its name and the text of its regions, which start on the line after its
    first (`func.func @f(...) {`). Its own attributes are in that first line, so a
    function made public keeps its key. None when its regions start elsewhere."""
    first, _, body = text.partition("\n")
    if len(op.regions) and not first.endswith("{"):
        return None
    return op.name, body


class BodyCache(dict[tuple[str, str], _V]):
    """What was read of top-level ops, by `body_key`: a later program keeps most of them.
    Bounded by the characters of the texts it keeps alive (a few megabyte modules'
    worth), then emptied, so a process that reduces many programs does not grow."""

    def __init__(self, budget: int = 1 << 26) -> None:
        super().__init__()
        self.budget, self.chars = budget, 0

    def put(self, key: tuple[str, str], value: _V) -> None:
        if self.chars + len(key[1]) > self.budget:
            self.clear()
        self.chars += len(key[1])
        self[key] = value

    def clear(self) -> None:
        super().clear()
        self.chars = 0


def op_header(op: ir.Operation, verified: bool) -> str | None:
    """The first line an op with a region prints (`func.func @f(...) -> ... {`), when
    nothing module-wide is in it."""
    text = op.get_asm(assume_verified=verified, use_local_scope=True, skip_regions=True)
    if not text.endswith(" {...}") or "\n" in text or _module_wide(text):
        return None
    return text[: -len("...}")]


def iter_ops(root: ir.Operation) -> Iterator[ir.Operation]:
    """Every op nested under root (not root itself), parents before children."""
    for region in root.regions:
        for block in region.blocks:
            for op in block.operations:
                op = op.operation
                yield op
                if len(op.regions):
                    yield from iter_ops(op)


def count_ops(root: ir.Operation, skip: frozenset[str] = frozenset()) -> int:
    """Ops under root; `skip` names op kinds not to count (e.g. function wrappers)."""
    from iree.compiler import ir

    count = 0
    advance = ir.WalkResult.ADVANCE

    # One Python call per op is the cost (it runs on every candidate): keep it minimal.
    def visit(op: ir.Operation) -> ir.WalkResult:
        nonlocal count
        count += 1
        return advance

    def visit_skipping(op: ir.Operation) -> ir.WalkResult:
        nonlocal count
        count += op.name not in skip
        return advance

    root.walk(visit_skipping if skip else visit)
    return count - 1  # the module itself is not part of the program


NATIVE_CALLBACKS.update(code for code in count_ops.__code__.co_consts if isinstance(code, CodeType))  # its visitors


#: A shaped type's kind (group 1), its dimension prefix (group 2, e.g. "4x?x") and the
#: start of its element type (group 3).
SHAPED_DIMS = re.compile(r"\b(tensor|vector|memref)<((?:(?:\d+|\?|\[\d+\])x)+)([\w.]*)")

#: A 0-d shaped type, e.g. `tensor<f32>`: its element type (group 1).
_ZERO_D = re.compile(r"\b(?:tensor|vector|memref)<([a-z][\w.]*)>")
#: A scalar type spelled on its own (not as a shaped type's element): its bit width.
_SCALAR = re.compile(r"(?<![\w<.x])(?:bf16|tf32|index|[fiu]\d+|si\d+|f\d+E\w+)\b")
#: What a dynamic dimension weighs: more than 1, so making it static is progress.
DYNAMIC_DIM = 2


@functools.cache
def bits(element: str) -> int:
    """Bit width of an element type's spelling (index counts as 64; unknown as 32)."""
    if element in ("index",):
        return 64
    if element in ("bf16",):
        return 16
    if element == "tf32":
        return 19
    m = re.match(r"(?:[fiu]|si)(\d+)", element)
    return int(m.group(1)) if m else 32


#: The numbers of a dense literal (a list, or hex bytes): most of a model's text, and no
#: type can be spelled with these characters, so the volume scan skips them.
_DENSE_PAYLOAD = re.compile(r'dense<(?:\[[-+0-9.,eExA-F\s\[\]()]*\]|"0x[0-9A-Fa-f]*")>')


def tensor_volume(text: str) -> int:
    """Bits of data spelled in text's types: elements x element width over shaped types,
    plus the width of every scalar type.

    Ranks `tensor<8xf32>` above `tensor<1xf32>`, `f64` above `f32` and `?` above `1`,
    though each pair prints in the same bytes: the tie-breaker that lets shrinking a
    dimension, demoting a type or making a shape static count as progress.
    """
    total = 0
    text = _DENSE_PAYLOAD.sub("dense<>", text)
    for m in SHAPED_DIMS.finditer(text):
        dims = [DYNAMIC_DIM if d == "?" else int(d.strip("[]")) for d in m.group(2).split("x")[:-1]]
        total += math.prod(dims) * bits(m.group(3))
    for m in _ZERO_D.finditer(text):
        total += bits(m.group(1))
    for m in _SCALAR.finditer(text):
        total += bits(m.group(0))
    return total


#: What is left of a program once everything the check could be about has gone.
_SHELL_OPS = frozenset({"builtin.module", "func.func", "func.return", "util.func", "util.return"})


def trivial(text: str) -> bool:
    """An empty module, or functions that only return: a check that keeps this is
    probably not looking at the bug (it accepts any program that compiles or parses)."""
    stripped = "".join(text.split())
    if stripped in ("", "module{}"):
        return True
    try:
        module = parse(text, new_context())
    except ParseError:
        return False
    return all(op.name in _SHELL_OPS for op in iter_ops(module.operation))
