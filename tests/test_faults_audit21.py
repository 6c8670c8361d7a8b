"""The twenty-first hostile run's defects, all of --localize-only: it took no lock on its
output, wrote its cut over a file or through a link that appeared at OUTPUT or
OUTPUT.inputs during the run, and skipped the settings checks a reduction makes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import make_script, needs_iree, on_call
from test_faults import assert_clean, cli, env, error_line, wait_for
from test_faults_audit18 import MISMATCH, wrapped

from reducer import session


@pytest.mark.parametrize("value", ["nan", "inf", "-1"])
def test_localize_only_refuses_a_timeout_a_reduction_refuses(mismatch: Path, value: str):
    """D4: `--timeout nan` ended in a traceback (exit 1), `-1` in exit 6."""
    done = cli(mismatch, "m.mlir", *MISMATCH, "--timeout", value, "-o", "cut.mlir", "--localize-only")
    assert done.returncode == session.EXIT_USAGE, done.stderr
    assert f"--timeout must be a finite number of seconds above 0, not {float(value)}" in error_line(done.stderr)
    assert "Traceback" not in done.stderr
    assert_clean(mismatch)


@pytest.mark.parametrize("flag", ["--for-upstream", "--trivial-is-error", "--print-diff", "--isolate-dispatch"])
def test_localize_only_refuses_the_flags_of_a_reduction(mismatch: Path, flag: str):
    """W1: these were ignored: a bot got a cut neither cleaned nor judged."""
    done = cli(mismatch, "m.mlir", *MISMATCH, flag, "-o", "cut.mlir", "--localize-only")
    assert done.returncode == session.EXIT_USAGE, done.stderr
    assert f"{flag} goes with a reduction" in error_line(done.stderr)


def test_localize_only_waits_for_no_live_run_on_its_output(mismatch: Path):
    """D3: --localize-only wrote the output of a live reduction (which then stopped with
    exit 11); it takes the lock now, and a held one is exit 9."""
    make_script(mismatch / "slow.sh", 'sleep 30\ngrep -q math.exp "$1"')
    other = subprocess.Popen(
        [sys.executable, "-m", "reducer.cli", "input.mlir", "-c", "./slow.sh", "-o", "X.mlir", "--no-state"],
        cwd=mismatch,
        env=env(mismatch),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: (mismatch / "X.mlir.lock").exists())
        done = cli(mismatch, "m.mlir", *MISMATCH, "-o", "X.mlir", "--localize-only")
        assert done.returncode == session.EXIT_BUSY, done.stderr
        assert f"another ireereduce run (PID {other.pid}) is writing X.mlir" in error_line(done.stderr)
        assert not (mismatch / "X.mlir").exists() and not (mismatch / "X.mlir.inputs").exists()
    finally:
        other.terminate()
        other.wait(60)
    assert_clean(mismatch)


@pytest.mark.e2e
@needs_iree
@pytest.mark.parametrize("planted", ["a file at OUTPUT", "a link at OUTPUT", "a link at OUTPUT.inputs"])
def test_localize_only_replaces_nothing_that_appeared_during_the_run(mismatch: Path, planted: str):
    """D1, D2: a file or a link put at OUTPUT or OUTPUT.inputs during the run was written
    over or through, the user's file replaced, exit 0. Here the compiler plants it at its
    second call: exit 11, nothing written, the user's files as they were."""
    mine = mismatch / "mine"
    mine.mkdir()
    (mine / "input0.npy").write_text("precious\n")
    (mine / "notes.mlir").write_text("my notes\n")
    calls, out = mismatch / "calls", mismatch / "cut.mlir"
    plant = {
        "a file at OUTPUT": f"echo mine > {out}",
        "a link at OUTPUT": f"ln -sn {mine / 'notes.mlir'} {out}",
        "a link at OUTPUT.inputs": f"ln -sn {mine} {out}.inputs",
    }[planted]
    args = wrapped(mismatch, on_call(calls, 2, plant))
    done = cli(mismatch, "m.mlir", *args, "-o", "cut.mlir", "--localize-only")
    assert done.returncode == session.EXIT_CHECK_CHANGED_FILES, done.stderr
    assert "changed during the run (someone else's now); nothing written" in error_line(done.stderr)
    assert sorted(os.listdir(mine)) == ["input0.npy", "notes.mlir"]
    assert (mine / "input0.npy").read_text() == "precious\n" and (mine / "notes.mlir").read_text() == "my notes\n"
    if planted == "a file at OUTPUT":
        assert out.read_text() == "mine\n"
    assert_clean(mismatch)


