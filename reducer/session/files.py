"""The user's files: checking every path the run will write before anything runs, and
writing results atomically (the input is read in `source`)."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import stat
import sys
import tempfile
from collections.abc import Iterable
from typing import BinaryIO, TextIO

import attrs

from reducer.core.executor import ExecutorLost
from reducer.core.oracle import whole, write_data
from reducer.core.state import KINDS, MARKER, Busy, OutputLock, RunState, foreign_lock
from reducer.session.scripts import script_and_args, shipped_files
from reducer.session.settings import (
    EXIT_BAD_CHECK,
    EXIT_BAD_INPUT,
    EXIT_BUSY,
    EXIT_CANNOT_WRITE,
    EXIT_CHECK_CHANGED_FILES,
    EXIT_EXECUTOR,
    EXIT_USAGE,
    Settings,
    UserError,
)
from reducer.session.source import BYTECODE_SUFFIX, EMPTY_INPUT_NAME, loops


def default_state_dir(output: str) -> str:
    return output + ".resume"


def default_output(path: str) -> str:
    """INPUT.reduced.mlir beside the input; text for a .mlirbc input too (-o x.mlirbc for bytecode)."""
    stem, ext = os.path.splitext(path)
    return f"{stem}.reduced{ext if ext and ext != BYTECODE_SUFFIX else '.mlir'}"


def lock_path(output: str) -> str:
    """OUTPUT.lock, beside the file the output leads to: `-o link.mlir` (a link to
    real.mlir) and `-o real.mlir` write one file, so they must take one lock."""
    return (resolve(output).path if os.path.islink(output) else output) + ".lock"


def take_lock(output: str) -> OutputLock:
    """OUTPUT.lock, taken: one run writes an output at a time (a reduction, --localize-only);
    another's is one line naming its PID (exit 9)."""
    lock = OutputLock(output, lock_path(output))
    try:
        lock.acquire()
    except Busy as exc:
        raise UserError(
            EXIT_BUSY,
            f"another ireereduce run (PID {exc.pid}) is writing {output}; wait for it, or give this one another -o",
        ) from None
    except OSError as exc:
        raise UserError(EXIT_CANNOT_WRITE, f"cannot create the lock file {lock.path}: {exc.strerror}") from None
    return lock


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


#: A name for a descriptor: /dev/stdout leads to /proc/self/fd/1.
_DESCRIPTOR = re.compile(r"^/(?:dev/fd|proc/(self|thread-self|\d+)/fd)/(\d+)$")
_STANDARD = {0: "standard input", 1: "standard output", 2: "standard error"}


@attrs.frozen
class Target:
    """Where a path the user gave leads. A symlink (`latest.mlir` into a results folder)
    is written through, the link kept; a device, a FIFO or /dev/stdout is a stream,
    written in place, never replaced by a file."""

    path: str  # every symlink followed
    kind: str | None = None  # None: a regular file, or none yet; else "a FIFO", ...
    fd: int | None = None  # a descriptor of this process it names (/dev/stdout): written through it

    @property
    def stream(self) -> bool:
        return self.kind is not None and self.kind != "a directory"


def resolve(path: str) -> Target:
    """Follow path's symlinks to what it names. /dev/stdout is told apart before
    realpath would follow /proc/self/fd/1 to the file the shell redirected it to."""
    here = os.path.abspath(path)
    for _ in range(40):
        named = _DESCRIPTOR.match(here)
        if named and named.group(1) in (None, "self", "thread-self", str(os.getpid())):
            fd = int(named.group(2))
            return Target(here, _STANDARD.get(fd, f"file descriptor {fd}"), fd)
        try:
            here = os.path.normpath(os.path.join(os.path.dirname(here), os.readlink(here)))
        except OSError:
            break
    real = os.path.realpath(path)
    try:
        mode = os.stat(real).st_mode
    except OSError:
        return Target(real)
    return Target(real, KINDS.get(stat.S_IFMT(mode)))


