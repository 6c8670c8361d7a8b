"""Found by the hostile run: a state directory that names what to run, and command lines
that were accepted, ignored or answered with a block of text. Each test asserts the exit
code, the one error line, and that nothing ran and nothing is left behind."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import test_faults
from conftest import make_script, needs_iree
from programs import COMPILE, mlp
from test_faults import SMALL, _killed_run, _open_files, _tree, assert_clean, cli, env, error_line

from reducer import session
from reducer.core.oracle import ScriptOracle
from reducer.iree.oracles import CompileOracle
from reducer.iree.oracles.command import Command
from reducer.iree.signature import Signature
from reducer.session import triage

case = test_faults.case  # the fixture: a directory with input.mlir, and TMPDIR in it

# -- the state directory names what runs ------------------------------------------------


def _forge(state: Path, field: str, value: object) -> None:
    """Edit the recorded start's oracle, as someone who can write the directory would."""
    start = json.loads((state / "start.json").read_text())
    start["$fields"]["oracle"]["$fields"][field] = value
    (state / "start.json").write_text(json.dumps(start))


@pytest.mark.parametrize("field", ["script", "args"])
def test_a_start_naming_another_check_is_refused_and_never_run(case: Path, field: str):
    state = _killed_run(case)
    evil = make_script(case / "evil.sh", f"touch {case}/PWNED; exit 0")
    # Either the script itself, or arguments the real one never got (a forged `-c` string).
    _forge(state, field, str(evil) if field == "script" else {"$tuple": [str(evil)]})
    best = (case / "input.reduced.mlir").read_bytes()
    again = cli(case, "input.mlir", "--check", "check.sh", "-j", "1")
    assert again.returncode == session.EXIT_STATE_MISMATCH, again.stderr
    line = error_line(again.stderr)
    assert "input.reduced.mlir.resume" in line and f"its {field} is" in line and "evil.sh" in line, line
    assert "--fresh" in line
    assert not (case / "PWNED").exists()
    assert (case / "input.reduced.mlir").read_bytes() == best
    assert (state / "run.json").is_file()  # the record is the user's to keep or start over from
    assert_clean(case)
    fresh = cli(case, "input.mlir", "--check", "check.sh", "-j", "1", "--fresh")
    assert fresh.returncode == 0, fresh.stderr
    assert not (case / "PWNED").exists() and not state.exists()
    assert_clean(case)


@needs_iree
@pytest.mark.parametrize("launcher", ["", "env IREEREDUCE_TEST=1 "], ids=["bare", "env"])
def test_a_rebuilt_compiler_does_not_continue_the_old_ones_run(case: Path, launcher: str):
    """The review: the resume stamp held the --compile command's words, not the program
    they run. After a rebuild of the compiler under test (here: its wrapper on PATH
    changed), the same command continued with the old build's verdicts. Behind `env`,
    the stamp named env only."""
    real = shutil.which("iree-compile")
    assert real is not None
    (case / "bin").mkdir()
    tool = make_script(case / "bin" / "iree-compile", f'exec {real} "$@"')
    (case / "input.mlir").write_text(mlp(layers=6, bad_layer=4))
    path = dict(env(case), PATH=f"{case / 'bin'}{os.pathsep}{os.environ['PATH']}")
    command = launcher + COMPILE + " {input} -o /dev/null"
    argv = [sys.executable, "-m", "reducer.cli", "input.mlir", "--compile", command, "-j", "2", "--max-checks", "3"]

    def run(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*argv, *extra], cwd=case, env=path, capture_output=True, text=True, timeout=300)

    first = run()
    assert first.returncode == session.EXIT_STOPPED and "--max-checks 3 reached" in first.stderr, first.stderr
    state = case / "input.reduced.mlir.resume"
    recorded = json.loads((state / "run.json").read_text())
    same = run()  # the same build: continued
    assert same.returncode == session.EXIT_STOPPED and "holds an interrupted run" not in same.stderr, same.stderr
    tool.write_text(tool.read_text() + "# rebuilt\n")
    again = run()
    assert again.returncode == session.EXIT_STATE_MISMATCH, again.stderr
    line = error_line(again.stderr)
    assert f"the program of --compile, {os.path.realpath(tool)}, changed" in line and "--fresh" in line, line
    # A state an earlier version recorded, without the stamp: said so, not "changed".
    del recorded["fingerprint"]["files"]
    (state / "run.json").write_text(json.dumps(recorded))
    older = run()
    assert older.returncode == session.EXIT_STATE_MISMATCH, older.stderr
    assert "an earlier ireereduce recorded it, without stamping --compile's program" in error_line(older.stderr)
    assert (state / "run.json").is_file()
    assert run("--fresh").returncode == session.EXIT_STOPPED
    assert_clean(case)


