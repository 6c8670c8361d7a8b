"""The benchmark harness measures what it claims: the corpus is valid MLIR of the stated
size with the bug in it, the wrapped check counts calls (and inverts for mlir-reduce),
and the runner records a real reduction and re-checks its output."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import needs_iree

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "benchmarks" / "checks"))

import cases  # noqa: E402
import measured  # noqa: E402
import models  # noqa: E402
import numeric_mismatch  # noqa: E402
import run  # noqa: E402

from reducer.core import ir  # noqa: E402


def _ops(text: str) -> int:
    ctx = ir.new_context()
    module = ir.parse(text, ctx)
    ir.verify(module.operation)
    return ir.count_ops(module.operation)


@pytest.mark.parametrize("bug", sorted(models.BUGS))
def test_transformer_is_large_valid_and_carries_its_bug(bug: str) -> None:
    text = models.transformer(bug=bug)
    assert 1000 <= _ops(text) <= 10000
    marker = {
        "f6": "f6E2M3FN",
        "tf32": "xtf32>",
        "i4dyn": "tensor<?xi4>",
        "i4odd": "tensor<7xi4>",
        "powf": "math.powf",
        "f6fused": "f6E2M3FN",
        "fptosi": "arith.fptosi",
    }[bug]
    assert marker in text
    assert "dense<[" in text and "call @softmax" in text and "call @layer" in text


@pytest.mark.e2e
@needs_iree
@pytest.mark.parametrize("case", [c for c in cases.CASES if c.hand], ids=lambda c: c.name)
def test_a_hand_reduced_case_and_its_original_both_show_the_bug(case: cases.Case, tmp_path: Path) -> None:
    """The bar (1.1x the hand-reduced size) means something only if the hand reduction
    is the same bug and smaller than the input."""
    hand = (ROOT / "benchmarks" / "hand" / case.hand).read_text()
    original = case.make()
    assert _ops(hand) < _ops(original) // 10
    for name, text in (("hand", hand), ("original", original)):
        (tmp_path / "input.mlir").write_text(text)
        check = run.plain_check(tmp_path, case)
        assert subprocess.run([str(check), "input.mlir"], cwd=tmp_path).returncode == 0, name


def test_convnet_and_upstream_cases_verify() -> None:
    assert _ops(models.convnet()) > 300
    text = cases.upstream_divsi()
    assert text.count("arith.divsi") == 1 and _ops(text) > 500


@pytest.mark.parametrize("n", [1000, 5000])
def test_scale_module_has_the_requested_size_and_one_special_op(n: int) -> None:
    text = models.scale_module(n)
    assert abs(_ops(text) - n) < n * 0.05
    assert text.count("math.cbrt") == 1 and text.count("call @") > 8


def test_wrapped_check_counts_calls_and_inverts(tmp_path: Path) -> None:
    case = cases.Case("t", "t", lambda: "", 'grep -q needle "$1"')
    (tmp_path / "input.mlir").write_text("needle\n")
    (tmp_path / "calls").write_text("")
    plain = run.wrap_check(tmp_path, case, invert=False)
    assert subprocess.run([str(plain)], cwd=tmp_path).returncode == 0  # cvise style: basename in cwd
    assert subprocess.run([str(plain), str(tmp_path / "input.mlir")]).returncode == 0
    inverted = run.wrap_check(tmp_path, case, invert=True)
    assert subprocess.run([str(inverted), str(tmp_path / "input.mlir")]).returncode == 1
    assert len((tmp_path / "calls").read_text().split()) == 3


def test_body_ops_ignores_wrappers_and_reports_unparsable() -> None:
    text = "func.func @f(%a: f32) -> f32 {\n  %0 = math.exp %a : f32\n  return %0 : f32\n}\n"
    assert run.body_ops(text) == 1
    assert run.body_ops("func.func @f( {") is None


def test_runner_records_a_real_reduction(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    from programs import chain

    case = cases.Case("tiny", "t", lambda: chain(30), 'grep -q math.exp "$1"')
    rec = run.run_one(case, run.TOOL_BY_NAME["ireereduce -j2"], chain(30, keep=20), cap=120, outputs=tmp_path)
    assert rec.ops == 1 and rec.still_interesting and not rec.capped and rec.exit_code == 0
    assert 0 < rec.calls < 30 and rec.engine_seconds is not None
    assert (tmp_path / "tiny" / "ireereduce-j2.mlir").read_text().count("math.exp") == 1


def test_runner_caps_a_tool_and_keeps_the_input_when_it_writes_nothing(tmp_path: Path) -> None:
    case = cases.Case("slow", "t", lambda: "", "true")
    # A sleeper that dies on SIGINT even when started from a shell's background job,
    # which ignores SIGINT (and `sleep` would inherit that); it says if it woke up.
    woke = tmp_path / "woke"
    sleeper = (
        "import signal, time; signal.signal(signal.SIGINT, signal.SIG_DFL); time.sleep(30); "
        f"open({str(woke)!r}, 'w').close()"
    )
    tool = run.Tool("sleeper", lambda w, c: [sys.executable, "-c", sleeper], "never.mlir")
    text = "func.func @f() {\n  return\n}\n"
    rec = run.run_one(case, tool, text, cap=1, outputs=tmp_path)
    # What the cap did, not how long it took (rec.seconds is clamped to the cap): the
    # tool was stopped by the cap's SIGINT, not by the SIGKILL 20 s later or its own end.
    assert rec.capped and rec.cap == 1 and rec.exit_code == -signal.SIGINT and not woke.exists()
    assert rec.note == "no output written" and rec.bytes == len(text) and rec.ops == 0
    assert (tmp_path / "slow" / "sleeper.mlir").read_text() == text


def test_numeric_check_reads_the_entry_signature() -> None:
    text = (
        "func.func private @helper(%x: f32) -> f32 {\n  return %x : f32\n}\n"
        "func.func @main(%a: tensor<2x?xf32>, %n: index) -> (tensor<2x?xf32>, i32) {\n"
    )
    assert numeric_mismatch.entry(text) == ("main", ["tensor<2x?xf32>", "index"], 2)


@pytest.mark.e2e
@needs_iree
def test_numeric_check_sees_the_powf_mismatch_and_not_a_clean_program(tmp_path: Path) -> None:
    body = "func.func @main(%a: tensor<8xf32>) -> tensor<8xf32> {{\n  %0 = {op} : tensor<8xf32>\n  return %0 : tensor<8xf32>\n}}\n"
    bad, good = tmp_path / "bad.mlir", tmp_path / "good.mlir"
    bad.write_text(body.format(op="math.powf %a, %a"))
    good.write_text(body.format(op="arith.mulf %a, %a"))
    script = ROOT / "benchmarks" / "checks" / "numeric_mismatch.py"
    assert subprocess.run([sys.executable, str(script), str(bad)]).returncode == 0
    assert subprocess.run([sys.executable, str(script), str(good)]).returncode == 1


def test_lithium_best_is_its_newest_interesting_copy(tmp_path: Path) -> None:
    tmp = tmp_path / "lithium-tmp"
    tmp.mkdir()
    (tmp_path / "input.mlir").write_text("a candidate lithium was testing when it was stopped")
    (tmp / "original.mlir").write_text("original")
    assert run._lithium_best(tmp_path).name == "original.mlir"  # tested, nothing interesting yet
    for name in ("1-interesting.mlir", "2-boring.mlir", "10-interesting.mlir", "11-boring.mlir"):
        (tmp / name).write_text(name)
    assert run._lithium_best(tmp_path).name == "10-interesting.mlir"


def test_numeric_check_makes_inputs_of_the_right_shape(tmp_path: Path) -> None:
    import numpy as np

    arg = numeric_mismatch.make_input("tensor<4x?xf32>", 0, tmp_path)
    arr = np.load(arg.split("@", 1)[1])
    assert arr.shape == (4, 4) and arr.dtype == np.float32 and (arr < 0).any() and (arr == 0).any()
    assert np.load(numeric_mismatch.make_input("tensor<i32>", 1, tmp_path).split("@", 1)[1]).shape == ()
    assert numeric_mismatch.make_input("index", 2, tmp_path) == "--input=5"


def test_summary_compares_against_peers_that_ran_and_still_fail(capsys: pytest.CaptureFixture[str]) -> None:
    def row(tool: str, ops: int | None, calls: int, still: bool = True, capped: bool = False) -> dict:
        return {
            "case": "chain-unary",
            "tool": tool,
            "ops": ops,
            "seconds": 10.0,
            "calls": calls,
            "still_interesting": still,
            "capped": capped,
            "engine_seconds": 0.1,
        }

    run.summary(
        [
            row("ireereduce -j2", 1, 20),
            row("iree-reduce", 1, 35),
            row("mlir-reduce", 0, 0),  # never ran a check: not a result
            row("cvise", 0, 5, still=False),  # its output no longer fails: not a result
            row("picire", 200, 3, capped=True),  # ran, removed nothing: not the fewest-calls peer
        ]
    )
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("| chain-unary"))
    assert "| 1 / 10 s / 20 |" in line and "1.0%" in line
    assert line.count("iree-reduce: 1 / 10 s / 35") == 2  # smallest and fewest calls
    assert "mlir-reduce" not in line and "cvise" not in line and "picire" not in line


def test_every_results_file_records_the_commit_it_measured():
    """A number without the commit it measured cannot be reproduced or compared. Rows from
    before the writers recorded it say "unknown" rather than a guessed commit."""
    import json

    files = sorted((ROOT / "benchmarks" / "results").glob("*.json"))
    assert len(files) >= 5
    for path in files:
        data = json.loads(path.read_text())
        rows = data if isinstance(data, list) else [data]
        missing = [i for i, row in enumerate(rows) if not row.get("commit")]
        assert not missing, f"{path.name}: rows {missing[:5]} record no commit"


def test_the_measured_commit_marks_changes_outside_the_results(tmp_path: Path):
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True, text=True).stdout.strip()

    assert measured.commit(tmp_path) == "unknown"  # not a checkout
    git("init", "-q")
    (tmp_path / "benchmarks" / "results").mkdir(parents=True)
    (tmp_path / "code.py").write_text("a = 1\n")
    (tmp_path / "benchmarks" / "results" / "r.json").write_text("[]\n")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "c")
    head = git("rev-parse", "--short=12", "HEAD")
    assert measured.commit(tmp_path) == head
    (tmp_path / "benchmarks" / "results" / "r.json").write_text("[1]\n")  # a result being written
    assert measured.commit(tmp_path) == head
    (tmp_path / "code.py").write_text("a = 2\n")  # the code measured is not HEAD's
    assert measured.commit(tmp_path) == head + "+"


COMMANDS = sorted(p.name for p in (ROOT / "benchmarks").glob("*.py") if "__main__" in p.read_text())


def test_every_benchmark_command_is_tested_here():
    """A new benchmark script joins the list below by itself: an import error in one
    (scale.py once broke after a move and nothing ran it) fails the suite, not a
    measurement session."""
    assert {"faults.py", "parallel.py", "run.py", "scale.py", "speculation.py", "workflows.py"} <= set(COMMANDS)


@pytest.mark.parametrize("script", COMMANDS)
def test_a_benchmark_command_starts(script: str) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), "--help"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "usage:" in done.stdout.lower()
