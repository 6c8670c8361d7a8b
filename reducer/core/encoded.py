"""An executor that hands its checks another form of each program (`Encoded`).

The engine, the cache, the journal and the workflows deal in one form, the canonical
text; where the user's check expects another (MLIR bytecode, for a bytecode input),
this executor, under all of them, converts each program just before it is checked.
It knows only a function from bytes to bytes, so it stays blind to IR as the oracle is.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from typing import Any

from reducer.core.executor import Executor
from reducer.core.oracle import Oracle, Verdict


class Encoded(Executor):
    """Checks `encode(data)` on `inner`. A program with no encoded form (`encode` gives
    None: text that does not parse has no bytecode) is not interesting, unchecked:
    the check could not be given it in its input's form."""

    def __init__(self, inner: Executor, encode: Callable[[bytes], bytes | None], unencodable: str) -> None:
        self.inner = inner
        self.encode = encode
        self.unencodable = unencodable  # why such a program is not interesting, in a verdict's words
        self.workers = inner.workers
        self.stats = inner.stats

    def submit(self, data: bytes, oracle: Oracle | None = None) -> concurrent.futures.Future[Verdict]:
        encoded = self.encode(data)
        if encoded is None:
            done: concurrent.futures.Future[Verdict] = concurrent.futures.Future()
            done.set_result(Verdict(False, None, outcome="not interesting", stderr_tail=self.unencodable))
            return done
        return self.inner.submit(encoded, oracle)

    def cancel(self, future: concurrent.futures.Future[Verdict]) -> None:
        self.inner.cancel(future)  # one of its own, or one made here (which it does not know)

    def close(self, abort: bool = False) -> None:
        self.inner.close(abort)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
