"""A compiler command line as a template: {input} is the candidate, {output} where the
compiled module goes. Its flags are what flag reduction removes; the flags a workflow
adds (--compile-to, --compile-mode) are kept apart so they are never reduced away."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sysconfig
from collections.abc import Sequence

import attrs

from reducer.core import codec

#: IREE tools a bare name may resolve to the installed wheels' binaries: skips pip's and
#: pyenv's wrapper scripts, which cost a Python start and turn a crash's signal into an
#: exit code. Only this environment's own pip script: a tool of the user's on PATH is theirs.
IREE_TOOLS = ("iree-compile", "iree-opt", "iree-run-module", "iree-dump-module")


_PLACEHOLDER = re.compile(r"\{(?:input|output|tmp)\}")


class CommandError(ValueError):
    pass


def resolve_tool(name: str) -> str:
    """What a bare IREE tool name runs: what PATH finds, as in the user's shell (their own
    build is the compiler under test), unless that is this environment's wrapper for the
    wheel's binary, or PATH has none: then the binary itself."""
    if os.sep in name or name not in IREE_TOOLS:
        return name
    found = shutil.which(name)
    if found is not None:  # checks run in a temp dir: PATH's relative entries are the run's cwd's
        found = os.path.abspath(found)
    if found is not None and not _our_wrapper(found, name):
        return found
    try:
        if name in ("iree-compile", "iree-opt"):
            from iree.compiler.tools.binaries import find_tool

            return str(find_tool(name))
        import iree._runtime_libs as libs

        path = os.path.join(os.path.dirname(libs.__file__), name)
        if os.access(path, os.X_OK):
            return path
    except Exception:  # not installed from a wheel: whatever is on PATH
        pass
    return found or name


def beside(program: str, name: str) -> str:
    """The tool `name` of the build a program given by path belongs to (`iree-opt` beside
    `~/iree-build/tools/iree-compile`): a reproducer is replayed by the compiler's own
    build. A bare name, or none there: the bare name, found as `resolve_tool` finds it."""
    if os.sep not in program:
        return name
    for where in (os.path.abspath(program), os.path.realpath(program)):  # a link's, then its build's
        there = os.path.join(os.path.dirname(where), name)
        if os.path.isfile(there) and os.access(there, os.X_OK):
            return there
    return name


def _our_wrapper(found: str, name: str) -> bool:
    """found is pip's console script for name in this environment (nothing else: a shim
    or another environment's script may lead to any build)."""
    mine = os.path.join(sysconfig.get_path("scripts"), name)
    return os.path.realpath(found) == os.path.realpath(mine) and not os.path.islink(mine)


@codec.record()
@attrs.frozen
class Command:
    argv: tuple[str, ...]  # the user's command, {input}/{output} included
    extra: tuple[str, ...] = ()  # added by a workflow, never reduced

    @property
    def tool(self) -> str:
        return os.path.basename(self.argv[0])

    def is_iree_compile(self) -> bool:
        return self.tool == "iree-compile"

    def render(self, **values: str) -> list[str]:
        """The argv to run, placeholders filled in."""
        return _fill((resolve_tool(self.argv[0]), *self.argv[1:], *self.extra), values)

    def shell(self, **values: str) -> str:
        """What a bug report shows: the tool as the user named it."""
        return shlex.join(_fill((*self.argv, *self.extra), values))

    def flags(self) -> list[int]:
        """Positions of the reducible flags: '-x'/'--x[=v]' words, not -o and its value,
        not the placeholders."""
        out = []
        skip = False
        for i, a in enumerate(self.argv):
            if i == 0 or skip:
                skip = False
                continue
            if a == "-o":
                skip = True
                continue
            if a.startswith("-") and not _PLACEHOLDER.search(a) and not a.startswith("-o"):
                out.append(i)
        return out

    def without(self, positions: Sequence[int]) -> Command:
        drop = set(positions)
        return attrs.evolve(self, argv=tuple(a for i, a in enumerate(self.argv) if i not in drop))

    def plus(self, *extra: str) -> Command:
        return attrs.evolve(self, extra=self.extra + tuple(extra))

    def has_flag(self, name: str) -> bool:
        return any(a == name or a.startswith(name + "=") for a in (*self.argv, *self.extra))


def _fill(argv: Sequence[str], values: dict[str, str]) -> list[str]:
    out = []
    for a in argv:
        for name, value in values.items():
            a = a.replace("{" + name + "}", value)
        out.append(a)
    return out


def parse_command(text: str, needs_output: bool = False) -> Command:
    """A command line from the user: shell words, {input} required."""
    try:
        argv = tuple(shlex.split(text))
    except ValueError as exc:
        raise CommandError(f"cannot split the command {text!r}: {exc}") from None
    if not argv:
        raise CommandError("the command is empty")
    if not any("{input}" in a for a in argv):
        raise CommandError(f"the command {text!r} has no {{input}}; put {{input}} where the program's path goes")
    if needs_output and not any("{output}" in a for a in argv):
        argv = argv + ("-o", "{output}")
    return Command(argv)