def test_a_check_given_with_its_arguments_is_stamped_and_watched_as_its_script(case: Path):
    """Audit 16 (D2): with `-c "./check.sh ARG"` the stamp and the guard took the whole
    string for the script's path, named no file, and protected nothing: an edited script
    continued the old one's run (exit 7, "flaky"), and an edit mid-run went unnoticed."""
    import signal

    from test_faults import BIG, start, wait_for

    (case / "input.mlir").write_text(BIG)
    check = make_script(case / "check.sh", 'sleep 0.1; grep -q "$2" "$1"')
    command = ["input.mlir", "-c", "./check.sh math.exp", "-j", "1"]
    proc = start(case, *command, start_new_session=True)
    wait_for(lambda: (case / "input.reduced.mlir").exists())
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    check.write_text(check.read_text() + "# edited\n")
    again = cli(case, *command)
    assert again.returncode == session.EXIT_STATE_MISMATCH, again.stderr
    assert "the check script changed" in error_line(again.stderr)
    # An edit while the run goes on (here: made by the check itself, at its fifth call).
    make_script(
        check,
        f'echo >> {case}/calls; [ "$(wc -l < {case}/calls)" -eq 5 ] && echo "# mid-run" >> {check}; '
        'sleep 0.1; grep -q "$2" "$1"',
    )
    during = cli(case, *command, "--fresh")
    assert during.returncode == session.EXIT_CHECK_CHANGED_FILES, during.stderr
    assert "the check script ./check.sh changed during the run" in error_line(during.stderr)
    assert_clean(case)


@pytest.mark.parametrize(
    "how", ["log into --inputs", "-o on --inputs a,b", "report over --inputs", "log into --compile", "-o on --compile"]
)
def test_the_arrays_and_the_compiler_a_run_reads_are_never_written(case: Path, how: str):
    """Audit 16 (D3): --log-file appended into an --inputs array or into the user's
    --compile wrapper, --report's inputs folder replaced the run's own --inputs, and
    `-o wrap.sh --fresh` replaced the wrapper. Each is refused before anything runs."""
    import numpy as np

    np.save(case / "a.npy", np.array([0.5, 1.5, -2, 3], dtype=np.float32))
    np.save(case / "b.npy", np.array([1, 2, 3, 4], dtype=np.float32))
    (case / "r.md.inputs").mkdir()
    np.save(case / "r.md.inputs" / "input0.npy", np.array([1, 2, 3, 4], dtype=np.float32))
    wrap = make_script(case / "wrap.sh", f'touch {case}/ran; exec iree-compile "$@"')
    compile_ = "./wrap.sh {input} --iree-hal-target-device=local --iree-hal-local-target-device-backends=llvm-cpu"
    mismatch = ["--mismatch", "--compile", compile_ + " -o {output}", "--against", compile_ + " -o {output}"]
    args, named, what = {
        "log into --inputs": (
            mismatch + ["--inputs", "a.npy", "--log-file", "a.npy"],
            "a.npy",
            "an array --inputs gives",
        ),
        "-o on --inputs a,b": (  # audit 17 (D1): the README's comma form
            mismatch + ["--inputs", "a.npy,b.npy", "-o", "b.npy", "--fresh"],
            "b.npy",
            "an array --inputs gives",
        ),
        "report over --inputs": (
            mismatch + ["--inputs", "r.md.inputs/input0.npy", "--report", "r.md"],
            "r.md.inputs/input0.npy",
            "which this run reads",
        ),
        "log into --compile": (
            ["--compile", compile_ + " -o /dev/null", "--log-file", "wrap.sh"],
            "wrap.sh",
            "--compile",
        ),
        "-o on --compile": (
            ["--compile", compile_ + " -o /dev/null", "-o", "wrap.sh", "--fresh"],
            "wrap.sh",
            "--compile",
        ),
    }[how]
    before = _tree(case)
    proc = cli(case, "input.mlir", *args)
    assert proc.returncode == session.EXIT_USAGE, proc.stderr
    line = error_line(proc.stderr)
    assert named in line and what in line and "never overwrites" in line, line
    assert _tree(case) == before and not (case / "ran").exists()
    assert wrap.read_text().endswith('exec iree-compile "$@"\n')
    assert_clean(case)


