"""The interface people and bots expect (issue 14): peer conventions through the real CLI,
the trivial-result warning, --print-diff, reports you can file, consistent sizes."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from importlib.resources import files
from pathlib import Path

import jsonschema
import pytest
from conftest import make_script
from rich.console import Console

from reducer import progress, session
from reducer.api import STATS_SCHEMA
from reducer.core.engine import RunStats, StrategyStats
from reducer.core.workspace import Size
from reducer.iree import report
from reducer.session import Result

ROOT = Path(__file__).resolve().parent.parent

# Spaced and commented the way people write it, so the file's bytes differ from the
# re-printed program's: sizes must still compare like with like.
SMALL = """// a comment the printer drops
func.func @f(%a: f32) -> f32 {
  %0 = arith.negf %a    : f32
  %1 = math.exp %0 : f32
  %2 = arith.negf %1 : f32
  return %2 : f32
}
"""


def run_cli(*args: str, cwd: Path, stdin: str | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "reducer.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        input=stdin,
        timeout=timeout,
    )


@pytest.fixture
def case(tmp_path: Path) -> Path:
    (tmp_path / "input.mlir").write_text(SMALL)
    make_script(tmp_path / "check.sh", 'grep -q "${2:-math.exp}" "$1"')
    return tmp_path


def reduced(case: Path, name: str = "input.reduced.mlir") -> str:
    text = (case / name).read_text()
    assert "math.exp" in text and "negf" not in text
    return text


# -- conventions -------------------------------------------------------------------
def test_version(case: Path):
    proc = run_cli("--version", cwd=case)
    assert proc.returncode == 0 and proc.stdout.startswith("ireereduce, version ")


def test_test_is_an_alias_of_check_and_test_arg_follows_the_candidate(case: Path):
    make_script(case / "check.sh", '[ "$#" = 3 ] && [ "$3" = "-q" ] && grep $3 "$2" "$1"')
    proc = run_cli(
        "input.mlir", "--test", "check.sh", "--test-arg", "math.exp", "--test-arg", "-q", "-j", "1", cwd=case
    )
    assert proc.returncode == 0, proc.stderr
    reduced(case)


def test_a_check_given_with_its_arguments_in_one_string(case: Path):
    proc = run_cli("input.mlir", "-c", "./check.sh math.exp", "-j", "1", cwd=case)
    assert proc.returncode == 0, proc.stderr
    reduced(case)


def test_dash_reads_stdin_and_needs_an_output(case: Path):
    proc = run_cli("-", "-c", "check.sh", "-o", "out.mlir", "-j", "1", cwd=case, stdin=SMALL)
    assert proc.returncode == 0, proc.stderr
    reduced(case, "out.mlir")
    proc = run_cli("-", "-c", "check.sh", cwd=case, stdin=SMALL)
    assert proc.returncode == 2 and "needs -o" in proc.stderr and "Traceback" not in proc.stderr


def test_max_checks_stops_with_the_best_so_far(case: Path):
    proc = run_cli("input.mlir", "-c", "check.sh", "-j", "1", "--max-checks", "1", "--stats-json", "s.json", cwd=case)
    assert proc.returncode == session.EXIT_STOPPED, proc.stderr
    assert "stopped (--max-checks 1 reached)" in proc.stderr
    stats = json.loads((case / "s.json").read_text())
    assert stats["status"] == "stopped" and stats["oracle_calls"] == 1
    out = case / "input.reduced.mlir"  # written at the first improvement, never with the input itself
    assert ("math.exp" in out.read_text()) if out.exists() else "no smaller program was found yet" in proc.stderr


def test_max_time_stops_a_slow_check(case: Path):
    make_script(case / "check.sh", 'sleep 0.4; grep -q math.exp "$1"')
    proc = run_cli("input.mlir", "-c", "check.sh", "-j", "1", "--max-time", "1.5", cwd=case)
    assert proc.returncode == session.EXIT_STOPPED, proc.stderr
    assert "--max-time 1.5 s reached" in proc.stderr
    out = case / "input.reduced.mlir"  # written at the first improvement, never with the input itself
    assert ("math.exp" in out.read_text()) if out.exists() else "no smaller program was found yet" in proc.stderr


def test_llvm_reduce_strategy_names_are_aliases(case: Path):
    proc = run_cli(
        "input.mlir",
        "-c",
        "check.sh",
        "-j",
        "1",
        "--strategies",
        "operands-zero,arguments",
        "--skip-strategies",
        "operands-to-args,operands-skip,ir-passes",
        "--stats-json",
        "s.json",
        cwd=case,
    )
    assert proc.returncode == 0, proc.stderr
    used = {n for n, st in json.loads((case / "s.json").read_text())["per_strategy"].items() if st["candidates"]}
    assert used and used <= {"replace-with-zero", "remove-results-and-arguments"}


# -- what a run says ---------------------------------------------------------------
def test_a_trivial_result_warns_and_can_be_an_error(case: Path):
    make_script(case / "check.sh", "exit 0")
    proc = run_cli("input.mlir", "-c", "check.sh", "-j", "1", cwd=case)
    assert proc.returncode == 0
    assert "warning: the result is trivial" in proc.stderr
    proc = run_cli("input.mlir", "-c", "check.sh", "-j", "1", "-o", "again.mlir", "--trivial-is-error", cwd=case)
    assert proc.returncode == session.EXIT_TRIVIAL and "error: the result is trivial" in proc.stderr


def test_print_diff_shows_each_accepted_step(case: Path):
    proc = run_cli("input.mlir", "-c", "check.sh", "-j", "1", "--print-diff", cwd=case)
    assert proc.returncode == 0, proc.stderr
    assert "--- before" in proc.stdout and "+++ after drop-ops" in proc.stdout
    assert "-    %0 = arith.negf %arg0 : f32" in proc.stdout


def test_heartbeat_when_piped(case: Path):
    make_script(case / "check.sh", 'sleep 0.5; grep -q math.exp "$1"')
    proc = run_cli("input.mlir", "-c", "check.sh", "-j", "1", "--heartbeat", "0.3", "--max-checks", "3", cwd=case)
    assert proc.returncode == session.EXIT_STOPPED, proc.stderr
    beats = [ln for ln in proc.stderr.splitlines() if ln.startswith("ireereduce: still working: ")]
    assert beats and "checks done" in beats[-1]


def test_sizes_compare_like_with_like(case: Path):
    """The first log line, the summary, the events and the report measure one way: the
    program as ireereduce prints it, never the input file's own spelling."""
    proc = run_cli(
        "input.mlir",
        "-c",
        "check.sh",
        "-j",
        "1",
        "--max-checks",
        "0",
        "--report-json",
        "r.json",
        "--progress-json",
        "p.jsonl",
        cwd=case,
    )
    assert proc.returncode == session.EXIT_STOPPED, proc.stderr
    start = json.loads((case / "p.jsonl").read_text().splitlines()[0])
    assert start["input"] == start["size"] and start["input"]["bytes"] != len(SMALL)
    n = start["input"]["bytes"]
    assert f"{n} -> {n} bytes (100.0%)" in proc.stderr  # nothing accepted: nothing changed
    sizes = json.loads((case / "r.json").read_text())["sizes"]
    assert sizes["before"]["bytes"] == sizes["after"]["bytes"] == n
    proc = run_cli("input.mlir", "-c", "check.sh", "-j", "1", cwd=case)
    first = next(ln for ln in proc.stderr.splitlines() if "% of the original" in ln)
    percent = float(first.split("(")[1].split("%")[0])
    assert percent < 100.0, first


