"""What lets an unattended run be stopped, killed or repeated safely: the lock on the
output, and the state directory a killed run continues from.

The state directory holds the run's settings fingerprint (settings, input and check
hashes; the data files and the programs the oracle runs by path, size and mtime), the start (the program after the original was checked and the workflows ran,
the calibrated oracle with its timeout and the original's verdict) and the verdict
journal (cache.VerdictJournal). The engine's position is not stored: the engine is
deterministic, so replaying the journal from the start reaches it again.

Everything in it is data (JSON, and the programs as text: reducer/core/codec.py), read
only once the fingerprint in run.json matches. A run uses a directory it makes, or one
it is given empty, and marks it as its own (MARKER); it removes only the files it names
there, and the directory only if it made it. A directory holding anything else is
refused (`RunState.refusal`): what the user keeps there is never touched.

The marker proves little by itself: anyone who can write the directory can write one.
So it is made with O_EXCL by the run, must be a regular file of this user (no other user
can plant one), and names the output the run writes: a directory copied or planted next
to another output is refused unread. What the start names to run is never trusted either:
a resumed run builds its oracle from its own command line and compares the two
(reducer/session/start.py).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import logging
import os
import re
import stat
from collections.abc import Sequence
from typing import Any

from reducer.core import codec
from reducer.core.cache import VerdictJournal, read_regular

log = logging.getLogger(__name__)

#: Settings that do not change which program the run ends with (or name files only).
#: Where checks run never changes the result (the engine is deterministic for any -j and
#: executor), so a run killed on a cluster can continue locally and the other way round.
_NOT_FINGERPRINTED = {
    "output",
    "report",
    "report_json",
    "stats_json",
    "log_file",
    "jobs",
    "state_dir",
    "no_state",
    "fresh",
    "executor",
    "scheduler",
    "resources",
    "check_files",
    "parameters",  # fingerprinted as the files they name (`stamp`), not as typed
    "max_time",
    "max_checks",
}  # limits say where a run stops, not what it finds


class Busy(Exception):
    def __init__(self, pid: str) -> None:
        super().__init__(pid)
        self.pid = pid


#: What a lock file of ours holds: its owner's PID after a word of ours (nothing, for the
#: instant it is made). The word tells it from a user's file holding a number.
_LOCK_WORD = "ireereduce"
_LOCK_CONTENT = re.compile(rb"(?:" + _LOCK_WORD.encode() + rb" [0-9]+\n?)?")


def foreign_lock(path: str) -> str | None:
    """Why path, named like a lock, is not a lock file of ours (the user's own: never
    written nor removed); None when there is none yet, or it is one of ours."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return None
    except OSError as exc:
        return exc.strerror
    if stat.S_ISLNK(mode):
        return "it is a symbolic link"
    if not stat.S_ISREG(mode):
        return "it is not a regular file"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        return exc.strerror
    try:
        head = os.read(fd, 64)
    finally:
        os.close(fd)
    if _LOCK_CONTENT.fullmatch(head):
        return None
    if re.fullmatch(rb"[0-9]+\n?", head):  # what ireereduce wrote before its locks had a word
        return "it holds only a number: a file of yours, or a lock an older ireereduce left, then remove it"
    return "it holds something other than an ireereduce PID"


