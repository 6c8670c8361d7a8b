"""The review of issue 30's --parameters: several archives of one scope, a default-scope
path holding '=', references with a config dict, the cheap fit check of
inline-parameters, sizes compared in the workspace's order (an earlier output that
still needs an archive, or one that needs none), `outside` kept in the stats, the state
fingerprint of the archives, and an archive gone before Dask ships it.

Archives are made at test time with the runtime's own API (ParameterIndex); the tests
that need it compile and run with the real iree-compile and iree-run-module."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from importlib.resources import files
from pathlib import Path

import jsonschema
import numpy as np
import pytest
from conftest import make_script, needs_iree
from test_bytecode import cli, error_line
from test_parameters import COMPILE, MODEL, archive

from reducer.core import ir as irutil
from reducer.core.workspace import Candidate, MLIRWorkspace, Size
from reducer.iree import parameters
from strategies.inline_parameters import InlineParameters

STATS = json.loads(files("reducer.schemas").joinpath("stats-schema.json").read_text())
W = np.array([60000, 1, 2, 3], np.float16)
B = np.array([0.5, 0.5, 0.5, 0.5], np.float16)


def two_archives(tmp_path: Path) -> tuple[Path, Path]:
    """w and b of MODEL's scope "model", each in a file of its own."""
    return archive(tmp_path / "w.irpa", {"w": W}), archive(tmp_path / "b.irpa", {"b": B})


# -- 1: several archives for one scope -------------------------------------------------


def test_every_archive_of_a_scope_is_looked_up_in_order(tmp_path: Path):
    w, b = two_archives(tmp_path)
    other = archive(tmp_path / "other.irpa", {"w": np.zeros(4, np.float16)})
    archives = parameters.Archives.open([f"model={w}", f"model={b}", f"model={other}"])
    assert archives.missing(MODEL) == []
    got = archives.lookup("model", "w")
    assert got is not None and got.tobytes() == W.tobytes()  # the first that has it, as iree-run-module does
    assert archives.lookup("model", "b") is not None


def test_a_key_no_archive_of_its_scope_has_names_them_all(tmp_path: Path):
    w, _ = two_archives(tmp_path)
    other = archive(tmp_path / "other.irpa", {"x": np.zeros(4, np.float16)})
    (tmp_path / "m.mlir").write_text(MODEL)
    make_script(tmp_path / "check.sh", "exit 0")
    proc = cli(
        tmp_path, "m.mlir", "--check", "./check.sh", "--parameters", f"model={w}", "--parameters", f"model={other}"
    )
    line = error_line(proc.stderr)
    assert proc.returncode == 3 and "w.irpa" in line and "other.irpa" in line and "'b'" in line, proc.stderr


def test_two_archives_of_one_scope_are_both_put_inline(tmp_path: Path):
    two_archives(tmp_path)
    proc = _reduce(
        tmp_path,
        MODEL,
        "--strategies",
        "inline-parameters",
        "-o",
        "out.mlir",
        archives=("model=w.irpa", "model=b.irpa"),
    )
    assert proc.returncode == 0, proc.stderr
    out = (tmp_path / "out.mlir").read_text()
    assert "#stream.parameter" not in out and "6.000000e+04" in out, out


# -- 5: a default-scope path holding '=' -----------------------------------------------

ONE = """\
util.global private @w = #stream.parameter.named<"w"> : tensor<4xf32>
func.func @main() -> tensor<4xf32> {
  %w = util.global.load @w : tensor<4xf32>
  return %w : tensor<4xf32>
}
"""


@pytest.mark.e2e
@needs_iree
def test_a_default_scope_path_with_an_equals_sign_reaches_iree_run_module(tmp_path: Path):
    folder = tmp_path / "a=b"
    folder.mkdir()
    path = archive(folder / "w.irpa", {"w": np.array([1, 2, 3, 4], np.float32)})
    (tmp_path / "m.mlir").write_text(ONE)
    subprocess.run(COMPILE.format(input="m.mlir", output="m.vmfb").split(), cwd=tmp_path, check=True)
    run = shutil.which("iree-run-module") or str(Path(shutil.which("iree-compile") or "").with_name("iree-run-module"))
    flag = parameters.flag("", str(path))
    proc = subprocess.run(
        [run, "--module=m.vmfb", "--function=main", flag], cwd=tmp_path, capture_output=True, text=True
    )
    assert proc.returncode == 0 and "4xf32=1 2 3 4" in proc.stdout, (flag, proc.stderr)
    assert parameters.flag("", "/x/w.irpa") == "--parameters=/x/w.irpa"  # as before, without '='


# -- 8: a reference with a config dict -------------------------------------------------

CONFIGURED = """\
util.global private @w = #stream.parameter.named<"model"::"w", {foo = 1 : i64}> : tensor<4xf16>
util.global private @v = #stream.parameter.named<"v", {foo = 1 : i64}> : tensor<4xf16>
"""


