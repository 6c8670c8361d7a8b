"""What a check's processes may use, and what they leave behind: the resource limits
a process that starts checks puts on them, the memory a check's processes use together,
and the child subreaper that finds every process a check left running. Knows nothing of oracles (`reducer.core.oracle.run_in`
uses it)."""

from __future__ import annotations

import _thread
import contextlib
import ctypes
import os
import resource
import signal
import sys
import threading
from collections.abc import Iterator
from types import CodeType, FrameType
from typing import Any


def no_core_dumps() -> None:
    """A crashing compiler must not leave a core file per candidate (gigabytes each)."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


#: What stops a run. Sent to the whole process group (Ctrl-C, a closed terminal, `kill --
#: -PGID`), they reach every worker too; the main process handles them and stops its
#: workers, which must neither die of them (a check's death read as its verdict) nor
#: print a traceback.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def ignore_stops() -> None:
    """The command's result is decided: a stop now could only cut what it says, or (while
    Python shuts down and puts back the default handlers) turn its exit code into 143."""
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)


def leave_stops_to_parent() -> None:
    """In a worker process: the stop signals do nothing here (the main process stops the
    workers), and those that came while it started (`stops_deferred`) are taken now. A
    handler, not SIG_IGN, which checks would inherit through exec."""
    for signum in STOP_SIGNALS:
        signal.signal(signum, _parents_to_handle)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)


def _parents_to_handle(_signum: int, _frame: object) -> None:
    pass


@contextlib.contextmanager
def stops_deferred() -> Iterator[None]:
    """While this thread starts worker processes: the stop signals blocked, so a child
    (and a thread started meanwhile, and what it starts) starts with them pending until
    `leave_stops_to_parent`, instead of dying of one (or of the parent's handler) before
    it installed its own; and held (`stops_held`)."""
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        with stops_held():
            yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


@contextlib.contextmanager
def stops_held() -> Iterator[None]:
    """In the main thread: the stop signals' handlers only note them during the block, and
    one noted is raised again as it ends. A handler that raises KeyboardInterrupt inside
    a fork's at-fork callbacks has it swallowed ("Exception ignored"), and the run would
    go on as if never stopped; one raised while a Dask cluster starts leaves that cluster
    starting with nobody to close it."""
    came: list[int] = []
    held: dict[int, Any] = {}
    try:  # a stop between two swaps is raised with every handler put back
        if threading.current_thread() is threading.main_thread():
            for signum in STOP_SIGNALS:
                old = signal.getsignal(signum)
                if callable(old):
                    held[signum] = old
                    signal.signal(signum, lambda got, _frame: came.append(got))
        yield
    finally:
        _restore(held)
        for noted in dict.fromkeys(came):
            signal.raise_signal(noted)


#: Seconds after which a swallowed KeyboardInterrupt is raised again (`interrupts_kept`).
INTERRUPT_AGAIN = 0.05
#: A stop's KeyboardInterrupt was swallowed: the signal handler, which raises only the first
#: stop of a run, must raise it again when `interrupts_kept` asks.
_swallowed = False


#: This run's stop raised its KeyboardInterrupt (the CLI's handlers note it; a new run clears it).
_stop_raised = False


def note_stop(raised: bool = True) -> None:
    """The stop signal handler raised this run's KeyboardInterrupt; or (False) a new run
    starts: nothing of an earlier stop is raised in it."""
    global _stop_raised, _swallowed
    _stop_raised = raised
    if not raised:
        _swallowed = False
        if _again is not None:
            _again.cancel()


def stop_raised() -> bool:
    """Whether this run's stop raised its KeyboardInterrupt already."""
    return _stop_raised


#: Our functions that the MLIR bindings call from C++ and that must not raise: raised in
#: a diagnostic handler, a KeyboardInterrupt is printed as a traceback and lost; in a
#: walk's visitor, it comes out as RuntimeError. A stop that lands in one (or in what it
#: calls) is raised a moment later (`stop_later`).
NATIVE_CALLBACKS: set[CodeType] = set()


def in_native_callback(frame: FrameType | None) -> bool:
    """Whether frame, or one of its callers, is one of `NATIVE_CALLBACKS`."""
    while frame is not None:
        if frame.f_code in NATIVE_CALLBACKS:
            return True
        frame = frame.f_back
    return False


#: The timer of `stop_later`, cancelled when a new run starts.
_again: threading.Timer | None = None


def stop_later() -> None:
    """Raise the stop again in the main thread a moment later, from another thread: here,
    the handler would run at once, inside the code that loses what it raises."""
    global _swallowed, _again
    _swallowed = True
    _again = threading.Timer(INTERRUPT_AGAIN, _thread.interrupt_main)
    _again.daemon = True
    _again.start()


def raise_if_stopped(cause: BaseException | None = None) -> None:
    """Raise the run's stop again where the MLIR bindings lost it. A KeyboardInterrupt
    raised in our Python code that the bindings call comes out of a walk as RuntimeError
    ("Exception raised in callback"), and out of a diagnostic handler not at all: a
    `except Exception` around the bindings took it as a faulty strategy, and a stopped run
    ended 0. Called there, before each candidate is built, and as the engine ends."""
    if _stop_raised:
        take_swallowed()  # raised here: `stop_later`'s timer must not raise it once more
        raise KeyboardInterrupt from cause


def take_swallowed() -> bool:
    """Whether a stop's KeyboardInterrupt was swallowed since the last call."""
    global _swallowed
    was, _swallowed = _swallowed, False
    return was


@contextlib.contextmanager
def interrupts_kept() -> Iterator[None]:
    """A KeyboardInterrupt that a stop signal's handler raised where Python swallows what
    is raised (a garbage collector callback, `__del__`, an at-fork callback: "Exception
    ignored in ...") is raised again in the main thread, at its next bytecode: else the
    run goes on as if never stopped. (Dask's scheduler, in this process with an embedded
    cluster, runs Python code at every garbage collection.)"""
    previous = sys.unraisablehook

    def hook(unraisable: Any) -> None:
        if isinstance(unraisable.exc_value, KeyboardInterrupt):
            stop_later()
        else:
            previous(unraisable)

    sys.unraisablehook = hook
    try:
        yield
    finally:
        if sys.unraisablehook is hook:
            sys.unraisablehook = previous


def _restore(handlers: dict[int, Any]) -> None:
    """Put the handlers back, all of them even if one that is back already raises (a
    signal that came meanwhile), which is raised once all are back."""
    left = list(handlers.items())
    stopped: BaseException | None = None
    while left:
        try:
            while left:
                signal.signal(*left[0])
                left.pop(0)
        except BaseException as exc:  # raised by a handler put back, between two bytecodes
            stopped = exc
    if stopped is not None:
        raise stopped


def format_size(n: int) -> str:
    """Bytes in the units --memory-limit takes."""
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.3g}{unit}"
    return str(n)


