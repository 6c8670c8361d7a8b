"""The oracle contract and bad input, through the real CLI: one clear line, a documented
exit code, never a traceback, and no process left behind."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import make_script

from reducer import session
from reducer.core.oracle import ScriptOracle as Oracle

SMALL = """func.func @f(%a: f32) -> f32 {
  %0 = arith.negf %a : f32
  %1 = math.exp %0 : f32
  %2 = arith.negf %1 : f32
  return %2 : f32
}
"""


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "reducer.cli", *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )


@pytest.fixture
def case(tmp_path: Path) -> Path:
    (tmp_path / "input.mlir").write_text(SMALL)
    return tmp_path


def one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in proc.stderr
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("ireereduce: error")]
    assert len(errors) == 1, proc.stderr
    return errors[0]


def test_reduces_and_never_touches_the_input(case: Path):
    make_script(case / "check.sh", 'grep -q math.exp "$1"')
    proc = run_cli("input.mlir", "--check", "check.sh", "-j", "2", cwd=case)
    assert proc.returncode == 0, proc.stderr
    assert (case / "input.mlir").read_text() == SMALL
    out = (case / "input.reduced.mlir").read_text()
    assert "math.exp" in out and "negf" not in out


def test_check_sees_basename_in_cwd_and_path_as_first_argument(case: Path):
    make_script(
        case / "check.sh",
        '[ "$(basename "$1")" = input.mlir ] && [ -f ./input.mlir ] && [ "$(dirname "$1")" = "$(pwd)" ] && grep -q math.exp ./input.mlir',
    )
    proc = run_cli("input.mlir", "--check", "check.sh", cwd=case)
    assert proc.returncode == 0, proc.stderr


def test_missing_input(case: Path):
    make_script(case / "check.sh", "exit 0")
    proc = run_cli("nope.mlir", "--check", "check.sh", cwd=case)
    assert proc.returncode == session.EXIT_BAD_INPUT
    assert "does not exist" in one_error_line(proc)


@pytest.mark.parametrize(
    "setup, expected",
    [
        (lambda d: None, "does not exist"),
        (lambda d: (d / "check.sh").write_text("#!/bin/sh\nexit 0\n"), "chmod +x"),
        (lambda d: make_script(d / "check.sh", "").write_text("exit 0\n"), "#!"),
    ],
    ids=["missing", "not-executable", "no-shebang"],
)
def test_bad_check_script(case: Path, setup, expected: str):
    setup(case)
    proc = run_cli("input.mlir", "--check", "check.sh", cwd=case)
    assert proc.returncode == session.EXIT_BAD_CHECK
    assert expected in one_error_line(proc)


def test_original_not_interesting(case: Path):
    make_script(case / "check.sh", "echo 'no crash here' >&2; exit 1")
    proc = run_cli("input.mlir", "--check", "check.sh", cwd=case)
    assert proc.returncode == session.EXIT_NOT_INTERESTING
    line = one_error_line(proc)
    assert "not interesting" in line and "mlir-reduce" in line and "no crash here" in line
    assert not (case / "input.reduced.mlir").exists()


def test_check_hangs_on_the_original(case: Path):
    """The hanging check is stopped at the timeout, not waited for: it never gets past
    its sleep, and nothing of it is left running."""
    pid, woke = case / "pid", case / "woke"
    # Written whole (mv), so a check stopped at its first line under load leaves no half file.
    make_script(case / "check.sh", f"echo $$ > {pid}.tmp && mv {pid}.tmp {pid}; sleep 60; touch {woke}")
    proc = run_cli("input.mlir", "--check", "check.sh", "--timeout", "1", cwd=case)
    assert proc.returncode == session.EXIT_CHECK_HANGS
    assert "--timeout" in one_error_line(proc)
    assert not woke.exists()
    assert not pid.exists() or not _alive(int(pid.read_text()))


def test_output_must_not_be_the_input(case: Path):
    make_script(case / "check.sh", "exit 0")
    proc = run_cli("input.mlir", "--check", "check.sh", "-o", "input.mlir", cwd=case)
    assert proc.returncode == session.EXIT_USAGE
    assert (case / "input.mlir").read_text() == SMALL


def test_unparsable_input_falls_back_to_text(case: Path):
    (case / "input.mlir").write_text("this is { not mlir (at all) }\nkeep BUG here\nand more lines\n")
    make_script(case / "check.sh", 'grep -q BUG "$1"')
    proc = run_cli("input.mlir", "--check", "check.sh", cwd=case)
    assert proc.returncode == 0, proc.stderr
    assert "does not parse as MLIR" in proc.stderr
    assert (case / "input.reduced.mlir").read_text().strip() == "BUG"


def test_timed_out_candidates_are_killed_with_their_children(tmp_path: Path):
    pidfile = tmp_path / "pids"
    script = make_script(
        tmp_path / "check.sh", f"(sleep 300 & echo $! >> {pidfile}; wait) & echo $! >> {pidfile}; sleep 300"
    )
    oracle = Oracle(str(script), "input.mlir", timeout=0.5)
    verdict = oracle.run(b"x")
    assert verdict.timed_out and not verdict.interesting
    time.sleep(0.2)
    for pid in pidfile.read_text().split():
        assert not _alive(int(pid)), f"process {pid} survived"


def test_background_children_of_a_finished_check_are_killed(tmp_path: Path):
    pidfile = tmp_path / "pids"
    script = make_script(tmp_path / "check.sh", f"sleep 300 & echo $! > {pidfile}; exit 0")
    verdict = Oracle(str(script), "input.mlir", timeout=10).run(b"x")
    assert verdict.interesting
    time.sleep(0.2)
    assert not _alive(int(pidfile.read_text()))


def _ignore_sigint() -> None:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # what a shell does to a background job


@pytest.mark.parametrize(
    "sig,inherit_ignored", [(2, False), (2, True), (15, False)], ids=["SIGINT", "SIGINT-after-ignored", "SIGTERM"]
)
def test_interrupt_keeps_the_best_so_far(case: Path, sig: int, inherit_ignored: bool):
    big = (
        "func.func @f(%a: f32) -> f32 {\n"
        + "".join(f"  %v{i} = arith.negf {'%a' if i == 0 else f'%v{i - 1}'} : f32\n" for i in range(60))
        + "  %e = math.exp %v59 : f32\n  return %e : f32\n}\n"
    )
    (case / "input.mlir").write_text(big)
    make_script(case / "check.sh", 'sleep 0.3; grep -q math.exp "$1"')
    proc = subprocess.Popen(
        [sys.executable, "-m", "reducer.cli", "input.mlir", "--check", "check.sh", "-j", "2"],
        cwd=case,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_ignore_sigint if inherit_ignored else None,
    )
    out = case / "input.reduced.mlir"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (not out.exists() or len(out.read_text()) >= len(big)):
        time.sleep(0.1)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == session.EXIT_INTERRUPTED, err
    assert "Traceback" not in err
    text = out.read_text()
    assert "math.exp" in text and len(text) < len(big)
    assert (case / "input.mlir").read_text() == big


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split()[2] != "Z"


@pytest.mark.parametrize(
    "args,code,words",
    [
        ([], session.EXIT_USAGE, "exactly one of --check"),
        (["--check", "check.sh", "--compile", "cc {input}"], session.EXIT_USAGE, "exactly one of --check"),
        (["--compile", "iree-compile input.mlir"], session.EXIT_USAGE, "has no {input}"),
        (["--compile", "no-such-compiler-xyz {input}"], session.EXIT_BAD_CHECK, "is not found"),
        (["--check", "check.sh", "--expect-crash"], session.EXIT_USAGE, "goes with --compile"),
        (["--compile", "sh -c 'exit 1' {input}", "--mismatch"], session.EXIT_USAGE, "--mismatch needs --against"),
        (["--compile", "sh -c 'exit 1' {input}", "--slower-than-factor", "2"], session.EXIT_USAGE, "needs --against"),
        (["--compile", "true {input}"], session.EXIT_NOT_INTERESTING, "the command succeeds on it"),
        (
            ["--compile", "sh -c 'echo error: other >&2; exit 1' {input}", "--expect-error", "the bug"],
            session.EXIT_NOT_INTERESTING,
            "--expect-error",
        ),
        (["--compile", "sh -c 'exit 1' {input}", "--expect-crash"], session.EXIT_NOT_INTERESTING, "does not crash"),
        (
            ["--compile", "sh -c 'exit 1' {input}", "--isolate-dispatch"],
            session.EXIT_USAGE,
            "need an iree-compile command",
        ),
    ],
    ids=[
        "no-oracle",
        "two-oracles",
        "no-input",
        "missing-compiler",
        "crash-with-check",
        "mismatch-alone",
        "factor-alone",
        "compiles-fine",
        "other-error",
        "no-crash",
        "isolate-not-iree",
    ],
)
def test_built_in_oracle_mistakes_get_one_line_and_a_code(case: Path, args: list[str], code: int, words: str):
    make_script(case / "check.sh", "exit 0")
    proc = run_cli("input.mlir", *args, cwd=case)
    assert proc.returncode == code, proc.stderr
    assert words in one_error_line(proc)


def test_a_compile_command_is_an_oracle_and_its_flags_are_reduced(case: Path):
    """A stand-in compiler: fails on math.exp, whatever its flags; the report names what was dropped."""
    proc = run_cli(
        "input.mlir",
        "--compile",
        'sh -c \'grep -q math.exp "$0" && echo "$0:2:3: error: exp" >&2 && exit 1; exit 0\' {input} --some-flag',
        "--report-json",
        "r.json",
        "-j",
        "2",
        cwd=case,
    )
    assert proc.returncode == 0, proc.stderr
    out = (case / "input.reduced.mlir").read_text()
    assert "math.exp" in out and "negf" not in out
    import json

    report = json.loads((case / "r.json").read_text())
    assert report["flags_removed"] == ["--some-flag"] and report["oracle"]["kind"] == "compile-failure"
    assert report["signature"]["errors"] == ["exp"]


def test_the_readme_gives_each_option_the_exit_code_of_its_table_row():
    """The README's exit-code table lists every code the command has; prose elsewhere that
    names an option from a row with "exit N" must say that row's code (it once said 8 for
    --max-time, which exits 13, and 9 for --trivial-is-error, which exits 14)."""
    import re

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text().splitlines()
    rows = {int(m[1]): m[2] for line in readme if (m := re.match(r"\| (\d+) \| (.*) \|$", line))}
    assert set(rows) == set(session.EXIT_CODES)
    codes: dict[str, set[int]] = {}
    for code, meaning in rows.items():
        for option in re.findall(r"`(--[a-z-]+)", meaning):
            codes.setdefault(option, set()).add(code)
    checked = 0
    for line in readme:
        said = [int(n) for n in re.findall(r"\bexits? (\d+)", line)]
        if line.startswith("|") or not said:
            continue
        for option in set(re.findall(r"`(--[a-z-]+)", line)) & set(codes):
            assert set(said) <= codes[option], f"{line!r}: {option} exits {sorted(codes[option])}"
            checked += 1
    assert checked >= 2  # the two sentences that were wrong
