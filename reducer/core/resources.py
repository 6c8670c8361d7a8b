"""Big inline weights: the `dense_resource` blobs of a text input, kept out of the run.

A model with inline weights keeps them in the resource section after the module
(`{-# dialect_resources: { builtin: { key: "0x..." } } #-}`): hundreds of megabytes of
hex that no strategy reads. `split` maps the file, finds each builtin blob's byte range
without turning its hex into a Python string, and gives the program without them; the
program keeps its `dense_resource<key>` references, so the parser, the workspace, the
strategies, the cache and the state see a few kilobytes where the file has gigabytes.

A program becomes a file again with `Blobs.attach`: the section it gets holds only the
blobs it still uses, and the bytes are copied from the input file by the kernel when
the candidate's file is written (`Attached.write_to`), never held here. Everything else
in the section (other dialects' resources, `external_resources` such as a crash
reproducer's `mlir_reproducer`) stays in the program's text as it was.
"""

from __future__ import annotations

import concurrent.futures
import errno
import hashlib
import math
import mmap
import os
import re
import threading
from collections.abc import Iterator, Mapping
from typing import BinaryIO

import attrs

from reducer.core.ir import bits

#: A blob reference: `dense_resource<key>` (the key bare or quoted; group 1 as spelled).
REFERENCE = re.compile(r'dense_resource<("(?:[^"\\\n]|\\.)*"|[^>\s"]+)>')
#: What MLIR appends to a key it already holds when it parses the same name again in one
#: context (`weights` -> `weights_1`): the workspace parses each program in one context.
_RENAMED = re.compile(r"_\d+$")
#: Bytes the scan maps and reads at a time: pages it has read are given back at once, so
#: finding where a gigabyte blob ends does not keep a gigabyte resident.
WINDOW = 1 << 25


class SectionError(Exception):
    """The text after the module is not a resource section this scanner reads."""


@attrs.frozen
class Span:
    """A blob's value in the input file: the quoted hex, quotes included."""

    offset: int
    length: int


@attrs.frozen
class Blobs:
    """The input file's builtin blobs, by key as spelled (`weights`, `"a key"`)."""

    path: str
    spans: Mapping[str, Span]

    @property
    def sizes(self) -> dict[str, int]:
        """The bytes each key adds to a file that uses it: what a program's size counts."""
        return {key: span.length for key, span in self.spans.items()}

    def used(self, program: bytes | str) -> list[str]:
        """The keys program refers to that have a blob, in order of first use."""
        text = program.decode(errors="surrogateescape") if isinstance(program, bytes) else program
        found: dict[str, None] = {}
        for m in REFERENCE.finditer(text):
            if m.group(1) in self.spans:
                found.setdefault(m.group(1))
        return list(found)

    def attach(self, program: bytes) -> bytes:
        """program as its file: the same bytes, then a section with the blobs it uses,
        each cut to what its types hold (`written`)."""
        if b"dense_resource<" not in program:
            return program
        text = program.decode(errors="surrogateescape")
        keep = written(text, self.sizes)
        if not keep:
            return program
        blobs = tuple((k, Span(self.spans[k].offset, n)) for k, n in keep.items())
        return Attached(program, self.path, blobs, {k: self.spans[k].length for k in keep})


#: A blob's use with its type: `dense_resource<key> : tensor<4x8xf32>` (dims, element).
_TYPED = re.compile(r"\s*:\s*(?:tensor|vector)<((?:\d+x)*)([a-z]\w*)>")
#: Quotes, `0x` and the alignment word: the hex of a blob before its data.
_HEAD = len('""') + len("0x") + 8


