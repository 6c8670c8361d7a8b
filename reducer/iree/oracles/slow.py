"""Interesting while compiling takes longer than a limit: an absolute number of seconds,
or N times what a second compiler or flag set takes on the same candidate.

Timing is noisy, so a candidate measured just above the limit is measured again and
judged by its fastest run (noise only ever adds time). A run that hits the timeout is
slow by definition. By default a candidate must also end the way the original did (it
compiled, or failed the same way): a reduction that turns a slow compile into a slow
crash is chasing something else.
"""

from __future__ import annotations

from typing import ClassVar

import attrs

from reducer.core.oracle import CancelFn, Oracle, Run, Verdict, candidate_dir, never, run_in
from reducer.iree import signature
from reducer.iree.oracles.command import Command

#: Measured above the limit by less than this factor: measure again.
NEAR = 1.25


@attrs.frozen
class SlowCompileOracle(Oracle):
    #: The command fields whose flags flag reduction may remove.
    commands: ClassVar[tuple[str, ...]] = ("command", "against")
    kind: ClassVar[str] = "compile-time"
    measures_time: ClassVar[bool] = True
    command: Command
    basename: str
    timeout: float | None
    seconds: float | None = None  # absolute limit
    factor: float | None = None  # or: this many times the time of `against`
    against: Command | None = None
    repeats: int = 3
    allow_slippage: bool = False
    expected: signature.Signature | None = None

    def run(self, data: bytes, cancel: CancelFn = never) -> Verdict:
        with candidate_dir(data, self.basename) as (tmp, path):
            runs: list[Run] = []
            refs: list[Run] = []
            while True:
                r = run_in(
                    self.command.render(input=path, output="/dev/null", tmp=tmp), tmp, self.timeout, cancel=cancel
                )
                runs.append(r)
                if self.against is not None:
                    refs.append(
                        run_in(
                            self.against.render(input=path, output="/dev/null", tmp=tmp),
                            tmp,
                            self.timeout,
                            cancel=cancel,
                        )
                    )
                took = min(x.seconds for x in runs)
                limit = self._limit(refs)
                if r.timed_out or took <= limit or took > NEAR * limit or len(runs) >= self.repeats:
                    break
        first = runs[0]
        sig = signature.of(first.returncode, first.stderr)
        if first.timed_out:
            outcome = "interesting"
        elif took <= limit:
            outcome = "fast"
        elif self.expected is not None and not self.allow_slippage and sig.kind != self.expected.kind:
            outcome = "different bug"
        elif (
            self.expected is not None
            and not self.allow_slippage
            and sig.kind != "ok"
            and not sig.matches(self.expected)
        ):
            outcome = "different bug"
        else:
            outcome = "interesting"
        note = f"compile took {took:.2f} s (best of {len(runs)}), limit {limit:.2f} s\n"
        return Verdict(
            outcome == "interesting", first.returncode, first.timed_out, took, note + first.stderr[-3000:], outcome, sig
        )

    def _limit(self, refs: list[Run]) -> float:
        if self.factor is not None and refs:
            return self.factor * min(x.seconds for x in refs)
        assert self.seconds is not None
        return self.seconds

    def calibrate(self, original: Verdict) -> SlowCompileOracle:
        return attrs.evolve(self, expected=signature.of_verdict(original))

    def failure(self) -> signature.Signature | None:
        return self.expected

    def reproducer(self, path: str) -> str:
        cmd = f"time {self.command.shell(input=path, output='/dev/null')}"
        if self.against is not None:
            return f"{cmd}\ntime {self.against.shell(input=path, output='/dev/null')}  # {self.factor:g}x faster"
        return f"{cmd}  # takes more than {self.seconds:g} s"

    def why_not(self, verdict: Verdict) -> str:
        return verdict.stderr_tail.splitlines()[0] if verdict.stderr_tail else verdict.outcome
