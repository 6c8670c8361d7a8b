"""Flag and pass-pipeline reduction with a stand-in compiler that needs some flags."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import ClassVar

import attrs

from reducer.core.executor import LocalExecutor
from reducer.core.oracle import Oracle, Verdict
from reducer.iree.flags import _pipeline_variants, reduce_flags
from reducer.iree.oracles import CompileOracle, MismatchOracle, parse_command
from reducer.iree.oracles.command import Command

#: Fails (the bug) only with --target=x and the 'bad' pass in the pipeline.
FAKE = r"""
import sys
args = sys.argv[2:]
pipeline = next((a for a in args if a.startswith("--pass-pipeline=")), "")
if "--target=x" in args and "bad" in pipeline:
    sys.stderr.write("in.mlir:1:1: error: the bug\n")
    sys.exit(1)
"""


def test_only_the_flags_and_passes_the_failure_needs_stay(tmp_path: Path):
    fake = tmp_path / "fake.py"
    fake.write_text(FAKE)
    command = parse_command(
        f"{sys.executable} {fake} {{input}} --verbose --target=x --opt=3 "
        "--pass-pipeline=builtin.module(func.func(canonicalize{max-iterations=2,top-down=false},bad),cse,symbol-dce) -o /dev/null"
    )
    oracle = CompileOracle(command, "in.mlir", 10)
    oracle = oracle.calibrate(oracle.run(b"x"))
    results = []
    for jobs in (1, 2, 3):
        with LocalExecutor(oracle, jobs) as executor:
            results.append(reduce_flags(oracle, b"x", executor))
            assert executor.stats.checks >= results[-1].checks  # they ran there (later ones speculatively)
    for r in results:
        argv = r.oracle.command.argv  # type: ignore[attr-defined]
        assert "--target=x" in argv and "--verbose" not in argv and "--opt=3" not in argv
        assert "--pass-pipeline=builtin.module(func.func(bad))" in argv
        assert r.oracle.run(b"x").interesting
    assert results[0].oracle == results[1].oracle == results[2].oracle  # any -j, the same flags
    assert results[0].removed[:2] == ("--verbose", "--opt=3")


def test_pipeline_variants_drop_one_pass_never_an_anchor_or_an_option():
    variants = _pipeline_variants("--pass-pipeline=builtin.module(func.func(canonicalize{a=1,b=2},cse),symbol-dce)")
    assert variants == [
        "--pass-pipeline=builtin.module(func.func(cse),symbol-dce)",
        "--pass-pipeline=builtin.module(func.func(canonicalize{a=1,b=2}),symbol-dce)",
        "--pass-pipeline=builtin.module(func.func(canonicalize{a=1,b=2},cse))",
    ]


@attrs.frozen
class _TwoCommands(Oracle):
    """Interesting while the first command keeps --a and the second keeps --b, as a
    mismatch needs something of each configuration; no tool runs."""

    commands: ClassVar[tuple[str, ...]] = ("compile", "against")
    compile: Command
    against: Command
    timeout: float | None = None

    def run(self, data: bytes, cancel=None) -> Verdict:
        return Verdict("--a" in self.compile.argv and "--b" in self.against.argv, 0)

    def reproducer(self, name: str) -> str:
        return ""


def test_both_configurations_of_a_mismatch_are_reduced():
    assert MismatchOracle.commands == ("compile", "against")  # the real one declares both
    oracle = _TwoCommands(
        parse_command("tool {input} --x --a --y -o {output}"), parse_command("tool {input} --b --x --z -o {output}")
    )
    with LocalExecutor(oracle, 2) as executor:
        result = reduce_flags(oracle, b"x", executor)
    assert result.oracle.compile.argv == ("tool", "{input}", "--a", "-o", "{output}")  # type: ignore[attr-defined]
    assert result.oracle.against.argv == ("tool", "{input}", "--b", "-o", "{output}")  # type: ignore[attr-defined]
    # each said with its side: the summary listed '--x, --x' (audit 7, W10)
    assert set(result.removed) == {"--x (side a)", "--y (side a)", "--x (side b)", "--z (side b)"}