@pytest.mark.parametrize("form", ["--test-arg", "-c"])
def test_a_file_the_check_is_given_by_a_relative_path_is_found_in_its_temp_dir(case: Path, form: str):
    """Audit 16 (D6): `--test-arg pat.txt` reached the check verbatim, in its temp dir
    where no pat.txt is: the pattern was empty, every candidate passed, and the run ended
    0 with `module {}`, which the user's check rejects."""
    (case / "pat.txt").write_text("math.exp\n")
    make_script(case / "check.sh", 'p="$(cat "$2")" && [ -n "$p" ] && grep -q "$p" "$1"')
    check = ["--check", "./check.sh", "--test-arg", "pat.txt"] if form == "--test-arg" else ["-c", "./check.sh pat.txt"]
    proc = cli(case, "input.mlir", *check, "-j", "1")
    assert proc.returncode == 0, proc.stderr
    out = case / "input.reduced.mlir"
    assert "math.exp" in out.read_text()
    mine = subprocess.run(["./check.sh", str(out), "pat.txt"], cwd=case)  # the user's own check, as they run it
    assert mine.returncode == 0
    assert_clean(case)


@pytest.mark.parametrize("held", ["", "my own notes, not MLIR\n"], ids=["empty", "the user's file"])
def test_a_run_stopped_before_its_first_improvement_does_not_present_the_output_as_its_result(case: Path, held: str):
    """Audit 16 (D4): an output the run never wrote (an empty one made beforehand, as
    `mktemp` does, or a file of the user's under --fresh) was "the smallest interesting
    program so far", "trivial", and the report's reproducer."""
    from test_faults import BIG

    (case / "input.mlir").write_text(BIG)
    make_script(case / "check.sh", '[ "$(grep -c negf "$1")" -eq 40 ] && grep -q math.exp "$1"')  # nothing smaller
    (case / "o.mlir").write_text(held)
    args = ["--check", "check.sh", "-j", "1", "-o", "o.mlir", "--max-checks", "2", "--stats-json", "s.json"]
    proc = cli(case, "input.mlir", *args, "--report-json", "r.json", *(["--fresh"] if held else []))
    assert proc.returncode == session.EXIT_STOPPED, proc.stderr
    last = proc.stderr.splitlines()[-1]
    assert last.endswith("no smaller program was found yet; o.mlir is as it was"), proc.stderr
    assert "trivial" not in proc.stderr
    assert ("--fresh: o.mlir holds 23 bytes; the run starts from the input" in proc.stderr) == bool(held)  # W1
    assert (case / "o.mlir").read_text() == held
    assert json.loads((case / "s.json").read_text())["trivial"] is False
    assert "math.exp" in json.loads((case / "r.json").read_text())["program"]  # the input, not the file
    (case / "p.mlir").write_text(held)
    from reducer import api

    done = api.reduce(
        case / "input.mlir", check=case / "check.sh", jobs=1, output=case / "p.mlir", max_checks=2, fresh=True
    )
    assert done.status == "stopped" and done.text == BIG and not done.trivial  # the API's result too
    assert_clean(case)


