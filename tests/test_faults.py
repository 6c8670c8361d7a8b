"""Issue 12's catalogue: what an unattended run must survive, through the real CLI.

Every test asserts the one error line (or the note) and the exit code, that the input
and the previous best are untouched, and that no temp dir (TMPDIR points into the test's
directory) and no check process is left."""

from __future__ import annotations

import contextlib
import os
import resource
import select
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import make_script

from reducer import session

SMALL = """func.func @f(%a: f32) -> f32 {
  %0 = arith.negf %a : f32
  %1 = math.exp %0 : f32
  %2 = arith.negf %1 : f32
  return %2 : f32
}
"""

#: A chain long enough that a run makes many improvements.
BIG = (
    "func.func @f(%a: f32) -> f32 {\n"
    + "".join(f"  %v{i} = arith.negf {'%a' if i == 0 else f'%v{i - 1}'} : f32\n" for i in range(40))
    + "  %e = math.exp %v39 : f32\n  return %e : f32\n}\n"
)

#: What a smaller earlier result of `grep -q math.exp` looks like.
EARLIER = "func.func @f(%a: f32) -> f32 {\n  %e = math.exp %a : f32\n  return %e : f32\n}\n"


@pytest.fixture
def case(tmp_path: Path) -> Path:
    (tmp_path / "input.mlir").write_text(SMALL)
    (tmp_path / "tmp").mkdir()
    return tmp_path


def env(case: Path) -> dict[str, str]:
    return dict(os.environ, TMPDIR=str(case / "tmp"))


def cli(case: Path, *args: str, **kw) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "reducer.cli", *args],
        cwd=case,
        capture_output=True,
        text=True,
        timeout=120,
        env=env(case),
        **kw,
    )


def command(case: Path, *args: str, **kw) -> subprocess.CompletedProcess[str]:
    """The command as users start it (`python -m reducer`, the entry point, which sets up
    signals and stderr before reducer.cli loads); output captured unless kw redirects it."""
    if not {"stdout", "stderr"} & kw.keys():
        kw["capture_output"] = True
    return subprocess.run(
        [sys.executable, "-m", "reducer", *args], cwd=case, text=True, timeout=120, env=env(case), **kw
    )


def start(case: Path, *args: str, **kw) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "reducer.cli", *args], cwd=case, stderr=subprocess.PIPE, text=True, env=env(case), **kw
    )


def error_line(stderr: str) -> str:
    assert "Traceback" not in stderr and "internal error" not in stderr, stderr
    errors = [ln for ln in stderr.splitlines() if ln.startswith("ireereduce: error")]
    assert len(errors) == 1, stderr
    assert ".ireereduce-" not in errors[0], errors[0]
    return errors[0]


