"""The built-in oracles and IREE workflows against the real iree-compile and
iree-run-module (pinned in constraints.txt): each reduces a realistic case of its kind
and the result still shows the original's signature."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import attrs
import jsonschema
import pytest
from conftest import needs_iree
from programs import COMPILE, const_eval_model, mlp, powf_model, two_bugs

from reducer.iree import signature
from reducer.session import Settings, reduce_file

pytestmark = [pytest.mark.e2e, needs_iree]

SCHEMA = json.loads((Path(__file__).resolve().parent.parent / "docs" / "report-schema.json").read_text())
CMD = COMPILE + " {input} -o /dev/null"
TRUNCF = "failed to legalize operation 'arith.truncf' that was explicitly marked illegal"


def compile_signature(path: Path, extra: str = "") -> signature.Signature:
    proc = subprocess.run(f"{COMPILE} {extra} {path} -o /dev/null", shell=True, capture_output=True, text=True)
    return signature.of(proc.returncode, proc.stderr)


def test_a_compile_failure_is_reduced_without_slipping_to_the_second_bug(tmp_path: Path):
    src = tmp_path / "model.mlir"
    src.write_text(two_bugs())
    original = compile_signature(src)
    assert original.first_error == TRUNCF and any("vector.maskedload" in e for e in original.errors)
    out, report, report_json = tmp_path / "out.mlir", tmp_path / "report.md", tmp_path / "report.json"
    result = reduce_file(
        Settings(
            str(src),
            compile=CMD,
            output=str(out),
            jobs=2,
            for_upstream=True,
            report=str(report),
            report_json=str(report_json),
        )
    )
    text = out.read_text()
    assert result.findings.phase == "executable-targets"  # checks stopped after codegen
    assert result.stats.outcomes["different bug"] > 0  # candidates that only kept the i4 bug were refused
    assert "xi4" not in text and "f6E2M3FN" in text and result.stats.final.ops <= 5
    assert compile_signature(out).matches(original)
    assert "--iree-llvmcpu-target-cpu=generic" in result.findings.flags_removed
    # The report a bot files: valid against the documented schema, the repro and its command inside.
    from reducer.iree import report as reporting

    data = reporting.build(result, str(src), "reduced")
    reporting_json = json.loads(reporting.to_json(data))
    jsonschema.validate(reporting_json, SCHEMA)
    assert reporting_json["rejected_as_different_bug"] == result.stats.outcomes["different bug"]
    assert reporting_json["signature"]["errors"][0] == TRUNCF
    assert "@f0" in reporting_json["program"] and "layer" not in reporting_json["program"]  # --for-upstream
    md = reporting.to_markdown(data)
    for part in (
        "## Reproducer",
        "## Command",
        "## Output",
        " out.mlir -o /dev/null",
        TRUNCF.split(" that")[0],
        "3.13",
    ):
        assert part in md


def test_a_crash_is_reduced_to_the_same_frames(tmp_path: Path):
    src = tmp_path / "model.mlir"
    t = "tensor<8x16xf32>"
    q = "tensor<8x16xtf32>"
    src.write_text(
        f"func.func @main(%x: {t}, %y: {t}) -> {t} {{\n"
        f"  %a = arith.addf %x, %y : {t}\n  %b = math.exp %a : {t}\n"
        f"  %q = arith.truncf %b : {t} to {q}\n  %m = arith.mulf %q, %q : {q}\n  %e = arith.extf %m : {q} to {t}\n"
        f"  %c = arith.subf %e, %x : {t}\n  %d = math.absf %c : {t}\n  return %d : {t}\n}}\n"
    )
    cmd = COMPILE + " --mlir-disable-threading {input} -o /dev/null"
    original = compile_signature(src, "--mlir-disable-threading")
    assert original.kind == "crash"
    out = tmp_path / "out.mlir"
    result = reduce_file(Settings(str(src), compile=cmd, output=str(out), jobs=2, expect_crash=True))
    assert compile_signature(out, "--mlir-disable-threading").matches(original)
    assert result.final_verdict is not None and result.final_verdict.signature.frames[:3] == original.frames[:3]
    assert result.stats.final.ops < result.stats.original.ops and "tf32" in out.read_text()


def test_dispatch_isolation_reduces_the_failing_executable_alone(tmp_path: Path):
    src = tmp_path / "model.mlir"
    src.write_text(mlp(layers=6, bad_layer=4))
    out = tmp_path / "out.mlir"
    result = reduce_file(Settings(str(src), compile=CMD, output=str(out), jobs=2, isolate_dispatch=True))
    found = result.findings.dispatch
    assert found is not None
    assert found.executables > 5 and len(found.failing) == 1 and found.name == found.failing[0]
    assert result.findings.workflow_checks == found.executables + 1  # counted with the engine's checks
    assert (
        result.input_size is not None and result.input_size.ops > 100 > result.stats.original.ops
    )  # report: before vs start
    text = out.read_text()
    assert len(re.findall(r"^\s*hal\.executable (?:public |private )?@", text, re.M)) == 1 and "f6E2M3FN" in text
    proc = subprocess.run(
        f"{COMPILE} --compile-mode=hal-executable {out} -o /dev/null", shell=True, capture_output=True, text=True
    )
    assert signature.of(proc.returncode, proc.stderr).first_error == TRUNCF


def test_reduction_can_start_from_the_ir_of_the_phase_before(tmp_path: Path):
    src = tmp_path / "model.mlir"
    src.write_text(mlp(layers=4, bad_layer=2))
    out = tmp_path / "out.mlir"
    result = reduce_file(Settings(str(src), compile=CMD, output=str(out), jobs=2, from_phase_dump=True))
    assert result.findings.phase == "executable-targets"
    assert result.findings.started_from == "executable-configurations"
    proc = subprocess.run(
        f"{COMPILE} --compile-from=executable-configurations --compile-to=executable-targets {out} -o /dev/null",
        shell=True,
        capture_output=True,
        text=True,
    )
    assert signature.of(proc.returncode, proc.stderr).first_error == TRUNCF
    assert "hal.executable" in out.read_text()


def test_a_numeric_mismatch_between_backends_is_reduced(tmp_path: Path):
    src = tmp_path / "model.mlir"
    src.write_text(powf_model())
    out = tmp_path / "out.mlir"
    result = reduce_file(llvm_cpu_against_vmvx_settings(src, out, jobs=2))
    text = out.read_text()
    assert "math.powf" in text and "math.tanh" not in text and result.stats.final.ops <= 3
    assert result.final_verdict is not None and "differs" in result.final_verdict.stderr_tail
    assert "function @main on inputs tensor<" in result.final_verdict.stderr_tail  # a report shows the inputs used
    assert result.stats.outcomes["same outputs"] > 0  # candidates that lost the mismatch were refused


SLIP = """func.func @main(%x: tensor<8xf32>) -> tensor<8xf32> {{
  %big = arith.constant dense<1.0e10> : tensor<8xf32>
  %m = arith.mulf %x, %big : tensor<8xf32>
  %i = arith.fptosi %m : tensor<8xf32> to tensor<8xi32>
  %f = arith.sitofp %i : tensor<8xi32> to tensor<8xf32>
  {powf}
  return %s : tensor<8xf32>
}}
"""
POWF = "%e = math.round %x : tensor<8xf32>\n  %p = math.powf %x, %e : tensor<8xf32>\n  %s = arith.addf %f, %p : tensor<8xf32>"


def llvm_cpu_against_vmvx_settings(src: Path, out: Path, **options: Any) -> Settings:
    """A --mismatch run comparing the two CPU backends on src."""
    backend = COMPILE.split("llvm-cpu")[0]
    return Settings(
        str(src),
        compile=f"{COMPILE} {{input}} -o {{output}}",
        against=f"{backend}vmvx {{input}} -o {{output}}",
        mismatch=True,
        output=str(out),
        **options,
    )


def llvm_cpu_against_vmvx(**options: object) -> Any:
    """The mismatch oracle comparing the two CPU backends, with no tool run yet."""
    from reducer.iree.oracles import MismatchOracle, parse_command

    backend = COMPILE.split("llvm-cpu")[0]
    return MismatchOracle(
        parse_command(f"{COMPILE} {{input}} -o {{output}}", needs_output=True),
        parse_command(f"{backend}vmvx {{input}} -o {{output}}", needs_output=True),
        "in.mlir",
        60.0,
        **options,  # type: ignore[arg-type]
    )


def test_a_mismatch_that_differs_another_way_is_a_different_bug(tmp_path: Path):
    """powf of negative bases is NaN on llvm-cpu only; an out-of-range fptosi differs in
    sign and size on both. The second alone is another bug unless slippage is allowed."""
    oracle = llvm_cpu_against_vmvx()
    original = oracle.run(SLIP.format(powf=POWF).encode())
    assert original.interesting and original.signature.first_error == "NaN on a only"
    calibrated = oracle.calibrate(original)
    slipped = SLIP.format(powf="%s = arith.addf %f, %x : tensor<8xf32>").encode()
    verdict = calibrated.run(slipped)
    assert verdict.outcome == "different bug" and "opposite signs" in verdict.signature.errors
    assert "NaN on a only" in calibrated.why_not(verdict)
    loose = attrs.evolve(calibrated, allow_slippage=True)
    assert loose.run(slipped).outcome == "interesting"


def test_a_function_the_module_does_not_export_is_named_with_those_it_does():
    """--function nope used to end in "no exported function to run", naming neither."""
    oracle = llvm_cpu_against_vmvx(function="nope")
    verdict = oracle.run(SLIP.format(powf=POWF).encode())
    assert not verdict.interesting and verdict.outcome == "no such function"
    assert "--function nope: the module exports no such function (it has main)" in oracle.why_not(verdict)


def test_a_function_the_input_does_not_export_is_a_bad_command_line(tmp_path: Path):
    """Audit 11 (M5): `--function nope` was exit 5, "the original is not interesting": a
    value of the command line given wrong, told as one (exit 2)."""
    from reducer.session.settings import EXIT_USAGE, UserError

    src = tmp_path / "in.mlir"
    src.write_text(SLIP.format(powf=POWF))
    with pytest.raises(UserError) as err:
        reduce_file(llvm_cpu_against_vmvx_settings(src, tmp_path / "out.mlir", function="nope"))
    assert err.value.code == EXIT_USAGE
    assert str(err.value) == "--function nope: the module exports no such function (it has main); give one of those"
    assert not (tmp_path / "out.mlir").exists()


def test_a_side_that_does_not_compile_is_told_by_its_error_line():
    """f32 demoted to f16 on a scalar function: vmvx's compile fails, its last stderr line
    a caret under the source; the reason given used to be that caret alone."""
    from reducer.iree.oracles import MismatchOracle, parse_command

    vmvx = COMPILE.split("llvm-cpu")[0] + "vmvx"
    oracle = MismatchOracle(
        parse_command(f"{vmvx} {{input}} -o {{output}}", needs_output=True),
        parse_command(f"{vmvx} --iree-input-demote-f32-to-f16 {{input}} -o {{output}}", needs_output=True),
        "in.mlir",
        60.0,
    )
    verdict = oracle.run(b"func.func @main(%x: f32) -> f32 {\n  %y = arith.mulf %x, %x : f32\n  return %y : f32\n}\n")
    assert verdict.outcome == "run failed" and verdict.stderr_tail.rstrip().endswith("^")
    why = oracle.why_not(verdict)
    assert why.startswith("run failed: compile b: in.mlir:2:") and "error: 'vm.mul.f32' op" in why, why


def test_a_compile_time_regression_is_reduced_to_what_makes_it_slow(tmp_path: Path):
    """Const-eval JIT-runs a 4096x4096 matmul of constants: seconds of compiling. The same
    program with a 1x1 matmul (what shrink-tensors tries) takes what any const-eval
    takes, measured here; the limit is four times that, so it holds on a faster or a
    loaded machine, and a check is stopped at the limit (slow by definition) instead of
    waiting for the big matmul. Compiling stops after global optimization, where
    const-eval runs, so code generation adds nothing to either."""
    cmd = COMPILE + " --compile-to=global-optimization {input} -o /dev/null"
    small = tmp_path / "small.mlir"
    small.write_text(const_eval_model(n=1))
    runs = []
    for _ in range(3):  # the best of three: noise only adds time
        start = time.monotonic()
        subprocess.run(cmd.replace("{input}", str(small)), shell=True, capture_output=True, check=True)
        runs.append(time.monotonic() - start)
    limit = 4 * min(runs)
    src, out = tmp_path / "model.mlir", tmp_path / "out.mlir"
    src.write_text(const_eval_model(n=4096))
    result = reduce_file(
        Settings(
            str(src),
            compile=cmd,
            slower_than=limit,
            timeout=limit,
            output=str(out),
            jobs=1,
            move_budget=0,
            reduce_flags=False,  # test_flags' subject; here each flag would cost a slow compile
        )
    )
    text = out.read_text()
    assert "linalg.matmul" in text and "math.exp" not in text
    dims = {int(d) for d in re.findall(r"(\d+)x", text)}
    assert dims == {4096}, "the matmul shrank: a small one is not slow"
    assert result.stats.final.ops < result.stats.original.ops
    # The small matmul, and programs without one, were judged by their time (a check that
    # ran past the limit was stopped, so none ended slow but in time).
    assert result.stats.outcomes["fast"] > 0 and result.stats.outcomes["different bug"] == 0