def test_a_recorded_compile_command_may_differ_only_by_what_triage_adds():
    """Calibration (the signature, the timeout) and the triage flags (--compile-to, ...)
    are the run's own; a flag none of them adds is not: iree-compile's linker path flags
    name a program it runs."""
    command = Command(("iree-compile", "{input}", "-o", "/dev/null"))
    built = CompileOracle(command, "input.mlir", 300.0, None, False, False)
    crash = Signature("crash", 6, ("error",), ("f",), "assert", "Pass")
    triaged = CompileOracle(
        command.plus("--compile-mode=hal-executable", "--compile-to=flow"),
        "input.mlir",
        12.0,
        None,
        False,
        False,
        crash,
    )
    assert triage.differs(triaged, built) is None
    forged = triaged.with_command(command.plus("--iree-llvmcpu-embedded-linker-path=/tmp/evil"))
    assert "--iree-llvmcpu-embedded-linker-path=/tmp/evil, which no triage step adds" in (
        triage.differs(forged, built) or ""
    )
    other = CompileOracle(Command(("sh", "-c", "evil {input}")), "input.mlir", 12.0, None, False, False, crash)
    assert "its command is \"sh -c 'evil {input}'\"" in (triage.differs(other, built) or "")
    script = ScriptOracle("/abs/check.sh", "input.mlir", 1.0)
    assert "its check is a check-script oracle, this command's a compile-failure oracle" in (
        triage.differs(script, built) or ""
    )


def _sweep(case: Path) -> None:
    """What the killed run could not remove (its temp dir, its lock file): a rerun that
    starts sweeps them, one refused before it starts does not."""
    for left in (case / "tmp").iterdir():
        shutil.rmtree(left)
    for lock in case.glob("*.lock"):
        lock.unlink()


def _rewrite_marker(state: Path, lines: list[str]) -> None:
    (state / "ireereduce-state").write_text("".join(f"{line}\n" for line in lines))


@pytest.mark.parametrize("how", ["copied", "marker-without-output", "linked-marker", "planted-by-another-user"])
def test_a_planted_state_with_a_marker_is_refused_unread(case: Path, how: str):
    """A marker proves only that someone who can write the directory wrote it: the run's
    own names its output, is a file of this user, and is not a link; anything else is
    refused before anything in the directory is read."""
    state = _killed_run(case)
    _sweep(case)
    target = case / "input.reduced.mlir.resume"
    args = ["input.mlir", "--check", "check.sh", "-j", "1"]
    if how == "copied":  # another output's state, next to this one
        target = case / "other.mlir.resume"
        shutil.copytree(state, target)
        args += ["-o", "other.mlir"]
        words = "it was made by a run for another output"
    elif how == "marker-without-output":  # what a forger writes from the docs
        _rewrite_marker(state, ["ireereduce state directory", "made"])
        words = "its ireereduce-state file is not one ireereduce writes"
    elif how == "linked-marker":
        (case / "elsewhere").write_bytes((state / "ireereduce-state").read_bytes())
        (state / "ireereduce-state").unlink()
        (state / "ireereduce-state").symlink_to(case / "elsewhere")
        words = "its ireereduce-state is a link"
    else:
        if os.geteuid() != 0:
            pytest.skip("needs root to make a file of another user")
        os.chown(state / "ireereduce-state", 65534, 65534)
        words = "its ireereduce-state is not a file of this user"
    _forge(target, "script", str(make_script(case / "evil.sh", f"touch {case}/PWNED; exit 0")))
    before = _tree(case)
    proc = cli(case, *args)
    assert proc.returncode == session.EXIT_USAGE, proc.stderr
    line = error_line(proc.stderr)
    assert f"the state directory {target.name} holds files ireereduce did not write ({words}" in line, line
    assert not (case / "PWNED").exists()
    assert _tree(case) == before
    assert_clean(case)