def ours(case: Path) -> list[int]:
    """Processes started by a run of this test (they inherit TMPDIR; a check's points
    into its own temp dir, under the run's)."""
    needle = f"TMPDIR={case / 'tmp'}".encode()
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                environ = Path(f"/proc/{entry.name}/environ").read_bytes()
                state = Path(f"/proc/{entry.name}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if any(v == needle or v.startswith(needle + b"/") for v in environ.split(b"\0")) and state != "Z":
                found.append(int(entry.name))
    return found


def assert_clean(case: Path) -> None:
    deadline = time.monotonic() + 15  # a guard: what would be left behind sleeps 30 s or more
    while ours(case) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not ours(case), "processes left behind"
    assert list((case / "tmp").iterdir()) == [], "temp dirs left behind"
    assert not list(case.glob("*.lock")), "lock file left behind"


def wait_for(predicate, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


# -- 1. the user's files are never written ---------------------------------------------
@pytest.mark.parametrize(
    "args, words",
    [
        (["--stats-json", "input.mlir"], "--stats-json input.mlir is the input"),
        (["--report", "input.mlir"], "--report input.mlir is the input"),
        (["--report-json", "input.mlir"], "--report-json input.mlir is the input"),
        (["--log-file", "input.mlir"], "--log-file input.mlir is the input"),
        (["-o", "check.sh"], "-o check.sh is the check script"),
        (["-o", "expected.txt"], "which the check script uses"),
        (["-o", "out.mlir", "--report", "out.mlir"], "-o and --report both name out.mlir"),
        (["--stats-json", "s.json", "--log-file", "s.json"], "--stats-json and --log-file both name s.json"),
    ],
    ids=[
        "stats-json",
        "report",
        "report-json",
        "log-file",
        "output-check",
        "output-shipped",
        "output-report",
        "stats-log",
    ],
)
def test_paths_that_name_the_users_files_are_refused(case: Path, args: list[str], words: str):
    check = make_script(case / "check.sh", f'grep -q math.exp "$1" && grep -q yes {case / "expected.txt"}')
    (case / "expected.txt").write_text("yes\n")
    (case / "out.mlir").write_text(EARLIER)
    before = {p.name: p.read_bytes() for p in case.iterdir() if p.is_file()}
    proc = cli(case, "input.mlir", "--check", "check.sh", *args)
    assert proc.returncode == session.EXIT_USAGE
    assert words in error_line(proc.stderr)
    assert {p.name: p.read_bytes() for p in case.iterdir() if p.is_file()} == before
    assert check.read_text().startswith("#!/bin/sh")
    assert_clean(case)


# -- 2. two runs on one output --------------------------------------------------------
def test_a_second_run_on_the_same_output_names_the_first(case: Path):
    (case / "input.mlir").write_text(BIG)
    make_script(case / "check.sh", 'sleep 0.5; grep -q math.exp "$1"')
    first = start(case, "input.mlir", "--check", "check.sh", "-j", "1")
    wait_for(lambda: (case / "input.reduced.mlir.lock").exists())
    second = cli(case, "input.mlir", "--check", "check.sh", "-j", "1")
    first.send_signal(signal.SIGTERM)
    first.communicate(timeout=60)
    assert second.returncode == session.EXIT_BUSY
    assert f"(PID {first.pid})" in error_line(second.stderr)
    assert (case / "input.mlir").read_text() == BIG
    out = case / "input.reduced.mlir"
    assert not out.exists() or "math.exp" in out.read_text()
    assert_clean(case)


# -- 3. a rerun starts from the earlier result and never overwrites it with the original --
def test_a_rerun_keeps_the_earlier_smaller_result(case: Path):
    (case / "input.mlir").write_text(BIG)
    (case / "input.reduced.mlir").write_text(EARLIER)
    ran = case / "ran"
    make_script(case / "check.sh", f'echo >> {ran}; sleep 0.3; grep -q math.exp "$1"')
    proc = start(case, "input.mlir", "--check", "check.sh", "-j", "1")
    # The original is checked twice, then the earlier result once.
    wait_for(lambda: ran.exists() and len(ran.read_text().splitlines()) >= 3)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == session.EXIT_INTERRUPTED, err
    out = (case / "input.reduced.mlir").read_text()
    assert "math.exp" in out and len(out) <= len(EARLIER)
    assert (case / "input.mlir").read_text() == BIG
    shutil.rmtree(case / "input.reduced.mlir.resume", ignore_errors=True)  # not a resume: a new run
    # Run to the end, watching the output: it never holds anything bigger than before.
    make_script(case / "check.sh", 'sleep 0.1; grep -q math.exp "$1"')
    done = start(case, "input.mlir", "--check", "check.sh", "-j", "1")
    largest = 0
    while done.poll() is None:
        try:
            largest = max(largest, len((case / "input.reduced.mlir").read_text()))
        except FileNotFoundError:
            pass
        time.sleep(0.02)
    _, err = done.communicate()
    assert done.returncode == 0, err
    assert "started from the smaller interesting program already in input.reduced.mlir" in err
    assert largest <= len(EARLIER)
    assert (case / "input.mlir").read_text() == BIG
    assert_clean(case)


# -- 4. flaky checks -------------------------------------------------------------------
#: Accepts any candidate the first time it sees it, and afterwards only what has math.exp:
#: a check that is wrong exactly when it is not asked twice.
FIRST_TIME_YES = """h=$(md5sum "$1" | cut -c1-32)
if [ -e {seen}/$h ]; then grep -q math.exp "$1"; else touch {seen}/$h; exit 0; fi"""


#: Right (math.exp) whenever it is asked again; asked about a program for the first time
#: it goes wrong once it has seen n programs, and passes it: late in a run, so the run
#: commits programs the check is right about before the ones it is wrong about.
WRONG_LATE = """h=$(md5sum "$1" | cut -c1-32)
if [ -e {seen}/$h ]; then grep -q math.exp "$1"; exit; fi
touch {seen}/$h
[ "$(ls {seen} | wc -l)" -gt {n} ] || grep -q math.exp "$1"
"""


def test_flaky_check_output_is_the_last_program_that_reproduces(case: Path, monkeypatch: pytest.MonkeyPatch):
    """The final program fails its re-checks; the walk back keeps the newest committed
    program that passes them (not the input, not an older commit)."""
    import tempfile

    import reducer
    from reducer import progress

    (case / "input.mlir").write_text(BIG)
    (case / "seen").mkdir()
    make_script(case / "check.sh", WRONG_LATE.format(seen=case / "seen", n=5))
    monkeypatch.setenv("TMPDIR", str(case / "tmp"))
    monkeypatch.setattr(tempfile, "tempdir", None)
    monitor, committed = progress.Monitor(), []
    monitor.on_candidate.append(lambda candidate: committed.append(candidate.text))
    done = reducer.reduce(case / "input.mlir", check=case / "check.sh", jobs=1, monitor=monitor)
    assert done.status == "flaky", done.result.flaky
    assert "flip rate" in done.result.flaky and "passed 6 re-checks in a row" in done.result.flaky
    final, earlier = committed[-1], [c for c in committed[:-1] if c != committed[-1]]
    assert "math.exp" not in final  # what the check was wrong about
    passing = [c for c in earlier if "math.exp" in c]
    assert len(passing) >= 2, committed  # so an older one would be a different answer
    assert done.text == passing[-1] != BIG
    assert (case / "input.reduced.mlir").read_text() == passing[-1]
    assert (case / "input.mlir").read_text() == BIG
    assert_clean(case)


#: Right (math.exp) except the third time it is asked about a program: the final
#: program passes its first re-check and fails its second.
THIRD_TIME_NO = """h=$(md5sum "$1" | cut -c1-32)
echo >> {seen}/$h
[ "$(wc -l < {seen}/$h)" -ne 3 ] && grep -q math.exp "$1"
"""


def test_a_final_program_must_pass_every_re_check_not_one(case: Path):
    """One worker: the re-checks run, and are read, in order. The walk back fails too (each
    committed program was checked once before), so the output is the input."""
    (case / "seen").mkdir()
    make_script(case / "check.sh", THIRD_TIME_NO.format(seen=case / "seen"))
    proc = cli(case, "input.mlir", "--check", "check.sh", "-j", "1")
    assert proc.returncode == session.EXIT_FLAKY, proc.stderr
    line = error_line(proc.stderr)
    assert "the check is flaky" in line and "flip rate" in line
    assert "no program the run committed passed 6 re-checks" in line
    assert (case / "input.reduced.mlir").read_text() == SMALL
    assert (case / "input.mlir").read_text() == SMALL
    assert_clean(case)


def test_repeat_makes_a_flaky_check_usable(case: Path):
    (case / "input.mlir").write_text(BIG)
    (case / "seen").mkdir()
    make_script(case / "check.sh", FIRST_TIME_YES.format(seen=case / "seen"))
    proc = cli(case, "input.mlir", "--check", "check.sh", "-j", "2", "--repeat", "2")
    assert proc.returncode == 0, proc.stderr
    out = (case / "input.reduced.mlir").read_text()
    assert "math.exp" in out and "negf" not in out
    assert_clean(case)


def test_the_original_checked_twice_notices_a_flaky_check(case: Path):
    make_script(case / "check.sh", f'[ -e {case}/once ] || {{ touch {case}/once; exit 1; }}; grep -q math.exp "$1"')
    proc = cli(case, "input.mlir", "--check", "check.sh", "-j", "1")
    assert proc.returncode == 0, proc.stderr
    assert "the check is flaky" in proc.stderr and "passed the original once and failed it once" in proc.stderr
    assert (case / "input.mlir").read_text() == SMALL
    assert_clean(case)


# -- 5 / 7. clean stops; no temp dir, no process (setsid ones too) -------------------------
def test_sigterm_mid_check_leaves_no_temp_dir_or_process(case: Path):
    (case / "input.mlir").write_text(BIG)
    pids = case / "pids"
    # A candidate (fewer negf than the input) hangs, from the start: telling the check to
    # hang once the first improvement was written raced a run this fast, which could end
    # within the 50 ms poll after it.
    woke = case / "woke"
    make_script(
        case / "check.sh",
        f'[ "$(grep -c negf "$1")" -lt 40 ] && {{ setsid sleep 300 & echo $! >> {pids}; sleep 30; touch {woke}; }}; '
        'grep -q math.exp "$1"',
    )
    # A timeout past the hang: waited for, the check would get to its end.
    proc = start(case, "input.mlir", "--check", "check.sh", "-j", "2", "--strategies", "drop-ops", "--timeout", "120")
    wait_for(lambda: pids.exists() and pids.read_text().split())
    time.sleep(0.3)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == session.EXIT_INTERRUPTED, err
    assert "interrupted" in err
    assert not woke.exists()  # the running checks were stopped, not waited for
    assert (case / "input.mlir").read_text() == BIG
    for pid in pids.read_text().split():
        assert not _alive(int(pid)), f"setsid child {pid} survived"
    assert_clean(case)


def test_setsid_children_of_a_finished_check_are_killed(case: Path):
    pids = case / "pids"
    make_script(case / "check.sh", f'setsid sleep 300 & echo $! >> {pids}; grep -q math.exp "$1"')
    proc = cli(case, "input.mlir", "--check", "check.sh", "-j", "1")
    assert proc.returncode == 0, proc.stderr
    for pid in pids.read_text().split():
        assert not _alive(int(pid)), f"setsid child {pid} survived"
    assert_clean(case)


def test_a_worker_killed_mid_check_leaves_no_temp_dir(case: Path):
    (case / "input.mlir").write_text(BIG)
    # A candidate (fewer negf than the input) hangs. Waiting for the first improvement
    # to start hanging raced the run: with checks this fast it may end 50 ms later.
    make_script(
        case / "check.sh",
        f'[ "$(grep -c negf "$1")" -lt 40 ] && {{ echo $PPID > {case}/worker; sleep 30; }}; grep -q math.exp "$1"',
    )
    proc = start(case, "input.mlir", "--check", "check.sh", "-j", "2")
    wait_for(lambda: (case / "worker").exists() and (case / "worker").read_text().strip())
    os.kill(int((case / "worker").read_text()), signal.SIGKILL)  # the worker process running the check
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode in (0, session.EXIT_INTERRUPTED), err
    assert "Traceback" not in err
    assert (case / "input.mlir").read_text() == BIG
    assert_clean(case)


# -- 6. errors from the environment ----------------------------------------------------
@pytest.mark.parametrize(
    "args, words",
    [
        (["-o", "missing/out.mlir"], "missing/out.mlir: the directory"),
        (["-o", "/sys/out.mlir"], "/sys/out.mlir: the directory /sys is not writable"),
        (["--report", "missing/r.md"], "--report missing/r.md: the directory"),
        (["--stats-json", "missing/s.json"], "--stats-json missing/s.json: the directory"),
    ],
    ids=["output-dir-missing", "output-dir-read-only", "report-dir-missing", "stats-dir-missing"],
)
def test_unwritable_paths_are_refused_before_the_check_runs(case: Path, args: list[str], words: str):
    make_script(case / "check.sh", f'touch {case}/ran; grep -q math.exp "$1"')
    proc = cli(case, "input.mlir", "--check", "check.sh", *args)
    assert proc.returncode == session.EXIT_USAGE
    assert words in error_line(proc.stderr)
    assert not (case / "ran").exists()
    assert (case / "input.mlir").read_text() == SMALL
    assert_clean(case)


def _file_size_limit() -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (100, 100))


def test_a_full_temp_dir_is_a_write_error_not_a_bad_check(case: Path):
    (case / "input.reduced.mlir").write_text(EARLIER)
    make_script(case / "check.sh", 'grep -q math.exp "$1"')
    proc = cli(case, "input.mlir", "--check", "check.sh", "-j", "1", preexec_fn=_file_size_limit)
    assert proc.returncode == session.EXIT_CANNOT_WRITE, proc.stderr
    line = error_line(proc.stderr)
    assert "cannot write a candidate into the temporary directory" in line and "File too large" in line
    assert (case / "input.reduced.mlir").read_text() == EARLIER
    assert (case / "input.mlir").read_text() == SMALL
    assert_clean(case)


def test_a_full_disk_names_the_output_and_where_the_best_is(case: Path, monkeypatch: pytest.MonkeyPatch):
    import errno

    (case / "input.mlir").write_text(BIG)
    make_script(case / "check.sh", 'grep -q math.exp "$1"')
    real = session.write_atomically
    writes = []

    def fills_up(path: str, data: bytes) -> None:
        writes.append(path)
        if len(writes) > 1:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)
        real(path, data)

    monkeypatch.setattr(session.files, "write_atomically", fills_up)
    monkeypatch.setenv("TMPDIR", str(case / "tmp"))
    monkeypatch.chdir(case)
    with pytest.raises(session.UserError) as err:
        session.reduce_file(session.Settings(input="input.mlir", check="check.sh", jobs=1))
    assert err.value.code == session.EXIT_CANNOT_WRITE
    message = str(err.value)
    assert message.startswith("cannot write the output input.reduced.mlir: No space left on device; ")
    assert "input.reduced.mlir still holds the smallest interesting program so far" in message
    best = (case / "input.reduced.mlir").read_text()
    assert "math.exp" in best and len(best) < len(BIG)
    assert (case / "input.mlir").read_text() == BIG
    assert (case / "input.reduced.mlir.resume").is_dir()  # a rerun continues once there is space
    assert_clean(case)


