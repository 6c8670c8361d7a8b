"""Issue 31's benchmarks measure what they claim: the 80-check case is a valid 2,000-op
module whose check needs two ops in two callees, and the trajectory benchmark reads the
time to 10% from a run's trajectory, compares labels and draws them."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import models  # noqa: E402
import parallel  # noqa: E402
import trajectory  # noqa: E402

from reducer.core import ir  # noqa: E402


def test_the_big_parallel_case_is_a_valid_2000_op_module_needing_two_callees():
    text = models.fanout_wide()
    module = ir.parse(text, ir.new_context())
    ir.verify(module.operation)
    assert 2000 <= ir.count_ops(module.operation) <= 2300
    case = parallel.CASES["big"]
    assert case.make is models.fanout_wide and len(case.needles) == 2
    # Each needed op once, in a different callee.
    homes = [[f for f in text.split("func.func")[1:] if needle in f] for needle in case.needles]
    assert [len(h) for h in homes] == [1, 1] and homes[0] != homes[1]
    assert parallel.CASES["fanout"].make is models.fanout and parallel.CASES["fanout"].results == "parallel.json"


def _point(event: str, seconds: float, checks: int, size: int) -> dict:
    return {"event": event, "seconds": seconds, "checks": checks, "judged": checks, "ops": size // 10, "bytes": size}


def _row(case: str, label: str, checks: int, final: int, sizes: list[tuple[float, int, int]]) -> dict:
    points = [_point("original", *sizes[0])] + [_point("commit", *s) for s in sizes[1:]] + [_point("final", *sizes[-1])]
    ten = trajectory.reached(points)
    return {
        "case": case,
        "label": label,
        "commit": "abc",
        "exit_code": 0,
        "capped": False,
        "still_interesting": True,
        "status": "reduced",
        "checks": checks,
        "original": points[0],
        "final": {"ops": final // 10, "bytes": final},
        "seconds": points[-1]["seconds"] + 0.5,
        "ten_percent_seconds": ten["seconds"] if ten else None,
        "ten_percent_checks": ten["checks"] if ten else None,
        "trajectory": points,
    }


def test_the_time_to_ten_percent_is_the_first_point_at_a_tenth_of_the_original():
    points = [_point("original", 1.0, 0, 1000), _point("commit", 2.0, 4, 101), _point("commit", 3.0, 9, 100)]
    assert trajectory.reached(points) == points[2]
    assert trajectory.reached(points[:2]) is None


@pytest.fixture
def results(tmp_path: Path) -> Path:
    rows = [
        _row("chain-unary", "baseline", 20, 100, [(1.0, 0, 1000), (4.0, 10, 90)]),
        _row("chain-unary", "after", 10, 120, [(1.0, 0, 1000), (2.0, 5, 90)]),
        _row("xf-f6", "baseline", 30, 50, [(1.0, 0, 1000), (3.0, 8, 500), (9.0, 20, 50)]),
        _row("xf-f6", "after", 30, 50, [(1.0, 0, 1000), (3.0, 8, 50)]),
    ]
    path = tmp_path / "trajectory.json"
    path.write_text(json.dumps(rows))
    return path


def test_the_table_compares_checks_final_sizes_and_time_to_ten_percent(results: Path):
    out = CliRunner().invoke(trajectory.cli, ["table", "--results", str(results)])
    assert out.exit_code == 0, out.output
    # Checks 40 against 50; the chain ended larger; 10% in 2 + 3 s against 4 + 9 s.
    assert "Total checks 40 against 50: 0.80x." in out.output
    assert "Final size larger: chain-unary." in out.output
    assert "Time to 10%: 5.0 s against 13.0 s in total (0.38x)" in out.output


def test_plot_draws_one_line_per_label(results: Path, tmp_path: Path):
    out = tmp_path / "t.svg"
    done = CliRunner().invoke(trajectory.cli, ["plot", "--results", str(results), "--out", str(out)])
    assert done.exit_code == 0, done.output
    svg = out.read_text()
    assert svg.startswith("<?xml") and "chain-unary" in svg and "xf-f6" in svg
    assert svg.count("baseline (abc)") == 2 and svg.count("after (abc)") == 2  # each panel's legend
