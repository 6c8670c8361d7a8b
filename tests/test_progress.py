"""Progress for people and bots (issue 14): the live status on a real pseudo-terminal, the
--progress-json stream validated event by event, and the Python API's events and result."""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import sys
import time
from importlib.resources import files
from pathlib import Path

import jsonschema
import pytest
from conftest import make_script

import reducer
from reducer import progress
from reducer.core.oracle import ScriptOracle
from reducer.session import Settings

SMALL = """func.func @f(%a: f32) -> f32 {
  %0 = arith.negf %a : f32
  %1 = math.exp %0 : f32
  %2 = arith.negf %1 : f32
  return %2 : f32
}
"""
PROGRESS = json.loads(files("reducer.schemas").joinpath("progress-schema.json").read_text())


@pytest.fixture
def case(tmp_path: Path) -> Path:
    (tmp_path / "input.mlir").write_text(SMALL)
    make_script(tmp_path / "check.sh", 'grep -q math.exp "$1"')
    return tmp_path


def test_live_status_updates_on_a_terminal_before_the_first_improvement(case: Path):
    """A slow check under a real pseudo-terminal: the status block redraws (elapsed time,
    checks) at least twice before the first accepted step's log line appears."""
    make_script(case / "check.sh", 'sleep 1; grep -q math.exp "$1"')
    master, slave = os.openpty()
    env = dict(os.environ, COLUMNS="100", LINES="40", TERM="xterm")
    env.pop("CI", None)  # rich would otherwise assume a non-interactive console
    proc = subprocess.Popen(
        [sys.executable, "-m", "reducer.cli", "input.mlir", "-c", "check.sh", "-j", "1"],
        cwd=case,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env,
    )
    os.close(slave)
    out = b""
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 1.0)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            out += chunk
        elif proc.poll() is not None:
            break
    proc.wait(timeout=30)
    os.close(master)
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.decode(errors="replace"))
    assert proc.returncode == 0, text[-2000:]
    first = text.index("% of the original")  # the first improvement's log line
    statuses = re.findall(r"checks +(\d+) done, (\d+) running.*?elapsed (\d+) s", text[:first], re.S)
    assert len(set(statuses)) >= 2, text[:first]
    assert "ireereduce  reducing" in text[:first]


def test_every_progress_event_of_a_real_run_follows_the_schema(case: Path):
    make_script(case / "check.sh", 'sleep 0.2; grep -q math.exp "$1"')
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "reducer.cli",
            "input.mlir",
            "-c",
            "check.sh",
            "-j",
            "2",
            "--progress-json",
            "-",
            "--heartbeat",
            "0.3",
        ],
        cwd=case,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    for event in events:
        jsonschema.validate(event, PROGRESS)
    kinds = [e["event"] for e in events]
    said = [k for k in kinds if k != "heartbeat"]  # heartbeats come while the original is checked too
    assert said[0] == "start" and said[-1] == "reduced" and kinds[-1] == "reduced"
    assert {"improve", "strategy", "heartbeat"} <= set(kinds), kinds
    assert events[-1]["size"] == [e for e in events if e["event"] == "improve"][-1]["size"]


