"""The eighteenth hostile run's defects and weak points: the log file opened before the
paths of what the run reads were checked, --localize-only writing past every protection,
`--inputs @a.npy`, informational options on a stdout that takes nothing, the run's own
paths inside a report's inputs folder, nohup, and flags that cancel each other."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import make_script, needs_iree
from test_faults import assert_clean, cli, error_line, wait_for
from test_faults_audit import make_case

from reducer import session

#: a + b, then exp: the demoted side overflows f16 where a + b passes about 11.
MODEL = """func.func @main(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> tensor<4xf32> {
  %0 = arith.addf %arg0, %arg1 : tensor<4xf32>
  %1 = math.exp %0 : tensor<4xf32>
  %2 = arith.mulf %1, %arg0 : tensor<4xf32>
  return %2 : tensor<4xf32>
}
"""
C = "iree-compile {input} --iree-hal-target-device=local --iree-hal-local-target-device-backends=llvm-cpu -o {output}"
MISMATCH = ["--mismatch", "--compile", C, "--against", C + " --iree-input-demote-f32-to-f16"]
MISMATCH += ["--rtol", "1e-6", "--atol", "1e-7"]


def mismatch_case(tmp_path: Path) -> Path:
    """make_case's, with MODEL as m.mlir: for the mismatch's MISMATCH arguments."""
    made = make_case(tmp_path)
    (made / "m.mlir").write_text(MODEL)
    return made


def wrapped(case: Path, first: str) -> list[str]:
    """MISMATCH with iree-compile behind a wrapper in case that runs the shell lines
    `first` before it (its arguments are "$@"; a compile runs in a folder of its own)."""
    make_script(case / "ic", f'{first}\nexec {shutil.which("iree-compile")} "$@"')
    return [a.replace("iree-compile", str(case / "ic")) for a in MISMATCH]


@pytest.fixture
def case(tmp_path: Path) -> Path:
    made = make_case(tmp_path)
    (made / "m.mlir").write_text(MODEL)
    np.save(made / "a.npy", np.array([0.5, 1.5, -2, 3], dtype=np.float32))
    np.save(made / "b.npy", np.array([0.25, -1, 2, 0.75], dtype=np.float32))
    return made


def _run(case: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The command as a user runs it, with iree-compile found through the wheel's package
    (not the tests' PATH entry for its binaries): finding it imports the MLIR bindings,
    whose start-up logs, and did so into the log file before the paths were refused."""
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if "_mlir_libs" not in p)
    env = dict(os.environ, TMPDIR=str(case / "tmp"), PATH=path)
    argv = [sys.executable, "-m", "reducer.cli", *args]
    return subprocess.run(argv, cwd=case, capture_output=True, text=True, timeout=120, env=env)


def _kept(case: Path, *names: str) -> dict[str, bytes]:
    return {n: (case / n).read_bytes() for n in names}


@pytest.mark.parametrize("spelling", ["a.npy,b.npy", "@a.npy,@b.npy", "--input=@a.npy"])
def test_a_log_file_naming_an_inputs_array_is_refused_before_it_is_opened(case: Path, spelling: str):
    """D1: refused with exit 2, but the log had already been appended to the array."""
    before = _kept(case, "a.npy")
    done = _run(case, "m.mlir", *MISMATCH, "--inputs", spelling, "--log-file", "a.npy", "-o", "o.mlir")
    assert done.returncode == session.EXIT_USAGE, done.stderr
    assert "an array --inputs gives" in error_line(done.stderr)
    assert _kept(case, "a.npy") == before
    assert_clean(case)


@pytest.mark.parametrize("option", ["--compile", "--against", "--run"])
def test_a_log_file_naming_a_program_of_a_mismatch_is_refused_before_it_is_opened(case: Path, option: str):
    """D1: a wrapper script of the user's got the log appended, and ran it as commands."""
    wrapper = make_script(case / "wrap.sh", 'exec "$@"')
    before = _kept(case, "wrap.sh")
    given = {"--compile": C, "--against": C + " --iree-input-demote-f32-to-f16", "--run": "iree-run-module"}
    given[option] = "./wrap.sh " + given[option]
    args = ["--mismatch", *(x for o, v in given.items() for x in (o, v))]
    done = _run(case, "m.mlir", *args, "--log-file", str(wrapper), "-o", "o.mlir")
    assert done.returncode == session.EXIT_USAGE, done.stderr
    assert f"the program of {option}" in error_line(done.stderr)
    assert _kept(case, "wrap.sh") == before
    assert_clean(case)


