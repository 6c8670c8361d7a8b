"""The twenty-fourth hostile run's defects: a stats file or report written at the end
through a link re-pointed during the run (at a file of the user's, or the input), and the
output's lock removed by its start-time path after its folder was swapped for a link (a
file of the user's, or another run's lock, deleted; the run's own left behind)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import make_script, on_call
from test_faults import assert_clean, cli, error_line

from reducer import session

SMALL = """func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = math.exp %arg0 : tensor<4xf32>
  %1 = arith.addf %0, %arg0 : tensor<4xf32>
  %2 = arith.mulf %1, %1 : tensor<4xf32>
  %3 = math.exp %2 : tensor<4xf32>
  return %3 : tensor<4xf32>
}
"""


def _case(tmp_path: Path, at: int, change: str) -> Path:
    """in.mlir, folders A and B, and k.sh: a grep check that runs `change` at its at-th call."""
    for name in ("A", "B", "tmp"):
        (tmp_path / name).mkdir()
    (tmp_path / "in.mlir").write_text(SMALL)
    make_script(tmp_path / "k.sh", on_call(tmp_path / "count", at, change) + '\ngrep -q math.exp "$1"')
    return tmp_path


@pytest.mark.parametrize("victim", ["B/notes.json", "in.mlir"])
def test_stats_and_reports_go_nowhere_a_link_was_repointed_to(tmp_path: Path, victim: str):
    """D2: --stats-json s.json and --report r.md, links into A/, re-pointed during the run at
    the user's notes (or the input): the stats and the report replaced them, exit 0."""
    case = _case(tmp_path, 4, f"ln -sfn {victim} {tmp_path}/s.json; ln -sfn {victim} {tmp_path}/r.md")
    (case / "B" / "notes.json").write_text("my notes\n")
    os.symlink("A/s.json", case / "s.json")
    os.symlink("A/r.md", case / "r.md")
    before = (case / victim).read_bytes()
    done = cli(case, "in.mlir", "-c", "./k.sh", "-o", "out.mlir", "--stats-json", "s.json", "--report", "r.md")
    assert done.returncode == session.EXIT_CHECK_CHANGED_FILES, done.stderr
    assert f"r.md leads to {case / victim} now, not to {case / 'A' / 'r.md'}" in error_line(done.stderr)
    assert (case / victim).read_bytes() == before
    assert "math.exp" in (case / "out.mlir").read_text()
    assert_clean(case)


def test_the_lock_released_is_the_runs_own_where_it_is_now(tmp_path: Path):
    """D3: -o A/out.mlir, and A swapped for a link to B during the run: the run removed
    B/out.mlir.lock (notes of the user's here; another run's lock elsewhere) and left its
    own lock in the moved folder."""
    case = _case(tmp_path, 9, f"mv {tmp_path}/A {tmp_path}/A.old; ln -s B {tmp_path}/A")
    (case / "B" / "out.mlir.lock").write_text("my own notes, not a lock\n")
    done = cli(case, "in.mlir", "-c", "./k.sh", "-o", "A/out.mlir", "-j", "1", "--no-state")
    assert done.returncode == session.EXIT_CHECK_CHANGED_FILES, done.stderr
    assert (case / "B" / "out.mlir.lock").read_text() == "my own notes, not a lock\n"
    assert not (case / "A.old" / "out.mlir.lock").exists()
    assert list((case / "tmp").iterdir()) == []


def test_without_proc_a_lock_at_the_old_path_that_is_not_ours_stays(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """D3 where /proc cannot say where the lock went: the file now at the start-time path
    (the user's, another run's) is removed only if it is the lock this run holds."""
    from reducer.core.state import OutputLock

    (tmp_path / "A").mkdir()
    lock = OutputLock(str(tmp_path / "A" / "out.mlir"))
    lock.acquire()
    os.rename(tmp_path / "A", tmp_path / "A.old")
    (tmp_path / "A").mkdir()
    (tmp_path / "A" / "out.mlir.lock").write_text("another run's\n")

    def no_proc(_path: str) -> str:
        raise OSError("no /proc here")

    monkeypatch.setattr(os, "readlink", no_proc)
    lock.release()
    assert (tmp_path / "A" / "out.mlir.lock").read_text() == "another run's\n"
