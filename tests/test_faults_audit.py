"""Hostile runs, part 3: what the second independent audit found.

Hard links to the user's files, streams that cannot be written (a full disk, a reader
that went away), a working directory that was removed, and an output that already
holds something the check rejects. Each test asserts the exit code, the message, the
user's files as they were, and no temp dir or process left."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import make_script, needs_iree
from test_faults import SMALL, assert_clean, cli, env, error_line

from reducer import session

CHECK = 'grep -q math.exp "$1"'


@pytest.fixture
def case(tmp_path: Path) -> Path:
    return make_case(tmp_path)


def make_case(tmp_path: Path) -> Path:
    """A small input, a check that greps it, and a TMPDIR of the run's own."""
    (tmp_path / "input.mlir").write_text(SMALL)
    (tmp_path / "tmp").mkdir()
    make_script(tmp_path / "check.sh", CHECK)
    return tmp_path


# -- a hard link is the same file under another name -----------------------------------
@pytest.mark.parametrize("flag", ["--log-file", "--progress-json", "-o", "--report", "--stats-json"])
@pytest.mark.parametrize("victim", ["input.mlir", "check.sh"])
def test_a_hard_link_to_the_input_or_the_check_is_refused(case: Path, flag: str, victim: str):
    """`--log-file run.log`, run.log a hard link to the input, wrote the log into the
    input (exit 11); `-o` on one was accepted and replaced the link."""
    before = (case / victim).read_bytes()
    os.link(case / victim, case / "other.name")
    proc = cli(case, "input.mlir", "--check", "./check.sh", flag, "other.name")
    assert proc.returncode == session.EXIT_USAGE, proc.stderr
    line = error_line(proc.stderr)
    assert f"{flag} other.name is" in line and "(a hard link to it)" in line, line
    assert (case / victim).read_bytes() == before
    assert os.path.samefile(case / victim, case / "other.name")
    assert not (case / "input.reduced.mlir").exists()
    assert_clean(case)


def test_two_reports_on_hard_links_of_one_file_are_refused(case: Path):
    (case / "r.json").write_text("")
    os.link(case / "r.json", case / "r2.json")
    proc = cli(case, "input.mlir", "--check", "./check.sh", "--report", "r.json", "--stats-json", "r2.json")
    assert proc.returncode == session.EXIT_USAGE, proc.stderr
    assert "--report r.json and --stats-json r2.json are one file" in error_line(proc.stderr)
    assert_clean(case)


def test_two_reports_on_a_file_and_a_link_to_it_name_both(case: Path):
    """Audit 9 (P21): the line named the link alone, as if both flags had given it."""
    (case / "link.md").symlink_to("r.md")
    proc = cli(case, "input.mlir", "--check", "./check.sh", "--report", "r.md", "--report-json", "link.md")
    assert proc.returncode == session.EXIT_USAGE, proc.stderr
    assert "--report r.md and --report-json link.md are one file" in error_line(proc.stderr)
    assert not (case / "r.md").exists() and (case / "link.md").is_symlink()
    assert_clean(case)


# -- side streams that cannot be written -------------------------------------------------
@pytest.mark.parametrize("flag", ["--progress-json", "--log-file"])
def test_a_side_stream_on_a_full_disk_ends_itself_not_the_run(case: Path, flag: str):
    """--progress-json /dev/full was a traceback (exit 1, no output, the state dir
    left); --log-file /dev/full lost every line without a word."""
    proc = cli(case, "input.mlir", "--check", "./check.sh", flag, "/dev/full")
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr
    warned = [ln for ln in proc.stderr.splitlines() if "cannot write" in ln]
    assert len(warned) == 1, proc.stderr
    assert f"cannot write {flag} /dev/full: No space left on device" in warned[0]
    assert "the run goes on" in warned[0]
    assert "negf" not in (case / "input.reduced.mlir").read_text()
    assert (case / "input.mlir").read_text() == SMALL
    assert not list(case.glob("*.resume"))
    assert_clean(case)


def test_progress_into_a_pipe_whose_reader_went_away_ends_the_events(case: Path):
    """`--progress-json - | head -1` ended in "internal error: BrokenPipeError"."""
    run = subprocess.Popen(
        [sys.executable, "-m", "reducer.cli", "input.mlir", "--check", "./check.sh", "--progress-json", "-"],
        cwd=case,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env(case),
    )
    assert run.stdout is not None
    first = run.stdout.readline()  # what `head -1` reads, then it goes
    run.stdout.close()
    _, stderr = run.communicate(timeout=120)
    assert '"event": "start"' in first
    assert run.returncode == 0, stderr
    assert "Traceback" not in stderr and "internal error" not in stderr, stderr
    assert "cannot write --progress-json -: its reader went away" in stderr, stderr
    assert "negf" not in (case / "input.reduced.mlir").read_text()
    assert_clean(case)


