"""Cutting spans out of text: what the text strategies share. Their edits are spans of the
current text; any subset, in any order, nested or overlapping (a deleted block and a line
inside it), cuts their union once."""

from __future__ import annotations

from collections.abc import Iterable


def cut(text: str, spans: Iterable[tuple[int, int]]) -> str:
    """text without the union of the half-open spans [start, end)."""
    kept: list[str] = []
    at = 0  # everything before `at` is decided
    for start, end in sorted(spans):
        if start > at:
            kept.append(text[at:start])
        at = max(at, end)
    kept.append(text[at:])
    return "".join(kept)


def line_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each line, its line break included."""
    spans, at = [], 0
    for line in text.splitlines(keepends=True):
        spans.append((at, at + len(line)))
        at += len(line)
    return spans
