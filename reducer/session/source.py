"""The input program as read: a file, a stream or stdin, text or MLIR bytecode, its
`dense_resource` blobs kept apart; anything unreadable is one line naming the file."""

from __future__ import annotations

import errno
import os
import re
import stat
import sys

import attrs

from reducer.core import resources
from reducer.core.resources import Blobs
from reducer.session import stream
from reducer.session.settings import EXIT_BAD_INPUT, EXIT_CANNOT_WRITE, UserError, missing, quoted

BOM = "\ufeff"


#: What MLIR bytecode starts with ("ML\xefR", mlir/Bytecode/BytecodeImplementation.h).
BYTECODE_MAGIC = b"ML\xefR"
#: The suffix MLIR tools give bytecode files.
BYTECODE_SUFFIX = ".mlirbc"


@attrs.frozen
class Input:
    """The input as read: its text (the engine reduces that), its bytes (what a resumed
    run must find unchanged: for an input whose blobs were split off, the digest of its
    bytes), whether it is MLIR bytecode (then every check gets each program as bytecode
    too), and its `dense_resource` blobs, when they were kept out of the text (then
    every file the run writes gets the blobs its program uses)."""

    text: str
    data: bytes
    bytecode: bool = False
    blobs: Blobs | None = None


#: An empty input name (an unset variable) is said so (`files.check_paths`): os.path reads
#: it as the current folder.
EMPTY_INPUT_NAME = "the input file's name is empty (an unset variable?); give the .mlir file to reduce"