#: Whether this process is a child subreaper (`become_subreaper`).
_reaper = False
PR_SET_CHILD_SUBREAPER = 36
#: Rounds of killing this process's children: each kills one generation of a tree whose
#: parents were killed first.
ORPHAN_ROUNDS = 100


def become_subreaper() -> bool:
    """Make this process the one that every orphaned descendant is reparented to (Linux
    3.4 and later), instead of init: whatever a check leaves running, whatever it did to
    its session (setsid) or its environment (env -i), is then a child of this process
    once the check has exited, and `reducer.core.oracle.run_in` kills it. Only for a
    process that runs one check at a time: all its children that were not there before
    a check are that check's. False where the kernel has no such thing (then the
    environment tag is what finds them)."""
    global _reaper
    if not _reaper and sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            _reaper = libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
        except (OSError, AttributeError):
            _reaper = False
    return _reaper


def reaping() -> bool:
    """Whether this process is a child subreaper (`become_subreaper`)."""
    return _reaper


def _not_inherited() -> None:
    """A forked child is no subreaper (the kernel does not pass it on)."""
    global _reaper
    _reaper = False


os.register_at_fork(after_in_child=_not_inherited)


def children() -> frozenset[int]:
    """This process's children, from /proc (their parent's threads list them), or by
    the parent pid of every process where the kernel has no such list."""
    me = os.getpid()
    found = _children_of(me)
    return frozenset(found if found is not None else _children_by_parent(me))


def _children_of(pid: int) -> set[int] | None:
    """pid's children, as its threads list them (empty once it is gone); None where
    this kernel keeps no such lists."""
    found: set[int] = set()
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                found.update(int(child) for child in f.read().split())
        except FileNotFoundError:
            if os.path.isdir(f"/proc/{pid}/task/{tid}"):  # no children lists in this kernel
                return None
        except OSError:
            continue
    return found


def _children_by_parent(me: int) -> set[int]:
    return {pid for pid, parent in _parents().items() if parent == me}


def _parents() -> dict[int, int]:
    """Every process's parent, from one pass over /proc."""
    found = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/stat") as f:
                    found[int(entry.name)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    return found


def end_orphans(earlier: frozenset[int]) -> None:
    """SIGKILL and reap this subreaper's children that were not there before the check
    (`earlier`), round by round as their own children are reparented here. Only those
    killed are waited for: one that cannot be killed (another user's) is not waited on
    forever."""
    for _ in range(ORPHAN_ROUNDS):
        killed = []
        for pid in children() - earlier:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
        if not killed:
            break
        for pid in killed:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)


