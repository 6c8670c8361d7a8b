"""The failure signature: what stays the same while the program shrinks, and what not."""

from __future__ import annotations

from reducer.iree import signature

CRASH = """Please report issues to https://github.com/iree-org/iree/issues and include the crash backtrace.
Stack dump:
0.	Program arguments: iree-compile in.mlir -o /dev/null
 #0 0x00007f6f3755a0ab llvm::sys::PrintStackTrace(llvm::raw_ostream&, int) Signals.cpp:0:0
 #1 0x00007f6f375571fe llvm::sys::RunSignalHandlers() Signals.cpp:0:0
 #2 0x00007f6f3755ac10 SignalHandler(int, siginfo_t*, void*) Signals.cpp:0:0
 #3 0x00007f6f3165a050 (/lib/x86_64-linux-gnu/libc.so.6+0x3c050)
 #4 0x00007f6f3f909a03 mlir::LLVM::LLVMStructType::getBody() const LLVMTypes.cpp:0:0
 #5 0x00007f6f3b7934af mlir::MemRefDescriptor::MemRefDescriptor(mlir::Value) MemRefBuilder.cpp:0:0
 #6 0x00007f6f39781d60 mlir::iree_compiler::HALDispatchABI::loadBinding(mlir::Operation*) DispatchABI.cpp:0:0
 #7 0x00007f6f39775bfd mlir::iree_compiler::ConvertToLLVM::run() ConvertToLLVM.cpp:0:0
 #8 0x00007f6f397726b7 mlir::iree_compiler::(anonymous namespace)::ConvertToLLVMPass::runOnOperation() ConvertToLLVM.cpp:0:0
 #9 0x00007f6f37b0bc27 mlir::detail::OpToOpPassAdaptor::runOnOperationImpl(bool) Pass.cpp:0:0
"""


def error(path: str, line: int, message: str) -> str:
    return (
        f"{path}:{line}:10: error: {message}\n    %0 = arith.truncf %arg0\n         ^\n{path}:2:3: note: called from\n"
    )


def test_an_error_keeps_its_message_without_positions_ssa_names_or_shapes():
    a = signature.of(
        1,
        error(
            "/tmp/a/in.mlir",
            88,
            "failed to legalize operation 'vector.store' that was explicitly marked illegal: %12 = \"vector.store\"(%1) : (vector<4x4xf6E2M3FN>) -> ()",
        ),
    )
    b = signature.of(
        1,
        error(
            "/tmp/b/in.mlir",
            3,
            "failed to legalize operation 'vector.store' that was explicitly marked illegal: %3 = \"vector.store\"(%9) : (vector<2xf6E2M3FN>) -> ()",
        ),
    )
    assert a.kind == "error" and a.code == 1
    assert a.first_error == "failed to legalize operation 'vector.store' that was explicitly marked illegal"
    assert b.matches(a) and a.matches(b)


def test_another_first_error_is_a_different_bug_but_extra_errors_are_not():
    original = signature.of(1, error("in.mlir", 3, "failed to legalize operation 'arith.truncf'"))
    other = signature.of(1, error("in.mlir", 3, "failed to legalize operation 'vector.maskedload'"))
    both = signature.of(
        1,
        error("in.mlir", 3, "failed to legalize operation 'vector.maskedload'")
        + error("in.mlir", 9, "failed to legalize operation 'arith.truncf'"),
    )
    assert not other.matches(original)
    assert both.matches(original)  # the original's error is still reported
    assert not signature.of(0, "").matches(original)
    assert not signature.of(2, error("in.mlir", 3, "failed to legalize operation 'arith.truncf'")).matches(original)


def test_a_candidate_without_the_original_error_text_is_another_failure():
    """A candidate that fails the same way but says nothing (an empty stderr, or only a
    warning) no longer shows the original's error: it is not the same bug."""
    original = signature.of(1, error("in.mlir", 3, "failed to legalize operation 'arith.truncf'"))
    silent = signature.of(1, "")
    warned = signature.of(1, "in.mlir:3:10: warning: unused value\n")
    assert silent.kind == warned.kind == original.kind and silent.code == original.code
    assert not silent.matches(original)
    assert not warned.matches(original)


def test_a_crash_and_an_error_with_the_same_code_and_message_are_different_bugs():
    """Only the kind tells these apart: an abort (SIGABRT, no stack printed) after the
    error, and a plain exit with code 6 after the same error."""
    text = error("in.mlir", 3, "failed to legalize operation 'arith.truncf'")
    crash, exit6 = signature.of(-6, text), signature.of(6, text)
    assert (crash.kind, exit6.kind) == ("crash", "error")
    assert crash.code == exit6.code == 6 and crash.errors == exit6.errors and not crash.frames
    assert not exit6.matches(crash)
    assert not crash.matches(exit6)


