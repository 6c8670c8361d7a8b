"""Paths a hostile run found unsafe: every path the run writes or removes (the output,
its lock and state directory, the reports, the log, the progress stream) is distinct
from the others and from the user's files, and a path that cannot be used is one line
with a documented exit code before anything runs, never a hang, a traceback or a file
of the user's replaced.

Each test asserts the exit code, the one line naming the user's path, that the user's
files keep their bytes and their kind (a symlink stays a symlink, a FIFO a FIFO), and
that no temp dir, lock or process is left."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import signal
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import make_script
from test_faults import BIG, SMALL, assert_clean, cli, env, error_line, ours, start, wait_for

from reducer import session


@pytest.fixture
def case(tmp_path: Path) -> Path:
    """test_faults' case: the input, and TMPDIR inside the test's directory."""
    (tmp_path / "input.mlir").write_text(SMALL)
    (tmp_path / "tmp").mkdir()
    return tmp_path


def _tree(root: Path) -> dict[str, tuple[str, bytes | str | None]]:
    """Every entry under root (the temp dir aside) with its kind and content: a file's
    bytes, a link's target; a FIFO is never opened."""
    found: dict[str, tuple[str, bytes | str | None]] = {}
    for p in sorted(root.rglob("*")):
        if p.parts[len(root.parts)] == "tmp":
            continue
        mode = os.lstat(p).st_mode
        if stat.S_ISLNK(mode):
            found[str(p.relative_to(root))] = ("link", os.readlink(p))
        elif stat.S_ISFIFO(mode):
            found[str(p.relative_to(root))] = ("fifo", None)
        elif stat.S_ISDIR(mode):
            found[str(p.relative_to(root))] = ("dir", None)
        else:
            found[str(p.relative_to(root))] = ("file", p.read_bytes())
    return found


def _no_run_left(case: Path) -> None:
    """assert_clean, for a test whose user keeps a file named like a lock."""
    wait_for(lambda: not ours(case), 15)
    assert list((case / "tmp").iterdir()) == [], "temp dirs left behind"


def _refused(case: Path, args: list[str], code: int, *words: str, **kw) -> str:
    """Run with args, expecting a refusal before the first check: the exit code, one line
    holding words, and every entry of the test's directory as it was."""
    make_script(case / "check.sh", f'touch {case}/ran; grep -q math.exp "$1"')
    before = _tree(case)
    proc = cli(case, *args, **kw)
    assert proc.returncode == code, proc.stderr
    line = error_line(proc.stderr)
    for w in words:
        assert w in line, line
    assert not (case / "ran").exists()
    assert _tree(case) == before
    return line


# -- 1. derived paths are in the collision check -----------------------------------------
@pytest.mark.parametrize(
    "args, words",
    [
        (["-o", "o.mlir", "--state-dir", "o.mlir"], ("--state-dir o.mlir", "-o o.mlir")),
        (["-o", "o.mlir", "--stats-json", "o.mlir.lock"], ("--stats-json o.mlir.lock", "lock")),
        (["-o", "o.mlir", "--log-file", "o.mlir.resume"], ("--log-file o.mlir.resume", "state directory")),
        (["-o", "o.mlir", "--progress-json", "o.mlir.lock"], ("--progress-json o.mlir.lock", "lock")),
        (["-o", "o.mlir", "--state-dir", "sd", "--report", "sd/r.md"], ("--report sd/r.md", "state directory sd")),
        (["-o", "o.mlir", "--state-dir", "s.json", "--stats-json", "s.json"], ("--stats-json s.json", "--state-dir")),
        (["-o", "input.mlir.lock"], ("o.mlir.lock", "the input")),
        (["-o", "o.mlir", "--report-json", "o.mlir.resume/r.json"], ("o.mlir.resume/r.json", "inside the state")),
    ],
    ids=[
        "state-dir-output",
        "stats-lock",
        "log-resume",
        "progress-lock",
        "report-in-state",
        "stats-state",
        "lock",
        "report-in-state-to-be",  # the run would make it: the reason is that, not a missing directory
    ],
)
def test_paths_the_run_derives_are_distinct_from_the_others(case: Path, args: list[str], words: tuple[str, ...]):
    """OUTPUT.lock and the state directory are written and removed by the run: a path
    given for anything else (or the input's lock name) that is one of them is refused."""
    (case / "sd").mkdir()
    given = "input.mlir"
    if args[-1] == "input.mlir.lock":  # the input is named as the output's lock would be
        os.rename(case / "input.mlir", case / "o.mlir.lock")
        given, args = "o.mlir.lock", ["-o", "o.mlir"]
    line = _refused(case, [given, "--check", "check.sh", *args], session.EXIT_USAGE, *words)
    assert "give" in line
    _no_run_left(case)  # the input is the only *.lock: the tree is as it was


