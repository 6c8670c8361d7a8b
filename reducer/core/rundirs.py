"""A run's own directory in the temp dir, and the tag its checks' processes carry.

Everything a run makes (candidates, checks' scratch, their processes) lives under one
locked directory and one environment tag, so that the run's end, or the next run after a
kill -9, removes it all; and only that: a folder of the user's of a like name stays.
Apart from the oracles because it is the run's lifetime, not a verdict's.
"""

from __future__ import annotations

import contextlib
import contextvars
import fcntl
import itertools
import logging
import os
import re
import shutil
import signal
import stat
import tempfile
import time
from collections.abc import Iterator

log = logging.getLogger(__name__)

#: Set by the main process for one run (`run_scope`), inherited by forked workers and by
#: every check: where candidate directories go, and the tag the process sweep looks for.
RUN_DIR_ENV = "IREEREDUCE_RUN_DIR"
RUN_TAG_ENV = "IREEREDUCE_RUN"
CHECK_TAG_ENV = "IREEREDUCE_CHECK"
_checks = itertools.count()


@contextlib.contextmanager
def run_scope() -> Iterator[str]:
    """One run's directory and process tag. Every check's temp dir lives inside the
    directory and every check's processes carry the tag, so when the run ends, however
    it ends (a worker killed mid-check with os._exit included), removing one directory
    and sweeping one tag leaves nothing behind, `setsid` children included."""
    remove_stale_runs()
    with _locked_run_dir() as (run_dir, tag):
        saved = {k: os.environ.get(k) for k in (RUN_DIR_ENV, RUN_TAG_ENV)}
        os.environ[RUN_DIR_ENV], os.environ[RUN_TAG_ENV] = run_dir, tag
        try:
            yield run_dir
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


#: Where a run directory is made before it is locked and renamed (`_locked_run_dir`).
STAGING_PREFIX = "ireereduce-new-"
#: A run directory's name, once locked: the staging name's eight characters after it.
RUN_PREFIX = "ireereduce-run-"
STAGING_STALE = 60.0
#: In a run directory: what the run made next to it in the temp dir (`note_outside`).
OUTSIDE_NOTE = ".outside"


def note_outside(path: str) -> None:
    """Something this process made directly in the temp dir, outside its run's directory
    (the multiprocessing temp dir of a process that started a Dask cluster), noted in the
    run's directory: removed by the sweep of a run killed with SIGKILL, like the
    directory. (A run that ends leaves it to whoever made it.)"""
    run_dir = os.environ.get(RUN_DIR_ENV)
    if run_dir is None or not os.path.isdir(run_dir):
        return
    with contextlib.suppress(OSError), open(os.path.join(run_dir, OUTSIDE_NOTE), "a") as f:
        f.write(f"{_identity(os.lstat(path))} {os.path.abspath(path)}\n")


def _identity(st: os.stat_result) -> str:
    """A directory's device and inode: what a note names is that directory, not one of
    the user's named like it (audit 12: a line added to a dead run's note named one)."""
    return f"{st.st_dev}:{st.st_ino}"


#: A task's own run directory and tag (`task_scope`), for the thread running it.
_task_scope: contextvars.ContextVar[tuple[str, str] | None] = contextvars.ContextVar("task_scope", default=None)


@contextlib.contextmanager
def task_scope() -> Iterator[None]:
    """What `run_scope` is to a run, for one check on a machine the run's scope does not
    reach (a Dask worker started on its own): if the worker is killed mid-check (the
    OOM killer, kill -9), its candidate's directory and the check's processes are
    swept by the next task or run that uses the same temp dir, instead of staying
    forever (until then a hung check runs on: its timeout died with the worker). Per
    thread, not per process: a worker may run checks of several runs at once. A no-op
    in a process that inherited a live run's directory (the local pool, the embedded
    Dask cluster)."""
    inherited = os.environ.get(RUN_DIR_ENV)
    if inherited is not None and os.path.isdir(inherited):
        yield
        return
    remove_stale_runs()
    # No tag sweep at the end: run_in sweeps each check's own tag as it ends, and a
    # killed worker runs neither; it would only cost one more scan of /proc per check.
    with _locked_run_dir(sweep_at_end=False) as scope:
        token = _task_scope.set(scope)
        try:
            yield
        finally:
            _task_scope.reset(token)