# -- a working directory that was removed ------------------------------------------------
def test_a_working_directory_that_was_removed_is_one_line(case: Path):
    gone = case / "gone"
    gone.mkdir()
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "import os, sys; os.rmdir(sys.argv.pop(1)); import reducer.cli; reducer.cli.main()",
            str(gone),
        ]
        + ["../input.mlir", "--check", "../check.sh"],
        cwd=gone,
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(env(case), PYTHONPATH=os.pathsep.join(sys.path)),
    )
    assert proc.returncode == session.EXIT_USAGE, proc.stderr
    assert "the current directory was removed" in error_line(proc.stderr)
    assert (case / "input.mlir").read_text() == SMALL
    assert_clean(case)


# -- an output that already holds something the check rejects --------------------------
OTHER_BUG = "func.func @g(%a: f32) -> f32 {\n  return %a : f32\n}\n"


@pytest.mark.parametrize("held", [OTHER_BUG, "my notes\n"])
def test_an_output_holding_what_the_check_rejects_is_kept(case: Path, held: str):
    """An earlier, smaller result for another bug in the default output was replaced by
    a larger program, with only a warning."""
    (case / "input.reduced.mlir").write_text(held)
    proc = cli(case, "input.mlir", "--check", "./check.sh")
    assert proc.returncode == session.EXIT_USAGE, proc.stderr
    line = error_line(proc.stderr)
    assert "input.reduced.mlir already holds a program the check rejects" in line, line
    assert "--fresh to replace it" in line
    assert (case / "input.reduced.mlir").read_text() == held
    assert not list(case.glob("*.resume"))
    assert_clean(case)


def test_an_output_holding_a_larger_interesting_program_of_the_users_is_kept(case: Path):
    """Audit 9 (Z08): a program of the user's at -o that the check accepts, no smaller
    than the input, was replaced by the result without a word. ireereduce never writes
    such a file; a copy of the input itself has nothing to lose."""
    larger = SMALL.replace("  return %2", "  %3 = arith.negf %2 : f32\n  return %3").replace(
        "-> f32 {", "-> f32 {\n  // mine"
    )
    (case / "out.mlir").write_text(larger)
    proc = cli(case, "input.mlir", "--check", "./check.sh", "-o", "out.mlir")
    assert proc.returncode == session.EXIT_USAGE, proc.stderr
    line = error_line(proc.stderr)
    assert "out.mlir already holds an interesting program no smaller than the input" in line, line
    assert (case / "out.mlir").read_text() == larger
    assert not list(case.glob("*.resume"))
    assert_clean(case)
    (case / "copy.mlir").write_text(SMALL)
    proc = cli(case, "input.mlir", "--check", "./check.sh", "-o", "copy.mlir")
    assert proc.returncode == 0, proc.stderr
    assert "negf" not in (case / "copy.mlir").read_text()


def test_fresh_replaces_an_output_the_check_rejects(case: Path):
    (case / "input.reduced.mlir").write_text(OTHER_BUG)
    proc = cli(case, "input.mlir", "--check", "./check.sh", "--fresh")
    assert proc.returncode == 0, proc.stderr
    assert "math.exp" in (case / "input.reduced.mlir").read_text()
    assert_clean(case)


def test_an_empty_output_file_is_written(case: Path):
    """A bot's `-o "$(mktemp)"`: an empty file has nothing to lose."""
    (case / "out.mlir").write_text("")
    proc = cli(case, "input.mlir", "--check", "./check.sh", "-o", "out.mlir")
    assert proc.returncode == 0, proc.stderr
    assert "negf" not in (case / "out.mlir").read_text()
    assert_clean(case)


# -- a built-in oracle whose command fails whatever the program ---------------------------
COMPILE = "iree-compile {input} --iree-hal-target-device=local --iree-hal-local-target-device-backends=llvm-cpu"


@pytest.mark.e2e
@needs_iree
@pytest.mark.parametrize(
    "bad, said",
    [("--bogus-flag", "Unknown command line argument '--bogus-flag'"), ("--iree-hal-target-device=nosuch", "nosuch")],
)
def test_a_compile_command_that_fails_on_an_empty_module_is_refused(case: Path, bad: str, said: str):
    """A --compile with a flag iree-compile does not know "reduced" the program to an
    empty module and exited 0 with only the trivial-result warning."""
    proc = cli(case, "input.mlir", "--compile", f"{COMPILE} {bad} -o {{output}}")
    assert proc.returncode == session.EXIT_NOT_INTERESTING, proc.stderr
    line = error_line(proc.stderr)
    assert "the command fails on an empty module too" in line and said in line, line
    assert "(no error message)" not in line, line  # audit 6 (c05): then it quoted the error it said was not there
    assert not (case / "input.reduced.mlir").exists()
    assert (case / "input.mlir").read_text() == SMALL
    assert_clean(case)


