"""The user's check script, before any check runs: split from the arguments given with
it, refused in one line when it cannot run (missing, not executable, a '#!' line naming
no program, Windows line ends), and the files it names, which the run protects and
ships with it."""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil

from reducer.session.settings import EXIT_BAD_CHECK, EXIT_USAGE, UserError, missing, quoted


def script_and_args(check: str) -> tuple[str, tuple[str, ...]]:
    """`-c "./check.sh math.exp"`: a check given with its arguments, as Shrink Ray takes it.
    Split only when the whole string names no file and its first word does."""
    if os.path.exists(check):
        return check, ()
    try:
        words = shlex.split(check)
    except ValueError as exc:  # `-c './check.sh "x'`: a quote not closed, not a file's name
        raise UserError(EXIT_USAGE, f"--check: cannot split {check!r} into a script and its arguments: {exc}") from None
    if len(words) > 1 and os.path.isfile(words[0]):
        return words[0], tuple(words[1:])
    return check, ()


def check_file(check: str | None) -> str | None:
    """The check's script file (`-c "./check.sh ARG"`: ./check.sh), as the oracle runs it:
    what the resume stamps, the guard watches and no output may name."""
    return script_and_args(check)[0] if check else None


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


def unrunnable(path: str, shown: str | None = None) -> str | None:
    """Why a program that is there cannot be run ("is a directory; ..."), None if it can:
    said for the check script and for the programs of --compile, --against and --run
    (`shown`: the path as the user gave it, for the command to mend it)."""
    if os.path.isdir(path):
        return "is a directory; give the program in it"
    if not os.access(path, os.X_OK):
        return f"is not executable; run: chmod +x {shlex.quote(shown or path)}"
    return None


def check_script(path: str) -> str:
    if not os.path.exists(path):
        with contextlib.suppress(ValueError):  # `-c "./a.sh x"`: a script and its arguments, or one name?
            if len(words := shlex.split(path)) > 1:
                if (why := unrunnable(words[0]) if os.path.exists(words[0]) else None) is not None:
                    raise UserError(EXIT_BAD_CHECK, f"check script {quoted(words[0])} {why}")
                raise UserError(
                    EXIT_BAD_CHECK,
                    f"{missing('check script', path)}, nor does {quoted(words[0])}, were the rest its arguments",
                )
        raise UserError(EXIT_BAD_CHECK, missing("check script", path))
    if (why := unrunnable(path)) is not None:
        raise UserError(EXIT_BAD_CHECK, f"check script {quoted(path)} {why}")
    with open(path, "rb") as f:
        head = f.read(512)
    if head.startswith(b"\x7fELF"):
        return os.path.abspath(path)
    if not head.startswith(b"#!"):
        raise UserError(EXIT_BAD_CHECK, f"check script {quoted(path)} has no '#!' line; start it with #!/bin/sh")
    _check_interpreter(path, head.split(b"\n", 1)[0])
    return os.path.abspath(path)


def _check_interpreter(path: str, line: bytes) -> None:
    """The program a '#!' line names must be there: else the kernel says only "No such
    file or directory", which reads as if the script itself were missing."""
    if line.endswith(b"\r"):
        raise UserError(
            EXIT_BAD_CHECK,
            f"check script {quoted(path)} has Windows line ends (CRLF): its '#!' line names "
            f"{line[2:-1].decode(errors='replace').strip()!r} followed by a carriage return; "
            f"convert it: sed -i 's/\\r$//' {path}",
        )
    words = line[2:].decode(errors="replace").split()
    if not words:
        raise UserError(EXIT_BAD_CHECK, f"check script {quoted(path)} has an empty '#!' line; start it with #!/bin/sh")
    program = words[0]
    if not os.path.exists(program):
        raise UserError(
            EXIT_BAD_CHECK, f"check script {quoted(path)}: its '#!' line names {program}, which does not exist"
        )
    if os.path.isdir(program) or not os.access(program, os.X_OK):
        raise UserError(
            EXIT_BAD_CHECK, f"check script {quoted(path)}: its '#!' line names {program}, which is not a program"
        )
    if os.path.basename(program) == "env":
        named = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
        if named and shutil.which(named[0]) is None:
            raise UserError(
                EXIT_BAD_CHECK,
                f"check script {quoted(path)}: its '#!' line runs {named[0]} through env, and {named[0]} is not on PATH",
            )