def test_a_write_error_names_the_users_path_not_the_temp_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    import errno

    def full(*_a, **_k):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(session.UserError) as err:
        session.save(str(tmp_path / "out.mlir"), b"x", "the output", "the best so far is elsewhere")
    assert err.value.code == session.EXIT_CANNOT_WRITE
    assert (
        str(err.value)
        == f"cannot write the output {tmp_path / 'out.mlir'}: No space left on device; the best so far is elsewhere"
    )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "how, words", [("rm -f", "was deleted during the run"), ("chmod -x", "is no longer executable")]
)
def test_a_check_that_disappears_mid_run(case: Path, how: str, words: str):
    (case / "input.mlir").write_text(BIG)
    count = case / "count"
    make_script(
        case / "check.sh",
        f'echo x >> {count}; [ $(wc -l < {count}) -ge 6 ] && {how} {case}/check.sh; grep -q math.exp "$1"',
    )
    proc = cli(case, "input.mlir", "--check", "check.sh", "-j", "1")
    assert proc.returncode == session.EXIT_BAD_CHECK, proc.stderr
    line = error_line(proc.stderr)
    assert "check.sh" in line and words in line
    assert (case / "input.mlir").read_text() == BIG
    assert "math.exp" in (case / "input.reduced.mlir").read_text()
    assert_clean(case)


def test_a_closed_stderr_still_reduces_and_exits_right(case: Path):
    make_script(case / "check.sh", 'grep -q math.exp "$1"')
    ok = subprocess.run(
        f"exec {sys.executable} -m reducer.cli input.mlir --check check.sh -j 1 2>&-",
        shell=True,
        cwd=case,
        env=env(case),
        timeout=120,
    )
    assert ok.returncode == 0
    assert "negf" not in (case / "input.reduced.mlir").read_text()
    bad = subprocess.run(
        f"exec {sys.executable} -m reducer.cli nope.mlir --check check.sh 2>&-",
        shell=True,
        cwd=case,
        env=env(case),
        timeout=120,
    )
    assert bad.returncode == session.EXIT_BAD_INPUT
    assert (case / "input.mlir").read_text() == SMALL
    assert_clean(case)


# -- 8. timeouts ---------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["nan", "inf", "1e400", "0", "-1"])
def test_timeout_must_be_finite_and_positive(case: Path, value: str):
    make_script(case / "check.sh", f'touch {case}/ran; grep -q math.exp "$1"')
    proc = cli(case, "input.mlir", "--check", "check.sh", "--timeout", value)
    assert proc.returncode == session.EXIT_USAGE
    assert "--timeout must be a finite number of seconds above 0" in error_line(proc.stderr)
    assert not (case / "ran").exists() and not (case / "input.reduced.mlir").exists()
    assert_clean(case)


# -- 9. modes ------------------------------------------------------------------------------
def test_output_files_respect_the_umask(case: Path):
    make_script(case / "check.sh", 'grep -q math.exp "$1"')
    proc = cli(
        case,
        "input.mlir",
        "--check",
        "check.sh",
        "-j",
        "1",
        "--stats-json",
        "s.json",
        "--report",
        "r.md",
        preexec_fn=lambda: os.umask(0o022),
    )
    assert proc.returncode == 0, proc.stderr
    for name in ("input.reduced.mlir", "s.json", "r.md"):
        assert (case / name).stat().st_mode & 0o777 == 0o644, name
    assert_clean(case)


# -- 10. a check that writes the user's files ----------------------------------------------
def _check_that_after(case: Path, checks: int, action: str) -> Path:
    """BIG as the input, and a check that greps it and, from its `checks`-th run on, does
    `action` first; the file counting its runs."""
    (case / "input.mlir").write_text(BIG)
    count = case / "count"
    make_script(
        case / "check.sh", f'echo x >> {count}; [ $(wc -l < {count}) -ge {checks} ] && {action}; grep -q math.exp "$1"'
    )
    return count


@pytest.mark.parametrize("target", ["input.mlir", "input.reduced.mlir"])
def test_a_check_that_writes_the_users_files_is_stopped(case: Path, target: str):
    count = _check_that_after(case, 7, f'cp "$1" {case}/{target}')
    proc = cli(case, "input.mlir", "--check", "check.sh", "-j", "1", "--strategies", "drop-ops")
    assert proc.returncode == session.EXIT_CHECK_CHANGED_FILES, proc.stderr
    line = error_line(proc.stderr)
    assert f"{target} changed during the run" in line and "gets its own copy of the candidate" in line
    assert len(count.read_text().splitlines()) <= 7 + 4  # stopped within the batch (a whole run makes 17 checks)
    out = (case / "input.reduced.mlir").read_text()
    assert "math.exp" in out and len(out) < len(BIG)
    assert_clean(case)


def test_a_check_that_writes_the_output_before_any_commit_is_told_apart(case: Path):
    """Audit 6 (m20): with nothing committed yet, the line said both that the output held
    the last good program again and that it was not written; it holds the check's junk."""
    make_script(case / "check.sh", f'echo junk >> {case}/input.reduced.mlir; grep -q math.exp "$1"')
    proc = cli(case, "input.mlir", "--check", "check.sh", "-j", "1")
    assert proc.returncode == session.EXIT_CHECK_CHANGED_FILES, proc.stderr
    line = error_line(proc.stderr)
    assert "input.reduced.mlir changed during the run" in line and "is not the run's" in line, line
    assert "last good program" not in line and "was not written" not in line, line
    assert (case / "input.reduced.mlir").read_text().startswith("junk")
    assert_clean(case)


# -- 11. text mode ---------------------------------------------------------------------------
def test_a_bom_is_stripped_and_said(case: Path):
    (case / "input.mlir").write_bytes("\ufeff".encode() + SMALL.encode())
    make_script(case / "check.sh", 'grep -q math.exp "$1"')
    proc = cli(case, "input.mlir", "--check", "check.sh", "-j", "1")
    assert proc.returncode == 0, proc.stderr
    assert "byte-order mark" in proc.stderr and "as mlir" in proc.stderr
    assert (case / "input.mlir").read_bytes().startswith("\ufeff".encode())
    assert_clean(case)


def test_a_check_that_needs_the_bom_is_told_it_was_removed(case: Path):
    """Audit 16 (W8): "not interesting ... for the input as given", which by hand it was."""
    (case / "input.mlir").write_bytes("\ufeff".encode() + SMALL.encode())
    make_script(case / "check.sh", '[ "$(head -c 3 "$1" | od -An -tx1 | tr -d " ")" = efbbbf ]')
    proc = cli(case, "input.mlir", "--check", "check.sh", "-j", "1")
    assert proc.returncode == session.EXIT_NOT_INTERESTING, proc.stderr
    assert error_line(proc.stderr).endswith("the input's UTF-8 byte-order mark was removed before the check")
    assert_clean(case)