def test_a_file_shipped_with_the_check_is_never_the_output(case: Path):
    """--check-files ships pat.txt with the check (here the script computes its name, so
    reading the script does not find it): -o pat.txt would overwrite it."""
    (case / "pat.txt").write_text("math\\.exp\n")
    line = _refused(
        case,
        ["input.mlir", "--check", "check.sh", "--executor", "dask", "--check-files", "pat.txt", "-o", "pat.txt"],
        session.EXIT_USAGE,
        "-o pat.txt is pat.txt, which --check-files ships with the check",
    )
    assert "never overwrites it" in line
    assert_clean(case)


def test_the_lock_itself_never_takes_a_file_that_is_not_a_lock(tmp_path: Path):
    """The lock's own check, for a file that appears after the paths were checked: it is
    neither written nor removed."""
    from reducer.core.state import OutputLock

    (tmp_path / "notes.txt").write_text("keep me\n")
    (tmp_path / "o.mlir.lock").write_text("my own lock notes\n")
    (tmp_path / "empty.txt").write_text("")  # what a lock holds for an instant: only the link tells
    (tmp_path / "p.mlir.lock").symlink_to("empty.txt")
    for name in ("o.mlir", "p.mlir"):
        lock = OutputLock(str(tmp_path / name))
        with pytest.raises(OSError):
            lock.acquire()
        lock.release()
    assert (tmp_path / "o.mlir.lock").read_text() == "my own lock notes\n"
    assert os.readlink(tmp_path / "p.mlir.lock") == "empty.txt" and (tmp_path / "empty.txt").read_text() == ""
    assert (tmp_path / "notes.txt").read_text() == "keep me\n"


@pytest.mark.parametrize("kind", ["file", "number", "link", "fifo"])
def test_a_users_own_file_named_like_the_lock_is_never_removed(case: Path, kind: str):
    """OUTPUT.lock that no run of ireereduce wrote (notes, a link, a FIFO) is refused,
    and stays as it was: the run would have written its PID into it and removed it.
    A file holding only a number (audit 9, S10) was taken for a lock a killed run left."""
    (case / "notes.txt").write_text("keep me\n")
    lock = case / "o.mlir.lock"
    if kind in ("file", "number"):
        lock.write_text("my own lock notes\n" if kind == "file" else "12345\n")
    elif kind == "link":
        lock.symlink_to("notes.txt")
    else:
        os.mkfifo(lock)
    make_script(case / "check.sh", f'touch {case}/ran; grep -q math.exp "$1"')
    before = _tree(case)
    proc = cli(case, "input.mlir", "--check", "check.sh", "-j", "1", "-o", "o.mlir")
    assert proc.returncode == session.EXIT_USAGE, proc.stderr
    line = error_line(proc.stderr)
    assert "o.mlir.lock" in line and "not an ireereduce lock" in line, line
    if kind == "number":  # audit 10 (W4): an older version's lock looks so too
        assert "or a lock an older ireereduce left, then remove it" in line, line
    assert not (case / "ran").exists()
    assert _tree(case) == before
    _no_run_left(case)


def test_a_lock_left_by_a_killed_run_is_taken_and_removed(case: Path):
    """The companion of the refusal above: a lock file holding our PID line (a run killed
    with SIGKILL leaves it) is a lock of ours, and never blocks a rerun."""
    (case / "o.mlir.lock").write_text("ireereduce 999999\n")
    make_script(case / "check.sh", 'grep -q math.exp "$1"')
    proc = cli(case, "input.mlir", "--check", "check.sh", "-j", "1", "-o", "o.mlir")
    assert proc.returncode == 0, proc.stderr
    assert "math.exp" in (case / "o.mlir").read_text()
    assert_clean(case)


