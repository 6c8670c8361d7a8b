"""Built-in oracles with a stand-in compiler (a Python script): the verdict logic, the
slippage guard, timing. The real tools are in test_e2e_oracles.py."""

from __future__ import annotations

import sys
from pathlib import Path

import attrs
import numpy as np
import pytest

from reducer.core.oracle import Run
from reducer.iree.oracles import CompileOracle, SlowCompileOracle, parse_command, slow
from reducer.iree.oracles.command import CommandError
from reducer.iree.oracles.mismatch import declarations, input_flag

FAKE = r"""
import os, signal, sys, time
text = open(sys.argv[1]).read()
fast = "--fast" in sys.argv
if "slow" in text and not fast:
    time.sleep(float(os.environ.get("FAKE_SLOW", "0.6")))
for line in text.splitlines():
    if line == "crash":
        sys.stderr.write("Stack dump:\n #0 0x0000 llvm::sys::PrintStackTrace() Signals.cpp:0:0\n #1 0x0001 mlir::Foo::bar() Foo.cpp:0:0\n")
        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGSEGV)
    if line.startswith("bug"):
        sys.stderr.write(f"{sys.argv[1]}:1:1: error: failed on {line} %12\n")
        sys.exit(1)
"""


@pytest.fixture
def compiler(tmp_path: Path) -> str:
    path = tmp_path / "fake_compiler.py"
    path.write_text(FAKE)
    return f"{sys.executable} {path} {{input}}"


def calibrated(oracle, data: bytes):
    verdict = oracle.run(data)
    assert verdict.interesting
    return oracle.calibrate(verdict)


def test_the_compile_oracle_wants_the_original_failure_and_names_the_others(compiler: str):
    oracle = calibrated(CompileOracle(parse_command(compiler), "in.mlir", 10), b"bugA\nbugB\n")
    assert oracle.expected is not None and oracle.expected.first_error == "failed on bugA %_"
    assert oracle.run(b"x\nbugA\n").outcome == "interesting"
    assert oracle.run(b"bugB\n").outcome == "different bug"
    assert oracle.run(b"crash\n").outcome == "different bug"
    assert oracle.run(b"fine\n").outcome == "no failure"
    relaxed = CompileOracle(parse_command(compiler), "in.mlir", 10, allow_slippage=True, expected=oracle.expected)
    assert relaxed.run(b"bugB\n").interesting
    assert relaxed.run(b"fine\n").outcome == "no failure"


def test_expect_error_and_expect_crash_narrow_what_counts(compiler: str):
    wants_b = CompileOracle(parse_command(compiler), "in.mlir", 10, expect_error=r"failed on bugB")
    assert not wants_b.run(b"bugA\n").interesting and wants_b.run(b"bugB\n").interesting
    assert "does not match --expect-error" in wants_b.why_not(wants_b.run(b"bugA\n"))
    crash = calibrated(CompileOracle(parse_command(compiler), "in.mlir", 10, expect_crash=True), b"crash\n")
    assert crash.expected.kind == "crash" and crash.expected.frames == ("mlir::Foo::bar()",)
    assert crash.run(b"y\ncrash\n").interesting
    assert crash.run(b"bugA\n").outcome == "different bug"