class OutputLock:
    """An fcntl lock on OUTPUT.lock, holding the owner's PID. The kernel drops it when the
    owner dies, SIGKILL included, so a stale file never blocks a rerun. A file of that
    name that is not a lock of ours (a link, a FIFO, the user's notes) is neither
    written nor removed: acquire raises an OSError."""

    def __init__(self, output: str, path: str | None = None) -> None:
        self.path = path or output + ".lock"
        self._fd: int | None = None

    def acquire(self) -> None:
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o666)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    os.close(fd)
                    raise
                pid = os.pread(fd, 32, 0).decode(errors="replace").removeprefix(_LOCK_WORD).strip() or "unknown"
                os.close(fd)
                raise Busy(pid) from None
            try:  # the holder may have removed the file between our open and our lock
                same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        if not stat.S_ISREG(os.fstat(fd).st_mode) or not _LOCK_CONTENT.fullmatch(os.pread(fd, 64, 0)):
            os.close(fd)
            raise OSError(errno.EEXIST, "it is not an ireereduce lock file", self.path)
        try:  # a full disk fails here, after the file was made: leave nothing behind
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{_LOCK_WORD} {os.getpid()}\n".encode(), 0)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(self.path)
            os.close(fd)
            raise
        self._fd = fd

    def release(self) -> None:
        """Remove the lock file this run holds, where it is now (its folder may have been
        moved: /proc names the open file's path), and only if it is that file: another
        run's lock, or a file of the user's, put at the old path is left alone."""
        if self._fd is None:
            return
        where = self.path
        with contextlib.suppress(OSError):
            where = os.readlink(f"/proc/self/fd/{self._fd}")
        with contextlib.suppress(OSError):
            st, own = os.lstat(where), os.fstat(self._fd)
            if (st.st_dev, st.st_ino) == (own.st_dev, own.st_ino):
                os.unlink(where)
        os.close(self._fd)
        self._fd = None


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def digest(path: str | None) -> str | None:
    if path is None:
        return None
    try:
        with open(path, "rb") as f:
            return _digest(f.read())
    except OSError:
        return None


def stamp(path: str) -> list[Any]:
    """A data file as the fingerprint holds it: where it really is, its size and its
    modification time in nanoseconds (a parameter archive may be gigabytes: not hashed
    like the check script). Nothing but the path for a file that is not there."""
    real = os.path.realpath(path)
    try:
        st = os.stat(real)
    except OSError:
        return [real]
    return [real, st.st_size, st.st_mtime_ns]


#: How a program a run's oracle runs (its compiler) is named among the data files.
PROGRAM = "the program of "


def fingerprint(
    settings: Any, input_bytes: bytes, data_files: Sequence[tuple[str, str]] = (), script: str | None = None
) -> dict[str, Any]:
    """What must be equal for a recorded run to be continued: the settings that decide
    the result, the input's bytes, the check script's bytes, and the data files the run
    reads (`data_files`: (what names it, path) pairs, such as --parameters' archives and
    the programs the oracle runs, named `PROGRAM` + the option),
    each by its `stamp`: a verdict of the old archive's values is not this one's."""
    import attrs

    fields = {k: v for k, v in attrs.asdict(settings).items() if k not in _NOT_FINGERPRINTED}
    fields = json.loads(json.dumps(fields, default=list))
    found = {
        "settings": fields,
        "input": hashlib.sha256(input_bytes).hexdigest(),
        "check": digest(script or settings.check),  # script: -c "./check.sh ARG"'s file
    }
    if data_files:  # absent without any: a state recorded before data files were stamped still matches
        found["files"] = [[name, *stamp(path)] for name, path in data_files]
    return found


def differences(old: dict[str, Any], new: dict[str, Any]) -> str:
    """The first thing that differs, in the user's words."""
    if old.get("input") != new.get("input"):
        return "the input changed"
    if old.get("check") != new.get("check"):
        return "the check script changed"
    if old.get("files") != new.get("files"):
        a, b = old.get("files") or [], new.get("files") or []
        if "files" not in old and all(f[0].startswith(PROGRAM) for f in b):
            return f"an earlier ireereduce recorded it, without stamping {b[0][0][len(PROGRAM) :]}'s program"
        changed = [f for f in b if f not in a] or [f for f in a if f not in b]
        if not changed:
            return "the data files changed"
        name, path = changed[0][:2]
        return f"{name}, {path}, changed" if name.startswith(PROGRAM) else f"the data file {path} changed"
    a, b = old.get("settings", {}), new.get("settings", {})
    names = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
    return "other settings (" + ", ".join("--" + n.replace("_", "-") for n in names) + ")"