def write_atomically(path: str, data: bytes) -> None:
    """Replace path in one step, so an interruption never leaves a half-written repro.
    A symlink is written through (the target is replaced beside itself), and a device,
    FIFO or /dev/stdout is written as a stream (`Target`). The file gets the mode a
    plain write would give (the old file's, else the umask's), and an error names
    path, not the temporary file."""
    target = resolve(path)
    if target.kind is not None:
        _write_stream(path, target, data)
        return
    directory = os.path.dirname(target.path)
    try:
        mode = os.stat(target.path).st_mode & 0o7777
    except OSError:
        mode = 0o666 & ~_umask()
    try:
        fd, tmp = tempfile.mkstemp(prefix=".ireereduce-", dir=directory)
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, path) from None
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), mode)
            write_data(f, data)
        os.replace(tmp, target.path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise OSError(exc.errno, exc.strerror, path) from None
        raise


def _write_stream(path: str, target: Target, data: bytes) -> None:
    """Write data into a device, a FIFO or one of this process's descriptors, in place.
    A FIFO nobody reads is an error, not a wait without end."""
    try:
        if target.kind in ("a directory", "a socket"):
            raise OSError(errno.EINVAL, f"it is {target.kind}")
        if target.fd is not None:
            for stream in (sys.stdout, sys.stderr):  # what they hold goes first
                with contextlib.suppress(Exception):
                    stream.flush()
            fd = target.fd
        else:
            fd = os.open(target.path, os.O_WRONLY | os.O_NONBLOCK)
            os.set_blocking(fd, True)
        try:
            view = memoryview(whole(data))
            while view:
                view = view[os.write(fd, view) :]
        finally:
            if fd != target.fd:
                os.close(fd)
    except OSError as exc:
        raise OSError(exc.errno, _unopened(path, exc), path) from None


def _unopened(path: str, exc: OSError) -> str:
    """ENXIO is a FIFO nobody reads, or a device with nothing behind it (/dev/tty when
    the run has no terminal): each said as what it is."""
    if exc.errno != errno.ENXIO:
        return str(exc.strerror)
    with contextlib.suppress(OSError):
        if stat.S_ISFIFO(os.stat(path).st_mode):
            return "no process reads the FIFO"
    return "the device has nothing behind it (no such device or address; /dev/tty without a terminal?)"


def open_stream(flag: str, path: str, append: bool = False) -> TextIO:
    """A file written as the run goes (--log-file, appended to; --progress-json), opened
    once before it starts: a FIFO nobody reads is an error now, as for the reports at
    the end, not a wait without end; /dev/stdout is this process's stdout (not the file
    it leads to opened again at its start). A name that is not UTF-8 is written as its
    own bytes."""
    target = resolve(path)
    try:
        if target.fd is not None:
            fd = os.dup(target.fd)
        else:
            how = os.O_APPEND if append else os.O_TRUNC
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | how | os.O_NONBLOCK, 0o666)
            os.set_blocking(fd, True)
    except OSError as exc:
        raise UserError(EXIT_CANNOT_WRITE, f"cannot write {flag} {path}: {_unopened(path, exc)}") from None
    return open(fd, "w", encoding="utf-8", errors="surrogateescape")


#: Where each path the run writes led when it was checked (`check_paths`): a report or
#: stats file written at the end goes nowhere else (a link re-pointed meanwhile, at the
#: input or a file of the user's, is left alone).
LEADS: dict[str, str] = {}


def save(path: str, data: bytes, what: str, best: str | None = None) -> None:
    """write_atomically, with a failure a UserError that says where the best so far is;
    a path that leads elsewhere than it did when checked is not written (exit 11)."""
    was = LEADS.get(os.path.abspath(path))
    if was is not None and os.path.realpath(path) != was:
        raise UserError(
            EXIT_CHECK_CHANGED_FILES,
            f"{what} {path} leads to {os.path.realpath(path)} now, not to {was} as when the run started; it "
            "was not written there" + (f"; {best}" if best else ""),
        )
    try:
        write_atomically(path, data)
    except OSError as exc:
        raise UserError(
            EXIT_CANNOT_WRITE, f"cannot write {what} {path}: {exc.strerror}" + (f"; {best}" if best else "")
        ) from None


