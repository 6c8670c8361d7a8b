"""External parameters (issue 30): --parameters scope=FILE reaches the run oracles, the
archive's values go inline (inline-parameters), and the result needs no archive.

Archives are made at test time with the runtime's own API (ParameterIndex), never
committed; the e2e test compiles and runs with the real iree-compile and iree-run-module."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import attrs
import numpy as np
import pytest
from conftest import make_script, needs_iree
from test_bytecode import cli, error_line

from reducer.core import ir as irutil
from reducer.core.dask_executor import ShippedFiles, ship
from reducer.core.oracle import CancelFn, Oracle, Verdict, never
from reducer.core.rundirs import RUN_DIR_ENV
from reducer.core.workspace import Candidate, MLIRWorkspace
from reducer.iree import parameters
from reducer.session import Settings, wiring
from strategies.inline_parameters import InlineParameters

#: w = 60000 overflows f16 once doubled: computed in f32 (side a) it is 120001, demoted
#: to f16 (side b) it is inf. With any small w there is no bug: the bug needs the archive.
MODEL = """\
util.global private @w = #stream.parameter.named<"model"::"w"> : tensor<4xf16>
util.global private @b = #stream.parameter.named<"model"::"b"> : tensor<4xf16>
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %w = util.global.load @w : tensor<4xf16>
  %b = util.global.load @b : tensor<4xf16>
  %s = arith.addf %w, %b : tensor<4xf16>
  %wf = arith.extf %s : tensor<4xf16> to tensor<4xf32>
  %d = arith.addf %wf, %wf : tensor<4xf32>
  %r = arith.addf %d, %x : tensor<4xf32>
  return %r : tensor<4xf32>
}
"""

COMPILE = (
    "iree-compile {input} --iree-hal-target-device=local --iree-hal-local-target-device-backends=llvm-cpu -o {output}"
)
AGAINST = COMPILE + " --iree-input-demote-f32-to-f16"


def command(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The installed command's own entry point (`python -m reducer`), whose exit path
    differs from reducer.cli's: it is where nanobind's leak report came out."""
    env = dict(os.environ, TMPDIR=str(cwd / "tmp"))
    (cwd / "tmp").mkdir(exist_ok=True)
    return subprocess.run(
        [sys.executable, "-m", "reducer", *args], cwd=cwd, capture_output=True, text=True, timeout=300, env=env
    )


def archive(path: Path, data: dict[str, np.ndarray], splats: dict[str, tuple[np.ndarray, int]] | None = None) -> Path:
    """An .irpa made by the runtime: `data` stored, `splats` as (pattern, bytes)."""
    import iree.runtime as rt

    index = rt.ParameterIndex()
    for key, value in data.items():
        index.add_buffer(key, value.tobytes())
    for key, (pattern, length) in (splats or {}).items():
        index.add_splat(key, pattern.tobytes(), length)
    index.create_archive_file(str(path))
    return path


def model_archive(path: Path) -> Path:
    return archive(path, {"w": np.array([60000, 1, 2, 3], np.float16)}, {"b": (np.array([0.5], np.float16), 8)})


# -- the strategy ----------------------------------------------------------------------


def test_inline_parameters_puts_values_inline_and_a_splat_for_equal_ones(tmp_path: Path):
    archives = parameters.Archives.open([f"model={model_archive(tmp_path / 'm.irpa')}"])
    ws = MLIRWorkspace(MODEL, irutil.PrintOptions(), outside=parameters.count)
    strategy = InlineParameters(archives)
    edits = ws.opportunities(strategy)
    assert [e.arg for e in edits] == [("model", "w"), ("model", "b")]
    got = ws.materialize(strategy, edits)
    assert isinstance(got, Candidate), got
    assert "#stream.parameter" not in got.text
    assert "@w = dense<[6.000000e+04, 1.000000e+00, 2.000000e+00, 3.000000e+00]> : tensor<4xf16>" in got.text
    assert "@b = dense<5.000000e-01> : tensor<4xf16>" in got.text  # the splat, as a splat
    # Longer text, yet smaller: it needs no archive (Size.outside).
    assert len(got.text) > len(ws.program.text) and got.size.outside == 0 and ws.size.outside == 2