def test_a_reference_with_a_config_dict_is_found_and_put_inline(tmp_path: Path):
    assert parameters.references(CONFIGURED) == [("model", "w"), ("", "v")]
    w = archive(tmp_path / "w.irpa", {"w": W})
    v = archive(tmp_path / "v.irpa", {"v": B})
    ws = MLIRWorkspace(CONFIGURED, irutil.PrintOptions(), outside=parameters.count)
    strategy = InlineParameters(parameters.Archives.open([f"model={w}", str(v)]))
    edits = ws.opportunities(strategy)
    assert [e.arg for e in edits] == [("model", "w"), ("", "v")]
    got = ws.materialize(strategy, edits)
    assert isinstance(got, Candidate) and "#stream.parameter" not in got.text, got


# -- 4: opportunities look at the index only -------------------------------------------


class _Counting:
    """An archive that counts how often its bytes are asked for."""

    def __init__(self, archives: parameters.Archives) -> None:
        self.archives, self.lookups = archives, 0

    def length(self, scope: str, key: str) -> int | None:
        return self.archives.length(scope, key)

    def lookup(self, scope: str, key: str) -> np.ndarray | None:
        self.lookups += 1
        return self.archives.lookup(scope, key)


def test_opportunities_never_read_an_archive_value(tmp_path: Path):
    w, b = two_archives(tmp_path)
    counting = _Counting(parameters.Archives.open([f"model={w}", f"model={b}"]))
    ws = MLIRWorkspace(MODEL, irutil.PrintOptions(), outside=parameters.count)
    strategy = InlineParameters(counting)
    edits = ws.opportunities(strategy)
    assert len(edits) == 2 and counting.lookups == 0
    got = ws.materialize(strategy, edits)
    assert isinstance(got, Candidate) and counting.lookups == 2, got


# -- NIT: an empty archive path --------------------------------------------------------


@pytest.mark.parametrize("spec", ["model=", ""])
def test_an_empty_archive_path_is_a_bad_command_line(tmp_path: Path, spec: str):
    (tmp_path / "m.mlir").write_text(MODEL)
    make_script(tmp_path / "check.sh", "exit 0")
    proc = cli(tmp_path, "m.mlir", "--check", "./check.sh", "--parameters", spec)
    line = error_line(proc.stderr)
    assert proc.returncode == 2 and "--parameters" in line, proc.stderr


def test_a_size_reads_well_with_what_it_needs_from_other_files():
    assert str(Size(1, 92, outside=1)) == "1 ops, 92 bytes, 1 from other files"
    assert str(Size(None, 92, outside=2)) == "92 bytes, 2 from other files"
    assert str(Size(1, 92)) == "1 ops, 92 bytes"


# -- 2: an earlier output compared in the workspace's order ----------------------------

#: One weight of 64 distinct halves: put inline, it is far longer than its reference.
LONG = """\
util.global private @w = #stream.parameter.named<"model"::"w"> : tensor<64xf16>
func.func @main() -> tensor<64xf16> {
  %w = util.global.load @w : tensor<64xf16>
  return %w : tensor<64xf16>
}
"""


def _reduce(
    tmp_path: Path,
    text: str,
    *extra: str,
    archives: tuple[str, ...] = ("model=m.irpa",),
    check: str = "grep -q '@w' \"$1\"",
) -> subprocess.CompletedProcess[str]:
    """ireereduce on text as m.mlir, given archives, without a state directory."""
    (tmp_path / "m.mlir").write_text(text)
    make_script(tmp_path / "check.sh", check)
    given = [arg for spec in archives for arg in ("--parameters", spec)]
    return cli(tmp_path, "m.mlir", "--check", "./check.sh", *given, "--no-state", *extra)


def test_an_earlier_output_that_still_needs_the_archive_is_replaced_by_the_inline_one(tmp_path: Path):
    """It is smaller in bytes than the input, so the run starts from it; its inline form is
    longer, yet smaller: it must be written, not held back by the earlier output's bytes."""
    archive(tmp_path / "m.irpa", {"w": W, "b": B})
    earlier = 'util.global private @w = #stream.parameter.named<"model"::"w"> : tensor<4xf16>\n'
    (tmp_path / "out.mlir").write_text(earlier)
    proc = _reduce(tmp_path, MODEL, "--strategies", "inline-parameters", "-o", "out.mlir")
    assert proc.returncode == 0, proc.stderr
    out = (tmp_path / "out.mlir").read_text()
    assert "#stream.parameter" not in out and "6.000000e+04" in out, out