#: The file that makes a directory a run's own, and its first line.
MARKER = "ireereduce-state"
MAGIC = "ireereduce state directory"
#: Its second line: whether the run made the directory (then it removes it at the end)
#: or was given it empty (then it leaves it, empty). Its third: OUTPUT and the output's
#: absolute path as a JSON string, the output the directory belongs to.
MADE, GIVEN = "made", "given"
OUTPUT = "output "
#: run.json's format: 2 is JSON (1, a pickled start, is not read).
FORMAT = 2
_RUN, _START, _JOURNAL = "run.json", "start.json", "verdicts.jsonl"
#: The files a run writes in its directory (besides the marker); nothing else is removed.
_NAMES = {_RUN, _RUN + ".tmp", _START, _START + ".tmp", _JOURNAL}
#: A program of the start, stored as text: start-<its path in the start>.mlir.
_PROGRAM = re.compile(r"start-([A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)*)\.mlir")


def _named_ours(name: str) -> bool:
    """A name a run writes in its directory (besides the marker)."""
    return name in _NAMES or bool(_PROGRAM.fullmatch(name))


#: What a path is, by its mode's type, when it is not a regular file (lstat: a link too).
KINDS = {
    stat.S_IFDIR: "a directory",
    stat.S_IFLNK: "a symbolic link",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFSOCK: "a socket",
}


class NotOurs(OSError):
    """The directory holds files this run did not write: it is not used, nor touched."""

    def __init__(self, path: str) -> None:
        super().__init__(errno.EEXIST, "it holds files ireereduce did not write", path)


def cannot_write(directory: str, exc: OSError) -> str:
    """Why the state directory cannot be written; a link planted in it is named, since the
    run never writes through one and "too many levels of symbolic links" says nothing."""
    if exc.errno == errno.ELOOP and exc.filename:
        return (
            f"cannot write the state directory {directory}: its {os.path.basename(exc.filename)} is a symbolic link "
            "ireereduce did not make, and it is not followed (remove it, --state-dir elsewhere, or --no-state)"
        )
    return f"cannot write the state directory {directory}: {exc.strerror} (--state-dir elsewhere, or --no-state)"


def _owner(output: str) -> str:
    """The output's absolute path, its directory's links resolved (not its own: the
    output may be a link the run writes through)."""
    absolute = os.path.abspath(output)
    return os.path.join(os.path.realpath(os.path.dirname(absolute)), os.path.basename(absolute))