def test_localize_only_refuses_inputs_read_from_its_own_inputs_folder(case: Path):
    """D2 (a): the arrays the run reads, in OUTPUT.inputs/, were swapped by its writes."""
    folder = case / "cut.mlir.inputs"
    folder.mkdir()
    for name in ("input0.npy", "input1.npy"):
        os.replace(case / ("a.npy" if name == "input0.npy" else "b.npy"), folder / name)
    before = _kept(case, "cut.mlir.inputs/input0.npy", "cut.mlir.inputs/input1.npy")
    given = "cut.mlir.inputs/input1.npy,cut.mlir.inputs/input0.npy"
    done = cli(case, "m.mlir", *MISMATCH, "--inputs", given, "-o", "cut.mlir", "--localize-only")
    assert done.returncode == session.EXIT_USAGE, done.stderr
    assert "which this run reads" in error_line(done.stderr)
    assert _kept(case, *before) == before and not (case / "cut.mlir").exists()


@pytest.mark.parametrize("victim", ["a.npy", "wrap.sh"])
def test_localize_only_never_writes_its_cut_over_what_the_run_reads(case: Path, victim: str):
    """D2 (b, c): `-o a.npy --fresh` replaced the array, `-o wrap.sh --fresh` the --against
    program, with the cut program."""
    make_script(case / "wrap.sh", 'exec "$@"')
    against = "./wrap.sh " + C + " --iree-input-demote-f32-to-f16"
    before = _kept(case, victim)
    args = ["--mismatch", "--compile", C, "--against", against, "--inputs", "a.npy,b.npy"]
    done = cli(case, "m.mlir", *args, "-o", victim, "--fresh", "--localize-only")
    assert done.returncode == session.EXIT_USAGE, done.stderr
    assert "ireereduce never overwrites it" in error_line(done.stderr)
    assert _kept(case, victim) == before


@pytest.mark.parametrize("log", ["a.npy", "cut.mlir.inputs/log.txt"])
def test_localize_only_refuses_a_log_file_where_it_would_harm(case: Path, log: str):
    """D2 (e): `--log-file a.npy` took the whole log into an --inputs array, no refusal;
    a log in OUTPUT.inputs would sit among the cut program's inputs."""
    (case / "cut.mlir.inputs").mkdir()
    before = _kept(case, "a.npy")
    args = ["--inputs", "a.npy,b.npy", "-o", "cut.mlir", "--localize-only", "--log-file", log]
    done = _run(case, "m.mlir", *MISMATCH, *args)
    assert done.returncode == session.EXIT_USAGE, done.stderr
    assert _kept(case, "a.npy") == before and list((case / "cut.mlir.inputs").iterdir()) == []


@pytest.mark.e2e
@needs_iree
def test_localize_only_keeps_inputs_it_did_not_write_with_them(case: Path):
    """W1: a file named input0.npy in OUTPUT.inputs, with no OUTPUT beside it, was
    replaced without --fresh."""
    folder = case / "cut.mlir.inputs"
    folder.mkdir()
    np.save(folder / "input0.npy", np.full((2, 3), 7))
    before = _kept(case, "cut.mlir.inputs/input0.npy")
    done = cli(case, "m.mlir", *MISMATCH, "-o", "cut.mlir", "--localize-only")
    assert done.returncode == session.EXIT_USAGE, done.stderr
    assert "--fresh to replace them" in error_line(done.stderr)
    assert _kept(case, *before) == before


@pytest.mark.e2e
@needs_iree
@pytest.mark.parametrize("flag", ["-o", "--report"])
def test_an_array_given_as_at_file_is_protected(case: Path, flag: str):
    """D3: `--inputs @a.npy` (iree-run-module's spelling) was no file to the protection:
    `-o a.npy --fresh` replaced it with MLIR, and a report shipped its own arrays over the
    one it was read from."""
    if flag == "-o":
        before = _kept(case, "a.npy")
        args = ["-o", "a.npy", "--fresh"]
        given = "@a.npy,@b.npy"
    else:
        (case / "r.md.inputs").mkdir()
        os.replace(case / "a.npy", case / "r.md.inputs" / "input0.npy")
        before = _kept(case, "r.md.inputs/input0.npy")
        args = ["--report", "r.md", "-o", "o.mlir"]
        given = "@r.md.inputs/input0.npy,@b.npy"
    done = cli(case, "m.mlir", *MISMATCH, "--no-localize", "--inputs", given, *args)
    assert done.returncode == session.EXIT_USAGE, done.stderr
    assert _kept(case, *before) == before
    assert_clean(case)


@pytest.mark.parametrize("option", ["--help", "--version", "--list-strategies", "--print-schema=report"])
def test_an_option_that_prints_on_a_full_stdout_is_one_line(case: Path, option: str):
    """D4: a 36-line traceback and exit 1 for `--help > /dev/full`."""
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "reducer.cli", option], stdout=full, stderr=subprocess.PIPE, text=True, cwd=case
        )
    assert done.returncode == session.EXIT_CANNOT_WRITE, done.stderr
    assert done.stderr.splitlines() == ["ireereduce: error: cannot write to standard output (No space left on device)"]