def test_an_inline_value_is_not_smaller_without_the_outside_count(tmp_path: Path):
    """What `Size.outside` guards: by ops and bytes alone, inlining never wins."""
    archives = parameters.Archives.open([f"model={model_archive(tmp_path / 'm.irpa')}"])
    ws = MLIRWorkspace(MODEL, irutil.PrintOptions())
    strategy = InlineParameters(archives)
    got = ws.materialize(strategy, ws.opportunities(strategy))
    assert not isinstance(got, Candidate) and got.reason == "not-smaller"


def test_only_keys_found_with_the_size_of_their_type_are_offered(tmp_path: Path):
    path = archive(tmp_path / "m.irpa", {"w": np.arange(3, dtype=np.float16)})  # 6 bytes, not 8; no "b"
    ws = MLIRWorkspace(MODEL, irutil.PrintOptions(), outside=parameters.count)
    assert ws.opportunities(InlineParameters(parameters.Archives.open([f"model={path}"]))) == []
    assert ws.opportunities(InlineParameters(parameters.Archives.open([f"other={path}"]))) == []  # another scope
    assert ws.opportunities(InlineParameters(None)) == []  # a run without archives


def test_the_default_scope_is_a_bare_file(tmp_path: Path):
    path = archive(tmp_path / "m.irpa", {"w": np.array([1, 2, 3, 4], np.int32)})
    text = 'util.global private @w = #stream.parameter.named<"w"> : tensor<4xi32>\n'
    ws = MLIRWorkspace(text, irutil.PrintOptions(), outside=parameters.count)
    strategy = InlineParameters(parameters.Archives.open([str(path)]))
    got = ws.materialize(strategy, ws.opportunities(strategy))
    assert isinstance(got, Candidate) and "dense<[1, 2, 3, 4]> : tensor<4xi32>" in got.text, got


def test_the_session_gives_the_strategy_the_archives(tmp_path: Path):
    path = model_archive(tmp_path / "m.irpa")
    settings = Settings(input=str(tmp_path / "m.mlir"), parameters=[f"model={path}"])
    supplies = wiring.open_archives(settings, MODEL)
    chosen = wiring.select_strategies("mlir", ["inline-parameters"], (), supplies=supplies)
    assert isinstance(chosen[0], InlineParameters) and chosen[0].parameters is supplies["parameters"]


# -- the oracle and Dask ---------------------------------------------------------------


def test_the_mismatch_oracle_gives_each_archive_to_iree_run_module(tmp_path: Path):
    path = model_archive(tmp_path / "m.irpa")
    settings = Settings(
        input="m.mlir", compile=COMPILE, against=AGAINST, mismatch=True, parameters=[f"model={path}", "d.irpa"]
    )
    oracle = wiring.make_oracle(settings, "m.mlir", 10.0)
    assert oracle._parameter_flags() == [f"--parameters=model={path}", f"--parameters={os.path.abspath('d.irpa')}"]  # type: ignore[attr-defined]
    assert f"--parameters=model={path}" in oracle.reproducer("m.mlir")


@attrs.frozen
class _Reads(Oracle):
    """Interesting while the file it reads holds 'yes'."""

    kind = "check-script"
    path: str
    timeout: float | None = None

    def run(self, data: bytes, cancel: CancelFn = never) -> Verdict:
        return Verdict(Path(self.path).read_text() == "yes", 0)

    def reproducer(self, path: str) -> str:
        return ""

    def data_files(self) -> tuple[str, ...]:
        return (self.path,)

    def with_data_files(self, moved):  # type: ignore[no-untyped-def]
        return attrs.evolve(self, path=moved[self.path])


def test_dask_ships_the_files_a_built_in_oracle_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    here = tmp_path / "weights.irpa"
    here.write_text("yes")
    shipped = ship(_Reads(str(here)), owner="t")
    assert isinstance(shipped, ShippedFiles)
    here.unlink()  # a worker on another machine: the file is not at this path
    monkeypatch.setenv(RUN_DIR_ENV, str(tmp_path))
    assert shipped.run(b"x").interesting
    assert (Path(shipped.directory()) / "weights.irpa").read_text() == "yes"


# -- the command line: errors and protection -------------------------------------------