def check_paths(settings: Settings, also: Iterable[tuple[str, str | None]] = ()) -> None:
    """Every path the run will write or remove, checked before anything runs: none may be
    the input, the check or a file the check uses, or another of them (the output's lock
    and state directory included), and each must be writable. After a reduction of hours
    is too late to find out. `also`: the caller's own (flag, path) pairs, such as the
    CLI's --progress-json, where "-" is stdout."""
    try:
        os.getcwd()  # every relative path is read against it
    except FileNotFoundError:
        raise UserError(EXIT_USAGE, "the current directory was removed; cd to one that exists and run again") from None
    if not settings.input and settings.text is None:  # an empty $VAR: the default output would be ".reduced.mlir"
        raise UserError(EXIT_BAD_INPUT, EMPTY_INPUT_NAME)
    output = _output(settings)
    also = list(also)
    named = [
        ("the output" if settings.output is None else "-o", output),
        ("--report", settings.report),
        ("--report-json", settings.report_json),
        ("--stats-json", settings.stats_json),
        ("--log-file", settings.log_file),
        *also,
    ]
    for flag, path in [("-o", settings.output), *named, ("--state-dir", settings.state_dir)]:
        if path == "":
            raise UserError(
                EXIT_USAGE, f"{flag} is empty; give a {'directory' if flag == '--state-dir' else 'file'} name"
            )
    protected = read_by_the_run(settings)
    state = None if settings.no_state else settings.state_dir or default_state_dir(output)
    refused = None if state is None else RunState(state, output).refusal()  # refused below, once the paths are
    inside = None if state is None or refused else os.path.realpath(state) + os.sep  # nothing given goes there
    # A report's inputs go in REPORT.inputs at the end: nothing else of the run's may be there.
    ships = report_inputs(settings, output)
    folders = {os.path.realpath(ships[0]): ships[0]} if ships else {}
    if state is not None and (into := _within(state, folders)):
        raise UserError(
            EXIT_USAGE, f"the state directory {state} is in {into}, where the report's inputs go; give another"
        )
    # A hard link is the same file under another name: realpath does not see it.
    protected_files = {inode: what for real, what in protected.items() if (inode := _inode(real)) is not None}
    seen: dict[str, tuple[str, str]] = {}  # real path: the flag and the path that name it
    seen_files: dict[tuple[int, int], tuple[str, str]] = {}  # a regular file's (device, inode): the same
    for flag, path in named:
        if path is None:
            continue
        stdout = path == "-" and (flag, path) in also  # for Settings' own paths, "-" is a file
        real = os.path.realpath("/dev/stdout" if stdout else path)
        LEADS[os.path.abspath(path)] = real
        inode = None if stdout else _inode(path)
        what = protected.get(real) or (protected_files.get(inode) if inode is not None else None)
        if what is not None:
            link = "" if real in protected else " (a hard link to it)"
            raise UserError(
                EXIT_USAGE, f"{flag} {path} is {what}{link}; ireereduce never overwrites it (give another path)"
            )
        _not_among_the_runs(flag, path, real, (state, inside), folders)
        if not stdout and loops(path):
            raise UserError(EXIT_USAGE, f"{flag} {path} is a symlink that leads back to itself; give another path")
        target = Target("-", "standard output", 1) if stdout else resolve(path)
        other = seen[real] if real in seen else seen_files.get(inode) if inode is not None else None
        if other is not None and not target.stream:  # two reports may share a stream, as on a terminal
            said = (
                f"{other[0]} and {flag} both name {path}"
                if other[1] == path
                else f"{other[0]} {other[1]} and {flag} {path} are one file"
            )
            raise UserError(EXIT_USAGE, f"{said}; give each its own file")
        seen[real] = (flag, path)
        if inode is not None:
            seen_files[inode] = (flag, path)
        _check_writable(flag, path, target, output_file=path == output)
        if not target.stream:
            _not_the_users(flag, path, target.path)
    if ships:  # a mismatch's report ships the inputs of its commands there
        check_inputs_folder("--report" if settings.report else "--report-json", ships[0], protected)
    _check_derived(settings, output, refused, protected, {real: f"{f} {p}" for real, (f, p) in seen.items()})