def test_an_error_is_an_event_too(case: Path, tmp_path: Path):
    make_script(case / "check.sh", "exit 1")
    proc = subprocess.run(
        [sys.executable, "-m", "reducer.cli", "input.mlir", "-c", "check.sh", "--progress-json", "p.jsonl"],
        cwd=case,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 5
    events = [json.loads(line) for line in (case / "p.jsonl").read_text().splitlines()]
    for event in events:
        jsonschema.validate(event, PROGRESS)
    assert events[-1]["event"] == "error" and events[-1]["code"] == 5


def test_the_python_api_reduces_text_and_reports_events(case: Path):
    seen: list[tuple[str, dict]] = []
    done = reducer.reduce(SMALL, check=case / "check.sh", jobs=1, on_event=lambda k, f: seen.append((k, f)))
    assert done.status == "reduced" and done.output is None  # text in, text out
    assert "math.exp" in done.text and "negf" not in done.text
    assert done.final.ops < done.original.ops and done.checks > 0 and not done.trivial
    assert done.report["title"] and done.report["sizes"]["after"]["bytes"] == done.final.bytes
    kinds = [k for k, _ in seen]
    assert kinds[0] == "start" and "improve" in kinds and kinds[-1] == "reduced"


def test_a_stop_an_earlier_run_raised_does_not_stop_the_next(case: Path, monkeypatch: pytest.MonkeyPatch):
    """A caller that runs several reductions in one process: the stop that ended one (as
    the CLI's handler notes it) is that run's, not the next one's."""
    from reducer.core import processes

    monkeypatch.setattr(processes, "_stop_raised", True)
    done = reducer.reduce(SMALL, check=case / "check.sh", jobs=1)
    assert done.status == "reduced" and "negf" not in done.text


def test_a_warm_up_runs_once_while_the_original_is_checked(case: Path):
    """`Monitor.on_idle` is the caller's slot for work the end of the run needs (the CLI
    imports rich there): once, while the run only waits for the original's checks."""
    started, done = case / "started", case / "done"
    # The original's checks take 2 s: the run's start-up before it waits is no race.
    original = case / "input.mlir"
    make_script(
        case / "check.sh",
        f'if cmp -s "$1" {original}; then echo >> {started}; sleep 2; echo >> {done}; fi; grep -q math.exp "$1"',
    )
    monitor = progress.Monitor()
    seen: list[tuple[str, bool, bool]] = []

    def warm_up() -> None:
        deadline = time.monotonic() + 5  # the original's checks are already running
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        seen.append((monitor.status().phase, started.exists(), done.exists()))

    monitor.on_idle.append(warm_up)
    result = reducer.reduce(case / "input.mlir", check=case / "check.sh", jobs=2, monitor=monitor)
    assert result.status == "reduced"
    assert seen == [("checking the original", True, False)]


def test_the_python_api_takes_a_ready_made_oracle_and_a_path(case: Path):
    oracle = ScriptOracle(str(case / "check.sh"), "input.mlir", None)
    done = reducer.reduce(case / "input.mlir", oracle=oracle, jobs=1, max_checks=2)
    assert done.status == "stopped" and done.reason == "--max-checks 2 reached"
    assert Path(done.output).name == "input.reduced.mlir" and "math.exp" in done.text


def test_the_python_api_raises_user_errors_with_the_exit_code(case: Path):
    with pytest.raises(reducer.UserError) as err:
        reducer.reduce(case / "missing.mlir", check=case / "check.sh")
    assert err.value.code == 3


def test_defaults_live_once():
    """Timing oracles check one at a time whoever calls: the CLI and the API share Settings."""
    assert Settings("x", compile="c", slower_than=1.0).workers() == 1
    assert Settings("x", compile="c", slower_than=1.0, jobs=3).workers() == 3
    assert Settings("x").workers() == (os.cpu_count() or 1)
    from reducer.cli import main

    defaults = {p.name: p.default for p in main.params}
    assert defaults["rtol"] == Settings("x").rtol and defaults["runner"] == Settings("x").runner


def test_heartbeat_fires_only_after_silence():
    events: list[tuple[str, float]] = []
    monitor = progress.Monitor(on_event=lambda k, f: events.append((k, time.monotonic())), heartbeat=0.5, poll=0.05)
    start = time.monotonic()
    with monitor.running():
        while not events and time.monotonic() < start + 10:
            time.sleep(0.02)
    assert events and {kind for kind, _ in events} == {"heartbeat"}
    assert events[0][1] - start >= 0.5  # not before half a second of silence


def test_each_improvement_moves_the_best_size_that_percent_and_heartbeats_show():
    """The improve event's percent, the status line and every later heartbeat measure
    the newest best, not the size the run started from."""
    from reducer.core.workspace import Candidate, Size

    events: list[tuple[str, dict]] = []
    monitor = progress.Monitor(on_event=lambda k, f: events.append((k, f)), heartbeat=0.05, poll=0.01)
    lines: list[str] = []
    monitor.listeners.append(progress.HeartbeatLine(monitor, lines.append))
    monitor.start(Size(10, 1000), Size(10, 1000), "mlir", 1, 10.0)
    monitor.improve(Candidate("a", Size(4, 400), "drop-ops"))
    monitor.improve(Candidate("b", Size(2, 250), "shrink-tensors"))
    improves = [f for k, f in events if k == "improve"]
    assert [(f["size"], f["percent"]) for f in improves] == [
        ({"ops": 4, "bytes": 400}, 40.0),
        ({"ops": 2, "bytes": 250}, 25.0),
    ]
    assert monitor.status().best == Size(2, 250) and monitor.status().percent() == 25.0
    with monitor.running():
        deadline = time.monotonic() + 30
        while not lines and time.monotonic() < deadline:
            time.sleep(0.01)
    beats = [f for k, f in events if k == "heartbeat"]
    assert beats and all(f["size"] == {"ops": 2, "bytes": 250} for f in beats)
    assert "(25.0%)" in lines[0]
