"""MLIR bytecode at the edges of a run: an input read as its text form, and a candidate
or the output written back as bytecode. The engine, the cache and the state only ever
see text; only what reaches a file (a check's candidate, the output) is bytecode.

Imported lazily, like `ir`: the bindings load only for a run that meets bytecode."""

from __future__ import annotations

import io
import threading
from typing import TYPE_CHECKING

from reducer.core import ir as irutil
from reducer.core.resources import Attached

if TYPE_CHECKING:  # pragma: no cover
    from iree.compiler import ir

#: What MLIR bytecode starts with ("ML\xefR", mlir/Bytecode/BytecodeImplementation.h).
MAGIC = b"ML\xefR"
#: The file name suffix MLIR tools give bytecode.
SUFFIX = ".mlirbc"


class BytecodeError(Exception):
    """The data is not bytecode these bindings (with IREE's dialects) can read: truncated,
    corrupt, or of a newer bytecode version."""


def is_bytecode(data: bytes) -> bool:
    return data.startswith(MAGIC)


def _context() -> ir.Context:
    """A context of its own, single-threaded: it may exist before workers are forked."""
    ctx = irutil.new_context()
    ctx.enable_multithreading(False)
    return ctx


def to_text(data: bytes) -> str:
    """The program bytecode holds, printed with its locations (a check may need them;
    the workspace drops them like any text input's if the check does not)."""
    from iree.compiler import ir

    if not is_bytecode(data):
        raise BytecodeError("it does not start with MLIR's bytecode magic (ML\\xefR)")
    ctx = _context()
    try:
        module = ir.Module.parse(data, ctx)
    except ir.MLIRError as exc:
        raise BytecodeError(irutil.first_line(str(exc).replace("Unable to parse module assembly:", ""))) from None
    return irutil.to_text(module.operation, irutil.PrintOptions(debug_info=True), verified=False)


def write(module: ir.Module) -> bytes:
    out = io.BytesIO()
    module.operation.write_bytecode(out)
    return out.getvalue()


class Writer:
    """Text to bytecode, for every program a run writes as bytecode. One context, used
    under a lock: callers may be on any thread. Text that does not parse has no bytecode
    form (None); a text-mode candidate can be such text."""

    #: Programs written in one context before a fresh one: a context keeps every
    #: attribute it has seen (each candidate's shrunk literals), so it would only grow.
    RENEW = 100

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ctx: ir.Context | None = None
        self._uses = 0

    def __call__(self, text: bytes) -> bytes | None:
        with self._lock:
            if self._ctx is None or self._uses >= self.RENEW:
                self._ctx, self._uses = _context(), 0
            self._uses += 1
            whole = text.whole() if isinstance(text, Attached) else text  # its blobs are in the input file
            # A blob's key seen before in a context is renamed (`weights_5`): a program with
            # blobs gets a context of its own, so its bytecode keeps the file's keys.
            ctx = _context() if b"dense_resource<" in whole else self._ctx
            try:
                module = irutil.parse(whole.decode(errors="surrogateescape"), ctx)
            except irutil.ParseError:
                return None
            try:
                return write(module)
            finally:
                del module


def program_text(data: bytes) -> str:
    """A program file's text, whichever form it holds (a report shows bytecode output as text)."""
    if is_bytecode(data):
        return to_text(data)
    return data.decode(errors="replace")
