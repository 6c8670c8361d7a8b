"""The crash-reproducer oracle against the real iree-opt: a local reproducer's replay is
judged with the slippage guard, a full-pipeline one is told apart, and the resource the
MLIR bindings drop is found, stripped and written back."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import needs_iree

from reducer.core import ir as irutil
from reducer.iree import reproducer, signature
from reducer.iree.oracles.replay import ReplayOracle

#: The f6 example's local reproducer (iree-convert-to-llvm), reduced: replays the truncf error.
LOCAL = """#executable_target_embedded_elf_x86_64 = #hal.executable.target<"llvm-cpu", "embedded-elf-x86_64", {cpu = "generic", cpu_features = "", data_layout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-i128:128-f80:128-n8:16:32:64-S128", iree.encoding.resolver = #iree_cpu.cpu_encoding_resolver<>, max_stack_allocation_size = 32768 : i32, native_vector_size = 16 : i32, target_triple = "x86_64-unknown-unknown-eabi-elf"}>
#pipeline_layout = #hal.pipeline.layout<bindings = [#hal.pipeline.binding<storage_buffer, "ReadOnly|Indirect">, #hal.pipeline.binding<storage_buffer, ReadOnly>, #hal.pipeline.binding<storage_buffer, Indirect>], flags = Indirect>
module attributes {stream.affinity.default = #hal.device.affinity<@__device_0>} {
  hal.executable private @main_dispatch_17 {
    hal.executable.variant public @embedded_elf_x86_64 target(#executable_target_embedded_elf_x86_64) {
      hal.executable.export public @main_dispatch_17_matmul_4x16x16_f32 ordinal(0) layout(#pipeline_layout) count(%arg0: !hal.device) -> (index, index, index) {
        %x, %y, %z = iree_tensor_ext.dispatch.workgroup_count_from_slice()
        hal.return %x, %y, %z : index, index, index
      }
      builtin.module {
        func.func @main_dispatch_17_matmul_4x16x16_f32(%arg0: memref<1x1xf32, strided<[16, 1], offset: ?>>) {
          %cst = arith.constant dense<0x7FC00000> : vector<1x1xf32>
          %false = arith.constant false
          %c0 = arith.constant 0 : index
          cf.br ^bb1
        ^bb1:  // 2 preds: ^bb0, ^bb4
          cf.cond_br %false, ^bb2, ^bb5
        ^bb2:  // 2 preds: ^bb1, ^bb3
          cf.cond_br %false, ^bb3, ^bb4
        ^bb3:  // pred: ^bb2
          cf.br ^bb2
        ^bb4:  // pred: ^bb2
          %0 = arith.truncf %cst : vector<1x1xf32> to vector<1x1xf6E2M3FN>
          %1 = arith.extf %0 : vector<1x1xf6E2M3FN> to vector<1x1xf32>
          %2 = vector.extract %1[0] : vector<1xf32> from vector<1x1xf32>
          vector.store %2, %arg0[%c0, %c0] : memref<1x1xf32, strided<[16, 1], offset: ?>>, vector<1xf32>
          cf.br ^bb1
        ^bb5:  // pred: ^bb1
          return
        }
      }
    }
  }
}

