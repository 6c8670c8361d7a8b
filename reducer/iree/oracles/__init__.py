"""Built-in oracles from IREE's debugging guides (shared/seeds): a compile failure, a
numeric mismatch between two configurations, a compile-time regression. Each runs the
real tools on the candidate's bytes and knows nothing of IR."""

from typing import TYPE_CHECKING

from reducer.iree.oracles.command import Command, parse_command
from reducer.iree.oracles.compile import CompileOracle
from reducer.iree.oracles.slow import SlowCompileOracle

if TYPE_CHECKING:
    from reducer.iree.oracles.mismatch import MismatchOracle


def __getattr__(name: str) -> object:
    """MismatchOracle on first use: it needs numpy, which every other run's start-up skips."""
    if name == "MismatchOracle":
        from reducer.iree.oracles.mismatch import MismatchOracle

        return MismatchOracle
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Command", "parse_command", "CompileOracle", "MismatchOracle", "SlowCompileOracle"]