@pytest.mark.parametrize("name", ["run.json", "start.json", "verdicts.jsonl", "start-text.mlir"])
@pytest.mark.parametrize("kind", ["fifo", "directory", "link"])
def test_a_runs_file_replaced_by_a_fifo_a_directory_or_a_link_is_refused_unread(case: Path, name: str, kind: str):
    """Audit 14 (DF1): a FIFO put in place of one of a killed run's files made the rerun
    wait for ever on reading it; a directory (S18) gave three lines that contradicted each
    other, a link (audit 13, R19) "Too many levels of symbolic links". Each is one line
    before anything runs, and what was put there stays."""
    state = _killed_run(case)
    _sweep(case)
    (case / "diary.txt").write_text("my own words\n")
    (state / name).unlink()
    if kind == "fifo":
        os.mkfifo(state / name)
    elif kind == "directory":
        (state / name).mkdir()
    else:
        (state / name).symlink_to(case / "diary.txt")
    make_script(case / "check.sh", f'touch {case}/ran; grep -q math.exp "$1"')
    before = _tree(case)
    proc = cli(case, "input.mlir", "--check", "check.sh", "-j", "1")
    assert proc.returncode == session.EXIT_USAGE, proc.stderr
    said = {"fifo": "a FIFO", "directory": "a directory", "link": "a symbolic link"}[kind]
    line = error_line(proc.stderr)
    assert f"holds files ireereduce did not write (its {name} is {said})" in line, line
    assert not (case / "ran").exists()
    assert _tree(case) == before  # the diary too
    assert_clean(case)


def test_a_link_met_while_writing_the_state_is_named():
    """A link put in the state after it was checked: the write fails (O_NOFOLLOW), and the
    line names it rather than saying "Too many levels of symbolic links"."""
    import errno

    from reducer.core.state import cannot_write

    exc = OSError(errno.ELOOP, "Too many levels of symbolic links", "out.resume/verdicts.jsonl")
    assert cannot_write("out.resume", exc) == (
        "cannot write the state directory out.resume: its verdicts.jsonl is a symbolic link ireereduce did not "
        "make, and it is not followed (remove it, --state-dir elsewhere, or --no-state)"
    )


def test_a_state_made_by_a_run_is_private_to_its_user(case: Path):
    state = _killed_run(case)
    assert state.stat().st_mode & 0o777 == 0o700
    assert (state / "ireereduce-state").read_text().splitlines()[2] == "output " + json.dumps(
        str(case.resolve() / "input.reduced.mlir")
    )


# -- the command line: one line, exit 2 ----------------------------------------------------


@pytest.mark.parametrize(
    "args, words",
    [
        (["--no-such-option"], "No such option '--no-such-option'"),
        (
            ["--executor", "slurm"],
            "Invalid value for '--executor': 'slurm' is not one of 'local', 'dask' (see ireereduce --help)",
        ),
        (["-j", "100000"], "-j must be from 1 to 1024 checks at once, not 100000"),
        (["-j", "0"], "-j must be from 1 to 1024 checks at once, not 0"),
        (["--repeat", "1000000"], "--repeat must be from 1 to 100 runs of each check, not 1000000"),
        (["--heartbeat", "nan"], "--heartbeat must be a finite number of seconds, at least 0.1, not nan"),
        (["--heartbeat", "inf"], "--heartbeat must be a finite number of seconds, at least 0.1, not inf"),
        (["--heartbeat", "-1"], "--heartbeat must be a finite number of seconds, at least 0.1, not -1.0"),
        (["--rtol", "0.5"], "--rtol goes with --mismatch, not with --check"),
        (["--function", "main"], "--function goes with --mismatch, not with --check"),
        (["--mismatch"], "--mismatch goes with --compile, not with --check"),
        (["-c", './check.sh "math'], "--check: cannot split './check.sh \"math' into a script and its arguments"),
    ],
    ids=[
        "unknown-option",
        "bad-choice",
        "jobs-huge",
        "jobs-zero",
        "repeat-huge",
        "heartbeat-nan",
        "heartbeat-inf",
        "heartbeat-negative",
        "rtol-with-check",
        "function-with-check",
        "mismatch-with-check",
        "check-unterminated-quote",
    ],
)
def test_a_bad_command_line_is_one_line_and_exit_2(case: Path, args: list[str], words: str):
    make_script(case / "check.sh", f'touch {case}/ran; grep -q math.exp "$1"')
    given = args if args[0] == "-c" else ["--check", "check.sh", *args]
    # Few open files: were -j 100000 let through, the run would start a few workers, not that many.
    proc = cli(case, "input.mlir", *given, preexec_fn=_open_files(64, 64))
    assert proc.returncode == session.EXIT_USAGE, proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr  # the line, and nothing else
    assert words in error_line(proc.stderr)
    assert not (case / "ran").exists() and not (case / "input.reduced.mlir").exists()
    assert not (case / "input.reduced.mlir.resume").exists()
    assert (case / "input.mlir").read_text() == SMALL
    assert_clean(case)