# -- 2. a FIFO nobody reads, and Ctrl-C before the run ----------------------------------
@pytest.mark.parametrize("flag", ["--progress-json", "--log-file"])
def test_a_stream_to_a_fifo_nobody_reads_is_refused_not_waited_on(case: Path, flag: str):
    os.mkfifo(case / "pipe")
    _refused(
        case,
        ["input.mlir", "--check", "check.sh", "-j", "1", "-o", "o.mlir", flag, "pipe"],
        session.EXIT_CANNOT_WRITE,
        f"cannot write {flag} pipe",
        "no process reads the FIFO",
    )
    assert stat.S_ISFIFO(os.lstat(case / "pipe").st_mode)
    assert_clean(case)


@pytest.mark.parametrize("flag", ["--progress-json", "--log-file"])
def test_the_terminal_without_one_is_said_as_a_device_not_a_fifo(case: Path, flag: str):
    """Audit 13 (W18): /dev/tty in a session with no terminal (a cron job, a CI bot) gives
    ENXIO, as a FIFO nobody reads does, and was called "no process reads the FIFO"."""
    _refused(
        case,
        ["input.mlir", "--check", "check.sh", "-j", "1", "-o", "o.mlir", flag, "/dev/tty"],
        session.EXIT_CANNOT_WRITE,
        f"cannot write {flag} /dev/tty: the device has nothing behind it",
        "/dev/tty without a terminal",
        start_new_session=True,  # no controlling terminal
    )
    assert_clean(case)


@pytest.mark.parametrize("flag", ["--progress-json", "--log-file"])
def test_a_stream_to_a_fifo_with_a_reader_gets_the_lines(case: Path, flag: str):
    """The refusal above must not be the only answer: with a reader, the lines arrive."""
    make_script(case / "check.sh", 'grep -q math.exp "$1"')
    os.mkfifo(case / "pipe")
    reader = os.open(case / "pipe", os.O_RDONLY | os.O_NONBLOCK)
    ours_too = os.open(case / "pipe", os.O_WRONLY)  # no EOF before the run has opened it
    os.set_blocking(reader, True)
    chunks: list[bytes] = []
    drain = threading.Thread(target=lambda: chunks.extend(iter(lambda: os.read(reader, 1 << 16), b"")))
    drain.start()
    try:
        proc = start(case, "input.mlir", "--check", "check.sh", "-j", "1", "-o", "o.mlir", flag, "pipe")
        _, err = proc.communicate(timeout=120)
    finally:
        os.close(ours_too)
        drain.join()
        os.close(reader)
    assert proc.returncode == 0, err
    assert (b'"event": "reduced"' if flag == "--progress-json" else b"MainProcess") in b"".join(chunks)
    assert stat.S_ISFIFO(os.lstat(case / "pipe").st_mode)
    assert_clean(case)


def test_a_slow_reader_of_the_progress_stream_loses_nothing(case: Path):
    """The FIFO is opened without waiting, then written as any stream is: a reader that
    falls behind (the pipe full) slows the run down, and gets every event. (The log
    shares the FIFO: the events alone are less than a page.)"""
    import fcntl

    (case / "input.mlir").write_text(BIG)
    make_script(case / "check.sh", 'grep -q math.exp "$1"')
    os.mkfifo(case / "pipe")
    reader = os.open(case / "pipe", os.O_RDONLY | os.O_NONBLOCK)
    ours_too = os.open(case / "pipe", os.O_WRONLY)
    size = fcntl.fcntl(reader, 1031, 4096)  # F_SETPIPE_SZ: a page, so that the events fill it
    os.set_blocking(reader, True)

    def blocked(pid: int) -> bool:
        """A thread of the run waits for room in a pipe (wchan: pipe_write)."""
        for task in Path(f"/proc/{pid}/task").glob("*"):
            with contextlib.suppress(OSError):
                if "pipe_write" in (task / "wchan").read_text():
                    return True
        return False

    drain = None
    try:
        both = ["--progress-json", "pipe", "--log-file", "pipe", "-vv"]  # more than a page between them
        proc = start(case, "input.mlir", "--check", "check.sh", "-j", "1", *both)
        wait_for(lambda: blocked(proc.pid) or proc.poll() is not None)  # full: now the run waits for us
        chunks: list[bytes] = []
        drain = threading.Thread(target=lambda: chunks.extend(iter(lambda: os.read(reader, 1 << 16), b"")))
        drain.start()
        _, err = proc.communicate(timeout=120)
    finally:
        os.close(ours_too)
        if drain is not None:
            drain.join()
        os.close(reader)
    assert proc.returncode == 0, err
    got = b"".join(chunks)
    events = [json.loads(line)["event"] for line in got.splitlines() if line.startswith(b"{")]
    assert len(got) > size and events[0] == "start" and events[-1] == "reduced", events
    assert_clean(case)