def test_text_mode_output_has_no_whitespace_padding(case: Path):
    (case / "input.mlir").write_text("not { mlir\n" + " " * 3000 + "\n\n\n" * 500 + "   BUG    \t \n" + "\n" * 400)
    make_script(case / "check.sh", 'grep -q BUG "$1"')
    proc = cli(case, "input.mlir", "--check", "check.sh", "-j", "1")
    assert proc.returncode == 0, proc.stderr
    assert (case / "input.reduced.mlir").read_text() == "BUG\n"
    assert "collapsed whitespace" in proc.stderr
    assert_clean(case)


# -- resume ------------------------------------------------------------------------------------
def test_a_killed_run_continues_where_it_stopped(case: Path):
    (case / "input.mlir").write_text(BIG)
    count = case / "count"
    make_script(case / "check.sh", f'echo x >> {count}; sleep 0.1; grep -q math.exp "$1"')
    # One worker: with more, how far speculation runs ahead depends on timing, and so
    # would the count of checks compared below.
    whole = cli(case, "input.mlir", "--check", "check.sh", "-j", "1", "-o", "whole.mlir")
    assert whole.returncode == 0, whole.stderr
    whole_checks = len(count.read_text().splitlines())
    count.unlink()
    proc = start(case, "input.mlir", "--check", "check.sh", "-j", "1", start_new_session=True)
    out = case / "input.reduced.mlir"
    wait_for(lambda: out.exists())
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    killed = len(count.read_text().splitlines())
    assert (case / "input.reduced.mlir.resume").is_dir()
    again = cli(case, "input.mlir", "--check", "check.sh", "-j", "1")
    assert again.returncode == 0, again.stderr
    assert "continuing the interrupted run recorded in input.reduced.mlir.resume" in again.stderr
    assert out.read_bytes() == (case / "whole.mlir").read_bytes()
    assert len(count.read_text().splitlines()) <= whole_checks + 2
    assert not killed == 0
    assert not (case / "input.reduced.mlir.resume").exists()
    assert (case / "input.mlir").read_text() == BIG


def test_a_killed_speculating_run_continues_to_the_same_output(case: Path):
    """With two workers, checks finish out of order and the journal holds speculative
    verdicts; the resumed run still ends where an uninterrupted one does."""
    (case / "input.mlir").write_text(BIG)
    make_script(case / "check.sh", 'sleep 0.1; grep -q math.exp "$1"')
    whole = cli(case, "input.mlir", "--check", "check.sh", "-j", "2", "-o", "whole.mlir")
    assert whole.returncode == 0, whole.stderr
    proc = start(case, "input.mlir", "--check", "check.sh", "-j", "2", start_new_session=True)
    out = case / "input.reduced.mlir"
    wait_for(lambda: out.exists())
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    again = cli(case, "input.mlir", "--check", "check.sh", "-j", "2")
    assert again.returncode == 0, again.stderr
    assert "continuing the interrupted run recorded in input.reduced.mlir.resume" in again.stderr
    assert out.read_bytes() == (case / "whole.mlir").read_bytes()
    assert not (case / "input.reduced.mlir.resume").exists()
    assert_clean(case)


def test_a_file_planted_in_a_killed_runs_state_is_said_at_resume_and_kept(case: Path):
    """Audit 11 (S7): a pickle put in OUTPUT.resume after a kill was never read (good) but
    only said at the end, after the whole reduction; it is said when the run continues."""
    import pickle

    (case / "input.mlir").write_text(BIG)
    make_script(case / "check.sh", 'sleep 0.1; grep -q math.exp "$1"')
    proc = start(case, "input.mlir", "--check", "check.sh", "-j", "1", start_new_session=True)
    out = case / "input.reduced.mlir"
    wait_for(lambda: out.exists())
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    planted = case / "input.reduced.mlir.resume" / "evil.pkl"
    ran = case / "pickle-ran"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {ran}",))

    planted.write_bytes(pickle.dumps(Evil()))
    before = planted.read_bytes()
    again = cli(case, "input.mlir", "--check", "check.sh", "-j", "1")
    assert again.returncode == 0, again.stderr
    lines = again.stderr.splitlines()
    said = [i for i, ln in enumerate(lines) if "also holds evil.pkl, which ireereduce did not write" in ln]
    reducing = [i for i, ln in enumerate(lines) if " reducing input.mlir " in ln]
    assert said and reducing and said[0] < reducing[0], again.stderr  # before the reduction, not after
    assert planted.read_bytes() == before and not ran.exists()
    assert_clean(case)


def test_a_run_whose_main_process_is_killed_leaves_no_worker_holding_its_locks(case: Path):
    """The OOM killer picks the largest process: the one holding the MLIR, not its
    workers. They stop too (a running check with them), so the run's locks are free
    and a rerun continues it, instead of finding the output busy for good."""
    (case / "input.mlir").write_text(BIG)
    hang = case / "hang"
    hang.touch()
    make_script(
        case / "check.sh",
        f'[ -e {hang} ] && [ "$(grep -c negf "$1")" -lt 40 ] && {{ echo $PPID > {case}/worker; sleep 30; }}; '
        'grep -q math.exp "$1"',
    )
    proc = start(case, "input.mlir", "--check", "check.sh", "-j", "2")
    wait_for(lambda: (case / "worker").exists() and (case / "worker").read_text().strip())
    proc.kill()  # the main process alone
    proc.wait(timeout=60)  # not communicate(): the workers hold its stderr until they end
    deadline = time.monotonic() + 10
    while ours(case) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not ours(case), "workers outlived the run"
    hang.unlink()
    again = cli(case, "input.mlir", "--check", "check.sh", "-j", "2")
    assert again.returncode == 0, again.stderr  # not "busy": nothing holds the output's lock
    assert (case / "input.reduced.mlir").read_text().count("\n") < BIG.count("\n")
    assert_clean(case)


def test_a_state_of_another_command_is_refused(case: Path):
    (case / "input.mlir").write_text(BIG)
    make_script(case / "check.sh", 'sleep 0.2; grep -q math.exp "$1"')
    proc = start(case, "input.mlir", "--check", "check.sh", "-j", "1", start_new_session=True)
    wait_for(lambda: (case / "input.reduced.mlir").exists())
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    best = (case / "input.reduced.mlir").read_bytes()
    other = cli(case, "input.mlir", "--check", "check.sh", "-j", "1", "--moves", "2")
    assert other.returncode == session.EXIT_STATE_MISMATCH
    line = error_line(other.stderr)
    assert "input.reduced.mlir.resume" in line and "--move-budget" in line and "--fresh" in line
    assert (case / "input.reduced.mlir").read_bytes() == best
    fresh = cli(case, "input.mlir", "--check", "check.sh", "-j", "2", "--moves", "2", "--fresh")
    assert fresh.returncode == 0, fresh.stderr
    assert_clean(case)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] != "Z"


# == issue 27: the state directory (defects 1 and 4) ====================================


# A state directory is one the run made and marked as its own; it removes only that, and
# never trusts what it finds in one before the fingerprint matches, nor as code ever.


def _tree(root: Path) -> dict[str, bytes | None]:
    """Every file (its bytes) and directory (None) under root."""
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))}


@pytest.mark.parametrize(
    "state_dir, words",
    [
        ("mine", "the state directory mine holds files ireereduce did not write"),
        ("mine/", "the state directory mine/ holds files ireereduce did not write"),
        (".", "the state directory . holds files ireereduce did not write"),
    ],
    ids=["users-dir", "users-dir-slash", "cwd"],
)
def test_a_state_dir_the_run_did_not_make_is_refused_and_untouched(case: Path, state_dir: str, words: str):
    make_script(case / "check.sh", f'touch {case}/ran; grep -q math.exp "$1"')
    (case / "mine").mkdir()
    (case / "mine" / "notes.txt").write_text("mine\n")
    (case / "mine" / "run.json").write_text("{}\n")  # a name the state uses, and still not ours
    (case / "mine" / "deep").mkdir()
    (case / "mine" / "deep" / "data.bin").write_bytes(b"\0\1")
    before = _tree(case)
    proc = cli(case, "input.mlir", "--check", "check.sh", "--state-dir", state_dir)
    assert proc.returncode == session.EXIT_USAGE, proc.stderr
    line = error_line(proc.stderr)
    assert words in line and "--state-dir" in line, line
    assert not (case / "ran").exists()  # refused before the first check
    assert _tree(case) == before
    assert_clean(case)


