"""ireereduce: reduce MLIR programs to the smallest one still interesting.

`reducer.reduce(...)` is the Python API (docs/api.md); `ireereduce` is the command.
"""

from __future__ import annotations

from typing import Any

__all__ = ["reduce", "Reduction", "UserError", "Monitor"]


def __getattr__(name: str) -> Any:
    # Lazy: importing the package must not load MLIR and the engine for `--version`.
    if name in ("reduce", "Reduction"):
        from reducer import api

        return getattr(api, name)
    if name == "UserError":
        from reducer.session import UserError

        return UserError
    if name == "Monitor":
        from reducer.progress import Monitor

        return Monitor
    raise AttributeError(name)