def test_a_hanging_compile_is_a_timeout_not_the_bug(compiler: str, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("FAKE_SLOW", "5")
    oracle = CompileOracle(parse_command(compiler), "in.mlir", 0.5)
    verdict = oracle.run(b"slow\nbugA\n")
    assert verdict.outcome == "timeout" and verdict.timed_out and not verdict.interesting
    assert "bugA" not in verdict.stderr_tail  # stopped before it got to the bug (after 5 s)


def test_the_slow_oracle_compares_with_a_limit_or_with_another_command(compiler: str, monkeypatch):
    # A slow compile sleeps 2 s; a quick one is a Python start-up (20-50 ms). The margins
    # are wide both ways, so a stalled start-up on a busy machine (a quick run must stay
    # under the limit, and under its fifth for the reference) does not decide the verdict.
    monkeypatch.setenv("FAKE_SLOW", "2")
    absolute = SlowCompileOracle(parse_command(compiler), "in.mlir", 10, seconds=1.0)
    slow = absolute.run(b"slow\n")
    assert slow.interesting and "best of" in slow.stderr_tail
    assert absolute.run(b"quick\n").outcome == "fast"
    relative = SlowCompileOracle(
        parse_command(compiler), "in.mlir", 10, factor=5.0, against=parse_command(compiler + " --fast")
    )
    assert relative.run(b"slow\n").interesting
    assert relative.run(b"quick\n").outcome == "fast"


def test_a_slow_candidate_must_end_the_way_the_original_did(compiler: str):
    oracle = calibrated(SlowCompileOracle(parse_command(compiler), "in.mlir", 10, seconds=0.3), b"slow\n")
    assert oracle.expected.kind == "ok"
    assert oracle.run(b"slow\nbugA\n").outcome == "different bug"
    assert (
        SlowCompileOracle(
            parse_command(compiler), "in.mlir", 10, seconds=0.3, allow_slippage=True, expected=oracle.expected
        )
        .run(b"slow\nbugA\n")
        .interesting
    )


@pytest.mark.parametrize(
    "times,outcome,runs",
    [
        ([5.0], "interesting", 1),
        ([1.0], "fast", 1),
        ([2.2, 2.1, 1.9], "fast", 3),
        ([2.2, 2.1, 2.3], "interesting", 3),
        ([2.2, 1.5], "fast", 2),
    ],
)
def test_a_timing_near_the_limit_is_measured_again(
    monkeypatch: pytest.MonkeyPatch, times: list[float], outcome: str, runs: int
):
    """Noise only adds time: near the limit the fastest of up to `repeats` runs decides."""
    measured = iter(times)
    monkeypatch.setattr(slow, "run_in", lambda *a, **k: Run(0, False, next(measured), ""))
    verdict = SlowCompileOracle(parse_command("cc {input}"), "in.mlir", 10, seconds=2.0, repeats=3).run(b"x")
    assert verdict.outcome == outcome and f"best of {runs})" in verdict.stderr_tail


def test_commands_need_their_input_and_know_their_flags():
    with pytest.raises(CommandError):
        parse_command("iree-compile model.mlir -o /dev/null")
    cmd = parse_command("iree-compile {input} --a=1 -o /dev/null --b --pass-pipeline=builtin.module(cse)")
    assert [cmd.argv[i] for i in cmd.flags()] == ["--a=1", "--b", "--pass-pipeline=builtin.module(cse)"]
    assert cmd.without([2]).argv == (
        "iree-compile",
        "{input}",
        "-o",
        "/dev/null",
        "--b",
        "--pass-pipeline=builtin.module(cse)",
    )
    assert cmd.plus("--compile-to=flow").shell(input="x.mlir").endswith("--compile-to=flow")
    assert parse_command("iree-compile {input}", needs_output=True).argv[-2:] == ("-o", "{output}")


def test_mismatch_inputs_come_from_the_module_abi(tmp_path: Path):
    dump = (
        "  [  0] main(!vm.ref<?>, f32) -> (!vm.ref<?>)\n"
        "        iree.abi.declaration: sync func @main(%input0: tensor<2x?xf32>, %input1: f32, %input2: tensor<3xi8>) -> (%output0: tensor<2x?xf32>)\n"
    )
    assert declarations(dump) == {"main": (["tensor<2x?xf32>", "f32", "tensor<3xi8>"], 1)}
    flags = [input_flag(t, k, str(tmp_path)) for k, t in enumerate(["tensor<2x?xf32>", "f32", "tensor<3xi8>", "index"])]
    assert flags[1] == "--input=0.75" and flags[3] == "--input=5"
    first = np.load(flags[0].split("@", 1)[1])
    assert first.shape == (2, 4) and first.dtype == np.float32 and (first < 0).any() and (first > 0).any()
    assert np.array_equal(first, np.load(input_flag("tensor<2x?xf32>", 0, str(tmp_path)).split("@", 1)[1]))
    assert input_flag("tensor<4xcomplex<f32>>", 0, str(tmp_path)) is None


@pytest.mark.parametrize("allow", [False, True])
def test_allow_slippage_reaches_the_mismatch_oracle(allow: bool):
    from reducer.session import Settings, make_oracle

    settings = Settings(
        "in.mlir",
        compile="iree-compile {input} -o {output}",
        against="iree-compile {input} -o {output}",
        mismatch=True,
        allow_slippage=allow,
    )
    assert make_oracle(settings, "in.mlir", 10.0).allow_slippage is allow


def test_a_long_compile_log_keeps_its_first_error_for_the_user():
    """The mismatch verdict kept the last 4000 characters of a side's log: a compile that
    printed many warnings after its error lost it, and the user was told a warning's line."""
    from reducer.session import Settings, make_oracle

    command = "iree-compile {input} -o {output}"
    settings = Settings("in.mlir", compile=command, against=command, mismatch=True)
    oracle = make_oracle(settings, "in.mlir", 10.0)
    log = "compile a: /tmp/x/in.mlir:3:5: error: failed to legalize operation 'math.erf'\n"
    log += "in.mlir:9:1: warning: a warning\n" * 400
    verdict = oracle._verdict("run failed", 1, 0.1, log)
    assert "warning" in verdict.stderr_tail.splitlines()[-1] and len(verdict.stderr_tail) < 4100  # the tail, kept short
    assert (
        oracle.why_not(verdict) == "run failed: compile a: in.mlir:3:5: error: failed to legalize operation 'math.erf'"
    )
    crashed = attrs.evolve(
        oracle._verdict("run failed", -11, 0.1, "run a: Segmentation fault"), notes=("--inputs gives 1",)
    )
    assert oracle.why_not(crashed) == "run failed: run a: Segmentation fault"  # never the note


def test_the_reports_commands_give_scalars_as_bare_values(tmp_path: Path):
    """The report's iree-run-module commands spell inputs as the checks do: a scalar f32
    as `-2.0`, never `f32=-2.0` (which iree-run-module refuses), a tensor as a .npy file."""
    from reducer.iree import evidence

    taken = [
        ("f32", np.array(-2.0, np.float32)),
        ("index", np.array(5)),
        ("i32", np.array(3, np.int32)),
        ("tensor<2xf32>", np.array([1.0, 2.0], np.float32)),
    ]
    folder = tmp_path / "inputs"
    folder.mkdir()
    assert evidence._flags(taken, str(folder), "") == ["-2.0", "5", "3", "@inputs/input3.npy"]
    assert np.array_equal(np.load(folder / "input3.npy"), taken[3][1])


def test_a_relative_program_in_a_command_is_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Audit 11 (D2): `--compile "./mycomp.sh ..."` passed the start-up check, but the checks
    run in temp dirs, where `./mycomp.sh` names nothing (exit 4)."""
    from reducer.session import Settings, make_oracle

    for name in ("mycomp.sh", "myrun"):
        (tmp_path / name).write_text("#!/bin/sh\nexit 0\n")
        (tmp_path / name).chmod(0o755)
    monkeypatch.chdir(tmp_path)
    command = "./mycomp.sh {input} -o {output}"
    settings = Settings("in.mlir", compile=command, against=command, mismatch=True, runner="./myrun --x")
    oracle = make_oracle(settings, "in.mlir", 10.0)
    assert oracle.compile.argv[0] == oracle.against.argv[0] == str(tmp_path / "mycomp.sh")
    assert oracle.runner.argv == (str(tmp_path / "myrun"), "--x")


def test_how_a_command_ended_is_said_in_words():
    """One phrase for the script oracle's and the mismatch oracle's reasons."""
    from reducer.core.oracle import ended

    assert [ended(3), ended(-9), ended(None), ended(0, timed_out=True)] == [
        "exit code 3",
        "signal 9",
        "timed out",
        "timed out",
    ]
