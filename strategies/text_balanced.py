"""text-balanced: delete a balanced {...} or (...) block, or empty it (C-Vise BalancedPass
curly/parens and their "-inside" variants), for input that does not parse."""

from __future__ import annotations

from collections.abc import Sequence

from reducer.core.strategy import Edit, Program, Strategy
from strategies._text import cut

PAIRS = {"{": "}", "(": ")"}


def balanced_spans(text: str) -> list[tuple[int, int]]:
    """(open, close) index pairs of matched brackets, outer ones first; unmatched ones are ignored."""
    spans, stack = [], []
    for i, ch in enumerate(text):
        if ch in PAIRS:
            stack.append((ch, i))
        elif ch in PAIRS.values():
            while stack and PAIRS[stack[-1][0]] != ch:
                stack.pop()
            if stack:
                spans.append((stack.pop()[1], i))
    return sorted(spans)


class TextBalanced(Strategy[Program]):
    name = "text-balanced"
    summary = "delete or empty balanced {} / () blocks (fallback for input that does not parse)"
    modes = frozenset({"text"})

    def opportunities(self, program: Program) -> list[Edit]:
        spans = [s for s in balanced_spans(program.text) if s[1] - s[0] > 1]
        edits = [Edit("delete", (), s) for s in spans]
        edits += [Edit("hollow", (), s) for s in spans]
        return edits

    def apply(self, program: Program, edits: Sequence[Edit]) -> str | None:
        return cut(program.text, map(_cut_span, edits))


def _cut_span(edit: Edit) -> tuple[int, int]:
    """A deletion takes the brackets too; hollowing keeps them (`cut` merges nested ones)."""
    start, end = edit.arg
    return (start, end + 1) if edit.kind == "delete" else (start + 1, end)
