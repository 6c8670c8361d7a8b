"""Flag and pass-pipeline reduction with a stand-in compiler that needs some flags."""

from __future__ import annotations

import sys
from pathlib import Path

from reducer.executor import LocalExecutor
from reducer.flags import _pipeline_variants, reduce_flags
from reducer.oracles import CompileOracle, MismatchOracle, parse_command

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


def test_both_configurations_of_a_mismatch_are_reduced():
    assert MismatchOracle.commands == ("compile", "against")
