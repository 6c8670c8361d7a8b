"""Numeric mismatches between two configurations: each side's inputs follow its own
signature, user-given inputs, and localising the first dispatch that goes wrong."""

from __future__ import annotations

import logging
import os
import pickle
import re
import subprocess
import sys
from pathlib import Path

import attrs
import numpy as np
import pytest
from conftest import needs_iree, watched_compile
from programs import COMPILE

from reducer import session
from reducer.core.ir import PrintOptions
from reducer.core.workspace import MLIRWorkspace
from reducer.session import Settings, make_oracle, reduce_file
from reducer.session.settings import EXIT_BAD_INPUT, EXIT_USAGE, LimitReached, UserError

pytestmark = pytest.mark.e2e

#: f32 inputs; exp(8x) passes f16's largest value (65504) where x >= 1.39.
DEMOTE_MODEL = """func.func @main(%x: tensor<2x3xf32>, %y: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %k = arith.constant dense<8.0> : tensor<2x3xf32>
  %0 = arith.mulf %x, %k : tensor<2x3xf32>
  %1 = math.exp %0 : tensor<2x3xf32>
  %2 = arith.addf %1, %y : tensor<2x3xf32>
  return %2 : tensor<2x3xf32>
}
"""
DEMOTE = "--iree-input-demote-f32-to-f16"


def demote_settings(tmp_path: Path, **more: object) -> Settings:
    src = tmp_path / "model.mlir"
    src.write_text(DEMOTE_MODEL)
    return Settings(
        str(src),
        compile=f"{COMPILE} {{input}} -o {{output}}",
        against=f"{COMPILE} {DEMOTE} {{input}} -o {{output}}",
        mismatch=True,
        **more,  # type: ignore[arg-type]
    )


@needs_iree
def test_a_demoted_side_gets_the_same_values_in_its_own_types(tmp_path: Path):
    """The README's demote example: the f16 module is fed f16 casts of the f32 inputs,
    and the outputs (f32 and f16) are compared; f16 overflows to inf where f32 does not."""
    settings = demote_settings(tmp_path)
    oracle = make_oracle(settings, "model.mlir", 120.0)
    verdict = oracle.run(DEMOTE_MODEL.encode())
    assert verdict.outcome == "interesting", verdict.stderr_tail
    assert verdict.signature.first_error == "inf on b only"
    assert "tensor<2x3xf32> = [" in verdict.stderr_tail  # side a's inputs, as a report shows them


@needs_iree
def test_given_inputs_replace_the_generated_ones_and_travel_with_the_oracle(tmp_path: Path):
    """Zeros give exp(0) = 1 on both sides: no mismatch, where the generated inputs
    overflow f16. The files are read once: a worker needs no copy of them."""
    x, y = tmp_path / "x.npy", tmp_path / "y.npy"
    np.save(x, np.zeros((2, 3), np.float32))
    np.save(y, np.zeros((2, 3), np.float32))
    oracle = make_oracle(demote_settings(tmp_path, inputs=[f"{x},{y}"]), "model.mlir", 120.0)
    x.unlink()
    y.unlink()
    shipped = pickle.loads(pickle.dumps(oracle))
    assert shipped.run(DEMOTE_MODEL.encode()).outcome == "same outputs"
    # iree-run-module's --input syntax, one value filling the tensor
    oracle = make_oracle(demote_settings(tmp_path, inputs=["2x3xf32=2", "2x3xf32=0"]), "model.mlir", 120.0)
    verdict = oracle.run(DEMOTE_MODEL.encode())
    assert verdict.outcome == "interesting" and verdict.signature.first_error == "inf on b only"
    assert "tensor<2x3xf32> = [2., 2., 2., 2., 2., 2.]" in verdict.stderr_tail


