"""text-tokens: delete single tokens (C-Reduce rm-toks), the finest fallback granularity."""

from __future__ import annotations

import re
from collections.abc import Sequence

from reducer.core.strategy import Edit, Program, Strategy

TOKEN = re.compile(r'"(?:[^"\\\n]|\\.)*"|[%@^#!]?[\w.$-]+|\S')


class TextTokens(Strategy):
    name = "text-tokens"
    summary = "delete single tokens (fallback for input that does not parse)"
    modes = frozenset({"text"})

    def opportunities(self, program: Program) -> list[Edit]:
        return [Edit("token", (), (m.start(), m.end())) for m in TOKEN.finditer(program.text)]

    def apply(self, program: Program, edits: Sequence[Edit]) -> str | None:
        text = program.text
        for start, end in sorted((e.arg for e in edits), reverse=True):
            text = text[:start] + text[end:]
        return text