@contextlib.contextmanager
def _locked_run_dir(sweep_at_end: bool = True) -> Iterator[tuple[str, str]]:
    """A new run directory, locked by this process, and its tag; gone (with what
    carries the tag, if `sweep_at_end`) when the block ends. It is made under another
    name and renamed once locked, so a sweep starting meanwhile never takes it for a
    dead run's. Its lock names it: a folder of another name holding one (a copy) is not it."""
    base = tempfile.gettempdir()
    staging = tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=base)
    lock = -1
    try:
        lock = os.open(os.path.join(staging, ".lock"), os.O_WRONLY | os.O_CREAT, 0o600)
        fcntl.flock(lock, fcntl.LOCK_EX)
        run_dir = os.path.join(base, RUN_PREFIX + os.path.basename(staging)[len(STAGING_PREFIX) :])
        os.write(lock, os.fsencode(_where(run_dir)) + b"\n")  # a TMPDIR's name may not be UTF-8
        os.rename(staging, run_dir)
    except BaseException:
        if lock >= 0:
            os.close(lock)
        shutil.rmtree(staging, ignore_errors=True)
        raise
    tag = _where(run_dir)  # a copy elsewhere of the same name is another run's, or the user's
    try:
        yield run_dir, tag
    finally:
        try:
            if sweep_at_end:
                sweep(RUN_TAG_ENV, tag)
        except OSError as exc:  # no file left to scan /proc with (ulimit -n): the directory still goes
            log.warning("could not look for the checks' processes left running: %s", exc)
        finally:
            # First: a note left by a removal that failed halfway would name what this
            # process, still alive, goes on using.
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(run_dir, OUTSIDE_NOTE))
            shutil.rmtree(run_dir, ignore_errors=True)
            os.close(lock)


def remove_stale_runs() -> None:
    """What a run killed with SIGKILL left: its directory and its checks' processes. A
    live run (or its orphaned workers) holds the flock on its directory's lock file.
    A staging directory is renamed microseconds after it is made: one older than
    STAGING_STALE seconds is a run killed in between. Only directories made as
    `_locked_run_dir` makes them are touched (mkdtemp's name and mode, this user's, a lock
    file naming the directory it is in): a folder of the user's of a like name stays."""
    try:
        base = tempfile.gettempdir()
        entries = [e for e in os.scandir(base) if _made_by_a_run(e)]
    except OSError:
        return
    for entry in [e for e in entries if e.name.startswith(STAGING_PREFIX)]:
        with contextlib.suppress(OSError):
            named = os.path.join(base, RUN_PREFIX + entry.name[len(STAGING_PREFIX) :])
            old = time.time() - entry.stat().st_mtime > STAGING_STALE
            if old and os.listdir(entry.path) == [".lock"] and _lock_naming(entry.path, named) is not None:
                shutil.rmtree(entry.path, ignore_errors=True)
    for entry in [e for e in entries if e.name.startswith(RUN_PREFIX)]:
        fd = _lock_naming(entry.path, entry.path)
        if fd is None:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            continue  # alive
        finally:
            os.close(fd)
        try:
            sweep(RUN_TAG_ENV, _where(entry.path))
        except OSError:  # no file left to scan /proc with (ulimit -n): a later run removes it
            continue
        _remove_noted(entry.path, base)
        shutil.rmtree(entry.path, ignore_errors=True)


#: A run's directory as `_locked_run_dir` names it: mkdtemp's eight characters.
_RUN_NAME = re.compile(r"ireereduce-(?:new|run)-[a-z0-9_]{8}")
#: What a dead run's process left in the temp dir (`note_outside`): multiprocessing's.
_NOTED_NAME = re.compile(r"pymp-[a-z0-9_]{8}")


def _where(path: str) -> str:
    """A run directory's full real path: what its lock holds and its processes carry. Its
    name alone is also a copy's in another temp dir (`cp -a`), whose sweep then took a
    live run's checks and the user's copy for a dead run's."""
    return os.path.realpath(path)


def _lock_naming(directory: str, name: str) -> int | None:
    """The open lock file of directory if it is a file naming `name` (what
    `_locked_run_dir` writes), else None."""
    try:
        fd = os.open(os.path.join(directory, ".lock"), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode) and os.pread(fd, 8192, 0) == os.fsencode(_where(name)) + b"\n":
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