@needs_iree
def test_too_few_or_too_many_inputs_are_said_before_the_run(tmp_path: Path, caplog: pytest.LogCaptureFixture):
    """Audit 8 (W7): one --inputs for a two-argument function was taken without a word,
    the other argument generated. The verdict notes it, apart from its log (a failure
    is never told by the note); the run warns of it once."""
    few = "--inputs gives 1 value for @main's 2 arguments: one gets generated values (give one --inputs per argument)"
    one = make_oracle(demote_settings(tmp_path, inputs=["2x3xf32=2"]), "model.mlir", 120.0)
    verdict = one.run(DEMOTE_MODEL.encode())
    assert verdict.interesting, verdict.stderr_tail
    assert verdict.notes == (few,) and "--inputs gives" not in verdict.stderr_tail
    three = make_oracle(demote_settings(tmp_path, inputs=["2x3xf32=2", "2x3xf32=0", "1"]), "model.mlir", 120.0)
    assert three.run(DEMOTE_MODEL.encode()).notes == (
        "--inputs gives 3 values for @main's 2 arguments: #3 (a scalar) goes unused",
    )
    two = make_oracle(demote_settings(tmp_path, inputs=["2x3xf32=2", "2x3xf32=0"]), "model.mlir", 120.0)
    assert two.run(DEMOTE_MODEL.encode()).notes == ()
    small = make_oracle(demote_settings(tmp_path, inputs=["2x2xf32=2", "2x3xf32=0"]), "model.mlir", 120.0)
    assert small.run(DEMOTE_MODEL.encode()).notes == (  # audit 10 (W7): fitted without a word
        "--inputs do not fit @main(tensor<2x3xf32>, tensor<2x3xf32>): one gets generated values; "
        "#1 (shape 2x2) goes unused",
    )
    settings = demote_settings(tmp_path, inputs=["2x3xf32=2"], output=str(tmp_path / "out.mlir"), no_state=True)
    with caplog.at_level(logging.WARNING, logger="reducer"), pytest.raises(LimitReached):
        reduce_file(attrs.evolve(settings, max_checks=1, localize=False))
    assert [r.getMessage() for r in caplog.records if "--inputs gives" in r.getMessage()] == [few]


@needs_iree
def test_a_silent_failing_run_command_still_gives_a_reason(tmp_path: Path):
    """Audit 10 (W6): `--run /bin/false` said "run failed: run a:" and nothing after."""
    oracle = make_oracle(demote_settings(tmp_path, runner="false"), "model.mlir", 120.0)
    verdict = oracle.run(DEMOTE_MODEL.encode())
    assert oracle.why_not(verdict) == "run failed: run a: exit code 1, nothing on stderr"


def test_inputs_unreadable_are_a_bad_input_and_written_wrong_a_usage_error(tmp_path: Path):
    with pytest.raises(UserError) as err:
        make_oracle(demote_settings(tmp_path, inputs=[str(tmp_path / "missing.npy")]), "model.mlir", 10.0)
    assert err.value.code == EXIT_BAD_INPUT and "missing.npy" in str(err.value)
    # A value written wrong is the command line's (audit 11, M3: it was exit 3, an input's)
    with pytest.raises(UserError, match="5 values for 6 elements") as err:
        make_oracle(demote_settings(tmp_path, inputs=["2x3xf32=1 2 3 4 5"]), "model.mlir", 10.0)
    assert err.value.code == EXIT_USAGE
    # Audit 8 (W6): two values joined as files are: "8 values for 4 elements" said not why
    with pytest.raises(UserError, match="holds more than one value; give each its own --inputs") as err:
        make_oracle(demote_settings(tmp_path, inputs=["4xf32=1 2 3 4,4xf32=0.5 0.5 0.5 0.5"]), "model.mlir", 10.0)
    assert err.value.code == EXIT_USAGE
    with pytest.raises(UserError, match="unknown element type") as err:
        make_oracle(demote_settings(tmp_path, inputs=["4xq9=1"]), "model.mlir", 10.0)
    assert err.value.code == EXIT_USAGE
    # The review: these were exit 1 (an OverflowError, a MemoryError), an exit-2 line naming no
    # entry, an array of an archive's key names, and "cannot read ... as a .npy file" (exit 3)
    import numpy as np

    np.savez(tmp_path / "both.npz", a=np.ones(3), b=np.ones(3))
    (tmp_path / "text.npy").write_text("1 2 3\n")
    (tmp_path / "badzip.npy").write_bytes(b"PK\x03\x04garbage")
    np.save(tmp_path / "objects.npy", np.array([{}], dtype=object), allow_pickle=True)
    np.save(tmp_path / "whole.npy", np.arange(4, dtype=np.float32))
    os.mkfifo(tmp_path / "fifo.npy")
    np.save(tmp_path / "strings.npy", np.full((2, 3), "ab"))
    header = np.lib.format.header_data_from_array_1_0(np.zeros(1, np.float32)) | {"shape": (1 << 40,)}
    with open(tmp_path / "huge.npy", "wb") as f:
        np.lib.format.write_array_header_1_0(f, header)
        f.write(bytes(16))
    (tmp_path / "cut.npy").write_bytes((tmp_path / "whole.npy").read_bytes()[:40])
    for entry, code, said in [
        ("i64=99999999999999999999", EXIT_USAGE, "'i64=99999999999999999999': a value out of the 64-bit range"),
        ("4xi8=1 2 300 4", EXIT_USAGE, "'4xi8=1 2 300 4': a value out of i8's range"),  # was 44
        ("99999999999999999999999999x9xf32=1", EXIT_USAGE, "elements is more than 268435456; give a .npy file"),
        ("2x3xf32:1", EXIT_USAGE, "'2x3xf32:1' is neither a value (such as 4xf32=1 2 3 4 or 0.5) nor a file"),
        (str(tmp_path / "both.npz"), EXIT_BAD_INPUT, "is a .npz archive: give each array as a .npy file"),
        # Audit 13 (M22): numpy said "This file contains pickled (object) data" of a text file
        (str(tmp_path / "text.npy"), EXIT_BAD_INPUT, "text.npy' is not a .npy file: it does not start with"),
        # The review: a damaged archive was an internal error (BadZipFile), an object array
        # still got numpy's allow_pickle wording; a header cut short is said as numpy reads it
        (str(tmp_path / "badzip.npy"), EXIT_BAD_INPUT, "badzip.npy' as a .npy file: File is not a zip file"),
        (str(tmp_path / "objects.npy"), EXIT_BAD_INPUT, "objects.npy' holds Python objects, not numbers"),
        (str(tmp_path / "cut.npy"), EXIT_BAD_INPUT, "cut.npy' as a .npy file: EOF: reading array header"),
        # Audit 15 (D3): a FIFO was opened and waited on for ever, past --max-time
        (str(tmp_path / "fifo.npy"), EXIT_BAD_INPUT, "fifo.npy' is not a regular file (a FIFO or a device)"),
        # The second review: strings were "could not convert string to float", a header claiming
        # 2^40 elements a MemoryError (both exit 1)
        (str(tmp_path / "strings.npy"), EXIT_BAD_INPUT, "strings.npy' holds <U2 values, not numbers"),
        (str(tmp_path / "huge.npy"), EXIT_BAD_INPUT, "huge.npy' is cut short: its header says (1099511627776,)"),
    ]:
        with pytest.raises(UserError) as err:
            make_oracle(demote_settings(tmp_path, inputs=[entry]), "model.mlir", 10.0)
        assert err.value.code == code and said in str(err.value), (entry, err.value)


