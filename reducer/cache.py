"""Oracle verdicts by content: the same candidate text is never tested twice.

Strategies converge on the same program often (Tian et al. found 24-62% duplicates,
research/general-reducers.md §0.5), and the final no-progress round re-derives many
candidates that were already judged.
"""

from __future__ import annotations

import hashlib


def key(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=20).digest()


class VerdictCache:
    def __init__(self) -> None:
        self._verdicts: dict[bytes, bool] = {}
        self.hits = 0

    def get(self, k: bytes) -> bool | None:
        verdict = self._verdicts.get(k)
        if verdict is not None:
            self.hits += 1
        return verdict

    def peek(self, k: bytes) -> bool | None:
        """Like get, without counting a hit (for verdicts this batch just produced)."""
        return self._verdicts.get(k)

    def put(self, k: bytes, interesting: bool) -> None:
        self._verdicts[k] = interesting

    def __len__(self) -> int:
        return len(self._verdicts)
