"""types: simpler types everywhere at once, as the IREE debugging guide suggests
(try other data types; make shapes static; drop unit dimensions).

Works on the canonical text, like shrink-tensors' dimension edits, so signatures and
the ops using a type change together: element types are demoted program-wide (f64 ->
f32, i64 -> i32, and f32 -> f16 as one more candidate), each dynamic shaped type is made
static (every `?` becomes 1), and each shaped type with unit dimensions loses them. The
verifier rejects what an op cannot accept (e.g. a dynamic size operand left behind).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from reducer.core.ir import SHAPED_DIMS
from reducer.core.strategy import Edit, Program, Strategy

DEMOTIONS = (("f64", "f32"), ("i64", "i32"), ("f32", "f16"))


def _token(name: str) -> re.Pattern[str]:
    """The type name as a whole token: not inside an identifier, an SSA name or a symbol."""
    return re.compile(rf"(?:(?<=[\d?\]]x)|(?<![\w@%#$.-])){name}(?![\w.])")


def _shaped_types(text: str) -> list[str]:
    """Every distinct shaped type spelling `kind<dims x element>` (no nested '<')."""
    seen: dict[str, None] = {}
    for m in SHAPED_DIMS.finditer(text):
        end = text.find(">", m.end())
        spelled = text[m.start() : end + 1]
        if end > 0 and "<" not in spelled[len(m.group(1)) + 1 :]:
            seen.setdefault(spelled, None)
    return list(seen)


def _static(t: str) -> str:
    return t.replace("?", "1")


def _no_unit_dims(t: str) -> str:
    kind, rest = t.split("<", 1)
    parts = rest[:-1].split("x")
    dims, element = parts[:-1], parts[-1]
    kept = [d for d in dims if d != "1"]
    return f"{kind}<{'x'.join(kept + [element])}>"


class Types(Strategy[Program]):
    name = "types"
    summary = "demote element types (f64->f32, i64->i32, f32->f16), make shapes static, drop unit dims"

    def opportunities(self, program: Program) -> list[Edit]:
        text = program.text
        edits = [Edit("demote", (), pair) for pair in DEMOTIONS if _token(pair[0]).search(text)]
        types = _shaped_types(text)
        edits += [Edit("static", (), t) for t in types if "?" in t]
        edits += [
            Edit("unit-dims", (), t)
            for t in types
            if "1" in t.split("<", 1)[1].split("x")[:-1] and not t.startswith("memref")
        ]
        return edits

    def apply(self, program: Program, edits: Sequence[Edit]) -> str | None:
        text = program.text
        rewrites = {}
        for e in edits:
            if e.kind == "static":
                rewrites[e.arg] = _static(e.arg)
            elif e.kind == "unit-dims":
                rewrites[e.arg] = _no_unit_dims(rewrites.get(e.arg, e.arg))
        if rewrites:
            pattern = re.compile("|".join(re.escape(t) for t in sorted(rewrites, key=len, reverse=True)))
            text = pattern.sub(lambda m: rewrites[m.group(0)], text)
        for e in edits:
            if e.kind == "demote":
                old, new = e.arg
                text = _token(old).sub(new, text)
        return text if text != program.text else None