@pytest.mark.parametrize("option", ["--compile", "--against", "--run"])
@pytest.mark.parametrize(
    "program, said",
    [
        ("./nosuch.sh", "is not found; install it or give its path"),
        ("nosuch-program-xyz", "is not found; install it or give its path"),
        ("./adir", "is a directory; give the program in it"),
        ("./noexec.sh", "is not executable; run: chmod +x ./noexec.sh"),
    ],
    ids=["missing-path", "missing-on-path", "directory", "not-executable"],
)
def test_a_program_that_cannot_run_is_refused_before_any_check(case: Path, option: str, program: str, said: str):
    """Audit 12 (X9-X15): a program --against or --run names that was missing, a
    directory or not executable was found out after the original's compile (minutes, on
    a model), as "cannot run the check (./adir): Permission denied", naming no option."""
    (case / "adir").mkdir()
    (case / "noexec.sh").write_text("#!/bin/sh\nexit 0\n")
    ran = case / "ran"
    make_script(case / "ok.sh", f"touch {ran}; exit 1")
    commands = {
        "--compile": "./ok.sh {input} -o {output}",
        "--against": "./ok.sh {input} -o {output}",
        "--run": "./ok.sh",
    }
    commands[option] = f"{program} {{input}} -o {{output}}" if option != "--run" else program
    args = [a for option_, value in commands.items() for a in (option_, value)]
    proc = cli(case, "input.mlir", "--mismatch", *args)
    assert proc.returncode == session.EXIT_BAD_CHECK, proc.stderr
    assert error_line(proc.stderr) == f"ireereduce: error: {option}: the program {program!r} {said}"
    assert not ran.exists()
    assert_clean(case)


def test_a_program_found_on_path_is_judged_there_not_in_the_current_directory(
    case: Path, monkeypatch: pytest.MonkeyPatch
):
    """The review: a bare name is looked up in PATH, as the checks do; a file of that name
    in the current directory (here not executable) is not the program."""
    (case / "true").write_text("not a program\n")
    monkeypatch.chdir(case)
    settings = session.Settings(
        "input.mlir",
        compile="true {input} -o {output}",
        against="true {input} -o {output}",
        runner="true",
        mismatch=True,
    )
    assert session.make_oracle(settings, "input.mlir", 10.0).runner.argv == ("true",)  # no refusal


def test_an_iree_tool_of_the_users_on_path_is_the_one_that_runs(case: Path):
    """Audit 14 (DF2): a bare `iree-compile` in --compile ran the installed wheel's copy
    before PATH was looked at, so a bug in the user's own compiler build was judged on
    another compiler (a false exit 5). PATH's tool runs; this environment's own wrapper
    for the wheel's binary still gives way to the binary."""

    calls = case / "calls.log"
    (case / "bin").mkdir()
    make_script(
        case / "bin" / "iree-compile",
        f'echo called >> {calls}; grep -q math.exp "$1" && {{ echo "error: MYBUG in exp" >&2; exit 1; }}; exit 0',
    )
    path = f"{case / 'bin'}{os.pathsep}{os.environ['PATH']}"
    proc = subprocess.run(
        [sys.executable, "-m", "reducer.cli", "input.mlir", "-j", "1", "--compile", "iree-compile {input} -o /dev/null"]
        + ["--expect-error", "MYBUG"],
        cwd=case,
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(env(case), PATH=path),
    )
    assert proc.returncode == 0, proc.stderr
    assert "math.exp" in (case / "input.reduced.mlir").read_text()
    assert calls.read_text().count("called") >= 2  # the original's check, and the candidates'
    assert_clean(case)