def test_a_state_dir_is_removed_only_if_the_run_made_it(case: Path):
    make_script(case / "check.sh", 'grep -q math.exp "$1"')
    made = cli(case, "input.mlir", "--check", "check.sh", "-j", "1", "--state-dir", "new")
    assert made.returncode == 0, made.stderr
    assert not (case / "new").exists()
    (case / "empty").mkdir()
    given = cli(case, "input.mlir", "--check", "check.sh", "-j", "1", "--state-dir", "empty", "-o", "out.mlir")
    assert given.returncode == 0, given.stderr
    assert (case / "empty").is_dir() and list((case / "empty").iterdir()) == []  # the user's, emptied of ours
    assert_clean(case)


#: A pickle that runs `touch PWNED` when it is loaded.
_EVIL_PICKLE = b"cposix\nsystem\n(Vtouch PWNED\ntR."


def _killed_run(case: Path) -> Path:
    """A run killed with SIGKILL after its first improvement: its state directory."""
    (case / "input.mlir").write_text(BIG)
    make_script(case / "check.sh", 'sleep 0.1; grep -q math.exp "$1"')
    proc = start(case, "input.mlir", "--check", "check.sh", "-j", "1", start_new_session=True)
    wait_for(lambda: (case / "input.reduced.mlir").exists())
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    # Its check runs in a process group of its own, and ends by itself: until then, a
    # check.sh the test writes anew could be read on by its shell.
    wait_for(lambda: not ours(case))
    state = case / "input.reduced.mlir.resume"
    assert (state / "run.json").is_file()
    return state


def test_a_planted_state_without_the_marker_is_refused_unread(case: Path):
    (case / "input.mlir").write_text(BIG)
    make_script(case / "check.sh", f'touch {case}/ran; grep -q math.exp "$1"')
    state = case / "input.reduced.mlir.resume"
    state.mkdir()
    (state / "run.json").write_text("{}\n")
    (state / "start.pickle").write_bytes(_EVIL_PICKLE)
    before = _tree(case)
    proc = cli(case, "input.mlir", "--check", "check.sh", "-j", "1")
    assert proc.returncode == session.EXIT_USAGE, proc.stderr
    assert "the state directory input.reduced.mlir.resume holds files" in error_line(proc.stderr)
    assert not (case / "PWNED").exists() and not (case / "ran").exists()
    assert _tree(case) == before
    assert_clean(case)


def test_a_planted_start_in_the_runs_own_state_never_runs_code(case: Path):
    """Whatever a state directory holds is data: a pickle is never loaded, and a start
    naming a class ireereduce does not know is not read; the run starts over, says so in
    one line, and ends where an uninterrupted one does."""
    state = _killed_run(case)
    (state / "start.pickle").write_bytes(_EVIL_PICKLE)
    (state / "start.json").write_text('{"$class": "subprocess:Popen", "$fields": {"args": ["touch", "PWNED"]}}')
    again = cli(case, "input.mlir", "--check", "check.sh", "-j", "1")
    assert again.returncode == 0, again.stderr
    assert not (case / "PWNED").exists()
    said = [ln for ln in again.stderr.splitlines() if "input.reduced.mlir.resume" in ln]
    assert len(said) == 2, again.stderr
    assert "cannot be continued" in said[0] and "subprocess:Popen" in said[0] and "starting over" in said[0]
    assert "start.pickle" in said[1]  # what was left, and why
    assert "continuing" not in again.stderr
    assert "math.exp" in (case / "input.reduced.mlir").read_text()
    assert sorted(p.name for p in state.iterdir()) == ["ireereduce-state", "start.pickle"]  # left, and still ours


# == issue 27: limits of the machine, and processes that hide ===============================
# (open files, SIGHUP, daemons that clear their environment, --memory-limit)


def _open_files(soft: int, hard: int):
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

    return limit


def test_more_jobs_than_open_files_allow_run_on_fewer_workers(case: Path):
    """-j 1000 with the usual 1024 open files ran out of descriptors mid-start and left
    its run directory behind. Here the hard limit is as low as the soft one: the run
    says how many checks it runs at once instead, and finishes."""
    make_script(case / "check.sh", 'grep -q math.exp "$1"')
    proc = cli(case, "input.mlir", "--check", "check.sh", "-j", "100", preexec_fn=_open_files(64, 64))
    assert proc.returncode == 0, proc.stderr
    assert "internal error" not in proc.stderr
    warned = [ln for ln in proc.stderr.splitlines() if "open files" in ln]
    assert len(warned) == 1 and "-j 100" in warned[0] and "ulimit -n" in warned[0], proc.stderr
    assert "negf" not in (case / "input.reduced.mlir").read_text()


# == issue 27: paths that are not plain files, messages, bad options (hostile run) ========
# Each test names the user's file in the one error line, checks the exit code, that the
# user's files are as they were, and that no temp dir, lock or process is left.


@pytest.mark.parametrize(
    "target, words", [("input.mlir", "is the input input.mlir"), ("check.sh", "is the check script check.sh")]
)
def test_progress_json_naming_the_users_files_is_refused(case: Path, target: str, words: str):
    check = make_script(case / "check.sh", f'touch {case}/ran; grep -q math.exp "$1"')
    script = check.read_bytes()
    proc = cli(case, "input.mlir", "--check", "check.sh", "--progress-json", target)
    assert proc.returncode == session.EXIT_USAGE, proc.stderr
    line = error_line(proc.stderr)
    assert f"--progress-json {target} {words}" in line
    assert (case / "input.mlir").read_text() == SMALL and check.read_bytes() == script
    assert not (case / "ran").exists() and not (case / "input.reduced.mlir").exists()
    assert_clean(case)


def test_progress_json_to_stdout_is_not_a_path(case: Path):
    make_script(case / "check.sh", 'grep -q math.exp "$1"')
    proc = cli(case, "input.mlir", "--check", "check.sh", "-j", "1", "-q", "--progress-json", "-")
    assert proc.returncode == 0, proc.stderr
    assert '"event": "reduced"' in proc.stdout.splitlines()[-1]
    assert not (case / "-").exists()
    assert_clean(case)


def test_output_symlinks_are_written_through_to_their_targets(case: Path):
    """`-o latest.mlir` pointing into a results folder: the link stays, the target gets
    the program (written atomically beside it); the same for the other outputs."""
    make_script(case / "check.sh", 'grep -q math.exp "$1"')
    (case / "results").mkdir()
    links = {"latest.mlir": "results/run1.mlir", "stats.json": "results/stats1.json", "report.md": "results/r1.md"}
    for link, target in links.items():
        (case / link).symlink_to(target)
    (case / "results" / "r1.md").write_text("# an old report\n\nReduced by ireereduce 0.1 from `old.mlir`.\n")  # ours
    args = ["-o", "latest.mlir", "--stats-json", "stats.json", "--report", "report.md"]
    proc = cli(case, "input.mlir", "--check", "check.sh", "-j", "1", *args)
    assert proc.returncode == 0, proc.stderr
    for link, target in links.items():
        assert (case / link).is_symlink() and os.readlink(case / link) == target, link
    out = (case / "results" / "run1.mlir").read_text()
    assert "math.exp" in out and "negf" not in out
    assert '"status": "reduced"' in (case / "results" / "stats1.json").read_text()
    assert "an old report" not in (case / "results" / "r1.md").read_text()
    assert sorted(p.name for p in (case / "results").iterdir()) == ["r1.md", "run1.mlir", "stats1.json"]
    assert (case / "input.mlir").read_text() == SMALL
    assert_clean(case)


