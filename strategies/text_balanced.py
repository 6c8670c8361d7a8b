"""text-balanced: delete a balanced {...} or (...) block, or empty it (C-Vise BalancedPass
curly/parens and their "-inside" variants), for input that does not parse."""

from __future__ import annotations

from collections.abc import Sequence

from reducer.core.strategy import Edit, Program, Strategy

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


class TextBalanced(Strategy):
    name = "text-balanced"
    summary = "delete or empty balanced {} / () blocks (fallback for input that does not parse)"
    modes = frozenset({"text"})

    def opportunities(self, program: Program) -> list[Edit]:
        spans = [s for s in balanced_spans(program.text) if s[1] - s[0] > 1]
        edits = [Edit("delete", (), s) for s in spans]
        edits += [Edit("hollow", (), s) for s in spans]
        return edits

    def apply(self, program: Program, edits: Sequence[Edit]) -> str | None:
        cuts: list[tuple[int, int]] = []
        for e in edits:  # a deletion covers everything nested inside it
            start, end = e.arg
            cuts.append((start, end + 1) if e.kind == "delete" else (start + 1, end))
        merged: list[tuple[int, int]] = []
        for start, end in sorted(cuts):
            if merged and start < merged[-1][1]:
                merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
            else:
                merged.append((start, end))
        text = program.text
        for start, end in reversed(merged):
            text = text[:start] + text[end:]
        return text