def report_inputs(settings: Settings, output: str) -> tuple[str, str] | None:
    """Where a mismatch's report ships the inputs its commands read, and what that folder
    is beside: REPORT.inputs beside the first report that is a file; OUTPUT.inputs, beside
    the reduced program, when the reports go to streams (a device, a FIFO, /dev/stdout,
    `-`), which have no folder of their own. None without a report."""
    given = [
        (w, what) for w, what in ((settings.report, "this report"), (settings.report_json, "the JSON report")) if w
    ]
    for where, what in given:
        if where != "-" and not resolve(where).stream:
            return where + ".inputs", what
    return (output + ".inputs", "the reduced program") if given else None


def _not_among_the_runs(
    flag: str, path: str, real: str, state: tuple[str | None, str | None], folders: dict[str, str]
) -> None:
    """A path given for the run is in none of the folders runs write their own files to:
    this run's state directory (`state`: as given, and its real path with a trailing
    separator), a report's inputs folder (`folders`), another run's state directory."""
    if state[1] is not None and real.startswith(state[1]):
        raise UserError(EXIT_USAGE, f"{flag} {path} is inside the state directory {state[0]}; give another path")
    if into := _within(path, folders):
        raise UserError(EXIT_USAGE, f"{flag} {path} is in {into}, where the report's inputs go; give another path")
    if os.path.lexists(os.path.join(os.path.dirname(real), MARKER)):  # another run's, which it may continue
        raise UserError(EXIT_USAGE, f"{flag} {path} is inside an ireereduce state directory; give another path")


def _within(path: str, folders: dict[str, str]) -> str | None:
    """The folder (as given) of `folders` (real path: as given) that path is or is in."""
    real = os.path.realpath(path)
    return next((given for f, given in folders.items() if real == f or real.startswith(f + os.sep)), None)


#: The paths whose file is replaced only if ireereduce wrote it (the output is judged by
#: the check instead, the log is appended to).
_REPLACED = ("--report", "--report-json", "--stats-json", "--progress-json")
#: A schema id of ireereduce's, as its JSON files and events carry it.
_SCHEMA = re.compile(rb'"schema"\s*:\s*"ireereduce-[a-z]+/')
#: JSON files read whole to find their schema id (sorted keys put it anywhere) up to this.
_JSON_READ = 256 << 20