def test_the_soft_open_files_limit_is_raised_to_the_hard_one(case: Path):
    """A soft limit below the hard one is only a default: the run raises it, so -j 16
    runs 16 checks at once and says nothing about open files."""
    make_script(case / "check.sh", 'grep -q math.exp "$1"')
    proc = cli(case, "input.mlir", "--check", "check.sh", "-j", "16", preexec_fn=_open_files(64, 4096))
    assert proc.returncode == 0, proc.stderr
    assert "open files" not in proc.stderr  # (a capped run says so: the test above)
    assert_clean(case)


def test_sighup_stops_the_run_like_sigterm(case: Path):
    """A closed terminal or ssh session sends SIGHUP to the run's process group: the run
    stops cleanly with the documented exit code, its lock, temp dir and checks gone. The
    workers leave the hangup to the main process: one that died of it would leave what
    its check started (here a daemon that cleared its environment) running."""
    (case / "input.mlir").write_text(BIG)
    pids = case / "pids"
    sh, sleep = shutil.which("sh"), shutil.which("sleep")
    make_script(
        case / "check.sh",
        f'[ "$(grep -c negf "$1")" -lt 40 ] && {{ setsid env -i {sh} -c \'{sleep} 300 & echo $! >> {pids}\' & '
        f'sleep 30; }}; grep -q math.exp "$1"',
    )
    proc = start(case, "input.mlir", "--check", "check.sh", "-j", "2", start_new_session=True)
    wait_for(lambda: pids.exists() and pids.read_text().split())
    os.killpg(proc.pid, signal.SIGHUP)  # the group, as the terminal's hangup reaches it
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == session.EXIT_INTERRUPTED, err
    assert "interrupted" in err and "Traceback" not in err
    assert (case / "input.mlir").read_text() == BIG
    for pid in pids.read_text().split():
        assert not _alive(int(pid)), f"daemon {pid} survived"
    assert_clean(case)


def test_a_daemon_that_clears_its_environment_and_session_is_killed(case: Path):
    """`setsid env -i` leaves both the check's process group and the run's environment
    tag: the process running the checks is a child subreaper, so the daemon becomes its
    child when its parent exits, and is killed after the check."""
    pids = case / "pids"
    sh, sleep = shutil.which("sh"), shutil.which("sleep")
    make_script(
        case / "check.sh",
        f"setsid env -i {sh} -c '{sleep} 300 & echo $! >> {pids}' &\nwait\ngrep -q math.exp \"$1\"",
    )
    proc = cli(case, "input.mlir", "--check", "check.sh", "-j", "1")
    assert proc.returncode == 0, proc.stderr
    daemons = pids.read_text().split()
    assert daemons
    for pid in daemons:
        assert not _alive(int(pid)), f"daemon {pid} survived"
    assert_clean(case)


def test_a_terminal_that_hangs_up_stops_the_run_cleanly(case: Path):
    """The real thing: the run's terminal goes away. Every write to it now fails (EIO),
    the summary's included: the run still ends as interrupted, and leaves nothing."""
    import pty

    (case / "input.mlir").write_text(BIG)
    pids = case / "pids"
    make_script(
        case / "check.sh",
        f'[ "$(grep -c negf "$1")" -lt 40 ] && {{ echo $$ >> {pids}; sleep 30; }}; grep -q math.exp "$1"',
    )
    argv = [sys.executable, "-m", "reducer.cli", "input.mlir", "--check", "check.sh", "-j", "2"]
    pid, terminal = pty.fork()
    if pid == 0:  # the run, in a session whose controlling terminal is the pty
        try:
            os.chdir(case)
            os.execve(sys.executable, argv, env(case))
        finally:
            os._exit(127)
    status = 0
    try:
        while not (pids.exists() and pids.read_text().split()):
            select.select([terminal], [], [], 0.05)
            with contextlib.suppress(OSError):
                os.read(terminal, 65536)  # the live status: a terminal that is read
            ended, status = os.waitpid(pid, os.WNOHANG)
            assert not ended, f"the run ended before its check hung, with status {status}"
    finally:
        os.close(terminal)  # hang up: the kernel sends SIGHUP to the run
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == session.EXIT_INTERRUPTED
    assert (case / "input.mlir").read_text() == BIG
    for check in pids.read_text().split():
        assert not _alive(int(check)), f"check {check} survived"
    assert_clean(case)


@pytest.mark.parametrize(
    "value, words",
    [("4X", "'4X' is not a size like 4G, 512M or 0"), ("100", "'100' is too little to start a check")],
    ids=["not-a-size", "bytes-meant-as-megabytes"],
)
def test_a_memory_limit_that_cannot_be_meant_is_refused(case: Path, value: str, words: str):
    make_script(case / "check.sh", f'touch {case}/ran; grep -q math.exp "$1"')
    proc = cli(case, "input.mlir", "--check", "check.sh", "--memory-limit", value)
    assert proc.returncode == session.EXIT_USAGE
    assert f"Invalid value for '--memory-limit': {words}" in proc.stderr
    assert not (case / "ran").exists()


def test_stats_json_to_a_link_to_stdout_prints_it(case: Path):
    """`--stats-json /dev/stdout`: the JSON goes to stdout and the link stays. (A link in
    the test's directory stands in for /dev/stdout, which a regression would replace.)"""
    import json

    make_script(case / "check.sh", 'grep -q math.exp "$1"')
    (case / "out").symlink_to("/dev/stdout")
    proc = cli(case, "input.mlir", "--check", "check.sh", "-j", "1", "-q", "--stats-json", "out")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["status"] == "reduced"
    assert (case / "out").is_symlink() and os.readlink(case / "out") == "/dev/stdout"
    assert_clean(case)


@pytest.mark.parametrize("flag", ["--stats-json", "--report", "--report-json"])
def test_reports_to_a_fifo_are_streamed_into_it(case: Path, flag: str):
    make_script(case / "check.sh", 'grep -q math.exp "$1"')
    fifo = case / "pipe"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a reader, so the run's open does not wait
    try:
        proc = cli(case, "input.mlir", "--check", "check.sh", "-j", "1", flag, "pipe")
        chunks = []
        while chunk := os.read(reader, 1 << 16):
            chunks.append(chunk)
    finally:
        os.close(reader)
    assert proc.returncode == 0, proc.stderr
    assert b"reduced" in b"".join(chunks)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert (case / "input.mlir").read_text() == SMALL
    assert_clean(case)


@pytest.mark.parametrize("kind", ["fifo", "link-to-dev-null"])
def test_an_output_that_is_not_a_regular_file_is_refused(case: Path, kind: str):
    """-o is written many times and gets a .lock and a .resume beside it: a FIFO or a
    device (here a link to /dev/null, never /dev/null itself) is refused, not replaced."""
    make_script(case / "check.sh", f'touch {case}/ran; grep -q math.exp "$1"')
    out = case / "out.mlir"
    if kind == "fifo":
        os.mkfifo(out)
    else:
        out.symlink_to(os.devnull)
    proc = cli(case, "input.mlir", "--check", "check.sh", "-o", "out.mlir")
    assert proc.returncode == session.EXIT_USAGE, proc.stderr
    line = error_line(proc.stderr)
    assert "-o out.mlir is a" in line and "give a regular file" in line
    assert stat.S_ISFIFO(os.lstat(out).st_mode) if kind == "fifo" else os.readlink(out) == os.devnull
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)
    assert not (case / "ran").exists() and not (case / "out.mlir.resume").exists()
    assert (case / "input.mlir").read_text() == SMALL
    assert_clean(case)


@pytest.mark.parametrize(
    "head, words",
    [
        ("#!/bin/no-such-shell", "'#!' line names /bin/no-such-shell, which does not exist"),
        ("#!/usr/bin/env no-such-shell", "no-such-shell is not on PATH"),
        ("#!/bin/sh\r", "Windows line ends (CRLF)"),
    ],
    ids=["missing", "env-missing", "crlf"],
)
def test_a_check_whose_interpreter_cannot_run_names_it(case: Path, head: str, words: str):
    check = case / "check.sh"
    check.write_bytes(f'{head}\ngrep -q math.exp "$1"\n'.replace("\n", "\r\n" if "\r" in head else "\n").encode())
    check.chmod(0o755)
    script = check.read_bytes()
    proc = cli(case, "input.mlir", "--check", "check.sh")
    assert proc.returncode == session.EXIT_BAD_CHECK, proc.stderr
    line = error_line(proc.stderr)
    assert "check script 'check.sh'" in line and words in line
    assert "No such file" not in line
    assert check.read_bytes() == script and (case / "input.mlir").read_text() == SMALL
    assert_clean(case)


