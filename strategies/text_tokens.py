"""text-tokens: delete single tokens (C-Reduce rm-toks), the finest fallback granularity."""

from __future__ import annotations

import re
from collections.abc import Sequence

from reducer.core.strategy import Edit, Program, Strategy
from strategies._text import cut

TOKEN = re.compile(r'"(?:[^"\\\n]|\\.)*"|[%@^#!]?[\w.$-]+|\S')


class TextTokens(Strategy[Program]):
    name = "text-tokens"
    summary = "delete single tokens (fallback for input that does not parse)"
    modes = frozenset({"text"})

    def opportunities(self, program: Program) -> list[Edit]:
        return [Edit("token", (), (m.start(), m.end())) for m in TOKEN.finditer(program.text)]

    def apply(self, program: Program, edits: Sequence[Edit]) -> str | None:
        return cut(program.text, (e.arg for e in edits))