@pytest.mark.e2e
@needs_iree
def test_a_compile_that_succeeds_gets_no_hint_for_check_scripts(case: Path):
    proc = cli(case, "input.mlir", "--compile", f"{COMPILE} -o {{output}}")
    assert proc.returncode == session.EXIT_NOT_INTERESTING, proc.stderr
    line = error_line(proc.stderr)
    assert "the command succeeds on it" in line and "mlir-reduce" not in line, line
    assert_clean(case)


@pytest.mark.parametrize("flag", ["--isolate-dispatch", "--from-phase-dump"])
def test_a_workflow_without_its_compile_oracle_is_refused_before_any_check(case: Path, flag: str):
    """--isolate-dispatch with a check script was refused only after the original's two
    checks, and as "not interesting" (exit 5) when the check failed it."""
    make_script(case / "check.sh", f"touch {case}/ran; exit 1")
    proc = cli(case, "input.mlir", "--check", "./check.sh", flag)
    assert proc.returncode == session.EXIT_USAGE, proc.stderr
    assert "need a --compile failure oracle" in error_line(proc.stderr)
    assert not (case / "ran").exists()
    assert_clean(case)


# -- options that leave nothing to do ----------------------------------------------------
@pytest.mark.parametrize(
    "args, said",
    [
        (["--strategies", "drop-ops", "--skip-strategies", "drop-ops"], "--skip-strategies leaves no strategy"),
        (["--no-state", "--state-dir", "sd"], "--no-state and --state-dir contradict each other"),
    ],
    ids=["every-strategy-skipped", "no-state-with-state-dir"],
)
def test_options_that_contradict_each_other_are_refused(case: Path, args: list[str], said: str):
    """Each was accepted: the first ran no strategy and exited 0 with the input as output."""
    proc = cli(case, "input.mlir", "--check", "./check.sh", *args)
    assert proc.returncode == session.EXIT_USAGE, proc.stderr
    assert said in error_line(proc.stderr)
    assert not (case / "input.reduced.mlir").exists() and not (case / "sd").exists()
    assert not list(case.glob("*.resume"))
    assert_clean(case)


def test_skipping_every_strategy_by_name_is_refused(case: Path):
    from reducer.session.wiring import registry

    everything = ",".join(registry())
    proc = cli(case, "input.mlir", "--check", "./check.sh", "--skip-strategies", everything)
    assert proc.returncode == session.EXIT_USAGE, proc.stderr
    assert "--skip-strategies leaves no strategy" in error_line(proc.stderr)
    assert_clean(case)


# -- a full disk as the state directory is made -----------------------------------------
def test_a_state_marker_cut_short_by_a_full_disk_leaves_no_directory(tmp_path: Path, monkeypatch):
    """On a full disk the run left OUTPUT.resume/ with an empty marker; the rerun, once
    there was space, refused the run's own directory as someone else's (exit 2)."""
    import errno

    from reducer.core import state

    class Full:
        def __init__(self, path: str, mode: str) -> None:
            self.file = open(path, mode)  # noqa: SIM115 - closed in __exit__

        def __enter__(self) -> Full:
            return self

        def __exit__(self, *exc: object) -> None:
            self.file.close()

        def write(self, _text: str) -> int:
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(state, "open", Full, raising=False)
    with pytest.raises(OSError):
        state.RunState(str(tmp_path / "s")).create({"input": "x"}, None)
    assert not (tmp_path / "s").exists()
    monkeypatch.undo()
    (tmp_path / "given").mkdir()  # a directory given empty stays, without a marker
    monkeypatch.setattr(state, "open", Full, raising=False)
    with pytest.raises(OSError):
        state.RunState(str(tmp_path / "given")).create({"input": "x"}, None)
    assert (tmp_path / "given").is_dir() and list((tmp_path / "given").iterdir()) == []


def test_a_start_cut_short_by_a_full_disk_leaves_no_state_directory(tmp_path: Path, monkeypatch):
    """Audit 8: with room for the marker but not for the start, OUTPUT.resume/ stayed
    with a marker and half a start, which no rerun resumes from."""
    import errno

    from reducer.core import state

    def full(self: state.RunState, name: str, _data: object) -> None:
        with open(os.path.join(self.path, name + ".tmp"), "w") as f:
            f.write("{")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(state.RunState, "_write_json", full)
    with pytest.raises(OSError):
        state.RunState(str(tmp_path / "s")).create({"input": "x"}, None)
    assert not (tmp_path / "s").exists()
    (tmp_path / "given").mkdir()  # a directory given empty is left empty
    with pytest.raises(OSError):
        state.RunState(str(tmp_path / "given")).create({"input": "x"}, None)
    assert (tmp_path / "given").is_dir() and list((tmp_path / "given").iterdir()) == []