def test_a_bare_scalar_is_an_input_as_iree_run_module_takes_it(tmp_path: Path):
    """Audit 7 (W4): `--inputs 5.5` for an f32 argument said "cannot read '5.5' as a .npy
    file", though iree-run-module takes the bare value (and refuses `f32=5.5`)."""
    from reducer.iree.inputs import flag, given

    assert flag(given("5.5"), "f32", str(tmp_path / "x.npy")) == "--input=5.5"
    assert flag(given("-3"), "i32", str(tmp_path / "x.npy")) == "--input=-3"
    assert flag(given("nan"), "f16", str(tmp_path / "x.npy")) == "--input=nan"
    (tmp_path / "7").write_bytes(b"not npy")  # a file of that name is read as one, as before
    with pytest.raises(ValueError, match="'7' is not a .npy file"):
        given("7", str(tmp_path))


TRACE = """=== main_dispatch_0::main_dispatch_0_matmul_2x2_f32 inputs ===
2x2xf32=[1 2][3 4]

=== main_dispatch_0::main_dispatch_0_matmul_2x2_f32 outputs ===
2x2xf32=[1 NAN][-INF 4]

=== main_dispatch_1::main_dispatch_1_elementwise_4_f32 inputs ===
4xf32=1 2 3 4
4xi32=1 2 3 4

=== main_dispatch_1::main_dispatch_1_elementwise_4_f32 outputs ===
4xf32=0.5 1 1.5 2
"""


def test_a_trace_is_read_dispatch_by_dispatch():
    from reducer.iree.localize import parse

    found = parse("EXEC @main\n" + TRACE)
    assert [t.name.split("::")[0] for t in found] == ["main_dispatch_0", "main_dispatch_1"]
    assert found[0].outputs[0].shape == (2, 2) and np.isnan(found[0].outputs[0][0, 1])
    assert found[0].outputs[0][1, 0] == -np.inf
    assert [x.dtype for x in found[1].inputs] == [np.float32, np.int32] and found[1].outputs[0][3] == 2.0


def test_dispatches_pair_by_order_and_shapes_and_say_when_they_differ():
    from reducer.iree.localize import Traced, match

    def t(*shapes: tuple[int, ...]) -> Traced:
        return Traced("d", [np.zeros(shapes[0])], [np.zeros(s) for s in shapes[1:]])

    a = [t((4,), (4,)), t((4,), (2, 2)), t((2, 2), (8,))]
    assert match(a, list(a)) == ([(0, 0), (1, 1), (2, 2)], "")
    b = [t((4,), (4,)), t((2, 2), (8,))]  # b fused a's middle dispatch away
    pairs, note = match(a, b)
    assert pairs == [(0, 0), (2, 1)] and "different dispatches (3 and 2)" in note
    assert match(a, [t((9,), (9,))])[0] == []