@pytest.mark.parametrize(
    "data, words",
    [
        (SMALL.replace("return %2", "// caf\xe9\n  return %2").encode("latin-1"), "byte 0xe9 at line 5, column 9"),
        (b"ML\xefR\x00\x01rest", "is not readable MLIR bytecode"),
    ],
    ids=["latin-1", "bytecode"],
)
def test_input_that_is_not_utf8_says_which_byte_and_where(case: Path, data: bytes, words: str):
    (case / "input.mlir").write_bytes(data)
    make_script(case / "check.sh", f'touch {case}/ran; grep -q math.exp "$1"')
    proc = cli(case, "input.mlir", "--check", "check.sh")
    assert proc.returncode == session.EXIT_BAD_INPUT, proc.stderr
    line = error_line(proc.stderr)
    assert "input.mlir" in line and words in line
    assert ("iconv" in line) == (words != "is not readable MLIR bytecode")
    assert ("bytecode" in line) == (words == "is not readable MLIR bytecode")
    assert (case / "input.mlir").read_bytes() == data and not (case / "ran").exists()
    assert_clean(case)


@pytest.mark.parametrize(
    "args, words",
    [
        (["--max-time", "nan"], "--max-time must be a finite number of seconds"),
        (["--strategies", ","], "--strategies names no strategy"),
        (
            ["--check-files", "expected.txt"],
            "--check-files goes with --executor dask; the local executor would ignore it",
        ),
    ],
    ids=["max-time-nan", "strategies-empty", "check-files-local"],
)
def test_bad_option_values_are_refused(case: Path, args: list[str], words: str):
    make_script(case / "check.sh", f'touch {case}/ran; grep -q math.exp "$1"')
    (case / "expected.txt").write_text("yes\n")
    proc = cli(case, "input.mlir", "--check", "check.sh", *args)
    assert proc.returncode == session.EXIT_USAGE, proc.stderr
    assert words in error_line(proc.stderr)
    assert not (case / "ran").exists() and not (case / "input.reduced.mlir").exists()
    assert not (case / "input.reduced.mlir.resume").exists()
    assert (case / "input.mlir").read_text() == SMALL
    assert_clean(case)


@pytest.mark.parametrize("flag", ["--strategies", "--skip-strategies"])
def test_a_strategy_typo_leaves_no_state_for_the_corrected_command(case: Path, flag: str):
    make_script(case / "check.sh", 'grep -q math.exp "$1"')
    typo = cli(case, "input.mlir", "--check", "check.sh", "-j", "1", flag, "drop-opz")
    assert typo.returncode == session.EXIT_USAGE, typo.stderr
    assert "unknown strategy drop-opz" in error_line(typo.stderr)
    assert not (case / "input.reduced.mlir.resume").exists()
    fixed = cli(case, "input.mlir", "--check", "check.sh", "-j", "1", flag, "drop-ops")
    assert fixed.returncode == 0, fixed.stderr
    assert "math.exp" in (case / "input.reduced.mlir").read_text()
    assert (case / "input.mlir").read_text() == SMALL
    assert_clean(case)


def test_a_removed_output_directory_saves_the_best_where_it_can(case: Path):
    (case / "input.mlir").write_text(BIG)
    (case / "results").mkdir()
    make_script(case / "check.sh", 'sleep 0.2; grep -q math.exp "$1"')
    proc = start(case, "input.mlir", "--check", "check.sh", "-j", "1", "-o", "results/out.mlir")
    wait_for(lambda: (case / "results" / "out.mlir").exists())
    shutil.rmtree(case / "results")
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == session.EXIT_CANNOT_WRITE, err
    line = error_line(err)
    assert "cannot write the output results/out.mlir" in line
    assert "is saved in out.saved.mlir" in line
    saved = (case / "out.saved.mlir").read_text()
    assert "math.exp" in saved and len(saved) < len(BIG)
    assert (case / "input.mlir").read_text() == BIG
    assert_clean(case)


def test_an_input_deleted_during_the_run_is_said_deleted(case: Path):
    """Audit 17 W4: a check that deleted the input was told as the input having
    'changed', with advice to reduce it 'as it is now'."""
    _check_that_after(case, 5, f"rm -f {case}/input.mlir")
    proc = cli(case, "input.mlir", "--check", "check.sh", "-j", "1", "--strategies", "drop-ops")
    assert proc.returncode == session.EXIT_CHECK_CHANGED_FILES, proc.stderr
    line = error_line(proc.stderr)
    assert "the input input.mlir was deleted during the run" in line and "put it back" in line, line
    assert "changed" not in line and "as it is now" not in line, line
    assert_clean(case)


def test_the_users_own_edit_of_the_input_is_not_blamed_on_the_check(case: Path):
    (case / "input.mlir").write_text(BIG)
    make_script(case / "check.sh", 'sleep 0.2; grep -q math.exp "$1"')
    proc = start(case, "input.mlir", "--check", "check.sh", "-j", "1")
    wait_for(lambda: (case / "input.reduced.mlir").exists())
    edited = BIG + "// a note\n"
    (case / "input.mlir").write_text(edited)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == session.EXIT_CHECK_CHANGED_FILES, err
    line = error_line(err)
    assert "the input input.mlir changed during the run" in line and "--fresh" in line
    assert "while the check ran" not in line and "a check must not" not in line
    assert "input.reduced.mlir holds the smallest interesting program so far" in line
    assert (case / "input.mlir").read_text() == edited
    assert "math.exp" in (case / "input.reduced.mlir").read_text()
    assert_clean(case)


@pytest.mark.parametrize("gap", [0.0, 0.01, 0.02, 0.04])
def test_ctrl_c_twice_tells_where_the_result_is(case: Path, gap: float):
    (case / "input.mlir").write_text(BIG)
    make_script(case / "check.sh", 'sleep 0.1; grep -q math.exp "$1"')
    proc = start(case, "input.mlir", "--check", "check.sh", "-j", "2")
    out = case / "input.reduced.mlir"
    wait_for(out.exists)
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    time.sleep(gap)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode in (session.EXIT_INTERRUPTED, -signal.SIGINT), err
    assert "Traceback" not in err and "before reduction started" not in err, err
    assert "the smallest interesting program so far is in input.reduced.mlir" in err
    assert "math.exp" in out.read_text() and len(out.read_text()) < len(BIG)
    assert (case / "input.mlir").read_text() == BIG
    assert_clean(case)


@pytest.mark.parametrize("kind", ["missing", "a-file"])
def test_an_unusable_tmpdir_is_said(case: Path, kind: str):
    tmpdir = case / "tmp" / "nope"
    if kind == "a-file":
        tmpdir.write_text("")
    make_script(case / "check.sh", 'grep -q math.exp "$1"')
    proc = subprocess.run(
        [sys.executable, "-m", "reducer.cli", "input.mlir", "--check", "check.sh", "-j", "1", "-q"],
        cwd=case,
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, TMPDIR=str(tmpdir)),
    )
    assert proc.returncode == 0, proc.stderr
    said = [ln for ln in proc.stderr.splitlines() if f"TMPDIR={tmpdir}" in ln]
    assert len(said) == 1 and "cannot be used" in said[0], proc.stderr
    assert "temporary files go to" in said[0]
    assert (case / "input.mlir").read_text() == SMALL
    if kind == "a-file":
        tmpdir.unlink()
    assert_clean(case)


def test_a_hanging_original_says_what_it_waits_for(case: Path):
    make_script(case / "check.sh", "sleep 300")
    proc = start(case, "input.mlir", "--check", "check.sh", "-j", "1", "--heartbeat", "0.2")
    assert proc.stderr is not None
    while "still working" not in (line := proc.stderr.readline()):
        assert line, "no heartbeat"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == session.EXIT_INTERRUPTED, err
    assert "checking the original" in line and "0 running" not in line
    assert "times out after 300 s" in line and "--timeout" in line
    assert "was not written" in err
    assert (case / "input.mlir").read_text() == SMALL and not (case / "input.reduced.mlir").exists()
    assert_clean(case)