def test_only_this_environments_own_pip_script_gives_way_to_the_wheels_binary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """pip's console script for iree-compile in this environment's scripts directory is the
    wheel's binary behind a Python start: the binary runs. A link put there to a build of
    the user's is theirs, and runs as found (the review)."""
    import sysconfig

    from iree.compiler.tools.binaries import find_tool

    from reducer.iree.oracles.command import resolve_tool

    scripts = tmp_path / "scripts"
    scripts.mkdir()
    monkeypatch.setattr(sysconfig, "get_path", lambda *a, **k: str(scripts))
    monkeypatch.setenv("PATH", f"{scripts}{os.pathsep}{os.environ['PATH']}")
    make_script(scripts / "iree-compile", "exec python -c 'from iree.compiler.tools.scripts import main'")
    assert resolve_tool("iree-compile") == str(find_tool("iree-compile"))
    (scripts / "iree-compile").unlink()
    make_script(tmp_path / "build-iree-compile", "exit 1")
    (scripts / "iree-compile").symlink_to(tmp_path / "build-iree-compile")
    assert resolve_tool("iree-compile") == str(scripts / "iree-compile")


@pytest.mark.parametrize(
    "given, said",
    [
        ("pat.txt,other/check.sh", "--check-files 'other/check.sh' has the name of the check script"),
        ("pat.txt,other/pat.txt", "--check-files 'other/pat.txt' has the name of 'pat.txt'"),
    ],
    ids=["the-check", "each-other"],
)
def test_check_files_of_one_name_are_refused_not_overwritten(case: Path, given: str, said: str):
    """Audit 15 (D2): files reach Dask workers by bare name beside the check: one named
    check.sh replaced the user's check (exit 0 with a module the check rejects)."""
    (case / "other").mkdir()
    for f in ("pat.txt", "other/pat.txt"):
        (case / f).write_text("math.exp\n")
    make_script(case / "other" / "check.sh", "exit 0")
    ran = case / "ran"
    make_script(case / "check.sh", f"touch {ran}; exit 0")
    proc = cli(case, "input.mlir", "--check", "check.sh", "--executor", "dask", "--check-files", given)
    assert proc.returncode == session.EXIT_USAGE, proc.stderr
    assert said in error_line(proc.stderr)
    assert not ran.exists()
    assert_clean(case)


def test_a_tool_found_through_a_relative_or_shim_path_entry_is_the_one_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """Audit 15 (D1, D4): PATH=bin:... gave checks (run in a temp dir) a relative path
    that did not exist there; a pyenv-like shim of the user's was swapped for the wheel."""
    from reducer.iree.oracles.command import resolve_tool

    (tmp_path / "bin").mkdir()
    make_script(tmp_path / "bin" / "iree-compile", 'exec "$HOME/.pyenv/libexec/pyenv" exec iree-compile "$@"')
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", f"bin{os.pathsep}{os.environ['PATH']}")
    assert resolve_tool("iree-compile") == str(tmp_path / "bin" / "iree-compile")


def test_a_check_script_that_is_a_directory_is_refused(case: Path):
    """The check script and the commands' programs share one reason (scripts.unrunnable)."""
    (case / "adir").mkdir()
    proc = cli(case, "input.mlir", "--check", "./adir")
    assert proc.returncode == session.EXIT_BAD_CHECK
    assert error_line(proc.stderr) == "ireereduce: error: check script './adir' is a directory; give the program in it"
    assert_clean(case)


@pytest.mark.parametrize(
    "given, said",
    [
        ("nosuch.dat", "'nosuch.dat' does not exist"),
        ("adir", "'adir' is a directory; give the files in it"),
        ("dangling.dat", "'dangling.dat' is a symlink to 'gone.dat', which does not exist"),
        ("fifo", "'fifo' is not a regular file; give a file the check reads"),  # the review: shipping it hung
        ("/dev/zero", "'/dev/zero' is not a regular file; give a file the check reads"),
    ],
    ids=["missing", "directory", "dangling", "fifo", "device"],
)
def test_a_check_file_that_cannot_be_shipped_is_named_before_dask_starts(case: Path, given: str, said: str):
    """Audit 13 (E05, E06): a --check-files entry that was missing or a directory was
    found by the original's check as "cannot run the check (nosuch.dat)", naming no option."""
    (case / "adir").mkdir()
    (case / "dangling.dat").symlink_to("gone.dat")
    os.mkfifo(case / "fifo")
    ran = case / "ran"
    make_script(case / "check.sh", f"touch {ran}; exit 0")
    proc = cli(case, "input.mlir", "--check", "check.sh", "--executor", "dask", "--check-files", given)
    assert proc.returncode == session.EXIT_BAD_CHECK, proc.stderr
    assert error_line(proc.stderr) == f"ireereduce: error: --check-files {said}"
    assert not ran.exists()
    assert_clean(case)