def test_an_option_that_prints_into_a_closed_pipe_exits_0(case: Path):
    """D4: `--list-strategies | head -c 10` exited 1 in silence; the reader had what it
    wanted. The pipe's reader is closed before the command starts: its first write fails."""
    r, w = os.pipe()
    os.close(r)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "reducer.cli", "--list-strategies"], stdout=w, stderr=subprocess.PIPE, timeout=60
        )
    finally:
        os.close(w)
    assert done.returncode == 0 and done.stderr == b"", done.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["-o", "r.md.inputs/input0.npy"],
        ["-o", "o.mlir", "--stats-json", "r.md.inputs/b-input0.npy"],
        ["-o", "o.mlir", "--log-file", "r.md.inputs/input0.npy"],
        ["-o", "o.mlir", "--state-dir", "r.md.inputs"],
        ["-o", "o.mlir", "--state-dir", "r.md.inputs/s"],
    ],
    ids=["output", "stats", "log", "state-dir", "state-dir-inside"],
)
def test_nothing_of_the_runs_goes_where_the_reports_inputs_go(case: Path, args: list[str]):
    """D5 and W4: -o r.md.inputs/input0.npy ended holding the report's array (exit 0);
    --stats-json there replaced an array the report's commands read."""
    (case / "r.md.inputs").mkdir()
    done = cli(case, "input.mlir", "--check", "./check.sh", "--report", "r.md", *args)
    assert done.returncode == session.EXIT_USAGE, done.stderr
    assert "where the report's inputs go" in error_line(done.stderr)
    assert list((case / "r.md.inputs").iterdir()) == []
    assert_clean(case)


def test_nohup_keeps_a_hangup_ignored(case: Path):
    """W8: `nohup ireereduce ...` stopped on SIGHUP (exit 130): the run replaced the
    SIG_IGN it inherited."""
    make_script(case / "slow.sh", 'sleep 1; grep -q math.exp "$1"')  # the run goes on for seconds after
    argv = [sys.executable, "-m", "reducer.cli", "input.mlir", "-c", "./slow.sh", "-o", "o.mlir", "-j", "1"]
    proc = subprocess.Popen(
        argv,
        cwd=case,
        env=dict(os.environ, TMPDIR=str(case / "tmp")),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN),  # as nohup does
    )
    wait_for(lambda: (case / "o.mlir").exists())  # past start-up: the run's own handlers are in
    proc.send_signal(signal.SIGHUP)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == session.EXIT_OK, err
    assert "interrupted" not in err
    assert_clean(case)


@pytest.mark.e2e
@needs_iree
def test_resume_with_other_arrays_names_them_not_their_bytes(case: Path):
    """W9: the refusal quoted the arrays' bytes (b"\\x93NUMPY...")."""
    from reducer.session.triage import differs
    from reducer.session.wiring import make_oracle

    settings = session.Settings(
        str(case / "m.mlir"), compile=C, against=C, mismatch=True, inputs=(str(case / "a.npy"), str(case / "b.npy"))
    )
    was = make_oracle(settings, "m.mlir", 10.0)
    np.save(case / "b.npy", np.array([9, 9, 9, 9], dtype=np.float32))
    said = differs(was, make_oracle(settings, "m.mlir", 10.0))
    assert said == "--inputs gives other arrays than the recorded run's (array 2 of 2 differs)", said


def test_flags_that_cancel_each_other_are_refused(case: Path):
    """W12: --backends silently replaced a given --against; --localize-only --no-localize
    ran the localisation."""
    done = cli(case, "m.mlir", "--backends", "llvm-cpu,vmvx", "--against", C, "-o", "o.mlir")
    assert done.returncode == session.EXIT_USAGE, done.stderr
    assert "--backends makes both commands" in error_line(done.stderr)
    done = cli(case, "m.mlir", *MISMATCH, "--localize-only", "--no-localize", "-o", "o.mlir")
    assert done.returncode == session.EXIT_USAGE, done.stderr
    assert "opposite things" in error_line(done.stderr)
    assert_clean(case)


@pytest.mark.parametrize("flag", ["--log-file", "-o"])
def test_another_runs_state_directory_is_no_place_for_a_path(case: Path, flag: str):
    """W15: a second run's --log-file went into a killed run's journal, and its -o replaced
    that run's recorded start program, which the first run's resume then continued from."""
    state = case / "a.mlir.resume"
    state.mkdir()
    (state / "ireereduce-state").write_text("ireereduce state directory\nmade\n")
    (state / "verdicts.jsonl").write_text("")
    before = {p.name: p.read_bytes() for p in state.iterdir()}
    done = cli(case, "input.mlir", "--check", "./check.sh", flag, "a.mlir.resume/verdicts.jsonl")
    assert done.returncode == session.EXIT_USAGE, done.stderr
    assert "is inside an ireereduce state directory" in error_line(done.stderr)
    assert {p.name: p.read_bytes() for p in state.iterdir()} == before
    assert_clean(case)