def _not_the_users(flag: str, path: str, real: str) -> None:
    """A report, stats or progress path may name a file only if it is empty or one an
    earlier run wrote (any of the four kinds): a rerun replaces its own report, never a
    file of the user's, nor one it cannot read to tell."""
    if flag not in _REPLACED:
        return
    try:
        with open(real, "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode) or st.st_size == 0 or _ours(f, st.st_size):
                return
    except FileNotFoundError:
        return
    except OSError as exc:
        raise UserError(
            EXIT_USAGE,
            f"{flag} {path} exists and cannot be read to tell whose it is ({exc.strerror}); give another path",
        ) from None
    raise UserError(
        EXIT_USAGE,
        f"{flag} {path} exists and is not a file ireereduce wrote; ireereduce never overwrites it "
        "(move it away or give another path)",
    )


def _ours(f: BinaryIO, size: int) -> bool:
    """A Markdown report (its summary line among the first five), an event stream (a
    schema id in its first line), or a JSON file whose top level has one of ours."""
    head = f.read(1 << 12)
    if any(line.startswith(b"Reduced by ireereduce ") for line in head.split(b"\n")[:5]):
        return True
    if _SCHEMA.search(head.split(b"\n", 1)[0]):
        return True
    if size > _JSON_READ or not head.lstrip().startswith(b"{"):
        return False
    f.seek(0)
    try:  # its first JSON value: what follows it (a line added since) does not make it the user's
        data = json.JSONDecoder().raw_decode(f.read().decode(errors="replace").lstrip())[0]
    except ValueError:
        return False
    return isinstance(data, dict) and str(data.get("schema", "")).startswith("ireereduce-")


#: The files ireereduce writes into an inputs folder (`evidence.ship`, `--localize-only`).
_INPUT_FILE = re.compile(r"(b-)?input[0-9]+\.npy")


def check_inputs_folder(flag: str, folder: str, protected: dict[str, str] | None = None) -> None:
    """The folder a mismatch's inputs go to may hold only inputs an earlier run wrote:
    a file of the user's there would be replaced, and a file named so is no folder; nor
    a file the run reads (`protected`: an --inputs array an earlier report shipped)."""
    if not os.path.lexists(folder):
        return
    if not os.path.isdir(folder) or os.path.islink(folder):
        raise UserError(
            EXIT_USAGE,
            f"{flag}: {folder} is where the inputs of its commands go, and it is not a folder ireereduce made; "
            "move it away or give another path",
        )
    names, protected = sorted(os.listdir(folder)), protected or {}
    reals = {n: os.path.realpath(os.path.join(folder, n)) for n in names}
    read = [(n, protected[r]) for n, r in reals.items() if r in protected]
    if read:  # named as it is in the folder: the user may have given it by another name (a link)
        raise UserError(
            EXIT_USAGE,
            f"{flag}: {folder} is where the inputs of its commands go, and it holds {read[0][0]} ({read[0][1]}), "
            "which this run reads; ireereduce never overwrites it (copy it elsewhere or give another path)",
        )
    theirs = [n for n in names if not _INPUT_FILE.fullmatch(n) or not _plain_file(os.path.join(folder, n))]
    if theirs:
        raise UserError(
            EXIT_USAGE,
            f"{flag}: {folder} is where the inputs of its commands go, and it holds files ireereduce did not write "
            f"({theirs[0]}{', ...' if len(theirs) > 1 else ''}); move them away or give another path",
        )


def _plain_file(path: str) -> bool:
    """A .npy file under one name only: what ireereduce writes, and replaces. A link
    (symbolic or hard), a FIFO, a folder, or a file that is no array (notes of the user's
    named input0.npy) under an input's name is someone else's."""
    try:  # opened as what lstat saw: a FIFO or link swapped in since would block or lead elsewhere
        st = os.lstat(path)
        if not (stat.S_ISREG(st.st_mode) and st.st_nlink == 1):
            return False
        with os.fdopen(os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK), "rb") as f:
            return os.fstat(f.fileno()).st_ino == st.st_ino and _whole_array(f)
    except OSError:
        return False


def _whole_array(f: BinaryIO) -> bool:
    """Whether f is a .npy file of numbers, as np.save writes one: its header, then exactly
    the bytes its shape and type take (notes that start with the magic are no array)."""
    import numpy as np

    from reducer.iree.inputs import npy_header

    try:
        shape, dtype, held = npy_header(f)
    except ValueError:
        return False
    return dtype.kind in "biufc" and int(np.prod(shape, dtype=object)) * dtype.itemsize == held


