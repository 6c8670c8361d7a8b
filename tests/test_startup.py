"""Every second before the first check is paid by every run: the command's start-up
imports only what reaching that check needs. numpy is for the mismatch oracle alone,
networkx for some strategies, Dask for `--executor dask`, package metadata for
plug-ins and reports, and the MLIR bindings are
loaded while the original's checks run."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize("module", ["numpy", "networkx", "distributed", "dask", "iree.compiler", "importlib.metadata"])
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
    monkeypatch.setattr(session, "registry", lambda: loaded.append(time.time()) or registry())
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
