"""The user's files: reading the input and the check, checking every path the run
will write before anything runs, and writing results atomically."""

from __future__ import annotations

import contextlib
import errno
import os
import re
import tempfile

from reducer.core.state import RunState
from reducer.session.settings import (
    EXIT_BAD_CHECK,
    EXIT_BAD_INPUT,
    EXIT_CANNOT_WRITE,
    EXIT_USAGE,
    Settings,
    UserError,
)


def default_state_dir(output: str) -> str:
    return output + ".resume"


def default_output(path: str) -> str:
    stem, ext = os.path.splitext(path)
    return f"{stem}.reduced{ext or '.mlir'}"


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_atomically(path: str, data: bytes) -> None:
    """Replace path in one step, so an interruption never leaves a half-written repro.
    The file gets the mode a plain write would give (the old file's, else the umask's),
    and an error names path, not the temporary file."""
    directory = os.path.dirname(os.path.abspath(path))
    try:
        mode = os.stat(path).st_mode & 0o7777
    except OSError:
        mode = 0o666 & ~_umask()
    try:
        fd, tmp = tempfile.mkstemp(prefix=".ireereduce-", dir=directory)
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, path) from None
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), mode)
            f.write(data)
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise OSError(exc.errno, exc.strerror, path) from None
        raise


def save(path: str, data: bytes, what: str, best: str | None = None) -> None:
    """write_atomically, with a failure a UserError that says where the best so far is."""
    try:
        write_atomically(path, data)
    except OSError as exc:
        raise UserError(
            EXIT_CANNOT_WRITE, f"cannot write {what} {path}: {exc.strerror}" + (f"; {best}" if best else "")
        ) from None


BOM = "\ufeff"


def read_input(path: str) -> str:
    if not os.path.exists(path):
        raise UserError(EXIT_BAD_INPUT, f"input file {path!r} does not exist")
    if os.path.isdir(path):
        raise UserError(EXIT_BAD_INPUT, f"input {path!r} is a directory; give the .mlir file to reduce")
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise UserError(EXIT_BAD_INPUT, f"cannot read input {path!r}: {exc.strerror}") from None
    try:
        return data.decode()
    except UnicodeDecodeError:
        raise UserError(
            EXIT_BAD_INPUT, f"input {path!r} is not UTF-8 text (MLIR bytecode? convert it with iree-opt first)"
        ) from None


def check_paths(settings: Settings) -> None:
    """Every file the run will write, checked before anything runs: none may be the
    input, the check or a file the check uses, or another of them, and each must be
    writable. After a reduction of hours is too late to find out."""
    output = settings.output or default_output(settings.input)
    named = [
        ("the output" if settings.output is None else "-o", output),
        ("--report", settings.report),
        ("--report-json", settings.report_json),
        ("--stats-json", settings.stats_json),
        ("--log-file", settings.log_file),
    ]
    protected = {os.path.realpath(settings.input): f"the input {settings.input}"}
    if settings.check is not None:
        for used in shipped_files(settings.check):
            protected.setdefault(os.path.realpath(used), f"{used}, which the check script uses")
        protected[os.path.realpath(settings.check)] = f"the check script {settings.check}"
    seen: dict[str, str] = {}
    for flag, path in named:
        if path is None:
            continue
        real = os.path.realpath(path)
        if real in protected:
            raise UserError(
                EXIT_USAGE, f"{flag} {path} is {protected[real]}; ireereduce never overwrites it (give another path)"
            )
        if real in seen:
            raise UserError(EXIT_USAGE, f"{seen[real]} and {flag} both name {path}; give each its own file")
        seen[real] = flag
        _check_writable(flag, path)
    # Never a directory the run did not make or was not given empty: it removes it at the end.
    refused = None if settings.no_state else RunState(settings.state_dir or default_state_dir(output)).refusal()
    if refused is not None:
        raise UserError(EXIT_USAGE, refused)


def _check_writable(flag: str, path: str) -> None:
    if os.path.isdir(path):
        raise UserError(EXIT_USAGE, f"{flag} {path} is a directory; give a file name")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise UserError(EXIT_USAGE, f"cannot write {flag} {path}: the directory {parent} does not exist")
    try:  # os.access is not enough: root passes it on read-only file systems
        fd, probe = tempfile.mkstemp(prefix=".ireereduce-probe-", dir=parent)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise UserError(
            EXIT_USAGE, f"cannot write {flag} {path}: the directory {parent} is not writable ({exc.strerror})"
        ) from None
    if os.path.exists(path) and not os.access(path, os.W_OK):
        raise UserError(EXIT_USAGE, f"cannot write {flag} {path}: it is read-only")


def shipped_files(script: str) -> list[str]:
    """Files a check script names (a reference output, a helper next to it): words of
    its text that are existing files, relative to its directory or the current one."""
    try:
        with open(script, "rb") as f:
            text = f.read(1 << 16).decode(errors="replace")
    except OSError:
        return []
    base = os.path.dirname(os.path.abspath(script))
    found = []
    for word in sorted(set(re.findall(r"[\w.+~/-]+", text))):
        if "/" not in word and "." not in word:
            continue
        for path in {os.path.join(base, word), os.path.abspath(word), os.path.expanduser(word)}:
            if os.path.isfile(path):
                found.append(path)
    return found


def check_script(path: str) -> str:
    if not os.path.exists(path):
        raise UserError(EXIT_BAD_CHECK, f"check script {path!r} does not exist")
    if os.path.isdir(path):
        raise UserError(EXIT_BAD_CHECK, f"check script {path!r} is a directory")
    if not os.access(path, os.X_OK):
        raise UserError(EXIT_BAD_CHECK, f"check script {path!r} is not executable; run: chmod +x {path}")
    with open(path, "rb") as f:
        head = f.read(4)
    if not (head.startswith(b"#!") or head == b"\x7fELF"):
        raise UserError(EXIT_BAD_CHECK, f"check script {path!r} has no '#!' line; start it with #!/bin/sh")
    return os.path.abspath(path)


#: Errors that mean a file could not be written, not that a program could not be run.
WRITE_ERRORS = (errno.ENOSPC, errno.EFBIG, errno.EDQUOT, errno.EROFS)


def user_error(exc: OSError) -> UserError:
    """What an OSError out of a check means to the user: a full disk, or a check that cannot run."""
    if exc.errno in WRITE_ERRORS:
        return UserError(
            EXIT_CANNOT_WRITE,
            f"cannot write a candidate into the temporary directory "
            f"{tempfile.gettempdir()}: {exc.strerror} (free space, or set TMPDIR)",
        )
    return UserError(EXIT_BAD_CHECK, f"cannot run the check ({exc.filename or 'its program'}): {exc.strerror}")
