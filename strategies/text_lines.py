"""text-lines: delete lines. The first fallback when the input does not parse as MLIR
(C-Reduce/C-Vise pass_lines; it takes the easy 80% fast)."""

from __future__ import annotations

from collections.abc import Sequence

from reducer.core.strategy import Edit, Program, Strategy


class TextLines(Strategy):
    name = "text-lines"
    summary = "delete lines (fallback for input that does not parse)"
    modes = frozenset({"text"})

    def opportunities(self, program: Program) -> list[Edit]:
        lines = program.text.splitlines(keepends=True)
        return [Edit("line", (), i) for i, line in enumerate(lines) if line.strip()]

    def apply(self, program: Program, edits: Sequence[Edit]) -> str | None:
        gone = {e.arg for e in edits}
        lines = program.text.splitlines(keepends=True)
        return "".join(line for i, line in enumerate(lines) if i not in gone)
