from __future__ import annotations

import os
import shutil
import stat
import sys
from pathlib import Path

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from reducer.ir import PrintOptions  # noqa: E402
from reducer.strategy import Program  # noqa: E402
from reducer.workspace import MLIRWorkspace  # noqa: E402


def make_script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.fixture
def script(tmp_path: Path):
    def make(body: str, name: str = "check.sh") -> Path:
        return make_script(tmp_path / name, body)

    return make


def workspace(text: str) -> MLIRWorkspace:
    return MLIRWorkspace(text, PrintOptions())


def program(text: str) -> Program:
    return workspace(text).program


needs_iree = pytest.mark.skipif(shutil.which("iree-compile") is None, reason="iree-compile not installed")


def apply_edits(strategy, text: str, pick=lambda edits: edits, grow: bool = False):
    """Materialise `pick(edits)` of strategy on text: a Candidate, or the Rejected reason."""
    ws = workspace(text)
    edits = ws.opportunities(strategy)
    return ws.materialize(strategy, pick(edits), grow=grow)


def each_edit(strategy, text: str, grow: bool = False) -> list:
    """Every edit of strategy on text, materialised alone: (edit, Candidate or Rejected)."""
    ws = workspace(text)
    return [(e, ws.materialize(strategy, [e], grow=grow)) for e in ws.opportunities(strategy)]