def load_input(path: str, split: bool = True, max_time: float | None = None) -> Input:
    """The input file; with `split`, a text input's builtin blobs stay in the file
    (`reducer.core.resources`) and its text refers to them by key. A stream is read
    until its end, --max-time, or a size no program reaches (`stream.read`)."""
    if not os.path.exists(path):
        if loops(path):
            raise UserError(EXIT_BAD_INPUT, f"input {quoted(path)} is a symlink that leads back to itself")
        raise UserError(EXIT_BAD_INPUT, missing("input file", path))
    if os.path.isdir(path):
        raise UserError(EXIT_BAD_INPUT, f"input {quoted(path)} is a directory; give the .mlir file to reduce")
    kind = os.stat(path).st_mode
    if stat.S_ISCHR(kind) or stat.S_ISBLK(kind) or stat.S_ISSOCK(kind):  # /dev/zero would be read forever
        raise UserError(
            EXIT_BAD_INPUT, f"input {quoted(path)} is a device, not a file; give the .mlir file (- reads stdin)"
        )
    if not stat.S_ISREG(kind):  # a pipe (`<(zcat model.mlir.gz)`): read once, as it comes
        try:  # without blocking in open: a FIFO nobody writes yet waits in stream.read's poll
            with os.fdopen(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb", buffering=0) as f:
                data = stream.read(f, path, max_time)
        except OSError as exc:
            raise UserError(EXIT_BAD_INPUT, f"cannot read input {quoted(path)}: {exc.strerror}") from None
        return Input(decode_input(data, path), data, data.startswith(BYTECODE_MAGIC))
    try:
        with open(path, "rb") as f:
            bytecode = f.read(len(BYTECODE_MAGIC)) == BYTECODE_MAGIC
        cut = resources.split(path) if split and not bytecode and not path.endswith(BYTECODE_SUFFIX) else None
        if cut is None:
            with open(path, "rb") as f:
                data = f.read()
    except OSError as exc:
        raise UserError(EXIT_BAD_INPUT, f"cannot read input {quoted(path)}: {exc.strerror}") from None
    if cut is not None:
        text = decode_input(cut.program, path)
        _all_blobs_there(path, text, cut.blobs)
        return Input(text, cut.digest, False, cut.blobs)
    text = decode_input(data, path)  # a .mlirbc name without the magic is refused there
    if not bytecode and "{-#" not in text:
        _all_blobs_there(path, text, None)
    return Input(text, data, bytecode)


def blobs_apart(given: Input, directory: str) -> Input:
    """An input read whole (bytecode, stdin, a pipe) whose text holds builtin blobs, as a
    text file's: its text written into directory (the run's own) and split there. Kept
    in the text, the blobs were renamed at every parse (`weights_6_2`) and lost when a
    program was written, so bytecode and text of one program reduced differently."""
    if given.blobs is not None or "dialect_resources" not in given.text:
        return given
    path = os.path.join(directory, "input-blobs.mlir")
    try:
        with open(path, "w", encoding="utf-8", errors="surrogateescape") as f:
            f.write(given.text)
    except OSError as exc:
        raise UserError(
            EXIT_CANNOT_WRITE, f"cannot copy the input's text into the temp dir {directory}: {exc.strerror}"
        ) from None
    cut = resources.split(path)
    if cut is None:
        return given
    return Input(cut.program.decode(errors="surrogateescape"), given.data, given.bytecode, cut.blobs)


def _all_blobs_there(path: str, text: str, blobs: Blobs | None) -> None:
    """A `dense_resource<key>` with no blob of that key in the file: no check could be
    given the program as the user meant it."""
    lost = resources.missing(blobs, text)
    if lost:
        more = f" (and {len(lost) - 1} more)" if len(lost) > 1 else ""
        raise UserError(
            EXIT_BAD_INPUT,
            f"input {quoted(path)} refers to dense_resource<{lost[0]}>{more}, but its resource section "
            "({-# dialect_resources: { builtin: ... } #-}) has no blob of that key",
        )


def read_stdin(max_time: float | None) -> str:
    """The input given as `-`, as text (a one-line program would read as a file's name)."""
    if sys.stdin is None:
        raise UserError(EXIT_BAD_INPUT, "the input is stdin (-), and stdin is closed")
    data = stream.read(sys.stdin.buffer, "-", max_time)
    if not data.strip():
        raise UserError(EXIT_BAD_INPUT, "the input on stdin (-) is empty; pipe the program to reduce into it")
    return decode_input(data, "-")


def read_input(path: str) -> str:
    """The input's whole text, its blobs included."""
    return load_input(path, split=False).text


def decode_input(data: bytes, path: str) -> str:
    """The input as text: MLIR bytecode (or a .mlirbc file) read by the MLIR bindings,
    else UTF-8; else which byte is not UTF-8, and where (a Latin-1 byte in a comment is
    the usual one)."""
    if data.startswith(BYTECODE_MAGIC) or path.endswith(BYTECODE_SUFFIX):
        return bytecode_text(data, path)
    try:
        return _closed(data.decode(), path)
    except UnicodeDecodeError as exc:
        bad = exc.start
    stem = os.path.splitext(path)[0] if path != "-" else "input"
    convert = f"iconv -f latin1 -t utf-8 {path} > {stem}.utf8.mlir" if path != "-" else "iconv -f latin1 -t utf-8"
    line_start = data.rfind(b"\n", 0, bad) + 1
    column = len(data[line_start:bad].decode(errors="replace")) + 1
    line = data.count(b"\n", 0, bad) + 1
    raise UserError(
        EXIT_BAD_INPUT,
        f"input {quoted(path)} is not UTF-8 text: byte 0x{data[bad]:02x} at line {line}, "
        f"column {column} is not UTF-8 (if the file is Latin-1: {convert})",
    )


_SECTION = re.compile(r"^\s*\{-#", re.MULTILINE)


def _closed(text: str, path: str) -> str:
    """text, unless its resource section (`{-# ... #-}`) is never closed: a file cut off
    there (a download that stopped inside a blob) crashes MLIR's parser now and then."""
    opened = _SECTION.search(text, max(0, text.rfind("#-}")))  # a section after the last close
    if opened is not None:
        line = text.count("\n", 0, opened.start()) + 1
        raise UserError(
            EXIT_BAD_INPUT,
            f"input {quoted(path)} ends inside its resource section: the '{{-#' at line {line} is never closed "
            "with '#-}' (a truncated file?)",
        )
    return text


def bytecode_text(data: bytes, path: str) -> str:
    """The program MLIR bytecode holds, as text; a file the bindings cannot read
    (truncated, corrupt, not bytecode at all) is one line naming it."""
    from reducer.core import bytecode

    try:
        text = bytecode.to_text(data)
    except bytecode.BytecodeError as exc:
        raise UserError(
            EXIT_BAD_INPUT, f"input {quoted(path)} is not readable MLIR bytecode (truncated or corrupt?): {exc}"
        ) from None
    if b"mlir_reproducer" in data and "mlir_reproducer" not in text:
        from reducer.iree.reproducer import in_bytecode

        text += in_bytecode(data)
    return text


def loops(path: str) -> bool:
    """path is a symlink in a loop: written as if it were nothing, it was replaced."""
    try:
        os.stat(path)
    except OSError as exc:
        return exc.errno == errno.ELOOP
    return False
