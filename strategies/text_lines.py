"""text-lines: delete lines. The first fallback when the input does not parse as MLIR
(C-Reduce/C-Vise pass_lines: coarse, so it takes the easy part fast)."""

from __future__ import annotations

from collections.abc import Sequence

from reducer.core.strategy import Edit, Program, Strategy
from strategies._text import cut, line_spans


class TextLines(Strategy[Program]):
    name = "text-lines"
    summary = "delete lines (fallback for input that does not parse)"
    modes = frozenset({"text"})

    def opportunities(self, program: Program) -> list[Edit]:
        text = program.text
        return [Edit("line", (), span) for span in line_spans(text) if text[span[0] : span[1]].strip()]

    def apply(self, program: Program, edits: Sequence[Edit]) -> str | None:
        return cut(program.text, (e.arg for e in edits))