def test_summary_never_cuts_strategy_names():
    stats = RunStats(Size(5, 100), Size(3, 60))
    stats.per_strategy = {
        "remove-results-and-arguments": StrategyStats(candidates=1),
        "arguments-to-constants": StrategyStats(candidates=2),
    }
    out = io.StringIO()
    from reducer.cli import _summary

    _summary(Console(file=out, width=60), Result("x.mlir", "mlir", stats, 1.0, 1.0, 0.1))
    assert "remove-results-and-arguments" in out.getvalue() and "arguments-to-constants" in out.getvalue()


# -- reports and machine-readable files ----------------------------------------------
def test_a_check_script_report_can_be_filed(case: Path):
    make_script(
        case / "check.sh", 'grep -q math.exp "$1" && echo "error: failed to legalize operation \'math.exp\'" >&2'
    )
    proc = run_cli(
        str(case / "input.mlir"),
        "-c",
        str(case / "check.sh"),
        "-j",
        "1",
        "--report",
        "r.md",
        "--report-json",
        "r.json",
        "--stats-json",
        "s.json",
        cwd=case,
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads((case / "r.json").read_text())
    jsonschema.validate(data, json.loads(files("reducer.schemas").joinpath("report-schema.json").read_text()))
    assert data["title"] == "error: failed to legalize operation 'math.exp'"
    assert data["oracle"]["reproduce"].startswith("./check.sh input.reduced.mlir")
    assert data["check_script"]["text"] == (case / "check.sh").read_text()
    md = (case / "r.md").read_text()
    assert md.startswith("# error: failed to legalize operation 'math.exp'\n")
    assert "grep -q math.exp" in md and str(case) not in md.split("## Details")[0].replace(f"`{case}/input.mlir`", "")
    stats = json.loads((case / "s.json").read_text())
    jsonschema.validate(stats, json.loads(files("reducer.schemas").joinpath("stats-schema.json").read_text()))
    assert stats["schema"] == STATS_SCHEMA and stats["status"] == data["status"] == "reduced"


def test_schemas_are_installed_match_docs_and_carry_ids():
    ids = {"report": report.SCHEMA, "stats": STATS_SCHEMA, "progress": progress.SCHEMA}
    for name, schema_id in ids.items():
        installed = files("reducer.schemas").joinpath(f"{name}-schema.json").read_text()
        assert installed == (ROOT / "docs" / f"{name}-schema.json").read_text(), name
        schema = json.loads(installed)
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema["$id"] == schema_id and schema["properties"]["schema"]["const"] == schema_id
    statuses = json.loads(files("reducer.schemas").joinpath("report-schema.json").read_text())["properties"]["status"][
        "enum"
    ]
    assert set(statuses) | {"error"} == set(progress.STATUSES)