def test_an_earlier_output_that_needs_no_archive_is_kept_though_longer(tmp_path: Path):
    """Longer than the input in bytes, but it needs no archive: smaller. The run starts
    from it, and nothing larger is written over it."""
    archive(tmp_path / "m.irpa", {"w": np.arange(64, dtype=np.float16)})
    values = ", ".join(f"{float(v):e}" for v in np.arange(64, dtype=np.float16))
    earlier = f"util.global private @w = dense<[{values}]> : tensor<64xf16>\n"
    assert len(earlier) > len(LONG)
    (tmp_path / "out.mlir").write_text(earlier)
    proc = _reduce(tmp_path, LONG, "--strategies", "inline-parameters", "-o", "out.mlir")
    assert proc.returncode == 0, proc.stderr
    out = (tmp_path / "out.mlir").read_text()
    assert "func.func" not in out and "#stream.parameter" not in out, out  # the earlier result, not the input's


# -- 3: the stats keep what the result needs from other files --------------------------


def test_the_stats_say_what_the_result_still_needs_from_an_archive(tmp_path: Path):
    archive(tmp_path / "m.irpa", {"w": W, "b": B})
    needs_both = '[ "$(grep -c \'parameter.named\' "$1")" -ge 2 ]'
    proc = _reduce(
        tmp_path, MODEL, "--strategies", "drop-ops", "--stats-json", "s.json", "-o", "out.mlir", check=needs_both
    )
    assert proc.returncode == 0, proc.stderr
    stats = json.loads((tmp_path / "s.json").read_text())
    assert stats["original"]["outside"] == 2 and stats["final"]["outside"] == 2, stats["final"]
    assert [p["outside"] for p in stats["trajectory"]][-1] == 2
    jsonschema.validate(stats, STATS)


# -- 6: the state fingerprint stamps each archive --------------------------------------


def _fingerprint(tmp_path: Path, *specs: str) -> dict[str, object]:
    from reducer.session import Settings
    from reducer.session.start import open_state

    settings = Settings(input="m.mlir", check="check.sh", parameters=list(specs), no_state=True)
    return open_state(settings, MODEL.encode(), str(tmp_path / "out.mlir")).fingerprint


def test_a_changed_archive_is_not_the_recorded_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from reducer.core.state import differences

    monkeypatch.chdir(tmp_path)
    path = archive(tmp_path / "m.irpa", {"w": W, "b": B})
    before = _fingerprint(tmp_path, "model=m.irpa")
    assert _fingerprint(tmp_path, f"model={path}") == before  # the same file, spelled otherwise
    archive(path, {"w": W[::-1].copy(), "b": B})  # new values, same size
    os.utime(path, ns=(1, 1))
    after = _fingerprint(tmp_path, "model=m.irpa")
    assert after != before and str(path) in differences(before, after)


# -- 7: Dask ships each archive once, and one gone is one line -------------------------


def _mismatch_settings(tmp_path: Path, **kw: object):  # type: ignore[no-untyped-def]
    from reducer.session import Settings

    (tmp_path / "m.mlir").write_text(MODEL)
    return Settings(
        input=str(tmp_path / "m.mlir"),
        output=str(tmp_path / "out.mlir"),
        compile=COMPILE,
        against=COMPILE + " --iree-input-demote-f32-to-f16",
        mismatch=True,
        parameters=[f"model={tmp_path / 'm.irpa'}"],
        no_state=True,
        **kw,
    )


@pytest.mark.e2e  # a Dask test: under CI=true a missing distributed fails it, not skips it
def test_dask_reads_an_archive_once_for_every_oracle_of_the_run(tmp_path: Path):
    pytest.importorskip("distributed")
    from reducer.core.dask_executor import DaskExecutor, ShippedFiles
    from reducer.session import wiring

    path = archive(tmp_path / "m.irpa", {"w": W, "b": B})
    oracle = wiring.make_oracle(_mismatch_settings(tmp_path), "m.mlir", 10.0)
    ex = DaskExecutor(None, 1)
    try:
        first = ex._shipped_form(oracle)
        path.unlink()  # read once: the calibrated oracle ships the same bytes
        second = ex._shipped_form(oracle.with_timeout(20.0))
    finally:
        ex.close()
    assert isinstance(first, ShippedFiles) and isinstance(second, ShippedFiles)
    assert second.files[0][1] is first.files[0][1]


@pytest.mark.e2e  # a Dask test: under CI=true a missing distributed fails it, not skips it
def test_an_archive_gone_before_dask_ships_it_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    pytest.importorskip("distributed")
    from reducer.session import UserError, reduce_file, wiring

    path = archive(tmp_path / "m.irpa", {"w": W, "b": B})
    opened = wiring.open_archives

    def then_deleted(settings, text):  # type: ignore[no-untyped-def]
        found = opened(settings, text)
        path.unlink()  # after the run found it, before the first check ships it
        return found

    monkeypatch.setattr(wiring, "open_archives", then_deleted)
    with pytest.raises(UserError) as caught:
        reduce_file(_mismatch_settings(tmp_path, executor="dask", jobs=1))
    assert caught.value.code == 3 and str(path) in str(caught.value) and "\n" not in str(caught.value)
    assert not (tmp_path / "out.mlir").exists()