MLP_C = "iree-compile --iree-hal-target-device=local --iree-llvmcpu-target-cpu=generic --iree-hal-local-target-device-backends="


def mlp_settings(tmp_path: Path, **more: object) -> Settings:
    from benchmarks.models import mismatch_mlp

    src = tmp_path / "mlp.mlir"
    src.write_text(mismatch_mlp())
    return Settings(
        str(src),
        compile=MLP_C + "llvm-cpu {input} -o {output}",
        against=MLP_C + "vmvx {input} -o {output}",
        mismatch=True,
        **more,  # type: ignore[arg-type]
    )


@needs_iree
def test_localisation_finds_the_first_dispatch_that_goes_wrong(tmp_path: Path):
    """mismatch_mlp's layer 1 computes powf of negative bases: NaN on llvm-cpu only, from
    dispatch #1 on (the residual carries it to every later one, which must not be named)."""
    from reducer.iree.localize import localize

    settings = mlp_settings(tmp_path)
    oracle = make_oracle(settings, "mlp.mlir", 120.0)
    where = localize(oracle, Path(settings.input).read_bytes(), "mlp.mlir")
    found = where.found
    assert found is not None, where.reason
    assert (found.index, found.name) == (1, "main_dispatch_1::main_dispatch_1_matmul_4x8x8_f32")
    assert found.kind == "NaN on a only" and found.inputs_agree and found.dispatches == 6
    assert np.isnan(found.a_value) and np.isfinite(found.b_value)
    assert "dispatch #1 of 6: main_dispatch_1::" in found.describe()


def localize_only(tmp_path: Path, out: Path) -> subprocess.CompletedProcess[str]:
    """`ireereduce mlp.mlir -o OUT --localize-only` on mlp_settings' model and sides."""
    settings = mlp_settings(tmp_path)
    return subprocess.run(
        [sys.executable, "-m", "reducer", settings.input, "-o", str(out), "--localize-only"]
        + ["--mismatch", "--compile", settings.compile or "", "--against", settings.against or ""],
        capture_output=True,
        text=True,
    )


@needs_iree
def test_localize_only_prints_the_dispatch_and_writes_it_cut_out(tmp_path: Path):
    out = tmp_path / "cut.mlir"
    proc = localize_only(tmp_path, out)
    assert proc.returncode == 0, proc.stderr
    assert "dispatch #1 of 6: main_dispatch_1::main_dispatch_1_matmul_4x8x8_f32" in proc.stdout
    assert "worst error: NaN on a only at output 0 index [" in proc.stdout
    cut = out.read_text()
    assert "math.powf" in cut and "func.call" not in cut and cut.count("linalg.matmul") == 1
    # Checked as MLIR prints it, as the reduction's workspace does: its re-print needs no check.
    assert MLIRWorkspace(cut, PrintOptions()).canonical(PrintOptions()) == cut
    given = np.load(tmp_path / "cut.mlir.inputs" / "input0.npy")
    assert given.shape == (4, 8) and np.isfinite(given).all()  # what dispatch #1 read: before the NaN
    again = subprocess.run(proc.args, capture_output=True, text=True)  # the cut is kept: --fresh replaces it
    assert again.returncode == session.EXIT_USAGE and "cut.mlir exists" in again.stderr, again.stderr
    assert out.read_text() == cut


@needs_iree
def test_localize_only_writes_bytecode_when_asked(tmp_path: Path):
    """Audit 8 (D1): -o cut.mlirbc got text, which ireereduce then refused as input."""
    out = tmp_path / "cut.mlirbc"
    proc = localize_only(tmp_path, out)
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes().startswith(b"ML\xefR")
    assert "math.powf" in subprocess.run(["iree-opt", str(out)], capture_output=True, text=True).stdout


