"""Built-in oracles from IREE's debugging guides (shared/seeds): a compile failure, a
numeric mismatch between two configurations, a compile-time regression. Each runs the
real tools on the candidate's bytes and knows nothing of IR."""

from reducer.iree.oracles.command import Command, parse_command
from reducer.iree.oracles.compile import CompileOracle
from reducer.iree.oracles.mismatch import MismatchOracle
from reducer.iree.oracles.slow import SlowCompileOracle

__all__ = ["Command", "parse_command", "CompileOracle", "MismatchOracle", "SlowCompileOracle"]
