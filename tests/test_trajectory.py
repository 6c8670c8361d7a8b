"""The run's trajectory in --stats-json (issue 31): the size against time and against
checks, from the original through every commit to the final result, so a reader sees
how fast the size went and not only where it ended."""

from __future__ import annotations

import json
from importlib.resources import files
from pathlib import Path
from typing import Any

import attrs
import jsonschema
import pytest
from conftest import make_script

import reducer
from reducer import progress
from reducer.core.stats import RunStats
from reducer.core.workspace import Size

#: Five functions, one of them with the op the check looks for: several commits.
PROGRAM = "\n".join(
    f"""func.func @f{i}(%a: f32) -> f32 {{
  %0 = arith.negf %a : f32
  %1 = {"math.exp" if i == 3 else "arith.addf"} %0{"" if i == 3 else ", %a"} : f32
  %2 = arith.mulf %1, %0 : f32
  return %2 : f32
}}"""
    for i in range(5)
)
STATS = json.loads(files("reducer.schemas").joinpath("stats-schema.json").read_text())


@pytest.fixture
def case(tmp_path: Path) -> Path:
    (tmp_path / "input.mlir").write_text(PROGRAM + "\n")
    make_script(tmp_path / "check.sh", 'grep -q math.exp "$1"')
    return tmp_path


def _reduce(case: Path, **options: Any) -> tuple[reducer.Reduction, list[dict[str, Any]], list[dict[str, Any]]]:
    """The reduction, its --stats-json trajectory, and the improve events it sent."""
    improves: list[dict[str, Any]] = []
    done = reducer.reduce(
        case / "input.mlir",
        check=case / "check.sh",
        jobs=2,
        stats_json=case / "stats.json",
        on_event=lambda kind, fields: improves.append(fields) if kind == "improve" else None,
        **options,
    )
    stats = json.loads((case / "stats.json").read_text())
    jsonschema.validate(stats, STATS)
    return done, stats["trajectory"], improves


def test_the_trajectory_runs_from_the_original_through_each_commit_to_the_final(case: Path):
    done, points, improves = _reduce(case)
    assert done.status == "reduced" and len(improves) >= 2
    assert [p["event"] for p in points] == ["original"] + ["commit"] * len(improves) + ["final"]
    assert (points[0]["ops"], points[0]["bytes"]) == (done.original.ops, done.original.bytes)
    assert (points[-1]["ops"], points[-1]["bytes"]) == (done.final.ops, done.final.bytes)
    # Each commit is the size its improve event told.
    assert [{"ops": p["ops"], "bytes": p["bytes"]} for p in points[1:-1]] == [f["size"] for f in improves]


def test_the_trajectory_is_monotone_in_time_and_checks_and_never_grows(case: Path):
    done, points, _ = _reduce(case)
    for before, after in zip(points, points[1:]):
        assert before["seconds"] <= after["seconds"]
        assert before["checks"] <= after["checks"] and before["judged"] <= after["judged"]
        assert after["bytes"] <= before["bytes"] and after["ops"] <= before["ops"]
    assert points[-1]["checks"] == done.checks  # the run's oracle_calls
    # A commit needs an interesting verdict of its own: the k-th has at least k judged, and a check behind it.
    commits = [p for p in points if p["event"] == "commit"]
    assert all(p["checks"] >= k and p["judged"] >= k for k, p in enumerate(commits, 1))


def test_an_earlier_runs_smaller_output_is_the_start_after_the_original(case: Path):
    """A run that starts from the smaller program an earlier run left in the output: the
    trajectory says so, and still begins at the original's size."""
    earlier = PROGRAM.split("\n}\n")[3] + "\n}\n"  # @f3 alone, which has the op
    assert "math.exp" in earlier and "@f2" not in earlier
    (case / "input.reduced.mlir").write_text(earlier)
    done, points, _ = _reduce(case)
    assert [p["event"] for p in points[:2]] == ["original", "start"]
    assert points[0]["bytes"] == done.original.bytes > points[1]["bytes"]


@attrs.define
class _Engine:
    stats: RunStats


def test_checks_a_primed_engine_ran_before_the_start_count_at_the_start():
    """The engine's first checks may start while the original's run; the start's point
    counts them once the engine is watched."""
    monitor = progress.Monitor()
    monitor.start(Size(10, 1000), Size(10, 1000), "mlir", 2, 10.0)
    with monitor.watching(_Engine(RunStats(Size(10, 1000), Size(10, 1000), oracle_calls=3))):
        pass
    assert [(p.event, p.checks) for p in monitor.trajectory] == [("original", 3)]