@pytest.mark.parametrize("flag", ["--report", "--report-json", "--stats-json", "--progress-json"])
def test_localize_only_refuses_what_it_would_not_write(tmp_path: Path, flag: str):
    """Audit 8 (D2): these were ignored without a word; refused before any compile."""
    (tmp_path / "mlp.mlir").write_text("func.func @main() {\n  return\n}\n")
    proc = subprocess.run(
        [sys.executable, "-m", "reducer", str(tmp_path / "mlp.mlir"), "-o", str(tmp_path / "cut.mlir")]
        + ["--localize-only", "--backends", "llvm-cpu,vmvx", flag, str(tmp_path / "x.out")],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == session.EXIT_USAGE, proc.stderr
    assert f"{flag} goes with a reduction: --localize-only writes the cut program and its inputs only" in proc.stderr
    assert {p.name for p in tmp_path.iterdir()} == {"mlp.mlir"}


@pytest.mark.parametrize("where", ["output", "inputs folder"])
def test_localize_only_never_replaces_a_users_file(tmp_path: Path, where: str):
    """Refused before any compile: a file of the user's at -o (without --fresh), or in
    the folder its inputs go to (even with --fresh, which replaces only the cut)."""
    mine = tmp_path / ("cut.mlir" if where == "output" else "cut.mlir.inputs/notes.txt")
    mine.parent.mkdir(exist_ok=True)
    mine.write_text("my notes\n")
    (tmp_path / "mlp.mlir").write_text("func.func @main() {\n  return\n}\n")
    proc = subprocess.run(
        [sys.executable, "-m", "reducer", str(tmp_path / "mlp.mlir"), "-o", str(tmp_path / "cut.mlir")]
        + ["--localize-only", "--backends", "llvm-cpu,vmvx"]
        + ([] if where == "output" else ["--fresh"]),
        capture_output=True,
        text=True,
    )
    assert proc.returncode == session.EXIT_USAGE, proc.stderr
    assert ("cut.mlir exists" if where == "output" else "notes.txt") in proc.stderr
    assert mine.read_text() == "my notes\n"
    left = {"mlp.mlir", mine.name} | ({"cut.mlir.inputs"} if where != "output" else set())
    assert {p.name for p in tmp_path.rglob("*")} == left


@needs_iree
def test_a_mismatch_run_reduces_the_cut_out_dispatch(tmp_path: Path):
    """The reduction starts from the one dispatch (a matmul and its fused elementwise
    tail), not the six-layer model, and ends at the powf."""
    settings = mlp_settings(tmp_path, output=str(tmp_path / "out.mlir"), jobs=2, reduce_flags=False)
    result = reduce_file(settings)
    assert any(n.startswith("localised to dispatch #1 main_dispatch_1::") for n in result.findings.notes)
    assert result.stats.original.ops is not None and result.stats.original.ops < 25  # the whole model: 90+
    text = (tmp_path / "out.mlir").read_text()
    assert "math.powf" in text and result.final_verdict is not None
    assert "NaN on a only" in result.final_verdict.stderr_tail
    # candidates that shrink @main's 4x8 argument run on the traced tensor's leading
    # block: without that, 36 of 80 checks failed to run and the argument stayed 4x8
    assert "tensor<4x8xf32>" not in text, text
    assert result.stats.outcomes.get("run failed", 0) <= 12, result.stats.outcomes


@needs_iree
@pytest.mark.parametrize("jobs", [1, 2])
def test_the_traced_run_is_the_originals_second_check(tmp_path: Path, jobs: int):
    """A localising run compiles the original untraced once, not twice: the traced run
    (which mismatches the same way) stands in for the second check, beside the first
    with two workers and after it with one."""
    settings = mlp_settings(tmp_path, output=str(tmp_path / "out.mlir"), jobs=jobs, reduce_flags=False)
    program, log = watched_compile(tmp_path, settings.input, "trace-dispatch-tensors", "traced")
    compile_ = program + (settings.compile or "")[len("iree-compile") :]
    settings = attrs.evolve(settings, compile=compile_, strategies=("drop-ops",), max_checks=2)
    with pytest.raises(LimitReached) as stopped:  # the start is what is counted here
        reduce_file(settings)
    result = stopped.value.args[0]
    assert any(n.startswith("localised to dispatch #1 ") for n in result.findings.notes)
    assert sorted(log.read_text().split()) == ["plain-beside" if jobs > 1 else "plain-alone", "traced"]


@needs_iree
def test_localize_only_traces_beside_the_originals_check(tmp_path: Path):
    settings = mlp_settings(tmp_path)
    program, log = watched_compile(tmp_path, settings.input, "trace-dispatch-tensors", "traced")
    proc = subprocess.run(
        [sys.executable, "-m", "reducer", settings.input, "-o", str(tmp_path / "cut.mlir"), "--localize-only", "-j2"]
        + ["--mismatch", "--compile", program + (settings.compile or "")[len("iree-compile") :]]
        + ["--against", settings.against or ""],
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ, TMPDIR=str(tmp_path)),
    )
    assert proc.returncode == 0, proc.stderr
    assert "dispatch #1 of 6: main_dispatch_1::" in proc.stdout
    assert sorted(log.read_text().split()) == ["plain-beside", "traced"]


