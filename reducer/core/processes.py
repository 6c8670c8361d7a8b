"""What a check's processes may use, and what they leave behind: the resource limits
a process that starts checks puts on them, and the child subreaper that finds every
process a check left running. Knows nothing of oracles (`reducer.core.oracle.run_in`
uses it)."""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import signal
import sys
from collections.abc import Iterator


def no_core_dumps() -> None:
    """A crashing compiler must not leave a core file per candidate (gigabytes each)."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def format_size(n: int) -> str:
    """Bytes in the units --memory-limit takes."""
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.3g}{unit}"
    return str(n)


@contextlib.contextmanager
def data_limit(memory: int) -> Iterator[None]:
    """This process's soft RLIMIT_DATA lowered to `memory` bytes (0: left alone) for the
    block: a process started in it inherits the limit. Only the soft limit, so it can be
    put back; never above a lower one the user set."""
    if not memory:
        yield
        return
    before = _lower_data_limit(memory)
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_DATA, before)


def child_limits(memory: int, cores: bool) -> None:
    """Between fork and exec, where the process starting a check has threads."""
    if cores:
        no_core_dumps()
    _lower_data_limit(memory)


def _lower_data_limit(memory: int) -> tuple[int, int]:
    """The soft RLIMIT_DATA at most `memory`; what it was."""
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    cap = min(x for x in (memory, soft, hard) if x != resource.RLIM_INFINITY)
    resource.setrlimit(resource.RLIMIT_DATA, (cap, hard))
    return soft, hard


def rss_bytes(usage: resource.struct_rusage) -> int:
    return int(usage.ru_maxrss) * (1 if sys.platform == "darwin" else 1024)


def own_peak() -> int:
    """This process's peak resident size. A check's starts as at least that of the
    process that started it (the kernel carries that process's peak over exec, and a
    fork counts the pages it shares as the child's), so only a peak above it says
    anything about the check."""
    return rss_bytes(resource.getrusage(resource.RUSAGE_SELF))


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
    found: set[int] = set()
    try:
        tasks = os.listdir(f"/proc/{me}/task")
    except OSError:
        return frozenset()
    for tid in tasks:
        try:
            with open(f"/proc/{me}/task/{tid}/children") as f:
                found.update(int(pid) for pid in f.read().split())
        except FileNotFoundError:
            if os.path.isdir(f"/proc/{me}/task/{tid}"):  # no children lists in this kernel
                return frozenset(_children_by_parent(me))
        except OSError:
            continue
    return frozenset(found)


def _children_by_parent(me: int) -> set[int]:
    found = set()
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == me:
                        found.add(int(entry.name))
            except (OSError, IndexError, ValueError):
                continue
    return found


def end_orphans(earlier: frozenset[int]) -> int:
    """SIGKILL and reap this subreaper's children that were not there before the check
    (`earlier`), round by round as their own children are reparented here; the largest
    peak resident size (bytes) among them. Only those killed are waited for: one that
    cannot be killed (another user's) is not waited on forever."""
    peak = 0
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
                peak = max(peak, rss_bytes(os.wait4(pid, 0)[2]))
    return peak