# -- inputs that are not regular files ----------------------------------------------------
def test_a_device_as_the_input_is_one_line(case: Path):
    """/dev/zero as the input was read forever: about 1 GB of memory a second, no word,
    and --max-time did not stop it."""
    proc = cli(case, "/dev/zero", "--check", "./check.sh", "-o", "out.mlir")
    assert proc.returncode == session.EXIT_BAD_INPUT, proc.stderr
    assert "input '/dev/zero' is a device, not a file" in error_line(proc.stderr)
    assert not (case / "out.mlir").exists()
    assert_clean(case)


def test_a_pipe_as_the_input_is_read_once_whole(case: Path):
    """`ireereduce <(zcat model.mlir.gz)`: the input was opened twice (for the bytecode
    magic, then for the program), and a pipe gives its bytes only once."""
    import threading

    fifo = case / "model.fifo"
    os.mkfifo(fifo)

    def feed() -> None:
        with open(fifo, "w") as f:
            f.write(SMALL)

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    proc = cli(case, str(fifo), "--check", "./check.sh", "-o", "out.mlir")
    writer.join(timeout=5)
    assert proc.returncode == 0, proc.stderr
    out = (case / "out.mlir").read_text()
    assert "math.exp" in out and "negf" not in out
    assert_clean(case)


def test_a_command_failing_otherwise_on_an_empty_module_quotes_that_failure(case: Path):
    """Audit 12 (I8): with --allow-slippage an empty module failing another way is enough
    to refuse the command; the line quoted the original's error, not the empty module's."""
    make_script(
        case / "comp.sh",
        'if grep -q math.exp "$1"; then echo "error: the original error" >&2; '
        'else echo "error: outer module does not contain a vm.module op" >&2; fi; exit 1',
    )
    proc = cli(case, "input.mlir", "--compile", "./comp.sh {input}", "--allow-slippage")
    assert proc.returncode == session.EXIT_NOT_INTERESTING, proc.stderr
    line = error_line(proc.stderr)
    assert "the command fails on an empty module too" in line and "does not contain a vm.module op" in line, line
    assert "the original error" not in line, line
    assert_clean(case)


def test_a_rerun_takes_an_output_of_shrunk_tensors_as_its_start(case: Path):
    """Audit 13 (D1): shrink-tensors made tensor<4xf32> tensor<1xf32>: the same ops and
    bytes, a smaller volume, so the run wrote it. A rerun without the state compared the
    output with the input by bytes alone and refused it as "no smaller than the input (a
    file of yours?)", though ireereduce wrote it."""
    program = """module {
  func.func @main(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> tensor<4xf32> {
    %0 = arith.addf %arg0, %arg1 : tensor<4xf32>
    %1 = math.atan2 %0, %arg1 : tensor<4xf32>
    return %1 : tensor<4xf32>
  }
}
"""  # as ireereduce prints it: the run's start is the input re-printed
    (case / "in.mlir").write_text(program)
    make_script(case / "atan.sh", 'grep -q math.atan2 "$1"')
    first = cli(case, "in.mlir", "--check", "./atan.sh", "-j", "1", "--strategies", "shrink-tensors")
    assert first.returncode == 0, first.stderr
    shrunk = (case / "in.reduced.mlir").read_text()
    assert "tensor<1xf32>" in shrunk and len(shrunk) == len(program)  # the same bytes, a smaller volume
    again = cli(case, "in.mlir", "--check", "./atan.sh", "-j", "1")
    assert again.returncode == 0, again.stderr
    assert "started from the smaller interesting program already in in.reduced.mlir" in again.stderr
    assert "math.atan2" in (case / "in.reduced.mlir").read_text()
    assert (case / "in.mlir").read_text() == program
    assert_clean(case)
    # The input as the user wrote it: the printed output is longer as a file (`module {`,
    # `%arg0`), smaller in the engine's order. A --no-state run cut short, then the rerun.
    raw = program.replace("module {\n", "").replace("\n}\n", "\n").replace("%arg0", "%a").replace("%arg1", "%b")
    (case / "raw.mlir").write_text(raw)
    cut = cli(case, "raw.mlir", "--check", "./atan.sh", "-j", "1", "--no-state", "--max-checks", "3")
    assert cut.returncode == session.EXIT_STOPPED, cut.stderr
    assert len((case / "raw.reduced.mlir").read_text()) > len(raw)
    again = cli(case, "raw.mlir", "--check", "./atan.sh", "-j", "1", "--no-state")
    assert again.returncode == 0, again.stderr
    assert "started from the smaller interesting program already in raw.reduced.mlir" in again.stderr
    assert_clean(case)