def test_a_missing_archive_is_one_line_naming_it(tmp_path: Path):
    (tmp_path / "m.mlir").write_text(MODEL)
    make_script(tmp_path / "check.sh", f"touch {tmp_path}/ran; exit 0")
    proc = cli(tmp_path, "m.mlir", "--check", "./check.sh", "--parameters", "model=gone.irpa")
    assert proc.returncode == 3, proc.stderr
    assert "gone.irpa" in error_line(proc.stderr) and not (tmp_path / "ran").exists()


def test_a_key_the_archive_lacks_is_one_line_naming_it(tmp_path: Path):
    (tmp_path / "m.mlir").write_text(MODEL)
    archive(tmp_path / "m.irpa", {"w": np.zeros(4, np.float16)})  # no "b"
    make_script(tmp_path / "check.sh", f"touch {tmp_path}/ran; exit 0")
    proc = cli(tmp_path, "m.mlir", "--check", "./check.sh", "--parameters", "model=m.irpa")
    assert proc.returncode == 3, proc.stderr
    line = error_line(proc.stderr)
    assert "m.irpa" in line and "'b'" in line and not (tmp_path / "ran").exists()


def test_an_archive_in_a_scope_the_program_does_not_use_is_one_line_naming_both(tmp_path: Path):
    """Audit 6 (q05): `other=m.irpa` for a program whose parameters are all "model"'s
    was ignored without a word, and inline-parameters had nothing to put inline."""
    (tmp_path / "m.mlir").write_text(MODEL)
    model_archive(tmp_path / "m.irpa")
    make_script(tmp_path / "check.sh", f"touch {tmp_path}/ran; exit 0")
    proc = cli(tmp_path, "m.mlir", "--check", "./check.sh", "--parameters", "other=m.irpa")
    assert proc.returncode == 3, proc.stderr
    line = error_line(proc.stderr)
    assert line.startswith("ireereduce: error: --parameters=other=m.irpa: m.mlir uses no parameter of scope 'other'")
    assert "(its scopes: 'model')" in line and not (tmp_path / "ran").exists()


def test_the_archive_is_never_written(tmp_path: Path):
    (tmp_path / "m.mlir").write_text(MODEL)
    model_archive(tmp_path / "m.irpa")
    make_script(tmp_path / "check.sh", "exit 0")
    before = (tmp_path / "m.irpa").read_bytes()
    for flag in ("-o", "--report"):  # a report would be written over it at the end
        proc = cli(tmp_path, "m.mlir", "--check", "./check.sh", "--parameters", "model=m.irpa", flag, "m.irpa")
        line = error_line(proc.stderr)
        assert proc.returncode == 2 and "m.irpa, a parameter archive" in line, proc.stderr
        assert (tmp_path / "m.irpa").read_bytes() == before


# -- the bar: the result runs with no archive and still shows the bug ------------------


@pytest.mark.e2e
@needs_iree
def test_the_result_needs_no_archive_and_still_shows_the_bug(tmp_path: Path):
    (tmp_path / "m.mlir").write_text(MODEL)
    model_archive(tmp_path / "m.irpa")
    common = ["--mismatch", "--compile", COMPILE, "--against", AGAINST, "--no-localize", "--no-reduce-flags"]
    # Without the archive the model does not run at all: the oracle must be given it.
    proc = cli(tmp_path, "m.mlir", *common, "--no-state", "-o", "none.mlir")
    assert proc.returncode == 5, proc.stderr
    proc = command(
        tmp_path,
        "m.mlir",
        *common,
        "--parameters",
        "model=m.irpa",
        "--strategies",
        "inline-parameters",
        "--report-json",
        "r.json",
        "-o",
        "out.mlir",
    )
    assert proc.returncode == 0, proc.stderr
    out = (tmp_path / "out.mlir").read_text()
    assert "#stream.parameter" not in out and "6.000000e+04" in out, out
    assert "the result needs no parameter archive" in proc.stderr and "leaked" not in proc.stderr, proc.stderr
    assert json.loads((tmp_path / "r.json").read_text())["parameters"] == []
    # The output alone, with no archive anywhere: both configurations still differ the same way.
    (tmp_path / "m.irpa").unlink()
    settings = Settings(input="out.mlir", compile=COMPILE, against=AGAINST, mismatch=True)
    oracle = wiring.make_oracle(settings, "out.mlir", 120.0)
    verdict = oracle.run(out.encode())
    assert verdict.interesting and "inf" in verdict.stderr_tail, verdict
