"""The nineteenth hostile run's defects: a link, a FIFO or a folder under an input's name
in a report's inputs folder (written through, waited on, or an internal error at the end),
and a damaged start program in the state directory."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from test_faults import assert_clean, cli, error_line
from test_faults_audit import make_case

from reducer import session
from reducer.iree.evidence import _save


@pytest.fixture
def case(tmp_path: Path) -> Path:
    return make_case(tmp_path)


def _plant(folder: Path, kind: str, victim: Path) -> None:
    entry = folder / "input0.npy"
    if kind == "symlink":
        entry.symlink_to(victim)
    elif kind == "hard link":
        os.link(victim, entry)
    elif kind == "fifo":
        os.mkfifo(entry)
    else:
        entry.mkdir()


@pytest.mark.parametrize("kind", ["symlink", "hard link", "fifo", "folder"])
@pytest.mark.parametrize("report", ["--report", "--report-json"])
def test_an_inputs_folder_entry_that_is_not_a_plain_file_is_refused(case: Path, kind: str, report: str):
    """D1-D3: the folder check read names only: a link named input0.npy had the user's
    file it leads to overwritten with an array, a FIFO hung the run after the reduction,
    and a folder ended it in an internal error. Refused up front now."""
    victim = case / "precious.txt"
    victim.write_text("mine\n")
    (case / "r.inputs").mkdir()
    _plant(case / "r.inputs", kind, victim)
    done = cli(case, "input.mlir", "--check", "./check.sh", "-o", "o.mlir", report, "r")
    assert done.returncode == session.EXIT_USAGE, done.stderr
    assert "holds files ireereduce did not write (input0.npy)" in error_line(done.stderr)
    assert victim.read_text() == "mine\n" and not (case / "o.mlir").exists()
    assert_clean(case)


@pytest.mark.parametrize("kind", ["symlink", "fifo"])
def test_an_input_array_replaces_what_is_under_its_name(tmp_path: Path, kind: str):
    """What appears under an input's name during the run is replaced, never written
    through (a link) nor waited on (a FIFO)."""
    victim = tmp_path / "precious.txt"
    victim.write_text("mine\n")
    _plant(tmp_path, kind, victim)
    _save(str(tmp_path / "input0.npy"), np.arange(3, dtype=np.float32))
    assert victim.read_text() == "mine\n"
    assert np.load(tmp_path / "input0.npy").tolist() == [0, 1, 2]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["input0.npy", "precious.txt"]
