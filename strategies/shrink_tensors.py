"""shrink-tensors: turn big dense literals into splats, and shrink static dimensions.

Both work on the canonical text: a dimension size is substituted in every shaped type
at once, which keeps function signatures and the ops using them consistent; a
candidate the verifier rejects (e.g. an op that spells the size in an attribute) is
simply skipped. Text also sidesteps the bindings' failure on complex dense literals.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

import attrs

from reducer.core.ir import SHAPED_DIMS
from reducer.core.strategy import Edit, Program, Strategy

_DENSE = re.compile(r"\b(dense|dense_resource)<")
_FIRST_SCALAR = re.compile(r"\(\s*[^)]*\)|[^\[\],\s]+")


@attrs.frozen
class Literal:
    start: int  # of "dense"
    end: int  # one past the literal's closing '>'
    element: str  # element type, e.g. "f32"
    splat_value: str


def _closing(text: str, i: int) -> int:
    """Index just past the '>' that closes the '<' at text[i - 1]."""
    depth = 1
    while i < len(text) and depth:
        ch = text[i]
        if ch == '"':
            i = text.index('"', i + 1)
        elif ch == "<":
            depth += 1
        elif ch == ">" and text[i - 1] != "-":
            depth -= 1
        i += 1
    return i


def _element_type(shaped: str) -> str | None:
    inner = shaped[shaped.index("<") + 1 : -1]
    depth, cut = 0, len(inner)
    for i, ch in enumerate(inner):  # drop an encoding / layout after a top-level comma
        depth += ch == "<"
        depth -= ch == ">"
        if ch == "," and depth == 0:
            cut = i
            break
    inner = inner[:cut].strip()
    m = re.match(r"(?:(?:\d+|\?|\[\d+\])x)*(.+)$", inner)
    return m.group(1) if m else None


def _zero(element: str) -> str:
    if element == "i1":
        return "false"
    if re.fullmatch(r"[su]?i\d+|index", element):
        return "0"
    if element.startswith("complex<"):
        return "(0.0,0.0)"
    return "0.0"


def find_literals(text: str) -> list[Literal]:
    """Every non-splat dense literal and dense_resource blob reference, with its splat value."""
    found = []
    for m in _DENSE.finditer(text):
        body_start = m.end()
        end = _closing(text, body_start)
        body = text[body_start : end - 1].strip()
        tm = re.match(r"\s*:\s*((?:tensor|vector|memref)<)", text[end:])
        if not tm:
            continue
        type_end = _closing(text, end + tm.end())
        element = _element_type(text[end + tm.start(1) : type_end])
        if element is None:
            continue
        if m.group(1) == "dense":
            if not (body.startswith("[") or body.startswith('"0x')):
                continue  # already a splat
            first = _FIRST_SCALAR.search(body.lstrip("["))
            value = first.group(0) if first and body.startswith("[") else _zero(element)
        else:
            value = _zero(element)
        found.append(Literal(m.start(), end, element, value))
    return found


def find_dims(text: str) -> Counter[int]:
    dims: Counter[int] = Counter()
    for m in SHAPED_DIMS.finditer(text):
        for d in m.group(2).split("x"):
            if d.isdigit() and int(d) > 1:
                dims[int(d)] += 1
    return dims


class ShrinkTensors(Strategy[Program]):
    name = "shrink-tensors"
    summary = "replace dense literals with splats; shrink static dimension sizes everywhere at once"

    def opportunities(self, program: Program) -> list[Edit]:
        literals = self._literals(program)
        order = sorted(range(len(literals)), key=lambda k: (literals[k].start - literals[k].end, k))
        edits = [Edit("splat", (), k) for k in order]
        dims = find_dims(program.text)
        by_size = sorted(dims, reverse=True)
        edits += [Edit("dim", (), (d, 1)) for d in by_size]
        edits += [Edit("dim", (), (d, 2)) for d in by_size if d > 2]
        return edits

    def apply(self, program: Program, edits: Sequence[Edit]) -> str | None:
        literals = self._literals(program)
        text = program.text
        for k in sorted((e.arg for e in edits if e.kind == "splat"), reverse=True):
            lit = literals[k]
            text = f"{text[: lit.start]}dense<{lit.splat_value}>{text[lit.end :]}"
        target: dict[int, int] = {}
        for e in edits:
            if e.kind == "dim":
                d, t = e.arg
                target[d] = min(t, target.get(d, t))
        if target:

            def shrink(m: re.Match[str]) -> str:
                dims = [str(target.get(int(d), d)) if d.isdigit() else d for d in m.group(2).split("x")[:-1]]
                return f"{m.group(1)}<{'x'.join(dims)}x{m.group(3)}"

            text = SHAPED_DIMS.sub(shrink, text)
        return text if text != program.text else None

    @staticmethod
    def _literals(program: Program) -> list[Literal]:
        return program.analysis(_literals_of)


def _literals_of(program: Program) -> list[Literal]:
    """The program's dense literals, found once per program (a regex over the whole text)."""
    return find_literals(program.text)
