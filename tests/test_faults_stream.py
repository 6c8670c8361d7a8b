"""An input that is an endless stream (issue 27, XA: `<(yes "// x")` was read until the
machine ran out of memory, past --max-time): it is read in chunks, up to --max-time or
a size cap, and stops with one line."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from test_faults import assert_clean, command, error_line
from test_faults_audit import make_case

from reducer import session
from reducer.session import stream


@pytest.fixture
def case(tmp_path: Path) -> Path:
    return make_case(tmp_path)


#: Writers that never end: as fast as `yes` goes, about 50 MB/s (data at every poll, yet
#: well under the size cap of a small CI machine in the 2 s of --max-time), a line each 10 ms.
WRITERS = {
    "yes": ["yes", "// x"],
    "fast": [
        sys.executable,
        "-c",
        "import sys, time\nwhile True:\n sys.stdout.buffer.write(b'// x\\n' * 10000)"
        "\n sys.stdout.flush()\n time.sleep(0.001)",
    ],
    "slow": ["sh", "-c", 'while :; do echo "// x"; sleep 0.01; done'],
}


def _endless(kind: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(WRITERS[kind], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)


@pytest.mark.parametrize("kind", ["fast", "slow"])
@pytest.mark.parametrize("how", ["stdin", "path"])
def test_an_endless_input_stops_at_max_time(case: Path, kind: str, how: str):
    writer = _endless(kind)
    assert writer.stdout is not None
    fd = writer.stdout.fileno()
    try:
        given = "-" if how == "stdin" else f"/dev/fd/{fd}"
        args = (given, "--check", "./check.sh", "-o", "out.mlir", "--max-time", "2")
        if how == "stdin":
            done = command(case, *args, stdin=writer.stdout)
        else:
            done = command(case, *args, pass_fds=(fd,))
    finally:
        writer.kill()
        writer.wait()
    assert done.returncode == session.EXIT_STOPPED, done.stderr
    line = error_line(done.stderr)
    assert "--max-time 2 ran out while reading the input" in line and "still coming" in line
    assert not (case / "out.mlir").exists()
    assert_clean(case)


def test_an_endless_stream_stops_at_the_size_cap():
    """Without --max-time, the cap: here 4 MiB (the real one is a quarter of the memory
    available). The reader runs in a process of its own, so a reader with no cap is
    a timeout here and not a machine out of memory."""
    code = (
        "import sys; from reducer.session import stream\n"
        "try:\n    stream.read(sys.stdin.buffer, '-', None, limit=4 << 20)\n"
        "except Exception as exc:\n    print(exc.code, exc)"
    )
    writer = _endless("yes")
    try:
        done = subprocess.run(
            [sys.executable, "-c", code], stdin=writer.stdout, capture_output=True, text=True, timeout=60
        )
    finally:
        writer.kill()
        writer.wait()
    assert done.stdout.startswith(f"{session.EXIT_BAD_INPUT} the input '-' is a stream that gave more than 4 MiB")


def test_a_stream_that_ends_is_read_whole():
    """Chunks joined in order: 3 MiB and a bit, across the 1 MiB chunk size, from a
    writer that ends."""
    data = b"".join(b"// line %d\n" % n for n in range(300_000))
    read_end, write_end = os.pipe()
    with os.fdopen(read_end, "rb") as f, os.fdopen(write_end, "wb") as sink:
        feeder = threading.Thread(target=lambda: (sink.write(data), sink.close()))
        feeder.start()
        got = stream.read(f, "pipe", max_time=60)
        feeder.join()
    assert got == data


def test_the_cap_is_a_share_of_memory_and_never_below_the_floor(tmp_path: Path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       25165824 kB\nMemAvailable:    8388608 kB\n")  # 8 GiB available
    assert stream.cap(str(meminfo)) == 2 << 30
    meminfo.write_text("MemAvailable:     102400 kB\n")  # 100 MiB: the floor
    assert stream.cap(str(meminfo)) == stream.FLOOR
    assert stream.cap() >= stream.FLOOR  # this machine's


@pytest.mark.parametrize("name", ["/dev/stdin", "/dev/fd/0"])
def test_a_file_redirected_to_stdin_without_an_output_asks_for_one(case: Path, name: str):
    """Audit 16 (W5): `ireereduce /dev/stdin < prog.mlir` wrote /dev/stdin.reduced.mlir,
    a file in /dev (as root), with its lock and state beside it; /dev/fd/0 said that
    /proc/PID/fd was not writable."""
    with open(case / "input.mlir", "rb") as given:
        done = command(case, name, "--check", "./check.sh", stdin=given)
    assert done.returncode == session.EXIT_USAGE, done.stderr
    assert (
        error_line(done.stderr)
        == f"ireereduce: error: reading the input from a stream ({name}) needs -o FILE for the result"
    )
    assert not any(n.endswith(".reduced.mlir") for n in os.listdir("/dev"))
    with open(case / "input.mlir", "rb") as given:
        done = command(case, name, "--check", "./check.sh", "-o", "out.mlir", stdin=given)
    assert done.returncode == 0, done.stderr
    assert_clean(case)


def test_a_stream_input_without_an_output_asks_for_one(case: Path):
    """Audit 7 (W1): `ireereduce <(cat m.mlir)` said /proc/PID/fd was not writable."""
    writer = subprocess.Popen(["cat", str(case / "input.mlir")], stdout=subprocess.PIPE)
    assert writer.stdout is not None
    fd = writer.stdout.fileno()
    try:
        done = command(case, f"/dev/fd/{fd}", "--check", "./check.sh", pass_fds=(fd,))
    finally:
        writer.kill()
        writer.wait()
    assert done.returncode == session.EXIT_USAGE, done.stderr
    assert error_line(done.stderr) == (
        f"ireereduce: error: reading the input from a stream (/dev/fd/{fd}) needs -o FILE for the result"
    )
    assert_clean(case)
