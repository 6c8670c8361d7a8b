"""Every second before the first check is paid by every run: the command's start-up
imports only what reaching that check needs. numpy is for the mismatch oracle alone,
networkx for some strategies, Dask for `--executor dask`, and the MLIR bindings are
loaded while the original's checks run."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize("module", ["numpy", "networkx", "distributed", "dask", "iree.compiler"])
def test_the_command_starts_without(module: str):
    probe = f"import sys, reducer.cli; print({module!r} in sys.modules)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False", f"importing the command loads {module}"