{-#
  external_resources: {
    mlir_reproducer: {
      pipeline: "builtin.module(hal.executable(hal.executable.variant(builtin.module(iree-convert-to-llvm{reassociateFpReductions=false target-data-layout= target-triple=}))))",
      disable_threading: true,
      verify_each: true
    }
  }
#-}
"""
TRUNCF = "failed to legalize operation 'arith.truncf' that was explicitly marked illegal"
FULL = """func.func @f() {
  return
}

{-#
  external_resources: {
    mlir_reproducer: {
      pipeline: "builtin.module(iree-op-pipeline-adaptor, symbol-dce)",
      disable_threading: false,
      verify_each: true
    }
  }
#-}
"""


def test_the_resource_is_found_and_its_braces_in_pass_options_do_not_end_it():
    found = reproducer.find(LOCAL)
    assert found is not None
    assert found.pipeline.endswith(
        "iree-convert-to-llvm{reassociateFpReductions=false target-data-layout= target-triple=}))))"
    )
    assert found.disable_threading and found.verify_each
    assert reproducer.find(FULL) == reproducer.Reproducer(
        "builtin.module(iree-op-pipeline-adaptor, symbol-dce)", disable_threading=False
    )
    assert reproducer.find("func.func @f() {\n  return\n}\n") is None


def test_the_bindings_drop_the_resource_and_strip_plus_block_give_it_back():
    """Why the output needs the trailer: the workspace's printer loses the resource."""
    printed = irutil.to_text(irutil.parse(LOCAL, irutil.new_context()).operation, irutil.PrintOptions(), verified=False)
    assert "mlir_reproducer" not in printed
    stripped = reproducer.strip(LOCAL)
    assert "mlir_reproducer" not in stripped and "arith.truncf" in stripped
    found = reproducer.find(LOCAL)
    assert found is not None and reproducer.find(stripped + found.block()) == found


@pytest.mark.e2e
@needs_iree
def test_a_replay_is_interesting_while_it_fails_the_original_way_and_its_command_reads_as_lit():
    found = reproducer.find(LOCAL)
    assert found is not None
    oracle = ReplayOracle.of(found.pipeline, "repro.mlir", 60.0)
    first = oracle.run(LOCAL.encode())
    assert (
        first.interesting
        and first.signature is not None
        and first.signature.first_error.startswith("failed to legalize operation 'arith.truncf'")
    )
    calibrated = oracle.calibrate(first)
    # Without the truncation the pass succeeds: no failure.
    fixed = LOCAL.replace(
        "%0 = arith.truncf %cst : vector<1x1xf32> to vector<1x1xf6E2M3FN>",
        "%0 = arith.constant dense<0.0> : vector<1x1xf6E2M3FN>",
    )
    assert fixed != LOCAL
    assert calibrated.run(fixed.encode()).outcome == "no failure"
    # Another error (the index constant typed i32: the parser refuses its uses): a different bug.
    other = LOCAL.replace("%c0 = arith.constant 0 : index", "%c0 = arith.constant 0 : i32")
    assert other != LOCAL
    assert calibrated.run(other.encode()).outcome == "different bug"
    shown = oracle.reproducer("repro.mlir")
    assert shown.startswith("iree-opt --pass-pipeline='builtin.module(hal.executable(")
    assert shown.endswith("repro.mlir -o /dev/null --mlir-disable-threading")
    # The shown command is a shell line that replays the error.
    proc = subprocess.run(
        shown.replace("repro.mlir", "/dev/stdin", 1), shell=True, input=LOCAL, capture_output=True, text=True
    )
    assert signature.of(proc.returncode, proc.stderr).matches(calibrated.expected)


@pytest.mark.e2e
@needs_iree
def test_a_full_pipeline_reproducer_is_not_replayable():
    found = reproducer.find(FULL)
    assert found is not None
    verdict = ReplayOracle.of(found.pipeline, "repro.mlir", 60.0).run(FULL.encode())
    assert verdict.outcome == "not replayable" and not verdict.interesting


def test_the_trailer_follows_the_pipeline_the_oracle_replays_now():
    found = reproducer.find(LOCAL)
    assert found is not None
    oracle = ReplayOracle.of(found.pipeline, "repro.mlir", 1.0)
    assert reproducer.find(reproducer.trailer(oracle)) == found
    shorter = oracle.with_command(oracle.command.without([1]))  # flag reduction dropped the pipeline flag
    assert reproducer.trailer(shorter) == ""  # type: ignore[arg-type]


def test_the_sources_a_codegen_error_points_into_are_picked(tmp_path):
    """With its executable sources dumped with locations, iree-compile names the source
    in the error; else the source holding the error's location in the input is taken."""
    dump = tmp_path / "sources"
    dump.mkdir()
    for n in (1, 2, 17):
        (dump / f"module_main_dispatch_{n}.mlir").write_text(f'%x = arith.truncf %y loc("/tmp/r/model.mlir":{n}:8)\n')
    named = f"{dump}/module_main_dispatch_17.mlir:30:10: error: failed to legalize operation 'arith.truncf'\n"
    assert reproducer._failing_sources(str(dump), named) == ["module_main_dispatch_17.mlir"]
    by_place = "/tmp/r/model.mlir:2:8: error: failed to legalize operation 'arith.truncf'\n"
    assert reproducer._failing_sources(str(dump), by_place) == ["module_main_dispatch_2.mlir"]
    assert reproducer._failing_sources(str(dump), "model.mlir:99:1: error: x\n") == []
    assert reproducer._failing_sources(str(tmp_path / "none"), named) == []


def test_the_reproducer_is_written_inside_the_runs_directory(tmp_path, monkeypatch):
    """Triage's scratch (the reproducer, the dumped sources) lives in the run's directory:
    a run killed with SIGKILL there leaves nothing that the next run's sweep misses (a
    directory of its own in TMPDIR stayed for good)."""
    from reducer.core import rundirs
    from reducer.session import Settings, make_oracle

    seen, record = tmp_path / "seen", tmp_path / "record.sh"
    record.write_text(
        f'#!/bin/sh\nfor a; do case $a in --mlir-pass-pipeline-crash-reproducer=*) echo "${{a#*=}}" >> {seen};; '
        "esac; done\nexit 1\n"
    )
    record.chmod(0o755)
    (tmp_path / "in.mlir").write_text("module {}\n")
    compiles = make_oracle(
        Settings(str(tmp_path / "in.mlir"), compile=f"{record} {{input}} -o /dev/null"), "in.mlir", 10
    )
    run = tmp_path / "run"
    run.mkdir()
    monkeypatch.setenv(rundirs.RUN_DIR_ENV, str(run))
    assert reproducer.local(compiles, b"module {}\n") is None  # the stand-in compiler writes none
    written = Path(seen.read_text().strip())
    assert written.parent.parent == run and written.parent.name.startswith("ireereduce-repro-")
    assert list(run.iterdir()) == []  # and removed when done


def test_an_output_with_blobs_gets_the_trailer_after_them(tmp_path):
    """The review: the trailer was added to the program's bytes (`Attached` + bytes is
    plain bytes), so the output of a reproducer with blobs lost them."""
    from reducer.session import Settings
    from reducer.session.guard import Guard
    from reducer.session.source import load_input

    src = tmp_path / "in.mlir"
    src.write_text(
        "func.func @f() -> tensor<2xf32> {\n  %w = arith.constant dense_resource<w> : tensor<2xf32>\n"
        "  return %w : tensor<2xf32>\n}\n{-#\n  dialect_resources: {\n    builtin: {\n"
        '      w: "0x040000000000803F00000040"\n    }\n  }\n#-}\n'
    )
    given = load_input(str(src))
    assert given.blobs is not None
    guard = Guard(Settings(str(src), output=str(tmp_path / "out.mlir")), str(tmp_path / "out.mlir"), given.blobs.attach)
    guard.trailer = reproducer.Reproducer("builtin.module(canonicalize)").block().encode()
    guard.write_output(given.text.encode())
    written = (tmp_path / "out.mlir").read_text()
    assert '"0x040000000000803F00000040"' in written and written.endswith(guard.trailer.decode())