# -- the memory a check uses ---------------------------------------------------------------
#
# Measured, not limited with setrlimit: RLIMIT_DATA and RLIMIT_AS count address space a
# process reserves and never touches. AddressSanitizer reserves terabytes of shadow at
# start, Go and the JVM reserve large heaps: under any such limit they fail at once, and
# with --compile that failure became the bug a run kept (it ended at `module {}`, exit 0).
# What takes a machine down is memory in use, so that is what is counted.

#: The share of this machine's memory the checks running at once may use between them by
#: default; the rest is the main process's (it holds the program) and the system's.
MEMORY_SHARE = 0.75
#: The default's floor: a small machine with many workers still runs its compilers.
MIN_DEFAULT_MEMORY = 256 << 20


def measurable() -> bool:
    """Whether a check's memory can be measured here: /proc/PID/statm (Linux)."""
    return os.path.exists("/proc/self/statm")


def physical_memory() -> int:
    """Bytes of memory this machine has (MemTotal), or its container's cgroup allows if
    that is less; 0 where it cannot be read."""
    total = 0
    with contextlib.suppress(OSError, ValueError, IndexError):
        with open("/proc/meminfo") as f:
            total = next(int(ln.split()[1]) << 10 for ln in f if ln.startswith("MemTotal:"))
    # cgroup v2, then v1, as a container sees its own: "max" or a huge number is no limit.
    for where in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        with contextlib.suppress(OSError, ValueError):
            with open(where) as f:
                cap = int(f.read().strip())
            if 0 < cap < total:
                total = cap
    return total


def default_memory_limit(workers: int) -> int:
    """What each of `workers` checks may use unless --memory-limit says: together
    MEMORY_SHARE of the memory, but at least MIN_DEFAULT_MEMORY each; 0 (no limit) where
    memory cannot be read or measured (not Linux)."""
    ram = physical_memory() if measurable() else 0
    return max(MIN_DEFAULT_MEMORY, int(MEMORY_SHARE * ram / max(1, workers))) if ram > 0 else 0


def memory_limit(given: int | None, workers: int) -> tuple[int, str]:
    """The bytes each check may use (0: none) for --memory-limit `given` (None: the
    default) and `workers` checks at once, and the start line that says so."""
    if given == 0:
        return 0, "checks have no memory limit (--memory-limit 0)"
    if not measurable():
        return 0, "checks have no memory limit: this system has no /proc to measure them by" + (
            " (--memory-limit is ignored)" if given else ""
        )
    limit = default_memory_limit(workers) if given is None else given
    if not limit:
        return 0, "checks have no memory limit: this machine's memory cannot be read (--memory-limit sets one)"
    if given is not None:
        how = "--memory-limit"
    elif limit == MIN_DEFAULT_MEMORY:
        how = "the default's floor; --memory-limit changes it"
    else:
        how = f"{MEMORY_SHARE:.0%} of {format_size(physical_memory())} / {max(1, workers)} workers; --memory-limit changes it"
    return limit, f"each check may use {format_size(limit)} of memory, its processes together ({how})"


def memory_in_use(root: int, earlier: frozenset[int]) -> int:
    """Bytes of anonymous memory resident in a check's processes together: root (the
    check) and its descendants, and in a subreaper the orphans reparented here since the
    check started (children not in `earlier`) with theirs. Anonymous: the heap, stacks,
    private mappings, what a program allocates; not file-backed pages (a compiler's
    shared libraries, mapped inputs), which are shared between the processes and which
    the kernel can drop. Resident: a mapping reserved and never touched (ASan's shadow)
    costs nothing. 0 where there is no /proc."""
    roots = {root} | (children() - earlier if _reaper else set())
    return sum(_anonymous_resident(pid) for pid in _tree(roots))


def _tree(roots: set[int]) -> set[int]:
    """roots and their descendants, through their children lists, or by every process's
    parent where the kernel keeps none."""
    seen: set[int] = set()
    todo = list(roots)
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        found = _children_of(pid)
        if found is None:
            return _tree_by_parent(roots)
        todo.extend(found)
    return seen


def _tree_by_parent(roots: set[int]) -> set[int]:
    parents = _parents()
    seen, grew = set(roots), True
    while grew:
        more = {pid for pid, parent in parents.items() if parent in seen} - seen
        seen |= more
        grew = bool(more)
    return seen


_PAGE = os.sysconf("SC_PAGE_SIZE")


def _anonymous_resident(pid: int) -> int:
    """statm's resident pages less its shared (file-backed and shmem) ones: RssAnon."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            fields = f.read().split()
        return max(0, int(fields[1]) - int(fields[2])) * _PAGE
    except (OSError, IndexError, ValueError):
        return 0