def test_progress_and_stats_to_stdout_share_it(case: Path):
    """`--progress-json /dev/stdout --stats-json /dev/stdout > file`: the events go
    through stdout's own descriptor, not the file opened again from its start, where the
    stats would then be written over them. (A link stands in for /dev/stdout.)"""
    make_script(case / "check.sh", 'grep -q math.exp "$1"')
    (case / "out").symlink_to("/dev/stdout")
    with open(case / "stdout.txt", "wb") as stdout:
        args = ["--progress-json", "out", "--stats-json", "out", "-q"]
        proc = start(case, "input.mlir", "--check", "check.sh", "-j", "1", *args, stdout=stdout)
        _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    text, values, at = (case / "stdout.txt").read_text(), [], 0
    while text[at:].strip():  # one JSON value after another, nothing written over
        value, end = json.JSONDecoder().raw_decode(text, len(text) - len(text[at:].lstrip()))
        values.append(value)
        at = end
    events = [v["event"] for v in values if "event" in v]
    assert events[0] == "start" and events[-1] == "reduced", events
    assert [v["status"] for v in values if "event" not in v] == ["reduced"]
    assert os.readlink(case / "out") == "/dev/stdout"
    assert_clean(case)


def test_the_log_file_is_appended_to(case: Path):
    """As logging.FileHandler did: a second run's log follows the first's."""
    make_script(case / "check.sh", 'grep -q math.exp "$1"')
    (case / "run.log").write_text("an earlier run\n")
    proc = cli(case, "input.mlir", "--check", "check.sh", "-j", "1", "--log-file", "run.log")
    assert proc.returncode == 0, proc.stderr
    log = (case / "run.log").read_text()
    assert log.startswith("an earlier run\n") and "MainProcess" in log
    assert_clean(case)


def _blocked_reading_a_pipe(pid: int) -> bool:
    """Waiting for the pipe: in read, or in poll (the input is read in chunks)."""
    try:
        return any(word in Path(f"/proc/{pid}/wchan").read_text() for word in ("pipe_read", "pipe_wait", "poll"))
    except OSError:
        return False


def test_ctrl_c_before_the_run_starts_is_the_interrupt_exit(case: Path):
    """Ctrl-C while the input is read from stdin (before any check): exit 130 with
    ireereduce's line, never click's "Aborted!" and exit 1."""
    make_script(case / "check.sh", 'grep -q math.exp "$1"')
    proc = start(case, "-", "--check", "check.sh", "-j", "1", "-o", "o.mlir", stdin=subprocess.PIPE)
    wait_for(lambda: _blocked_reading_a_pipe(proc.pid))
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == session.EXIT_INTERRUPTED, err
    assert "Aborted" not in err and "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith("ireereduce: interrupted"), err
    assert not (case / "o.mlir").exists() and not (case / "o.mlir.resume").exists()
    assert_clean(case)


# -- 3. --progress-json - with stdout closed ---------------------------------------------
def test_progress_to_a_closed_stdout_is_one_line(case: Path):
    make_script(case / "check.sh", f'touch {case}/ran; grep -q math.exp "$1"')
    before = _tree(case)
    proc = subprocess.run(
        f"exec {sys.executable} -m reducer.cli input.mlir --check check.sh -j 1 -o o.mlir --progress-json - >&-",
        shell=True,
        cwd=case,
        stderr=subprocess.PIPE,
        text=True,
        env=env(case),
        timeout=120,
    )
    assert proc.returncode == session.EXIT_USAGE, proc.stderr
    line = error_line(proc.stderr)
    assert "--progress-json -" in line and "standard output is closed" in line, line
    assert not (case / "ran").exists()
    assert _tree(case) == before  # no o.mlir, no o.mlir.resume
    assert_clean(case)