class RunState:
    """One run's state directory; `output`: the output it belongs to (None: any, for
    callers that keep state of their own, such as tests)."""

    def __init__(self, path: str, output: str | None = None) -> None:
        self.path = path
        self.owner = None if output is None else _owner(output)
        self.journal: VerdictJournal | None = None
        self._told = False  # that files someone else put here stay
        self._digests: Any = None  # the start's programs' sha256 by name, as run.json records them

    def _file(self, name: str) -> str:
        return os.path.join(self.path, name)

    def _mark(self) -> str | None:
        """The marker's second line (MADE or GIVEN) if the directory is this run's own."""
        return self._marker()[0]

    def _marker(self) -> tuple[str | None, str]:
        """(MADE or GIVEN, "") if the directory is this run's own; else (None, why not)."""
        try:
            fd = os.open(self._file(MARKER), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError as exc:
            return None, f"its {MARKER} is a link" if exc.errno == errno.ELOOP else f"no {MARKER} file in it"
        try:
            st = os.fstat(fd)
            mine = stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid()
            lines = os.read(fd, 1 << 16).decode(errors="replace").splitlines() if mine else []
        except OSError:
            mine, lines = False, []
        finally:
            os.close(fd)
        if not mine:
            return None, f"its {MARKER} is not a file of this user"
        if len(lines) < 3 or lines[0] != MAGIC or lines[1] not in (MADE, GIVEN) or not lines[2].startswith(OUTPUT):
            return None, f"its {MARKER} file is not one ireereduce writes"
        try:
            output = json.loads(lines[2][len(OUTPUT) :])
        except ValueError:
            return None, f"its {MARKER} file is not one ireereduce writes"
        if self.owner is not None and output != self.owner:
            return None, f"it was made by a run for another output, {output!r}"
        return lines[1], ""

    def _usable(self) -> tuple[str | None, str]:
        """_marker, and none of the run's names taken by something else than a regular file:
        a FIFO there blocked the read that resumes, a directory broke the write. Such a
        directory is still the run's to clear (its own files), not to use."""
        how, why = self._marker()
        odd = self._not_files() if how is not None else ""
        return (None, odd) if odd else (how, why)

    def _not_files(self) -> str:
        """The first entry named as a run's file that is not a regular file (a FIFO, a
        directory, a link, a device), as "its NAME is a KIND"; "" when there is none."""
        try:
            names = sorted(os.listdir(self.path))
        except OSError:
            return ""
        for name in names:
            if _named_ours(name) and not self._ours(name):
                with contextlib.suppress(OSError):
                    mode = os.lstat(self._file(name)).st_mode
                    return f"its {name} is {KINDS.get(stat.S_IFMT(mode), 'a hard link (a file with another name too)')}"
        return ""

    def refusal(self) -> str | None:
        """Why the run may not use the directory, in one line for the user; None when it may:
        it does not exist yet (the run makes it), is empty, or is a run's own."""
        path = self.path
        if not os.path.lexists(path):
            parent = os.path.dirname(os.path.abspath(path))
            if not os.path.isdir(parent):
                return f"cannot make the state directory {path}: the directory {parent} does not exist (--state-dir)"
            return None
        if not os.path.isdir(path):
            return f"the state directory {path} is not a directory; give --state-dir a new or empty directory"
        try:
            entries = os.listdir(path)
        except OSError as exc:
            return f"cannot read the state directory {path}: {exc.strerror} (--state-dir elsewhere, or --no-state)"
        how, why = self._usable()
        if not entries or how is not None:
            return None
        return (
            f"the state directory {path} holds files ireereduce did not write ({why}); a run removes "
            "only a directory it made: give --state-dir a new or empty directory, or --no-state"
        )

    def exists(self) -> bool:
        """Whether the directory is a run's own and usable: what is recorded there may be continued."""
        return self._usable()[0] is not None

    def load(self, fp: dict[str, Any]) -> tuple[dict[str, Any], Any] | None:
        """The recorded fingerprint and start, or None when there is no complete record.
        The start is read only if the fingerprint is fp (else it is None): nothing in a
        directory is used before it is known to be this command's."""
        if not self.exists():
            return None
        try:
            run = json.loads(read_regular(self._file(_RUN)))
        except FileNotFoundError:
            return None  # killed before its start was recorded
        except (OSError, ValueError, RecursionError) as exc:
            return self._unusable(f"its {_RUN} cannot be read: {exc}")
        if not isinstance(run, dict) or run.get("format") != FORMAT or not isinstance(run.get("fingerprint"), dict):
            return self._unusable(f"its {_RUN} was not written by this version of ireereduce")
        recorded: dict[str, Any] = run["fingerprint"]
        if recorded != fp:
            return recorded, None
        self._digests = run.get("programs")  # absent in a state an earlier version wrote
        try:
            start = codec.decode(json.loads(read_regular(self._file(_START))), self._read_program)
        except (OSError, ValueError, RecursionError) as exc:  # codec.CodecError is a ValueError
            return self._unusable(f"its start cannot be read: {exc}")
        return recorded, start

    def _unusable(self, why: str) -> tuple[dict[str, Any], Any] | None:
        """No record to continue (None), having told the user why."""
        log.warning("the state directory %s cannot be continued (%s); starting over", self.path, why)
        return None

    def _read_program(self, name: str) -> str:
        file = f"start-{name}.mlir"
        if not _PROGRAM.fullmatch(file):
            raise codec.CodecError(f"not a program's name: {name!r}")
        data = read_regular(self._file(file))
        digests = self._digests
        if digests is not None and (not isinstance(digests, dict) or digests.get(name) != _digest(data)):
            raise codec.CodecError(f"{file} is not the program the run recorded (cut short?)")
        return data.decode()

    def _write_program(self, name: str, text: str) -> None:
        """A program as text, its digest kept for run.json: a file cut short (a power cut
        before the disk had it) is then told from the one recorded, never used."""
        file = f"start-{name}.mlir"
        if not _PROGRAM.fullmatch(file):
            raise codec.CodecError(f"a program at {name!r}, which is not a file name")
        data = text.encode()
        with open(self._file(file), "wb") as f:
            f.write(data)
        self._digests = (self._digests or {}) | {name: _digest(data)}

    def create(self, fp: dict[str, Any], start: Any) -> None:
        """Record a new run in a directory it makes, or is given empty, or already owns:
        the marker first, then the start, and run.json last (atomically), so a run.json
        always has its start. Raises NotOurs (an OSError) for a directory of someone else's."""
        self._clear()
        if not os.path.lexists(self.path):
            os.mkdir(self.path, 0o700)  # the run's alone: no one else puts a start in it
            self._write_marker(MADE)
        elif self._usable()[0] is None:
            if os.listdir(self.path):
                raise NotOurs(self.path)
            self._write_marker(GIVEN)
        try:
            self._digests = {}
            data = codec.encode(start, self._write_program)
            self._write_json(_START, data)
            self._write_json(_RUN, {"format": FORMAT, "fingerprint": fp, "programs": self._digests})
        except codec.CodecError as exc:
            log.warning("cannot record this run's start in %s (%s); a killed run will start over", self.path, exc)
        except OSError:  # a full disk: a start cut short resumes nothing, and stays for no one
            self.remove()
            raise

    def _write_marker(self, how: str) -> None:
        """O_EXCL: never through a file or link already there. A marker cut short (a full
        disk) is removed with the directory the run made for it: left, it made the rerun
        take the run's own directory for someone else's."""
        f = open(self._file(MARKER), "x")  # noqa: SIM115 - closed below, where a full disk shows
        try:
            with f:
                f.write(f"{MAGIC}\n{how}\n{OUTPUT}{json.dumps(self.owner)}\n")
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(self._file(MARKER))
                if how == MADE:
                    os.rmdir(self.path)
            raise

    def _write_json(self, name: str, data: Any) -> None:
        with open(self._file(name + ".tmp"), "w") as f:
            json.dump(data, f, indent=1, sort_keys=True)
        os.replace(self._file(name + ".tmp"), self._file(name))

    def open_journal(self) -> VerdictJournal:
        self.journal = VerdictJournal(self._file(_JOURNAL))
        return self.journal

    def _clear(self) -> None:
        """Remove the files a run writes (run.json first: the record is gone before its
        parts), if the directory is a run's own; nothing else, and never what is not a file."""
        if self._mark() is None:
            return
        try:
            names = os.listdir(self.path)
        except OSError:
            return
        for name in sorted(names, key=lambda n: n != _RUN):
            if self._ours(name):  # a FIFO, link or directory of that name is not ours
                with contextlib.suppress(OSError):
                    os.unlink(self._file(name))

    def others(self) -> list[str] | None:
        """What is in the directory that a run does not write (None: it cannot be read):
        never read, never removed, but the user is told."""
        try:
            names = os.listdir(self.path)
        except OSError:
            return None
        return sorted(n for n in names if n != MARKER and not self._ours(n))

    def _ours(self, name: str) -> bool:
        """A file a run writes: its name, and a regular file under that name only (a
        directory of that name is not, nor a hard link to a file of the user's, which the
        journal's appends and cuts would write through)."""
        if not _named_ours(name):
            return False
        try:
            st = os.lstat(self._file(name))
        except OSError:
            return False
        return stat.S_ISREG(st.st_mode) and st.st_nlink == 1

    def remove(self) -> None:
        """Remove what the run wrote, and the directory if the run made it. Files someone
        else put there stay, and with them the marker: the directory is still the run's."""
        if self.journal is not None:
            self.journal.close()
            self.journal = None
        how = self._mark()
        if how is None:
            return
        self._clear()
        try:  # not others(): what _clear left of a run's names (a directory) is left too
            left = sorted(n for n in os.listdir(self.path) if n != MARKER)
        except OSError:
            return
        if left:
            if not self._told:
                log.warning(
                    "leaving the state directory %s: it holds %s, which ireereduce did not write",
                    self.path,
                    ", ".join(left),
                )
                self._told = True
            return
        with contextlib.suppress(OSError):
            os.unlink(self._file(MARKER))
            if how == MADE:
                os.rmdir(self.path)