def test_inputs_follow_a_signature_the_reduction_changed():
    """Shrunk shapes get the leading block, dropped unit dimensions are squeezed, a
    dropped argument drops its value, a new one gets generated values, and an argument
    that fits no value is not given one meant for another."""
    from reducer.iree.inputs import Unfit, cast, fitted, generated

    def fit(values: list[np.ndarray], types: list[str]) -> list[np.ndarray]:
        return [v for v, _ in fitted(values, types)]

    x, y = np.arange(32, dtype=np.float32).reshape(4, 8), np.full(3, 7.0, np.float32)
    assert [k for _, k in fitted([x, y], ["tensor<3xf32>", "tensor<2x2xi32>"])] == [1, None]  # whence each
    assert fit([x, y], ["tensor<4x8xf32>", "tensor<3xf32>"])[0] is x  # unchanged: as they are
    block, v = fit([x, y], ["tensor<2x3xf32>", "tensor<3xf32>"])
    assert block.tolist() == [[0, 1, 2], [8, 9, 10]] and v is y
    (only,) = fit([x, y], ["tensor<3xf32>"])  # x's argument went
    assert only is y
    row, scalar = fit([x, y], ["tensor<8xf32>", "f32"])  # 1x8, unit dimension dropped
    assert row.tolist() == list(range(8)) and float(scalar) == 7.0
    a, b, new = fit([x, y], ["tensor<4x8xf32>", "tensor<3xf32>", "tensor<2x2xi32>"])
    assert new.tolist() == generated("tensor<2x2xi32>", 2).tolist()
    assert cast(fit([x], ["tensor<1x2xf16>"])[0], "tensor<1x2xf16>").dtype == np.float16
    (big,) = fit([y], ["tensor<5xf32>"])  # does not fit: generated, not y padded
    assert big.tolist() == generated("tensor<5xf32>", 0).tolist()
    with pytest.raises(Unfit):
        fit([x], ["tensor<2x!foo.t>"])


def test_a_dispatch_whose_inputs_already_carry_the_difference_is_not_the_culprit():
    """a's dispatch 0 makes the NaN but has no partner on b: the paired dispatch after it
    reads the NaN already, so nothing is named (the whole program is reduced)."""
    from reducer.iree.localize import Traced, first_wrong

    ok, nan = np.ones(4, np.float32), np.array([1, np.nan, 1, 1], np.float32)
    a = [Traced("a0", [ok], [nan]), Traced("a1", [nan], [nan]), Traced("a2", [ok], [nan])]
    b = [Traced("b1", [ok], [ok]), Traced("b2", [ok], [ok])]
    assert first_wrong(a, b, [(1, 0)], "NaN on a only", 1e-3, 1e-4) is None
    found = first_wrong(a, b, [(1, 0), (2, 1)], "NaN on a only", 1e-3, 1e-4)
    assert found is not None and (found.name, found.name_b, found.element) == ("a2", "b2", (1,))
    # a dispatch before it that differs another way (5x) is another bug, not this one
    a, b = [Traced("x", [ok], [ok * 5]), *a], [Traced("y", [ok], [ok]), *b]
    found = first_wrong(a, b, [(0, 0), (3, 2)], "NaN on a only", 1e-3, 1e-4)
    assert found is not None and found.name == "a2"


def test_a_data_tiled_dispatch_is_read_and_paired_by_its_outputs():
    """With --iree-opt-data-tiling on llvm-cpu a matmul dispatch reads its weights and
    the activation twice, printed under a longer header; vmvx's reads the activation
    alone. The two still pair by order and output shapes, and the inputs both read are
    compared."""
    from reducer.iree.localize import first_wrong, match, parse

    tiled = TRACE.replace("inputs ===", "inputs with {0, 1, 2} decoded to row major layout ===")
    a = parse(tiled)
    assert [len(t.inputs) for t in a] == [1, 2] and a[0].outputs[0].shape == (2, 2)
    a[0].inputs.insert(0, np.full((8, 8), np.nan, np.float32))  # the weights, read only on a
    b = parse(TRACE)
    b[0].outputs[0] = np.array([[1, 2], [-np.inf, 4]], np.float32)
    pairs, note = match(a, b)
    assert pairs == [(0, 0), (1, 1)] and "paired by order and output shapes" in note
    found = first_wrong(a, b, pairs, "NaN on a only", 1e-3, 1e-4)
    assert found is not None and found.index == 0 and found.inputs_agree and found.traced_b is b[0]


