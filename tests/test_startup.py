"""Every second before the first check is paid by every run: the command's start-up
imports only what reaching that check needs. numpy is for the mismatch oracle alone,
networkx for some strategies, Dask for `--executor dask`, package metadata for
plug-ins and reports; the MLIR bindings, the IREE room (triage, flags, the report) and
rich (the summary) are loaded while the original's checks run."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize(
    "module",
    ["numpy", "networkx", "distributed", "dask", "iree.compiler", "importlib.metadata", "reducer.iree", "rich.console"],
)
def test_the_command_starts_without(module: str):
    probe = f"import sys, reducer.cli; print({module!r} in sys.modules)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False", f"importing the command loads {module}"


def test_the_strategies_load_while_the_originals_checks_run(tmp_path, monkeypatch: pytest.MonkeyPatch):
    """Importing the strategies (the MLIR bindings, networkx) takes about a second; done
    while the original's checks run, it is not on the way to the engine's first check."""
    import time

    from conftest import make_script

    from reducer import session

    loaded: list[float] = []
    registry = session.registry
    monkeypatch.setattr(session.wiring, "registry", lambda: loaded.append(time.time()) or registry())
    src, log = tmp_path / "in.mlir", tmp_path / "ends"
    src.write_text("func.func @f(%a: f32) -> f32 {\n  %0 = math.atan2 %a, %a : f32\n  return %0 : f32\n}\n")
    stamp = "python3 -c 'import time; print(time.time())'"
    check = make_script(tmp_path / "check.sh", f'sleep 1; echo "$({stamp})" >> {log}; grep -q math.atan2 "$1"')
    with pytest.raises(session.LimitReached):
        session.reduce_file(
            session.Settings(str(src), str(check), str(tmp_path / "out.mlir"), jobs=2, no_state=True, max_checks=1)
        )
    assert len(loaded) == 1  # once a run
    assert loaded[0] < min(float(t) for t in log.read_text().split())  # before the first check ended


def test_the_registry_defers_what_is_slow_to_load_until_after_the_first_checks_start():
    """The linalg dialect's Python DSL (0.15 s) is iree-simplify's alone: loading the
    registry, on the way to the engine's first (early) checks, leaves it out."""
    probe = "import sys, reducer.session as s; s.registry(); print('iree.compiler.dialects.linalg' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_deferred_imports_load_while_the_originals_checks_run(tmp_path, monkeypatch: pytest.MonkeyPatch):
    """...and the session loads it while the original is checked, so that the engine's
    time (issue 13's share, 0.15 s of a 0.9 MB run's 0.4 s) does not include it."""
    from conftest import make_script

    from reducer import session

    loaded: list[str] = []
    monkeypatch.setattr(session.wiring.importlib, "import_module", lambda name: loaded.append(name))
    src = tmp_path / "in.mlir"
    src.write_text("func.func @f(%a: f32) -> f32 {\n  %0 = math.atan2 %a, %a : f32\n  return %0 : f32\n}\n")
    check = make_script(tmp_path / "check.sh", 'grep -q math.atan2 "$1"')
    with pytest.raises(session.LimitReached):
        session.reduce_file(
            session.Settings(str(src), str(check), str(tmp_path / "out.mlir"), jobs=2, no_state=True, max_checks=1)
        )
    assert loaded == ["iree.compiler.dialects.linalg"]