# -- 4. a file name that is not UTF-8 -----------------------------------------------------
def test_an_input_name_that_is_not_utf8_round_trips_into_the_reports(case: Path):
    name = os.fsdecode(b"in\xff.mlir")
    os.rename(case / "input.mlir", case / name)
    make_script(case / "check.sh", 'grep -q math.exp "$1"')
    args = [name, "--check", "check.sh", "-j", "1", "--report", "r.md", "--report-json", "r.json"]
    proc = cli(case, *args, errors="surrogateescape")  # stderr names the file with its own bytes
    assert proc.returncode == 0, proc.stderr
    assert "internal error" not in proc.stderr
    # the summary names the output with its own bytes too, not Python's `\udcff` escape (audit 8, W1)
    assert b"ireereduce: in\xff.reduced.mlir" in os.fsencode(proc.stderr), proc.stderr
    assert b"in\xff.mlir" in (case / "r.md").read_bytes()  # the name's own bytes, as a shell gives them back
    report = json.loads((case / "r.json").read_bytes())
    assert os.fsencode(report["input"]) == b"in\xff.mlir"
    assert (case / name).read_text() == SMALL
    assert "math.exp" in (case / os.fsdecode(b"in\xff.reduced.mlir")).read_text()
    assert_clean(case)


def test_a_name_goes_out_as_its_bytes_and_what_the_stream_cannot_encode_escaped():
    """The handler behind the summary's names: an undecodable name byte as itself; any
    other character a stream (here ASCII) cannot encode still escaped, never an error."""
    code = "import os, sys; from reducer.options import names_as_given; names_as_given(); "
    code += "sys.stderr.write(os.fsdecode(b'a\\xff') + '\\xe9\\n')"
    env = dict(os.environ, PYTHONIOENCODING="ascii")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, env=env, timeout=60)
    assert proc.returncode == 0 and proc.stderr == b"a\xff\\xe9\n", proc.stderr
    closed = "import sys; sys.stdout.close(); from reducer.options import names_as_given; names_as_given()"
    proc = subprocess.run([sys.executable, "-c", closed], capture_output=True, timeout=60)  # an embedder's
    assert proc.returncode == 0 and proc.stderr == b"", proc.stderr


# -- 5. the lock is beside the output's target -------------------------------------------
def test_a_link_to_the_output_and_the_output_share_one_lock(case: Path):
    (case / "input.mlir").write_text(BIG)
    make_script(case / "check.sh", 'sleep 0.3; grep -q math.exp "$1"')
    (case / "link.mlir").symlink_to("real.mlir")
    first = start(case, "input.mlir", "--check", "check.sh", "-j", "1", "-o", "link.mlir")
    try:
        wait_for(lambda: (case / "real.mlir.lock").exists())
        second = cli(case, "input.mlir", "--check", "check.sh", "-j", "1", "-o", "real.mlir", "--no-state")
    finally:
        first.send_signal(signal.SIGTERM)
        first.communicate(timeout=60)
    assert second.returncode == session.EXIT_BUSY, second.stderr
    assert f"(PID {first.pid})" in error_line(second.stderr)
    assert (case / "link.mlir").is_symlink() and os.readlink(case / "link.mlir") == "real.mlir"
    assert not (case / "link.mlir.lock").exists()
    assert (case / "input.mlir").read_text() == BIG
    assert_clean(case)


# -- 6. a full file system under the state directory ------------------------------------
def test_a_full_state_directory_is_named_not_the_temp_dir(case: Path, monkeypatch: pytest.MonkeyPatch):
    """The journal's write fails as a full disk fails it (an OSError without a file
    name): the line names the state directory and the ways out, not TMPDIR."""
    from reducer.core import cache

    (case / "input.mlir").write_text(BIG)
    make_script(case / "check.sh", 'grep -q math.exp "$1"')

    class Full:
        def __init__(self, inner) -> None:
            self.inner = inner

        def write(self, data: bytes) -> int:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        def __getattr__(self, name: str):
            return getattr(self.inner, name)

    real = cache.VerdictJournal.__init__

    def opened(self, path: str) -> None:
        real(self, path)
        self._file = Full(self._file)

    monkeypatch.setattr(cache.VerdictJournal, "__init__", opened)
    monkeypatch.setenv("TMPDIR", str(case / "tmp"))
    monkeypatch.chdir(case)
    with pytest.raises(session.UserError) as err:
        session.reduce_file(session.Settings(input="input.mlir", check="check.sh", jobs=1))
    assert err.value.code == session.EXIT_CANNOT_WRITE
    message = str(err.value)
    assert message.startswith("cannot write the state directory input.reduced.mlir.resume: No space left"), message
    assert "--state-dir" in message and "--no-state" in message and "temporary" not in message
    assert (case / "input.mlir").read_text() == BIG
    assert_clean(case)