@needs_iree
def test_a_side_whose_dispatches_carry_encodings_is_cut_from_the_other_side(tmp_path: Path):
    """llvm-cpu with data tiling against vmvx: the two sides form different dispatches
    (said so), the first wrong one is still named, and since a's carries encodings
    the cut program comes from b's IR."""
    from benchmarks.models import mismatch_mlp

    src, out = tmp_path / "mlp.mlir", tmp_path / "cut.mlir"
    src.write_text(mismatch_mlp(bug_layer=3, slip=False))
    proc = subprocess.run(
        [sys.executable, "-m", "reducer", str(src), "-o", str(out), "--localize-only", "--mismatch"]
        + ["--compile", MLP_C + "llvm-cpu --iree-opt-data-tiling {input} -o {output}"]
        + ["--against", MLP_C + "vmvx {input} -o {output}"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert "dispatch #3 of 6: main_dispatch_3::" in proc.stdout
    assert "form different dispatches (6 and 6, reading different tensors)" in proc.stdout
    assert "cut out:" in proc.stdout, proc.stdout
    assert "math.powf" in out.read_text() and "encoding" not in out.read_text()


@needs_iree
def test_the_report_names_the_dispatch_and_ships_the_inputs_its_commands_need(tmp_path: Path):
    """A localised run's report names the dispatch, the two configurations and the worst
    element, writes the reduced program's inputs beside it, and its commands, run from
    there, show NaN on llvm-cpu and a number on vmvx. The summary counts the model, the
    cut and the result."""
    import json
    import shlex

    settings = mlp_settings(tmp_path)
    out, rep = tmp_path / "out.mlir", tmp_path / "bug.md"
    proc = subprocess.run(
        [sys.executable, "-m", "reducer", settings.input, "-o", str(out), "-j", "2", "--no-reduce-flags"]
        + ["--mismatch", "--compile", settings.compile or "", "--against", settings.against or ""]
        + ["--report", str(rep), "--report-json", str(tmp_path / "bug.json")],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"model 1\d\d ops, cut at dispatch #1 to 2\d ops, reduced to \d ops;", proc.stderr), proc.stderr
    data = json.loads((tmp_path / "bug.json").read_text())
    where, diff = data["localized"], data["difference"]
    assert (where["index"], where["name"]) == (1, "main_dispatch_1::main_dispatch_1_matmul_4x8x8_f32")
    assert where["kind"] == "NaN on a only" and where["a"] == "nan" and isinstance(where["b"], float)
    assert "llvm-cpu" in diff["configurations"]["a"] and "vmvx" in diff["configurations"]["b"]
    assert data["oracle"]["reproduce"] == diff["commands"]  # the Command section runs as shipped
    assert diff["worst"]["kind"] == "NaN on a only" and diff["worst"]["a"] == "nan"
    text = rep.read_text()
    assert "#1 of 6, `main_dispatch_1::main_dispatch_1_matmul_4x8x8_f32`" in text
    assert "- worst element: output 0 index [" in text and "`bug.md.inputs/`" in text
    (given,) = diff["inputs"]["a"]
    assert given.startswith("bug.md.inputs/") and (tmp_path / given).exists()
    shown = []
    for line in diff["commands"].splitlines():
        done = subprocess.run(shlex.split(line), capture_output=True, text=True, cwd=tmp_path)
        assert done.returncode == 0, (line, done.stderr)
        shown.append(done.stdout.lower())
    assert "nan" in shown[2] and "nan" not in shown[3], shown


@needs_iree
def test_the_traced_runs_get_longer_than_a_check(tmp_path: Path):
    """Tracing may compile far slower than a check (107 s against 3 s on a data-tiled
    llvm-cpu model): the traced runs get TRACE_TIMEOUT_FACTOR times the check timeout,
    so a trace that takes longer than one check still localises."""
    import attrs

    from reducer.iree.localize import localize
    from reducer.iree.oracles.command import resolve_tool

    slow = tmp_path / "slow-when-traced"
    slow.write_text(
        f'#!/bin/sh\ncase "$*" in *--iree-flow-trace-dispatch-tensors*) sleep 1.5;; esac\n'
        f'exec {resolve_tool("iree-compile")} "$@"\n'
    )
    slow.chmod(0o755)
    settings = mlp_settings(tmp_path)
    settings = attrs.evolve(settings, compile=str(slow) + (settings.compile or "")[len("iree-compile") :])
    oracle = attrs.evolve(make_oracle(settings, "mlp.mlir", 120.0), timeout=1.0)
    where = localize(oracle, Path(settings.input).read_bytes(), "mlp.mlir")
    assert where.found is not None and where.found.index == 1, where.reason


def test_what_became_of_inputs_that_do_not_fit_is_told_whole():
    """Audit 11 (M6) and the review: `--inputs 5.5` for @main(tensor<?xf32>, tensor<4xf32>)
    was told as "the other one gets generated values": both did, as the scalar fits
    neither. The note counts what was generated and names what goes unused."""
    import numpy as np

    from reducer.iree.inputs import fitted
    from reducer.iree.oracles.mismatch import _fit_note

    def note(given: list[np.ndarray], types: list[str]) -> str:
        return _fit_note(given, fitted(given, types), "main", types)

    scalar, four = np.asarray(5.5, dtype=np.float32), np.ones(4, dtype=np.float32)
    two = ["tensor<?xf32>", "tensor<4xf32>"]
    assert note([scalar], two) == (
        "--inputs gives 1 value for @main's 2 arguments: 2 get generated values; #1 (a scalar) goes unused "
        "(give one --inputs per argument)"
    )
    assert note([scalar, scalar], [*two, "tensor<2xf32>"]) == (
        "--inputs gives 2 values for @main's 3 arguments: 3 get generated values; #1 (a scalar), #2 (a scalar) "
        "go unused (give one --inputs per argument)"
    )
    assert note([four, scalar, scalar], two) == (
        "--inputs gives 3 values for @main's 2 arguments: one gets generated values; #2 (a scalar), "
        "#3 (a scalar) go unused"
    )
    assert note([scalar, four], ["tensor<4xf32>", "tensor<4xf32>"]) == (
        "--inputs do not fit @main(tensor<4xf32>, tensor<4xf32>): one gets generated values; #1 (a scalar) goes unused"
    )
    assert note([four, four], two) == ""
    big = np.ones((2, 4), dtype=np.float32)  # cut to its argument's leading block
    assert note([big], ["tensor<2x2xf32>"]) == "--inputs (2x4) are cut to @main(tensor<2x2xf32>)'s shapes"


@needs_iree
def test_localize_only_warns_of_inputs_that_do_not_fit_and_refuses_a_wrong_function(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
):
    """Audit 12 (D3) and the review: --localize-only judged the original without the
    reduction's start, so one --inputs for two arguments went unsaid, and --function nope
    was exit 5 where a reduction says exit 2."""
    from reducer.session.localize_only import localize_only

    settings = demote_settings(tmp_path)
    given = {"compile": settings.compile, "against": settings.against, "mismatch": True}
    with caplog.at_level(logging.WARNING, logger="reducer"):
        localize_only(settings.input, {**given, "inputs": ["2x3xf32=2"], "output": str(tmp_path / "a.mlir")})
    said = [r.getMessage() for r in caplog.records if "--inputs gives" in r.getMessage()]
    assert said == [
        "--inputs gives 1 value for @main's 2 arguments: one gets generated values (give one --inputs per argument)"
    ]
    capsys.readouterr()
    code = localize_only(settings.input, {**given, "function": "nope", "output": str(tmp_path / "b.mlir")})
    assert code == EXIT_USAGE
    err = capsys.readouterr().err
    assert "--function nope: the module exports no such function (it has main); give one of those" in err
    assert not (tmp_path / "b.mlir").exists()


def test_the_functions_a_module_has_are_named_on_one_line():
    """The review: the exports of a module with thousands of them made a line longer
    than a verdict keeps whole, and the refusal came out cut in the middle."""
    from reducer.iree.oracles.mismatch import _some

    assert _some(["main", "f"]) == "main, f"
    names = [f"f{k}" for k in range(2000)]
    assert _some(names) == ", ".join(names[:20]) + " and 1980 more"


@pytest.mark.e2e
@needs_iree  # make_oracle finds iree-compile, though no compile runs
def test_a_cut_mlir_prints_otherwise_is_checked_as_cut_when_the_print_does_not_reproduce(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """The cut is checked as MLIR prints it; when that print does not reproduce (the
    bindings' IREE is not --compile's, say) the text as cut is checked too, and kept."""
    from types import SimpleNamespace

    from reducer.core.oracle import Verdict
    from reducer.iree import cut

    as_cut = "func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {\n  return %x : tensor<4xf32>\n}\n"
    monkeypatch.setattr(cut, "flow_ir", lambda *a, **k: "flow")
    monkeypatch.setattr(cut, "program", lambda flow, name: (as_cut, ["tensor<4xf32>"]))
    found = SimpleNamespace(name="d::d", traced=SimpleNamespace(inputs=[np.zeros(4, np.float32)]), traced_b=None)
    oracle = make_oracle(demote_settings(tmp_path), "model.mlir", 10.0)
    seen: list[bytes] = []

    def check(data: bytes, judge: object) -> Verdict:
        seen.append(data)
        return Verdict(data == as_cut.encode(), 0, outcome="interesting" if data == as_cut.encode() else "same outputs")

    done = cut.cut(oracle, b"model", "model.mlir", found, check)  # type: ignore[arg-type]
    assert seen[0].startswith(b"module {") and seen[1:] == [as_cut.encode()]
    assert done.text == as_cut and done.checks == 2
