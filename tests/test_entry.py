"""The `ireereduce` console script enters through `reducer.__main__`, which must import
nothing until it runs: Dask's fork-server and spawned workers re-run the main module, and
every import there is paid once per worker."""

from __future__ import annotations

import subprocess
import sys


def test_the_entry_module_imports_nothing_until_it_runs() -> None:
    code = "import sys, reducer.__main__; print(sorted(m for m in sys.modules if m.startswith('reducer.')))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "['reducer.__main__']"


def test_python_dash_m_reducer_is_the_command() -> None:
    done = subprocess.run([sys.executable, "-m", "reducer", "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "--check" in done.stdout