# -- weak points ---------------------------------------------------------------------------
def test_output_to_stdout_is_refused(case: Path):
    line = _refused(case, ["input.mlir", "--check", "check.sh", "-o", "-"], session.EXIT_USAGE, "-o -")
    assert "./-" in line  # how to name a file called "-"
    assert not (case / "-").exists()
    assert_clean(case)


@pytest.mark.parametrize(
    "flag", ["--stats-json", "-o", "--report", "--report-json", "--log-file", "--progress-json", "--state-dir"]
)
def test_an_empty_path_is_refused(case: Path, flag: str):
    _refused(case, ["input.mlir", "--check", "check.sh", flag, ""], session.EXIT_USAGE, f"{flag} is empty")
    assert_clean(case)


def test_print_diff_into_a_closed_pipe_is_quiet(case: Path):
    """`--print-diff | head -1`: the reader goes away; the run goes on to its result
    and its exit code, with no traceback and no "Broken pipe" on stderr."""
    (case / "input.mlir").write_text(BIG)
    make_script(case / "check.sh", 'grep -q math.exp "$1"')
    proc = start(
        case, "input.mlir", "--check", "check.sh", "-j", "1", "-o", "o.mlir", "--print-diff", stdout=subprocess.PIPE
    )
    assert proc.stdout is not None
    proc.stdout.close()  # every diff line now meets a closed pipe
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    for noise in ("Broken pipe", "BrokenPipe", "Traceback", "Exception ignored", "error"):
        assert noise not in err, err
    assert "math.exp" in (case / "o.mlir").read_text()
    assert (case / "input.mlir").read_text() == BIG
    assert_clean(case)


def test_an_output_through_a_missing_directory_is_a_bad_path(case: Path):
    """`./sub/../o.mlir`: realpath drops `sub/..` without looking; the kernel does not."""
    line = _refused(
        case, ["input.mlir", "--check", "check.sh", "-o", "./sub/../o.mlir"], session.EXIT_USAGE, "-o ./sub/../o.mlir"
    )
    assert "./sub/.." in line
    assert_clean(case)


# -- reports, stats and progress never replace a file of the user's (audit 6, w09) --------
@pytest.mark.parametrize(
    "flag, name",
    [("--report", "r.md"), ("--report-json", "r.json"), ("--stats-json", "s.json"), ("--progress-json", "p.jsonl")],
)
def test_a_report_path_holding_a_users_file_is_refused(case: Path, flag: str, name: str):
    (case / name).write_text("# my notes\n{}\n")
    _refused(
        case,
        ["input.mlir", "-c", "./check.sh", flag, name],
        session.EXIT_USAGE,
        flag,
        name,
        "not a file ireereduce wrote",
    )


def test_a_rerun_replaces_the_reports_it_wrote(case: Path):
    """What the refusal must not break: the same command twice, each time new reports."""
    make_script(case / "check.sh", 'grep -q math.exp "$1"')
    names = {"--report": "r.md", "--report-json": "r.json", "--stats-json": "s.json", "--progress-json": "p.jsonl"}
    args = ["input.mlir", "-c", "./check.sh", "-o", "out.mlir", *(a for pair in names.items() for a in pair)]
    first = cli(case, *args)
    assert first.returncode == session.EXIT_OK, first.stderr
    for name in names.values():
        (case / name).write_bytes((case / name).read_bytes() + b"\n(stale)")
    (case / "out.mlir").unlink()
    second = cli(case, *args)
    assert second.returncode == session.EXIT_OK, second.stderr
    assert all(b"(stale)" not in (case / name).read_bytes() for name in names.values())
    assert_clean(case)


@pytest.mark.parametrize("kind", ["file", "folder of the user's"])
def test_the_reports_inputs_folder_holding_a_users_file_is_refused(case: Path, kind: str):
    if kind == "file":
        (case / "r.md.inputs").write_text("mine")
    else:
        (case / "r.md.inputs").mkdir()
        (case / "r.md.inputs" / "notes.txt").write_text("mine")
    _refused(
        case, ["input.mlir", "-c", "./check.sh", "--report", "r.md"], session.EXIT_USAGE, "--report", "r.md.inputs"
    )