def _inode(path: str) -> tuple[int, int] | None:
    """A regular file's (device, inode), the same under every name; None for anything else."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return (st.st_dev, st.st_ino) if stat.S_ISREG(st.st_mode) else None


def _output(settings: Settings) -> str:
    if settings.output == "-":
        raise UserError(
            EXIT_USAGE,
            "-o - would be a file named '-', not stdout: the output is written at every improvement, with a .lock "
            "and a .resume beside it; give a file name (./- for a file named -)",
        )
    if settings.output is None and _is_stream(settings.input):  # INPUT.reduced.mlir would be /dev/fd/63's
        raise UserError(EXIT_USAGE, f"reading the input from a stream ({settings.input}) needs -o FILE for the result")
    return settings.output or default_output(settings.input)


def _is_stream(path: str) -> bool:
    """A pipe or FIFO (`<(zcat m.mlir.gz)` is /dev/fd/63), or a name in /dev or /proc
    (`/dev/stdin < prog.mlir`): no file to put a result beside."""
    if os.path.abspath(path).startswith(("/dev/", "/proc/")):
        return True
    try:
        return stat.S_ISFIFO(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def read_by_the_run(settings: Settings) -> dict[str, str]:
    """The user's files the run reads (real path: what it is, in the user's words)."""
    protected = {os.path.realpath(settings.input): f"the input {settings.input}"}
    if settings.check is not None:
        script, args = script_and_args(settings.check)
        for used in shipped_files(script):
            protected.setdefault(os.path.realpath(used), f"{used}, which the check script uses")
        for arg in (*args, *settings.test_args):  # `-c "./check.sh pat.txt"`, --test-arg pat.txt
            # An absolute name reaches the check as it is, a relative one once it exists (a
            # rerun, a resume): refused either way, so the first run and the rerun agree.
            # A folder or a device (`/dev/null`) is no file of the user's to keep.
            if arg and (os.path.isfile(arg) or not os.path.exists(arg)):
                protected.setdefault(os.path.realpath(arg), f"{arg}, which the check is given")
        for used in settings.check_files:
            protected.setdefault(os.path.realpath(used), f"{used}, which --check-files ships with the check")
        protected[os.path.realpath(script)] = f"the check script {script}"
    from reducer.session.wiring import input_entries, programs

    for value in input_entries(settings.inputs):  # an array, not a value written out (`4xf32=1,2,3,4`)
        path = value.removeprefix("--input=").lstrip("@")  # iree-run-module's spellings, as inputs.given reads them
        if os.path.isfile(path):
            protected.setdefault(os.path.realpath(path), f"{value}, an array --inputs gives")

    for name, program in programs(settings):  # a compiler wrapper of the user's, say
        protected.setdefault(os.path.realpath(program), f"{program}, {name}")
    if settings.parameters:  # the archives are the user's
        from reducer.iree.parameters import split_spec

        for _scope, archive in map(split_spec, settings.parameters):
            if archive:
                protected.setdefault(os.path.realpath(archive), f"{archive}, a parameter archive --parameters names")
    return protected


def _check_derived(
    settings: Settings, output: str, refused: str | None, protected: dict[str, str], given: dict[str, str]
) -> None:
    """The paths the run makes itself (OUTPUT.lock, the state directory), written and removed
    by it: none may be a path given for anything else or a file the run reads, and a file
    named like the lock that no run of ireereduce wrote is the user's: never written or removed.
    `given`: the real paths given so far with flag and path; `refused`: the state's `RunState.refusal()`."""
    of = f"of {'-o' if settings.output is not None else 'the output'} {output}"
    lock = lock_path(output)
    derived = [(f"the lock file {lock} {of}", lock)]
    state = None if settings.no_state else settings.state_dir or default_state_dir(output)
    if state is not None:
        derived.append((f"--state-dir {state}" if settings.state_dir else f"the state directory {state} {of}", state))
    if state is not None and os.path.realpath(state) == os.path.realpath(tempfile.gettempdir()):
        raise UserError(
            EXIT_USAGE,
            f"--state-dir {state} is the temp directory (TMPDIR), where every run makes its scratch "
            "directory; give the state a folder of its own",
        )
    for what, path in derived:
        real = os.path.realpath(path)
        if real in protected:
            raise UserError(
                EXIT_USAGE, f"{what} is {protected[real]}; ireereduce never overwrites it (give another -o)"
            )
        if real in given:
            raise UserError(EXIT_USAGE, f"{what} is also {given[real]}; give each its own path")
        given[real] = what
    if refused is not None:  # never a directory the run did not make or was not given empty
        raise UserError(EXIT_USAGE, refused)
    _name_fits(output, lock, ".lock")
    if state is not None and not settings.state_dir:
        _name_fits(output, state, ".resume")
    why = foreign_lock(lock)
    if why is not None:
        raise UserError(
            EXIT_USAGE,
            f"{lock} exists and is not an ireereduce lock file ({why}); ireereduce never writes or removes it: "
            "move it away, or give another -o",
        )


def _name_fits(output: str, beside: str, suffix: str) -> None:
    """The output's name and the name of what goes beside it (`suffix` added: its lock,
    its state directory) fit the file system (255 bytes a name on most): else the
    lock's lookup fails with 'File name too long', which read as a lock of someone
    else's, and the state directory is refused only after the original's checks."""
    try:
        os.lstat(beside)
    except OSError as exc:
        if exc.errno == errno.ENAMETOOLONG:
            size = len(os.path.basename(output).encode())
            what = "for the lock beside it" if suffix == ".lock" else "for the state directory beside it"
            when = "" if size > 255 else f" once '{suffix}' is added {what}"
            raise UserError(
                EXIT_USAGE,
                f"the output name {os.path.basename(output)[:40]}... ({size} bytes) is too long for its "
                f"file system{when}; give a shorter -o"
                + ("" if suffix == ".lock" else " (or --state-dir elsewhere, or --no-state)"),
            ) from None


