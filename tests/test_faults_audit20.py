"""The twentieth hostile run's defects: a mismatch's report to a stream made its inputs
folder in /dev (or ended in an internal error), a report's inputs folder that became a
link during the run was written through, and --max-time did not hold before the
reduction started (the original's check, the traced run beside it)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import make_script, needs_iree, on_call
from test_faults import assert_clean, cli, env, error_line
from test_faults_audit18 import MISMATCH, wrapped

from reducer import session


@pytest.mark.e2e
@needs_iree
@pytest.mark.parametrize("flag, stream", [("--report", "/dev/stdout"), ("--report-json", "/dev/fd/2")])
def test_a_report_to_a_stream_ships_its_inputs_beside_the_output(mismatch: Path, flag: str, stream: str):
    """D1, D2: `--report /dev/stdout` made /dev/stdout.inputs (as root) and its commands
    named a folder that was not there; `--report-json /dev/fd/2` ended in an internal
    error. A stream has no folder: the inputs go beside the reduced program."""
    shutil.rmtree(stream + ".inputs", ignore_errors=True)
    done = cli(mismatch, "m.mlir", *MISMATCH, "-j", "2", "-o", "o.mlir", flag, stream)
    made = os.path.lexists(stream + ".inputs")
    shutil.rmtree(stream + ".inputs", ignore_errors=True)
    assert done.returncode == session.EXIT_OK, done.stderr
    assert not made, f"{stream}.inputs was made"
    assert isinstance(np.load(mismatch / "o.mlir.inputs" / "input0.npy"), np.ndarray)
    if flag == "--report":
        assert "- inputs: in `o.mlir.inputs/`, beside the reduced program" in done.stdout
        assert "--input=@o.mlir.inputs/input0.npy" in done.stdout
    else:
        report = json.loads(done.stderr[done.stderr.index("{") : done.stderr.rindex("}") + 1])
        assert report["difference"]["inputs_beside"] == "the reduced program"
    assert_clean(mismatch)


@pytest.mark.e2e
@needs_iree
def test_an_inputs_folder_that_became_a_link_is_not_written_through(mismatch: Path):
    """D3: REPORT.inputs was checked at the start only; a link put there during the run
    had the report's arrays written into the folder it leads to, over the user's file.
    Here the compiler plants it at its third call: the report goes without its inputs,
    and says so."""
    victim = mismatch / "victim"
    victim.mkdir()
    (victim / "input0.npy").write_text("mine\n")
    calls, link = mismatch / "calls", mismatch / "r.md.inputs"
    args = wrapped(mismatch, on_call(calls, 3, f"ln -sn {victim} {link}"))
    done = cli(mismatch, "m.mlir", *args, "-j", "2", "-o", "o.mlir", "--report", "r.md")
    assert done.returncode == session.EXIT_OK, done.stderr
    assert os.path.islink(mismatch / "r.md.inputs")
    assert sorted(os.listdir(victim)) == ["input0.npy"] and (victim / "input0.npy").read_text() == "mine\n"
    assert "the report's inputs were not written to r.md.inputs" in done.stderr
    assert "## The difference" not in (mismatch / "r.md").read_text()
    assert_clean(mismatch)


def test_max_time_holds_while_the_original_is_checked(mismatch: Path):
    """D4: a check of the original that takes longer than --max-time ran to its end
    (twice): the run stops at --max-time, exit 13, nothing written."""
    make_script(mismatch / "slow.sh", 'sleep 60\ngrep -q math.exp "$1"')
    done = cli(mismatch, "input.mlir", "-c", "./slow.sh", "--max-time", "2", "-j", "2", "-o", "o.mlir")
    assert done.returncode == session.EXIT_STOPPED, done.stderr
    assert "--max-time 2 s ran out while the original input was checked; nothing was written" in error_line(done.stderr)
    assert not (mismatch / "o.mlir").exists()
    assert_clean(mismatch)


@pytest.mark.e2e
@needs_iree
def test_max_time_cuts_the_traced_run_beside_the_original(mismatch: Path):
    """D4: a traced compile that hangs held the run for ten check timeouts past
    --max-time (the harness's 120 s cut it short). It is cut off there; the original's
    second check, which it could not stand in for, is past the limit too."""
    args = wrapped(mismatch, 'case "$*" in *trace-dispatch*) exec sleep 600;; esac')
    done = cli(mismatch, "m.mlir", *args, "-j", "2", "-o", "o.mlir", "--max-time", "8", "--timeout", "60")
    assert done.returncode == session.EXIT_STOPPED, done.stderr
    assert "--max-time 8 s ran out while the original input was checked" in error_line(done.stderr)
    assert not (mismatch / "o.mlir").exists()
    assert_clean(mismatch)


@pytest.mark.parametrize("option", ["--help", "--version", "--list-strategies", "--print-schema=report"])
def test_an_option_that_prints_on_a_closed_stdout_is_one_line(mismatch: Path, option: str):
    """W1: with stdout closed (`>&-`) these printed nowhere and exited 0, where a stdout
    that takes nothing (`> /dev/full`) is exit 8."""
    done = subprocess.run(
        [sys.executable, "-m", "reducer", option],
        cwd=mismatch,
        stdout=None,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
        env=env(mismatch),
        preexec_fn=lambda: os.close(1),
    )
    assert done.returncode == session.EXIT_CANNOT_WRITE, done.stderr
    assert done.stderr == "ireereduce: error: cannot write to standard output (it is closed)\n"


@pytest.mark.e2e
@needs_iree
def test_a_report_named_dash_ships_its_inputs_beside_the_output(mismatch: Path):
    """W3: `--report -` (a file named -, as documented) shipped no inputs, and its
    difference section went silently; they go beside the reduced program, as for a stream."""
    done = cli(mismatch, "m.mlir", *MISMATCH, "-j", "2", "-o", "o.mlir", "--report", "-")
    assert done.returncode == session.EXIT_OK, done.stderr
    assert "- inputs: in `o.mlir.inputs/`, beside the reduced program" in (mismatch / "-").read_text()
    assert (mismatch / "o.mlir.inputs" / "input0.npy").exists() and not (mismatch / "-.inputs").exists()
    assert_clean(mismatch)