def test_an_earlier_runs_file_is_told_by_content_not_by_flag_or_spacing(case: Path):
    """Ours under another flag, or compacted by `jq -c`, is replaced; a draft that quotes a
    report's summary line further down, or a bot's log holding events past its first
    line, is the user's."""
    make_script(case / "check.sh", 'grep -q math.exp "$1"')
    (case / "r.json").write_text('{"a":1,"schema":"ireereduce-stats/1"}\n')
    done = cli(case, "input.mlir", "-c", "./check.sh", "-o", "out.mlir", "--report-json", "r.json")
    assert done.returncode == session.EXIT_OK, done.stderr
    for name, text in [
        ("draft.md", "# my bug\n\n\n\n\n\nReduced by ireereduce 1.0 from `m.mlir`.\n"),
        ("runs.jsonl", 'my bot\n{"schema": "ireereduce-progress/1"}\n'),
    ]:
        (case / name).write_text(text)
        flag = "--report" if name.endswith(".md") else "--progress-json"
        _refused(
            case, ["input.mlir", "-c", "./check.sh", flag, name], session.EXIT_USAGE, "not a file ireereduce wrote"
        )


def test_the_apis_stats_json_is_checked_as_the_clis(case: Path):
    """The review: `reducer.reduce(..., stats_json=...)` was never among the checked paths,
    and replaced a file of the user's (or would have replaced the input)."""
    from reducer import api

    make_script(case / "check.sh", 'grep -q math.exp "$1"')
    (case / "notes.json").write_text("mine\n")
    for target in ("notes.json", "input.mlir"):
        with pytest.raises(session.UserError) as err:
            api.reduce(case / "input.mlir", check=case / "check.sh", output=case / "o.mlir", stats_json=case / target)
        assert err.value.code == session.EXIT_USAGE, err.value
    assert (case / "notes.json").read_text() == "mine\n" and (case / "input.mlir").read_text() == SMALL
    assert not (case / "o.mlir").exists()


def test_an_input_or_check_name_not_utf8_or_in_a_loop_is_said_as_it_is(case: Path):
    """Audit 10 (W1, W5): such names showed as Python's `'m\\udce9.mlir'`, and an input
    that is a symlink in a loop was said not to exist."""
    missing = os.fsdecode(b"m\xe9.mlir")
    proc = cli(case, missing, "--check", "check.sh", errors="surrogateescape")
    assert proc.returncode == session.EXIT_BAD_INPUT
    assert b"input file 'm\xe9.mlir' does not exist" in os.fsencode(error_line(proc.stderr))
    check = os.fsdecode(b"c\xe9.sh")
    (case / check).write_text("#!/bin/sh\nexit 0\n")
    proc = cli(case, "input.mlir", "--check", f"./{check}", errors="surrogateescape")
    assert proc.returncode == session.EXIT_BAD_CHECK
    assert b"check script './c\xe9.sh' is not executable" in os.fsencode(error_line(proc.stderr))
    os.symlink("l2", case / "l1")
    os.symlink("l1", case / "l2")
    proc = cli(case, "l1", "--check", "check.sh")
    assert proc.returncode == session.EXIT_BAD_INPUT
    assert "input 'l1' is a symlink that leads back to itself" in error_line(proc.stderr)


def test_a_dangling_link_as_input_or_check_says_where_it_leads(case: Path):
    """Audit 11 (A6): `ls` shows the link, so "does not exist" read as wrong; the line now
    says it is a link and names what it leads to."""
    make_script(case / "check.sh", 'grep -q math.exp "$1"')
    os.symlink("gone.mlir", case / "in.mlir")
    proc = cli(case, "in.mlir", "--check", "check.sh")
    assert proc.returncode == session.EXIT_BAD_INPUT
    assert "input file 'in.mlir' is a symlink to 'gone.mlir', which does not exist" in error_line(proc.stderr)
    os.symlink("gone.sh", case / "c.sh")
    proc = cli(case, "input.mlir", "--check", "./c.sh")
    assert proc.returncode == session.EXIT_BAD_CHECK
    assert "check script './c.sh' is a symlink to 'gone.sh', which does not exist" in error_line(proc.stderr)
    os.symlink("in.mlir", case / "chain.mlir")  # chain.mlir -> in.mlir -> gone.mlir: where it ends
    proc = cli(case, "chain.mlir", "--check", "check.sh")
    said = f"input file 'chain.mlir' is a symlink to '{os.path.realpath(case / 'gone.mlir')}', which does not exist"
    assert said in error_line(proc.stderr)
    assert_clean(case)