def test_a_signal_while_the_workers_stop_waits_until_they_are_gone(case: Path, monkeypatch: pytest.MonkeyPatch):
    """Ctrl-C again while a finished run stops its workers: they and the temp dir still
    go, and the run ends as interrupted with its result (in-process, so the signal lands
    exactly there)."""
    import tempfile

    from reducer.core.executor import LocalExecutor

    class SignalledWhileClosing(LocalExecutor):
        def close(self, abort: bool = False) -> None:
            os.kill(os.getpid(), signal.SIGINT)
            super().close(abort)

    (case / "input.mlir").write_text(BIG)
    make_script(case / "check.sh", 'grep -q math.exp "$1"')
    monkeypatch.chdir(case)
    monkeypatch.setenv("TMPDIR", str(case / "tmp"))
    monkeypatch.setattr(tempfile, "tempdir", str(case / "tmp"))
    settings = session.Settings(input="input.mlir", check="check.sh", jobs=2)
    try:
        session.reduce_file(settings, executor_factory=SignalledWhileClosing)
    except BaseException as exc:  # a KeyboardInterrupt must not reach pytest
        ended: BaseException | None = exc
    else:
        ended = None
    assert isinstance(ended, session.Interrupted), repr(ended)
    assert ended.result.output == "input.reduced.mlir"
    out = (case / "input.reduced.mlir").read_text()
    assert "math.exp" in out and "negf" not in out
    assert (case / "input.mlir").read_text() == BIG
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert_clean(case)


def test_a_full_disk_at_the_lock_leaves_no_lock_file(case: Path, monkeypatch: pytest.MonkeyPatch):
    """A full disk still lets the lock file be made (an inode, no data), then fails its
    PID: the run says so in one line (exit 8) and leaves no lock file behind."""
    import errno

    from reducer.core import state

    (case / "input.mlir").write_text(SMALL)
    make_script(case / "check.sh", 'grep -q math.exp "$1"')

    def full(fd: int, data: bytes, offset: int) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(state.os, "pwrite", full)
    monkeypatch.chdir(case)
    with pytest.raises(session.UserError) as err:
        session.reduce_file(session.Settings(input="input.mlir", check="check.sh", jobs=1))
    assert err.value.code == session.EXIT_CANNOT_WRITE
    assert str(err.value) == "cannot create the lock file input.reduced.mlir.lock: No space left on device"
    assert not (case / "input.reduced.mlir.lock").exists()
    assert_clean(case)


def test_no_state_and_another_state_dir_pass_a_foreign_resume_directory(case: Path):
    """The refusal of a directory the run did not make names --state-dir and --no-state
    as the ways out: both must work from the command line, next to a user's own
    OUTPUT.resume, which stays untouched."""
    (case / "input.mlir").write_text(SMALL)
    make_script(case / "check.sh", 'grep -q math.exp "$1"')
    mine = case / "input.reduced.mlir.resume"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    refused = cli(case, "input.mlir", "--check", "check.sh", "-j", "1")
    assert refused.returncode == 2 and "--no-state" in refused.stderr
    for extra in (["--no-state"], ["--state-dir", "elsewhere"]):
        done = cli(case, "input.mlir", "--check", "check.sh", "-j", "1", "--fresh", *extra)
        assert done.returncode == 0, done.stderr
        assert "math.exp" in (case / "input.reduced.mlir").read_text()
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"] and (mine / "notes.txt").read_text() == "keep"
    assert not (case / "elsewhere").exists()
    assert_clean(case)


@pytest.mark.parametrize(
    ("args", "code", "said"),
    [
        (["--memory-limit", "9223372036854775807"], 2, "more memory than a process can be given"),
        (["--memory-limit", "99999999T"], 2, "more memory than a process can be given"),
        (["--compile", "iree-compile {input} -o /dev/null", "--expect-error", "no such (error"], 2, "--expect-error"),
    ],
    ids=["memory-limit-c-long", "memory-limit-terabytes", "expect-error-regex"],
)
def test_values_that_cannot_be_used_are_one_line_not_an_internal_error(
    case: Path, args: list[str], code: int, said: str
):
    """Found by the independent hostile run: each of these ended in 'internal error'."""
    (case / "input.mlir").write_text(SMALL)
    run = cli(case, "input.mlir", *args, "-j", "1")
    assert run.returncode == code, run.stderr
    assert said in run.stderr and "internal error" not in run.stderr and "Traceback" not in run.stderr
    assert (case / "input.mlir").read_text() == SMALL
    assert_clean(case)


def test_a_closed_stdin_as_the_input_is_one_line(case: Path):
    make_script(case / "check.sh", 'grep -q math.exp "$1"')
    run = subprocess.run(
        f"exec {sys.executable} -m reducer.cli - --check check.sh -o out.mlir <&-",
        shell=True,
        cwd=case,
        stderr=subprocess.PIPE,
        text=True,
        env=env(case),
        timeout=120,
    )
    assert run.returncode == 3, run.stderr
    assert run.stderr.strip() == "ireereduce: error: the input is stdin (-), and stdin is closed"
    assert_clean(case)


@pytest.mark.parametrize(
    "how",
    [
        ["--test-arg", "pat.txt", "-o", "pat.txt"],
        ["-c", "./check.sh pat.txt", "-o", "pat.txt"],
        ["-c", "./check.sh pat.txt", "-o", "check.sh"],
    ],
    ids=["test-arg", "in-check-string", "script-of-check-string"],
)
def test_files_the_check_is_given_are_never_the_output(case: Path, how: list[str]):
    """Found by the independent hostile run: a file passed to the check as an argument
    (or the script of `-c "./check.sh ARG"`) was overwritten by -o, and the run exited 0
    only because the check's own pattern file had become the reduced program."""
    (case / "input.mlir").write_text(SMALL)
    (case / "pat.txt").write_text("math\\.exp\n")
    make_script(case / "check.sh", 'grep -q -f "$2" "$1"')
    script = (case / "check.sh").read_text()
    args = how if how[0] == "-c" else ["--check", "./check.sh", *how]
    run = cli(case, "input.mlir", *args, "-j", "1")
    assert run.returncode == 2, run.stderr
    assert "ireereduce never overwrites it" in run.stderr
    assert (case / "pat.txt").read_text() == "math\\.exp\n" and (case / "check.sh").read_text() == script
    assert_clean(case)


def test_a_summary_of_a_program_without_an_op_count_gives_bytes_only():
    """Audit 10 (W2): a flaky run whose last program was not read as MLIR said
    `10 -> None ops, 441 -> 165 bytes`."""
    from types import SimpleNamespace

    from reducer.core.workspace import Size
    from reducer.session.triage import ops_summary

    def result(final_ops: int | None) -> SimpleNamespace:
        stats = SimpleNamespace(original=Size(10, 441), final=Size(final_ops, 165))
        return SimpleNamespace(stats=stats, findings=SimpleNamespace(localized=None, pass_level=None), input_size=None)

    assert ops_summary(result(None)) == ""
    assert ops_summary(result(4)) == "10 -> 4 ops, "


def test_a_full_tmpdir_is_said_full_not_read_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Audit 11 (FD3): a TMPDIR on a full file system was said "not writable". A full
    tmpfs still makes empty files: the first write is what fails. A full mount needs
    root; /dev/full gives the kernel's own ENOSPC to the probe's write. Only rundirs'
    view of tempfile is replaced (os.write patched for all was for every thread)."""
    import tempfile
    import types

    from reducer.core import rundirs

    wanted = tmp_path / "full"
    wanted.mkdir()
    monkeypatch.setenv("TMPDIR", str(wanted))
    fell_back = types.SimpleNamespace(gettempdir=lambda: str(tmp_path))  # where Python fell back to
    fell_back.TemporaryFile = lambda dir: open("/dev/full", "wb", buffering=0)  # noqa: SIM115 - closed by `with`
    monkeypatch.setattr(rundirs, "tempfile", fell_back)
    said = rundirs.tmpdir_unused()
    assert list(wanted.iterdir()) == []  # the probe's file is gone
    fell_back.TemporaryFile = tempfile.TemporaryFile
    again = rundirs.tmpdir_unused()  # writable by now (the review: it was said "not writable")
    assert again is not None and "(it could not be written to when the run started)" in again
    assert said == f"TMPDIR={wanted} cannot be used (no space left on device); temporary files go to {tmp_path}"
