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


def test_the_worker_log_queue_is_let_go_without_waiting_at_exit():
    """multiprocessing-logging joins its polling thread at exit (up to 0.2 s a run); once
    the workers are gone the CLI unwraps the handlers and lets that thread end alone."""
    import logging

    import multiprocessing_logging

    from reducer import cli

    root = logging.getLogger()
    before = list(root.handlers)
    try:
        cli._setup_logging(0, True, None)
        wrapped = [h for h in root.handlers if isinstance(h, multiprocessing_logging.MultiProcessingHandler)]
        assert wrapped
        cli._stop_worker_logging()
        assert not any(isinstance(h, multiprocessing_logging.MultiProcessingHandler) for h in root.handlers)
        assert all(h.sub_handler in root.handlers for h in wrapped)
        for h in wrapped:
            h._receive_thread.join(1.0)
            assert not h._receive_thread.is_alive()
    finally:
        for h in list(root.handlers):
            root.removeHandler(h)
        for h in before:
            root.addHandler(h)