def _check_writable(flag: str, path: str, target: Target, output_file: bool) -> None:
    """A regular file (or none yet) in a writable directory; a stream (a device, a FIFO,
    /dev/stdout) only where it is written once: not for the output, which is written at
    every improvement and gets a .lock and a .resume beside it."""
    if target.kind == "a directory":
        raise UserError(EXIT_USAGE, f"{flag} {path} is a directory; give a file name")
    if target.kind == "a socket" or (target.stream and output_file):
        raise UserError(
            EXIT_USAGE,
            f"{flag} {path} is {target.kind}; the output is written at every improvement, with a .lock and a "
            ".resume beside it: give a regular file"
            if output_file
            else f"{flag} {path} is a socket; give a regular file",
        )
    if target.stream:
        if target.fd is None and not os.access(target.path, os.W_OK):
            raise UserError(EXIT_USAGE, f"cannot write {flag} {path}: it is not writable")
        if target.fd is not None:
            try:
                os.fstat(target.fd)
            except OSError:  # `>&-`: nothing to write to, and fd 1 may become a file of the run's
                raise UserError(EXIT_USAGE, f"cannot write {flag} {path}: {target.kind} is closed") from None
        return
    parent = os.path.dirname(target.path)
    if not os.path.isdir(parent):
        raise UserError(EXIT_USAGE, f"cannot write {flag} {path}: the directory {parent} does not exist")
    given = os.path.dirname(path) or "."  # the kernel looks at `sub` in `sub/../o.mlir`; realpath does not
    if not os.path.isdir(given):
        raise UserError(EXIT_USAGE, f"cannot write {flag} {path}: the directory {given} cannot be reached")
    try:  # os.access is not enough: root passes it on read-only file systems
        fd, probe = tempfile.mkstemp(prefix=".ireereduce-probe-", dir=parent)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise UserError(
            EXIT_USAGE, f"cannot write {flag} {path}: the directory {parent} is not writable ({exc.strerror})"
        ) from None
    if os.path.exists(target.path) and not os.access(target.path, os.W_OK):
        raise UserError(EXIT_USAGE, f"cannot write {flag} {path}: it is read-only")


#: Errors that mean a file could not be written, not that a program could not be run.
WRITE_ERRORS = (errno.ENOSPC, errno.EFBIG, errno.EDQUOT, errno.EROFS)


def user_error(exc: OSError) -> UserError:
    """What an OSError out of a check means to the user: a full disk, a check that cannot
    run, or an executor that lost its cluster."""
    if isinstance(exc, ExecutorLost):
        return UserError(EXIT_EXECUTOR, str(exc))
    if exc.errno in WRITE_ERRORS:
        return UserError(
            EXIT_CANNOT_WRITE,
            f"cannot write a candidate into the temporary directory "
            f"{tempfile.gettempdir()}: {exc.strerror} (free space, or set TMPDIR)",
        )
    return UserError(EXIT_BAD_CHECK, f"cannot run the check ({exc.filename or 'its program'}): {exc.strerror}")


def rescue(path: str, data: bytes) -> str:
    """Where data went when path cannot be written (its directory removed): a new file
    in the current directory, else in the temp directory; never over an existing one."""
    stem, ext = os.path.splitext(os.path.basename(path))
    for directory in (".", tempfile.gettempdir()):
        for n in range(100):
            name = os.path.join(directory, f"{stem}.saved{f'-{n}' if n else ''}{ext}")
            try:
                fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            except FileExistsError:
                continue
            except OSError:
                break
            try:
                with os.fdopen(fd, "wb") as f:
                    write_data(f, data)
            except OSError:
                with contextlib.suppress(OSError):
                    os.unlink(name)
                break
            shown = os.path.normpath(name)
            return f"the smallest interesting program so far ({len(data)} bytes) is saved in {shown} instead"
    return f"the smallest interesting program so far ({len(data)} bytes) could not be saved anywhere else either"
