"""Interesting while the compiler fails the way it failed on the original.

The failure is the original's signature (reducer/iree/signature.py) unless the user relaxes
it (--allow-slippage): a candidate that fails differently is "a different bug", which
is how a compiler reduction usually goes wrong.
"""

from __future__ import annotations

import re
from typing import ClassVar

import attrs

from reducer.core.oracle import CancelFn, Oracle, Verdict, candidate_dir, never, run_in
from reducer.iree import signature
from reducer.iree.oracles.command import Command


@attrs.frozen
class CompileOracle(Oracle):
    #: The command fields whose flags flag reduction may remove.
    commands: ClassVar[tuple[str, ...]] = ("command",)
    kind: ClassVar[str] = "compile-failure"
    command: Command
    basename: str
    timeout: float | None
    expect_error: str | None = None  # a regex the stderr must match
    expect_crash: bool = False
    allow_slippage: bool = False  # any failure (that meets the expectations) counts
    expected: signature.Signature | None = None  # the original's, once calibrated

    def run(self, data: bytes, cancel: CancelFn = never) -> Verdict:
        with candidate_dir(data, self.basename) as (tmp, path):
            r = run_in(self.command.render(input=path, output="/dev/null", tmp=tmp), tmp, self.timeout, cancel=cancel)
        sig = signature.of(r.returncode, r.stderr)
        outcome = self.judge(sig, r.stderr, r.timed_out)
        return Verdict(outcome == "interesting", r.returncode, r.timed_out, r.seconds, r.stderr, outcome, sig)

    def judge(self, sig: signature.Signature, stderr: str, timed_out: bool = False) -> str:
        if timed_out:
            return "timeout"
        if sig.kind == "ok":
            return "no failure"
        if self.expect_crash and sig.kind != "crash":
            return "different bug"
        if self.expect_error and not re.search(self.expect_error, stderr, re.MULTILINE):
            return "different bug"
        if self.expected is not None and not self.allow_slippage and not sig.matches(self.expected):
            return "different bug"
        return "interesting"

    def calibrate(self, original: Verdict) -> CompileOracle:
        return attrs.evolve(self, expected=signature.of_verdict(original))

    def failure(self) -> signature.Signature | None:
        return self.expected

    def reproducer(self, path: str) -> str:
        return self.command.shell(input=path, output="/dev/null")

    def why_not(self, verdict: Verdict) -> str:
        if verdict.outcome == "no failure":
            return "the command succeeds on it"
        if self.expect_crash and verdict.signature and verdict.signature.kind != "crash":
            return f"it does not crash ({verdict.signature.describe()})"
        if self.expect_error:
            return f"its stderr does not match --expect-error {self.expect_error!r}" + (
                f" ({verdict.signature.describe()})" if verdict.signature else ""
            )
        return super().why_not(verdict)

    def with_command(self, command: Command) -> CompileOracle:
        return attrs.evolve(self, command=command)