def test_types_and_numbers_normalise_but_element_types_stay():
    assert signature.normalise("'tensor.expand_shape' op expected 7 dims, got 3 for tensor<7x?xi4>") == (
        "'tensor.expand_shape' op expected N dims, got N for tensor<Nxi4>"
    )
    assert signature.normalise("type tensor<8xf6E2M3FN> at @layer17") == "type tensor<Nxf6E2M3FN> at @_"


def test_a_crash_is_its_signal_and_top_frames_through_any_wrapper():
    for rc in (-11, 139, 245):  # killed, through a shell, through a Python console script
        sig = signature.of(rc, CRASH)
        assert sig.kind == "crash" and sig.code == 11
        assert sig.frames[:2] == (
            "mlir::LLVM::LLVMStructType::getBody() const",
            "mlir::MemRefDescriptor::MemRefDescriptor(mlir::Value)",
        )
        assert sig.failing_pass == "ConvertToLLVMPass" and len(sig.frames) == 5
        assert "SIGSEGV in mlir::LLVM::LLVMStructType::getBody() const (in ConvertToLLVMPass)" == sig.describe()
    original = signature.of(-11, CRASH)
    elsewhere = signature.of(-11, CRASH.replace("LLVMStructType::getBody", "LLVMArrayType::getElementType"))
    assert signature.of(245, CRASH).matches(original)
    assert not elsewhere.matches(original)
    deeper = signature.of(
        -11, CRASH.replace("MemRefDescriptor::MemRefDescriptor(mlir::Value)", "MemRefDescriptor::poison()")
    )
    assert deeper.matches(original)  # the way to the crash may change as the program shrinks
    other_pass = signature.of(-11, CRASH.replace("ConvertToLLVMPass", "LLVMCPULowerExecutableTargetPass"))
    assert other_pass.failing_pass == "LLVMCPULowerExecutableTargetPass" and not other_pass.matches(original)
    assert not signature.of(1, error("in.mlir", 1, "x")).matches(original)


def test_an_assertion_is_part_of_a_crash_signature():
    text = (
        'iree-compile: Foo.cpp:12: void f(): Assertion `isa<To>(Val) && "cast<Ty>() argument of incompatible type!"\' failed.\n'
        + CRASH
    )
    sig = signature.of(-6, text)
    assert sig.kind == "crash" and sig.code == 6
    assert sig.assertion.startswith("isa<To>(Val)")
    other = signature.of(-6, text.replace("isa<To>", "dyn_cast<To>"))
    assert not other.matches(sig)


def _numeric(a: list, b: list):
    import numpy as np

    return signature.numeric(
        [np.array(x, dtype=np.float32) for x in a], [np.array(y, dtype=np.float32) for y in b], 1e-3, 1e-4
    )


def test_a_numeric_mismatch_records_the_output_and_the_worst_kind_of_difference():
    nan = float("nan")
    sig = _numeric([[1.0, 2.0], [nan, 3.0, -1.0]], [[1.0, 2.0], [0.25, 3.5, 1.0]])
    assert sig.kind == "mismatch" and sig.code == 1
    assert sig.errors == ("NaN on a only", "opposite signs", "off by under 2x")
    assert sig.describe() == "output 1 differs: NaN on a only, opposite signs, off by under 2x"
    assert _numeric([[1.0]], [[1.00001]]).kind == "ok"


def test_each_kind_of_numeric_difference():
    inf, nan = float("inf"), float("nan")
    assert _numeric([[nan]], [[nan]]).kind == "ok"
    assert _numeric([[1.0]], [[nan]]).errors == ("NaN on b only",)
    assert _numeric([[inf]], [[1.0]]).errors == ("inf on a only",)
    assert _numeric([[1.0]], [[-inf]]).errors == ("inf on b only",)
    assert _numeric([[1.0]], [[5.0]]).errors == ("off by 2x or more",)
    assert _numeric([[1.0, 2.0]], [[1.0, 2.0, 3.0]]).errors == ("shapes differ",)


def test_a_candidate_must_still_differ_the_original_way_wherever_that_output_went():
    nan = float("nan")
    original = _numeric([[5.0], [nan, 1.0]], [[5.0], [-0.8, 1.0]])  # output 1: NaN on one side
    moved = _numeric([[nan, 2.0]], [[-0.8, 2.0]])  # the same difference, now output 0
    slipped = _numeric([[1.0, -2.0]], [[1.0, 2.0]])  # a sign flip somewhere else
    assert moved.matches(original)
    assert not slipped.matches(original)
    assert not signature.Signature("ok", 0).matches(original)
