"""Reading an input that is a stream (stdin, `<(zcat model.mlir.gz)`, a FIFO): in
chunks, so that an endless one (`<(yes)`) stops at --max-time or at a size no real
program reaches on this machine, with one line, instead of growing until the kernel
kills the run. Ctrl-C stops it between two chunks."""

from __future__ import annotations

import os
import select
import time
from typing import BinaryIO

from reducer.session.settings import EXIT_BAD_INPUT, EXIT_STOPPED, UserError

CHUNK = 1 << 20
#: Below this the cap would refuse real inputs on a machine short of memory; the kernel
#: is then the judge, as it is for any program.
FLOOR = 256 << 20


def cap(meminfo: str = "/proc/meminfo") -> int:
    """A quarter of the memory available now: the run holds the text, its parse and the copies
    its workers print, so an input past that could not be reduced here anyway."""
    try:
        with open(meminfo) as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return max(FLOOR, int(line.split()[1]) * 1024 // 4)
    except (OSError, ValueError, IndexError):
        pass
    try:
        return max(FLOOR, os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 4)
    except (OSError, ValueError):
        return 8 << 30


def read(f: BinaryIO, name: str, max_time: float | None, limit: int | None = None) -> bytes:
    """All of the stream f (the input named `name`), or one line saying why not: it
    was still coming when --max-time ran out (exit 13), or past `limit` bytes (exit 3)."""
    limit = cap() if limit is None else limit
    deadline = None if max_time is None else time.monotonic() + max_time
    fd = f.fileno()
    ready = select.poll()  # poll, not select: a descriptor past 1024 is fine
    ready.register(fd, select.POLLIN | select.POLLHUP)
    parts: list[bytes] = []
    size = 0
    while True:
        if deadline is not None and time.monotonic() >= deadline:
            raise UserError(
                EXIT_STOPPED,
                f"--max-time {max_time:g} ran out while reading the input {name!r} "
                + (f"({_mib(size)} read and it is still coming)" if size else "(nothing came from it)")
                + "; nothing was written",
            )
        if not ready.poll(1000):  # a second at most: the time limit is looked at again
            continue
        try:
            part = os.read(fd, CHUNK)
        except BlockingIOError:  # a descriptor left non-blocking by whoever made it
            continue
        if not part:
            return b"".join(parts)
        parts.append(part)
        size += len(part)
        if size > limit:
            raise UserError(
                EXIT_BAD_INPUT,
                f"the input {name!r} is a stream that gave more than {_mib(limit)} (a quarter of the memory "
                "available) and is still coming; is it endless? Write it to a file and give that",
            )


def _mib(size: int) -> str:
    return f"{size / (1 << 20):.0f} MiB" if size >= 1 << 20 else f"{size} bytes"
