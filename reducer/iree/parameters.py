"""External parameters: the archives `--parameters` names (iree-run-module's syntax,
`scope=FILE`, or a bare FILE for the default scope "") and the references a program makes
to them, `#stream.parameter.named<"scope"::"key">`.

Archives are read with the runtime's own parameter support (`iree.runtime.ParameterIndex`,
the file mapped, not copied), never parsed here: the entries come back as bytes views for
a strategy to put inline (strategies/inline_parameters.py).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:
    import numpy as np

#: A parameter reference: `#stream.parameter.named<"scope"::"key">`, or `<"key">` in the
#: default scope; either may go on with a config dict, `<"scope"::"key", {...}>`.
REFERENCE = re.compile(r'#stream\.parameter\.named<"((?:[^"\\]|\\.)*)"(?:::"((?:[^"\\]|\\.)*)")?(?=\s*[,>])')


class ArchiveError(ValueError):
    """An archive that cannot be read, or a key the program uses that it lacks: the
    message is one line naming the file."""


def split_spec(spec: str) -> tuple[str, str]:
    """(scope, file) of one `--parameters` value, split as iree-run-module splits it: at
    the first '=', a bare FILE being the default scope ""."""
    scope, eq, path = spec.partition("=")
    return (scope, path) if eq else ("", spec)


def flag(scope: str, path: str) -> str:
    """iree-run-module's flag for one archive. A default-scope path holding '=' is given
    an empty scope first (`--parameters==/a=b/w.irpa`): bare, iree-run-module would split
    it at its first '=' into a scope and a file that does not exist."""
    return f"--parameters={scope}={path}" if scope or "=" in path else f"--parameters={path}"


def references(text: str) -> list[tuple[str, str]]:
    """The (scope, key) pairs text refers to, each once, in order of first use."""
    found: dict[tuple[str, str], None] = {}
    for m in REFERENCE.finditer(text):
        scope, key = (m.group(1), m.group(2)) if m.group(2) is not None else ("", m.group(1))
        found[(_unescape(scope), _unescape(key))] = None
    return list(found)


def count(text: str) -> int:
    """How many parameters text needs from outside its file (the workspace's `outside`)."""
    return len(references(text)) if "#stream.parameter.named<" in text else 0


def _unescape(s: str) -> str:
    return re.sub(r"\\(.)", r"\1", s)


@attrs.define
class Archives:
    """The archives of a run, by scope: each loaded once (mapped), read by key. A scope
    may have several files (`--parameters model=w.irpa --parameters model=b.irpa`):
    iree-run-module adds each to that scope's index, and a key is looked up in them in
    the order given (the first that has it: as iree-run-module resolves it)."""

    files: dict[str, list[str]]  # scope: its paths, as the user gave them, in order
    _indexes: dict[str, object] = attrs.field(factory=dict, repr=False)  # by path
    _entries: dict[str, dict[str, object]] = attrs.field(factory=dict, repr=False)  # by path

    @classmethod
    def open(cls, specs: Sequence[str]) -> Archives:
        """Every archive loaded; ArchiveError names the first that is missing or unreadable."""
        files: dict[str, list[str]] = {}
        for scope, path in map(split_spec, specs):
            if path not in files.setdefault(scope, []):
                files[scope].append(path)
        archives = cls(files)
        for paths in files.values():
            for path in paths:
                archives._load(path)
        return archives

    def _load(self, path: str) -> dict[str, object]:
        if path in self._entries:
            return self._entries[path]
        if not os.path.isfile(path):
            what = "does not exist" if not os.path.exists(path) else "is not a file"
            raise ArchiveError(f"the parameter archive {path} (--parameters) {what}")
        rt = _runtime()
        index = rt.ParameterIndex()
        try:
            index.load(path)  # mapped: a multi-gigabyte archive is not read into memory
        except Exception as exc:
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ArchiveError(f"the parameter archive {path} (--parameters) cannot be read: {reason}") from None
        self._indexes[path] = index  # keeps the mapping alive
        self._entries[path] = dict(index.items())
        return self._entries[path]

    def _entry(self, scope: str, key: str) -> object | None:
        """scope's entry key, from the first of its archives that has it."""
        for path in self.files.get(scope, ()):
            entry = self._load(path).get(key)
            if entry is not None:
                return entry
        return None

    def lookup(self, scope: str, key: str) -> np.ndarray | None:
        """The bytes of scope's entry key as uint8, without a copy: one dimension for an
        entry stored in the file, two (count, pattern) for a splat; None when no archive
        of that scope was given or none has such a key."""
        entry = self._entry(scope, key)
        if entry is None:
            return None
        import numpy as np

        rt = _runtime()

        if entry.is_splat:  # type: ignore[attr-defined]
            pattern = np.frombuffer(entry.splat_pattern, np.uint8)  # type: ignore[attr-defined]
            count = entry.length // max(len(pattern), 1)  # type: ignore[attr-defined]
            return np.broadcast_to(pattern, (count, len(pattern)))
        return np.asarray(rt.parameter_index_entry_as_numpy_flat_ndarray(entry), np.uint8)

    def length(self, scope: str, key: str) -> int | None:
        """The byte length of scope's entry key (None: no such entry), read from the index
        alone: what a strategy checks before it asks for the bytes."""
        entry = self._entry(scope, key)
        return None if entry is None else int(entry.length)  # type: ignore[attr-defined]

    def missing(self, text: str) -> list[tuple[str, str]]:
        """The references text makes in a given scope whose key none of its archives has."""
        return [(s, k) for s, k in references(text) if s in self.files and self._entry(s, k) is None]

    def paths(self, scope: str) -> list[str]:
        """scope's archives, in the order given."""
        return list(self.files.get(scope, ()))


def _runtime() -> Any:
    """The runtime's bindings, loaded only by a run given archives. Their leak checker
    is off: the archives stay mapped until the process exits, and nanobind then printed
    a hundred lines of "leaked function" after the summary."""
    import iree._runtime_libs._runtime as native
    import iree.runtime as rt

    native.disable_leak_checker()
    return rt


def needed(text: str) -> list[str]:
    """The references text still makes, spelled `scope::key` (`key` in the default scope):
    what the report says a repro needs an archive for."""
    return [f"{s}::{k}" if s else k for s, k in references(text)]


def note(text: str, given: bool) -> str | None:
    """The summary's line on archives: whether the result still needs one, and for which
    keys; None for a run that neither had archives nor a program that uses them."""
    keys = needed(text)
    if not keys:
        return "the result needs no parameter archive: its parameters are inline" if given else None
    shown = ", ".join(keys[:8]) + (f" and {len(keys) - 8} more" if len(keys) > 8 else "")
    return f"the result still needs a parameter archive for {len(keys)} key{'s' if len(keys) > 1 else ''}: {shown}"


def absolute(specs: Iterable[str]) -> tuple[tuple[str, str], ...]:
    """(scope, absolute path) pairs: checks run in a temp dir of their own."""
    return tuple((scope, os.path.abspath(path)) for scope, path in map(split_spec, specs))