@pytest.mark.parametrize("runner", ["", "   "])
@pytest.mark.parametrize("only", [[], ["--localize-only"]])
def test_an_empty_run_command_is_one_line(mismatch: Path, runner: str, only: list[str]):
    """D5: `--run ""` was "internal error: IndexError" (a traceback with --localize-only)."""
    done = cli(mismatch, "m.mlir", *MISMATCH, "--run", runner, "-o", "o.mlir", *only)
    assert done.returncode == session.EXIT_USAGE, done.stderr
    assert (
        error_line(done.stderr)
        == "ireereduce: error: --run: the command is empty; give the runner, such as iree-run-module"
    )
    assert_clean(mismatch)


@pytest.mark.parametrize("amount", ["1e400", "inf", "1e308"])
def test_a_resource_amount_past_counting_is_refused(mismatch: Path, amount: str):
    """D6: GPU=1e400 (inf) or 1e308 summed over the workers to inf: "internal error",
    tracebacks, and a Dask scratch folder left in TMPDIR."""
    done = cli(mismatch, "input.mlir", "-c", "./check.sh", "--executor", "dask", "--resources", f"GPU={amount}")
    assert done.returncode == session.EXIT_USAGE, done.stderr
    assert "give NAME=NUMBER with a positive number up to 1e+12" in error_line(done.stderr)
    assert_clean(mismatch)


@pytest.mark.e2e
@needs_iree
def test_a_fresh_cut_leaves_no_array_of_the_earlier_one(mismatch: Path):
    """W12: --fresh over an earlier cut with more inputs left its input7.npy beside the new
    cut's arrays: `--inputs cut.mlir.inputs/*` would feed a stale one."""
    (mismatch / "cut.mlir").write_text("earlier\n")
    (mismatch / "cut.mlir.inputs").mkdir()
    np.save(mismatch / "cut.mlir.inputs" / "input7.npy", np.zeros(3, dtype=np.float32))
    done = cli(mismatch, "m.mlir", *MISMATCH, "-o", "cut.mlir", "--localize-only", "--fresh")
    assert done.returncode == session.EXIT_OK, done.stderr
    given = done.stdout.rsplit("--inputs ", 1)[1].split()[0].split(",")
    assert sorted(os.listdir(mismatch / "cut.mlir.inputs")) == sorted(os.path.basename(g) for g in given)
    assert_clean(mismatch)


@pytest.mark.parametrize("only", [[], ["--localize-only", *MISMATCH]])
def test_an_empty_input_name_is_said_so(mismatch: Path, only: list[str]):
    """W14: `ireereduce "$UNSET" -c ./check.sh` said "input '.' is a directory"."""
    done = cli(mismatch, "", "-c", "./check.sh", *only)
    assert done.returncode == session.EXIT_BAD_INPUT, done.stderr
    assert "the input file's name is empty" in error_line(done.stderr)
    assert_clean(mismatch)


def test_an_empty_input_name_through_the_api_is_said_so(mismatch: Path):
    """W14, for a script: api.reduce("") read the current folder as the input."""
    from reducer import api

    with pytest.raises(session.UserError) as err:
        api.reduce("", check=mismatch / "check.sh", output=mismatch / "o.mlir", no_state=True)
    assert err.value.code == session.EXIT_BAD_INPUT and str(err.value) == session.EMPTY_INPUT_NAME
    assert not (mismatch / "o.mlir").exists()


@pytest.mark.parametrize("entry", ["@", "--input=", "--input=@"])
def test_an_empty_inputs_file_name_is_said_so(mismatch: Path, entry: str):
    """W14: `--inputs=@` was "cannot read '' as a .npy file: Is a directory"."""
    done = cli(mismatch, "m.mlir", *MISMATCH, f"--inputs={entry}", "-o", "cut.mlir", "--localize-only")
    assert done.returncode == session.EXIT_USAGE, done.stderr
    assert f"--inputs: {entry!r} names no file (the name after it is empty)" in error_line(done.stderr)
    assert_clean(mismatch)


@pytest.mark.parametrize("value", [",", ""])
def test_inputs_that_name_nothing_are_refused(mismatch: Path, value: str):
    """`--inputs ,` (or an empty $VAR) ran on generated inputs without a word."""
    done = cli(mismatch, "m.mlir", *MISMATCH, f"--inputs={value}", "-o", "cut.mlir", "--localize-only")
    assert done.returncode == session.EXIT_USAGE, done.stderr
    assert f"--inputs {value!r} names no input" in error_line(done.stderr)
    assert_clean(mismatch)