def _made_by_a_run(entry: os.DirEntry[str]) -> bool:
    """mkdtemp's name and mode: what `_locked_run_dir` made."""
    return bool(_RUN_NAME.fullmatch(entry.name)) and _private_dir(entry.stat(follow_symlinks=False))


def _private_dir(st: os.stat_result) -> bool:
    """A directory as mkdtemp makes one: mode 0700, this user's (not a link to one)."""
    return stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == os.getuid()


def _remove_noted(run_dir: str, base: str) -> None:
    """What a dead run noted it made outside its directory: only multiprocessing's
    directories of the temp dir itself (its name and mode, this user's), nothing else."""
    try:
        with open(os.path.join(run_dir, OUTSIDE_NOTE)) as f:
            noted = f.read().splitlines()
    except OSError:
        return
    for line in noted:
        identity, _, path = line.partition(" ")
        if os.path.dirname(path) != os.path.abspath(base) or not _NOTED_NAME.fullmatch(os.path.basename(path)):
            continue
        with contextlib.suppress(OSError):
            st = os.lstat(path)
            if _private_dir(st) and _identity(st) == identity:
                shutil.rmtree(path, ignore_errors=True)


def sweep(variable: str, value: str) -> int:
    """SIGKILL every process whose environment has variable=value; the number killed.
    A process group kill misses children that called setsid; the environment is
    inherited through setsid, fork and exec alike."""
    needle = os.fsencode(f"{variable}={value}")
    killed = 0
    me = os.getpid()
    for _ in range(3):  # a dying parent may fork once more; look again
        found = False
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit() or int(entry.name) == me:
                continue
            try:
                with open(f"/proc/{entry.name}/environ", "rb") as f:
                    env = f.read()
            except OSError:
                continue
            if needle in env.split(b"\0"):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(int(entry.name), signal.SIGKILL)
                    killed += 1
                    found = True
        if not found:
            break
    return killed


@contextlib.contextmanager
def scratch_dir(prefix: str = "ireereduce-") -> Iterator[str]:
    """A fresh temporary directory inside the run's directory when there is one: it goes
    with the run's, also when the next run sweeps what a kill -9 left (a directory of
    its own in TMPDIR would stay there for good)."""
    with tempfile.TemporaryDirectory(prefix=prefix, dir=scratch_parent()) as tmp:
        yield tmp


def scratch_parent() -> str | None:
    """Where scratch directories go: the run's (or the task's) directory, when there is
    one; None: tempfile's choice (TMPDIR)."""
    scoped = _task_scope.get()
    parent = scoped[0] if scoped is not None else os.environ.get(RUN_DIR_ENV)
    return parent if parent is not None and os.path.isdir(parent) else None


def check_env() -> tuple[dict[str, str], str]:
    """The environment of one check: the run's (or the task's) directory and tag, and a
    tag of its own that the sweep of what it leaves behind looks for; and that tag."""
    scoped = _task_scope.get()
    env = dict(os.environ) if scoped is None else dict(os.environ, **{RUN_DIR_ENV: scoped[0], RUN_TAG_ENV: scoped[1]})
    check_tag = env[CHECK_TAG_ENV] = f"{env.get(RUN_TAG_ENV, 'none')}/{os.getpid()}/{next(_checks)}"
    return env, check_tag


def tmpdir_unused() -> str | None:
    """Why $TMPDIR is not where the run's directory goes, if it is not: Python falls back
    to /tmp without a word."""
    wanted = os.environ.get("TMPDIR")
    used = tempfile.gettempdir()
    if not wanted or os.path.realpath(wanted) == os.path.realpath(used):
        return None
    return f"TMPDIR={wanted} cannot be used ({_unusable(wanted)}); temporary files go to {used}"


def _unusable(directory: str) -> str:
    """Why no file can be made in directory, as the system says it (full, read-only,
    behind a directory this user may not search)."""
    try:
        if not stat.S_ISDIR(os.stat(directory).st_mode):
            return "it is not a directory"
        with tempfile.TemporaryFile(dir=directory) as f:
            os.write(f.fileno(), b"blat")  # as Python's look does: a full tmpfs makes empty files
        return "it could not be written to when the run started"  # it can now
    except FileNotFoundError:
        return "it does not exist"
    except OSError as exc:
        return exc.strerror.lower() if exc.strerror else "it is not writable"