def written(text: str, sizes: Mapping[str, int]) -> dict[str, int]:
    """The bytes of each blob text uses, as its file gets it (the quotes included), in
    order of first use. A blob whose every use has a static type of whole bytes is cut
    to the largest of those types: a shrunk constant's blob keeps its first elements,
    as a shrunk dense literal does. Otherwise it is written whole."""
    need: dict[str, int] = {}
    own = _own_blobs(text)
    for m in REFERENCE.finditer(text):
        key = m.group(1)
        if key not in sizes or key in own:
            continue
        typed = _TYPED.match(text, m.end())
        width = bits(typed.group(2)) if typed is not None else 0
        if typed is None or width % 8 or typed.group(2).startswith("complex"):
            need[key] = sizes[key]
            continue
        elements = math.prod(int(d) for d in typed.group(1).split("x")[:-1])
        need[key] = min(sizes[key], max(need.get(key, 0), _HEAD + 2 * elements * (width // 8)))
    return need


#: A hex blob a text's own resource section holds (a compiler's dump carries its blobs).
_OWN = re.compile(r'^\s*("(?:[^"\\\n]|\\.)*"|[^\s:"]+)\s*:\s*"0x', re.M)


def _own_blobs(text: str) -> set[str]:
    """The keys whose blobs text holds itself (after its `{-#`): those it needs no copy of."""
    at = text.find("{-#")
    return set() if at < 0 else {m.group(1) for m in _OWN.finditer(text, at)}


def section(blobs: list[tuple[str, Span]], whole: Mapping[str, int]) -> Iterator[tuple[str, Span | None]]:
    """The pieces of a resource section holding these blobs (each span the bytes of its
    value to copy; one shorter than the value in the file gets its closing quote here):
    text, or a span to copy."""
    yield "\n{-#\n  dialect_resources: {\n    builtin: {\n", None
    for i, (key, span) in enumerate(blobs):
        yield f"      {key}: ", None
        if span.length < whole[key]:
            yield "", Span(span.offset, span.length - 1)
            yield '"', None
        else:
            yield "", span
        yield (",\n" if i + 1 < len(blobs) else "\n"), None
    yield "    }\n  }\n#-}\n", None


class Attached(bytes):
    """A program whose file also holds blobs of the input file. As bytes it is the
    program, so what keys, caches and compares candidates (and the verdict journal)
    reads only that; what writes the file (`reducer.core.oracle.write_data`) calls
    `write_to`, and the kernel copies the blobs from the input. `whole` is the file's
    bytes, for what must travel whole (Dask) or be read (bytecode output)."""

    path: str
    blobs: tuple[tuple[str, Span], ...]  # each with the bytes of its value to write
    whole_sizes: dict[str, int]  # each blob's bytes in the input file

    def __new__(
        cls, program: bytes, path: str, blobs: tuple[tuple[str, Span], ...], whole_sizes: Mapping[str, int]
    ) -> Attached:
        self = super().__new__(cls, program)
        self.path, self.blobs, self.whole_sizes = path, blobs, dict(whole_sizes)
        return self

    def __reduce__(self) -> tuple[object, ...]:
        return (Attached, (bytes(self), self.path, self.blobs, self.whole_sizes))

    def write_to(self, f: BinaryIO) -> None:
        f.flush()
        fd = f.fileno()
        _write_all(fd, bytes(self))
        with open(self.path, "rb") as src:
            for text, span in section(list(self.blobs), self.whole_sizes):
                if span is None:
                    _write_all(fd, text.encode())
                else:
                    _copy(src.fileno(), fd, span.offset, span.length)

    def whole(self) -> bytes:
        parts = [bytes(self)]
        with open(self.path, "rb") as src:
            for text, span in section(list(self.blobs), self.whole_sizes):
                parts.append(text.encode() if span is None else os.pread(src.fileno(), span.length, span.offset))
        return b"".join(parts)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _copy(src: int, dst: int, offset: int, length: int) -> None:
    """length bytes of src from offset, appended to dst, in the kernel where it can."""
    end = offset + length
    while offset < end:
        try:
            done = os.copy_file_range(src, dst, end - offset, offset)
        except OSError as exc:
            if exc.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.EPERM):
                raise
            break
        if done == 0:
            break
        offset += done
    while offset < end:  # no copy_file_range between these files: a bounded buffer
        chunk = os.pread(src, min(end - offset, 1 << 20), offset)
        if not chunk:
            raise OSError(errno.EIO, "the input file is shorter than when it was read")
        _write_all(dst, chunk)
        offset += len(chunk)


def unrenamed(key: str, known: Mapping[str, object]) -> str:
    """The input's key that `key` is MLIR's rename of (`weights_3` -> `weights`), or key."""
    if key in known:
        return key
    quoted = key.startswith('"') and key.endswith('"') and len(key) >= 2
    bare = key[1:-1] if quoted else key
    while True:
        shorter = _RENAMED.sub("", bare)
        if shorter == bare:
            return key
        bare = shorter
        spelled = f'"{bare}"' if quoted else bare
        if spelled in known:
            return spelled


@attrs.frozen
class Split:
    """An input file read with its blobs split off: the rest of its bytes (the program),
    the blobs, and the digest of the whole file (what a resumed run must find again)."""

    program: bytes
    blobs: Blobs
    digest: bytes


_SPACE = b" \t\r\n"


def split(path: str) -> Split | None:
    """The file without its builtin blobs; None when it has none, or when what follows
    the module is not a section this reads (then the file is read whole, as before).
    The file's digest is read alongside the scan, on another thread (hashing releases
    the GIL): the two take the time of the longer, not of both."""
    stop = threading.Event()
    with open(path, "rb") as f, concurrent.futures.ThreadPoolExecutor(1) as pool:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            return None
        digest = pool.submit(_digest, path, stop)
        try:
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
                start = _section_start(mm)
                if start is None:
                    return None
                try:
                    pieces, spans = _Scanner(mm, start).scan()
                except SectionError:
                    return None
                if not spans:
                    return None
            return Split(_program(path, start, pieces), Blobs(os.path.abspath(path), spans), digest.result())
        finally:
            stop.set()


def _program(path: str, start: int, pieces: list[tuple[int, int]]) -> bytes:
    """The module's bytes and the kept pieces of the section, read from the file."""
    with open(path, "rb") as f:
        head = os.pread(f.fileno(), start, 0)
        rest = b"".join(os.pread(f.fileno(), n, at) for at, n in pieces)
    if not rest.strip():
        return head.rstrip(_SPACE) + b"\n"
    return head + rest


def _section_start(mm: mmap.mmap) -> int | None:
    """Where the first `{-#` at the start of a line is: the resource section."""
    at = 0
    while True:
        at = mm.find(b"{-#", at)
        if at < 0:
            return None
        line = mm.rfind(b"\n", 0, at) + 1
        if not mm[line:at].strip(_SPACE):
            return line
        at += 3


def _digest(path: str, stop: threading.Event) -> bytes:
    """The file's sha256, read in windows (nothing of it stays resident); b"" if stopped."""
    h = hashlib.sha256()
    with open(path, "rb", buffering=0) as f:
        while not stop.is_set():
            chunk = f.read(WINDOW)
            if not chunk:
                return h.digest()
            h.update(chunk)
    return b""


def _release(mm: mmap.mmap, at: int, length: int) -> None:
    """Give back the pages of mm[at : at + length] (the page cache keeps them)."""
    page = at - at % mmap.PAGESIZE
    length = min(length + at - page, len(mm) - page)
    if length > 0 and hasattr(mmap, "MADV_DONTNEED"):
        mm.madvise(mmap.MADV_DONTNEED, page, length)


class _Scanner:
    """Reads resource sections from `start` to the end of the file: the byte ranges of
    everything but the builtin hex blobs (`pieces`), and those blobs (`spans`)."""

    def __init__(self, mm: mmap.mmap, start: int) -> None:
        self.mm, self.at = mm, start
        self.pieces: list[tuple[int, int]] = []
        self.spans: dict[str, Span] = {}

    def scan(self) -> tuple[list[tuple[int, int]], dict[str, Span]]:
        mm = self.mm
        kept = self.at  # the start of what is kept and not yet in pieces
        while True:
            self._space()
            if self.at >= len(mm):
                break
            if mm[self.at : self.at + 3] != b"{-#":
                raise SectionError(f"expected '{{-#' at byte {self.at}")
            self.at += 3
            body = self.at
            entries = self._entries(b"#-}")
            cut, gone = self._blob_cuts(entries)
            if gone:  # the whole section goes
                self.pieces.append((kept, body - 3 - kept))
                kept = self.at
                continue
            for a, b in cut:
                self.pieces.append((kept, a - kept))
                kept = b
        self.pieces.append((kept, len(mm) - kept))
        self.pieces = [(a, n) for a, n in self.pieces if n > 0]
        return self.pieces, self.spans

    # Each entry: (name, start of name, end after value and its comma, value's inner entries or None, value span)
    def _entries(self, close: bytes) -> list[tuple[bytes, int, int, list | None, tuple[int, int]]]:
        out: list[tuple[bytes, int, int, list | None, tuple[int, int]]] = []
        while True:
            self._space()
            if self.mm[self.at : self.at + len(close)] == close:
                self.at += len(close)
                return out
            begin = self.at
            name = self._key()
            self._space()
            self._expect(b":")
            self._space()
            value_start = self.at
            inner = None
            if self.mm[self.at : self.at + 1] == b"{":
                self.at += 1
                inner = self._entries(b"}")
            else:
                self._value()
            value = (value_start, self.at)
            self._space()
            if self.mm[self.at : self.at + 1] == b",":
                self.at += 1
            out.append((name, begin, self.at, inner, value))

    def _blob_cuts(self, entries: list) -> tuple[list[tuple[int, int]], bool]:
        """Record the builtin hex blobs among a section's entries: the byte ranges that
        cut them (and what they leave empty) out, and whether nothing of it is left."""
        cut: list[tuple[int, int]] = []
        gone_sections: set[int] = set()
        for i, (name, _begin, _end, inner, _value) in enumerate(entries):
            if name != b"dialect_resources" or inner is None:
                continue
            gone_dialects: set[int] = set()
            for j, (dialect, _b, _e, blobs, _v) in enumerate(inner):
                if dialect != b"builtin" or blobs is None:
                    continue
                hexes = {k for k, e in enumerate(blobs) if e[3] is None and self.mm[e[4][0] : e[4][0] + 3] == b'"0x'}
                for k in sorted(hexes):
                    key, _kb, _ke, _none, (vs, ve) = blobs[k]
                    self.spans[key.decode(errors="surrogateescape")] = Span(vs, ve - vs)
                if hexes and len(hexes) == len(blobs):
                    gone_dialects.add(j)
                else:
                    cut += _cuts(blobs, hexes)
            if gone_dialects and len(gone_dialects) == len(inner):
                gone_sections.add(i)
            else:
                cut += _cuts(inner, gone_dialects)
        if gone_sections and len(gone_sections) == len(entries):
            return [], True
        cut += _cuts(entries, gone_sections)
        return _merged(cut), False

    def _space(self) -> None:
        mm = self.mm
        while self.at < len(mm) and mm[self.at] in _SPACE:
            self.at += 1
        if mm[self.at : self.at + 2] == b"//":
            end = mm.find(b"\n", self.at)
            self.at = len(mm) if end < 0 else end
            self._space()

    def _expect(self, token: bytes) -> None:
        if self.mm[self.at : self.at + len(token)] != token:
            raise SectionError(f"expected {token!r} at byte {self.at}")
        self.at += len(token)

    def _key(self) -> bytes:
        mm = self.mm
        if mm[self.at : self.at + 1] == b'"':
            begin = self.at
            self._string()
            return mm[begin : self.at]
        m = re.match(rb"[A-Za-z_][\w.$-]*", mm[self.at : self.at + 256])
        if m is None:
            raise SectionError(f"expected a key at byte {self.at}")
        self.at += m.end()
        return m.group(0)

    def _string(self) -> None:
        """Past a quoted string; the closing quote of a hex blob is found in windows."""
        mm = self.mm
        at = self.at + 1
        while True:
            end = self._find(b'"', at)
            if end < 0:
                raise SectionError("a string that does not end")
            slashes = 0
            while mm[end - 1 - slashes] == 0x5C:  # backslash
                slashes += 1
            if slashes % 2 == 0:
                self.at = end + 1
                return
            at = end + 1

    def _find(self, byte: bytes, at: int) -> int:
        mm = self.mm
        while at < len(mm):
            found = mm.find(byte, at, at + WINDOW)
            _release(mm, at, min(WINDOW, (found if found >= 0 else len(mm)) - at))
            if found >= 0:
                return found
            at += WINDOW
        return -1

    def _value(self) -> None:
        mm = self.mm
        if mm[self.at : self.at + 1] == b'"':
            self._string()
            return
        m = re.match(rb"[^,}\s]+", mm[self.at : self.at + 4096])
        if m is None:
            raise SectionError(f"expected a value at byte {self.at}")
        self.at += m.end()


def _cuts(entries: list, remove: set[int]) -> list[tuple[int, int]]:
    """The byte ranges that take entries[i] for i in remove out of their dictionary and
    leave it well-formed: a last entry takes the comma before it along."""
    kept = [i for i in range(len(entries)) if i not in remove]
    cuts = []
    for i in sorted(remove):
        begin, end = entries[i][1], entries[i][2]
        before = [k for k in kept if k < i]
        if before and not any(k > i for k in kept):
            begin = entries[before[-1]][4][1]  # after the value before: its comma goes
        cuts.append((begin, end))
    return cuts


def _merged(cuts: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for a, b in sorted(cuts):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def missing(blobs: Blobs | None, program: str) -> list[str]:
    """Keys program refers to with no blob in the file."""
    have = blobs.spans if blobs is not None else {}
    return sorted({m.group(1) for m in REFERENCE.finditer(program)} - set(have))