@pytest.mark.parametrize(
    "args, words",
    [
        (["--backends", "llvm-cpu,vmvx", "--rtol", "-1"], "--rtol must be a tolerance of 0 or more, not -1.0"),
        (["--backends", "llvm-cpu,vmvx", "--atol", "-0.5"], "--atol must be a tolerance of 0 or more, not -0.5"),
        (
            ["--backends", "foo,bar"],
            "--backends: unknown backend foo, bar; the local backends are llvm-cpu, vmvx",
        ),
        (
            ["--backends", "vmvx,vmvx"],
            "--backends: vmvx,vmvx names vmvx twice; give two different backends, e.g. llvm-cpu,vmvx",
        ),
        (
            ["--compile", "iree-compile {input} -o /dev/null", "--test-arg", "x"],
            "--test-arg goes with --check, not with --compile",
        ),
        (["--compile", "iree-compile '{input}"], '--compile: cannot split the command "iree-compile \'{input}"'),
        (
            ["--backends", "llvm-cpu,vmvx", "--run", "iree-run-module 'x"],
            '--run: cannot split the command "iree-run-module \'x"',
        ),
        (
            ["--compile", "iree-compile {input} -o /dev/null", "--from-phase-dump", "--no-phases"],
            "--from-phase-dump starts from the phase search's dump: drop --no-phases",
        ),
    ],
    ids=[
        "rtol-negative",
        "atol-negative",
        "backends-unknown",
        "backends-twice",
        "test-arg-with-compile",
        "compile-quote",
        "run-quote",
        "phase-dump-without-phases",
    ],
)
def test_a_built_in_oracles_bad_options_are_one_line_and_exit_2(case: Path, args: list[str], words: str):
    """Refused before any compile: nothing runs, nothing is written."""
    proc = cli(case, "input.mlir", "-j", "1", *args)
    assert proc.returncode == session.EXIT_USAGE, proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert words in error_line(proc.stderr)
    assert not (case / "input.reduced.mlir").exists() and not (case / "input.reduced.mlir.resume").exists()
    assert_clean(case)


def _stdin(case: Path, data: bytes, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "reducer.cli", "-", *args],
        input=data,
        cwd=case,
        capture_output=True,
        env=env(case),
        timeout=120,
    )


def test_an_empty_stdin_as_the_input_is_one_line(case: Path):
    make_script(case / "check.sh", f'touch {case}/ran; grep -q math.exp "$1"')
    run = _stdin(case, b"", "--check", "check.sh", "-o", "out.mlir")
    assert run.returncode == session.EXIT_BAD_INPUT, run.stderr
    assert (
        run.stderr.decode().strip()
        == "ireereduce: error: the input on stdin (-) is empty; pipe the program to reduce into it"
    )
    assert not (case / "ran").exists() and not (case / "out.mlir").exists()
    assert_clean(case)


def test_a_one_line_program_on_stdin_is_a_program_not_a_file_name(case: Path):
    make_script(case / "check.sh", 'grep -q keep "$1"')
    run = _stdin(case, b"drop keep drop", "--check", "check.sh", "-o", "out.mlir", "-j", "1")
    assert run.returncode == 0, run.stderr
    assert (case / "out.mlir").read_text().strip() == "keep"
    assert_clean(case)


def test_a_huge_timeout_is_logged_short(case: Path):
    """Audit 7 (W11): --timeout 1e308 printed a 309-digit number of seconds (refused now,
    audit 22 D5: past what a wait holds); the longest allowed is logged short."""
    make_script(case / "check.sh", 'grep -q math.exp "$1"')
    proc = cli(case, "input.mlir", "--check", "./check.sh", "-j", "1", "--timeout", "1e8")
    assert proc.returncode == session.EXIT_OK, proc.stderr
    assert "check timeout 1e+08 s" in proc.stderr and "100000000" not in proc.stderr
    assert_clean(case)
