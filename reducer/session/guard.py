"""The guard on the user's files while checks run (see `Guard`)."""

from __future__ import annotations

import errno
import logging
import os
import tempfile
import threading
from collections.abc import Callable

from reducer.core.bytecode import Writer
from reducer.core.executor import ExecutorLost
from reducer.core.oracle import whole
from reducer.core.state import cannot_write
from reducer.session import files
from reducer.session.files import WRITE_ERRORS, rescue
from reducer.session.scripts import check_file
from reducer.session.settings import (
    EXIT_BAD_CHECK,
    EXIT_CANNOT_WRITE,
    EXIT_CHECK_CHANGED_FILES,
    EXIT_EXECUTOR,
    Settings,
    UserError,
)

log = logging.getLogger(__name__)


class Guard:
    """The user's files as they were: a check that writes the input, the output or
    itself is a broken check, and its verdicts cannot be trusted. Also remembers the
    last good output, to put back if the check overwrote it."""

    def __init__(self, settings: Settings, output: str, attach: Callable[[bytes], bytes] | None = None) -> None:
        self.settings = settings
        self.output = output
        self.script = check_file(settings.check)
        self.paths = [settings.input, output] + ([self.script] if self.script else [])
        self.expected = {p: self._stat(p) for p in self.paths}
        self.good: bytes | None = None  # what the output holds: a program's `form`, without the trailer
        #: Written after every program (a crash reproducer's resource, which the MLIR
        #: bindings do not print).
        self.trailer = b""
        self.lock = threading.Lock()
        #: Where the output leads (a symlinked -o: its target): the only file the run writes.
        self.lead = os.path.realpath(output)
        #: Set when the output changed and now leads to another file: where the best went.
        self.moved: str | None = None
        self._bytecode = Writer() if settings.output_bytecode(output) else None
        self._attach = attach  # a program's file gets the blobs it uses (`reducer.core.resources`)

    @property
    def plain(self) -> bool:
        """The output holds a program's text as it is (no bytecode, no blobs attached)."""
        return self._attach is None and self._bytecode is None

    def form(self, program: bytes) -> bytes:
        """A program (text) as the output holds it: MLIR bytecode for -o x.mlirbc or
        --emit-bytecode, else the text. Text that does not parse as MLIR has no bytecode
        form and stays text."""
        if self._attach is not None:
            program = self._attach(program)
        if self._bytecode is None:
            return program
        encoded = self._bytecode(whole(program))
        if encoded is None:
            log.warning("the program does not parse as MLIR: %s holds it as text, not bytecode", self.output)
            return program
        return encoded

    def holds(self, data: bytes, program: bytes) -> bool:
        """Whether output bytes `data` are `program` in the output's form."""
        return data == self.form(program)

    @staticmethod
    def _stat(path: str) -> tuple[int, int] | None:
        try:
            st = os.stat(path)
        except OSError:
            return None
        return st.st_size, st.st_mtime_ns

    def write_output(self, program: bytes) -> None:
        data = self.form(program)
        with self.lock:
            self._write(data)
            self.good = data

    def _write(self, data: bytes) -> None:
        """Write the output. If it cannot be written and no longer holds the best so far
        (its directory was removed), data is saved elsewhere, and the error says where."""
        # A program with blobs is an `Attached` (its file gets them as it is written): `+`
        # would make it plain bytes, the blob-free text, so a trailer goes after its whole
        # file; a program that holds the resource already (text mode) gets no second one.
        whole_file = self._whole_file(data)
        if self._elsewhere():  # a commit, or the last good program put back, would write someone else's file
            self.moved = self.moved or rescue(self.output, whole_file)
            raise UserError(EXIT_CHECK_CHANGED_FILES, self._changed(self.output))
        try:
            files.write_atomically(self.output, whole_file)
        except OSError as exc:
            intact = self.good is not None and self._stat(self.output) == self.expected[self.output]
            where = self._where_best() if intact else rescue(self.output, whole_file)
            raise UserError(
                EXIT_CANNOT_WRITE, f"cannot write the output {self.output}: {exc.strerror}; {where}"
            ) from None
        self.expected[self.output] = self._stat(self.output)

    def _whole_file(self, data: bytes) -> bytes:
        carries = self.trailer and b"mlir_reproducer" not in bytes(data)
        return whole(data) + self.trailer if carries else data

    def _elsewhere(self) -> bool:
        """The output leads to another file than at the start (a link re-pointed, its folder
        swapped for a link). A plain output deleted from its folder is not: realpath resolves
        what is there of a path, so the run may write it there again."""
        return os.path.realpath(self.output) != self.lead

    def _where_best(self) -> str:
        assert self.good is not None
        return f"{self.output} still holds the smallest interesting program so far ({len(self.good)} bytes)"

    def best(self) -> str:
        if self.good is None:
            return f"no smaller program was found; {self.output} was not written"
        return f"{self.output} holds the smallest interesting program so far"

    def check(self, _verdict: object = None) -> None:
        check = self.script
        with self.lock:
            if check is not None and self.expected.get(check) is not None:
                if not os.path.exists(check):
                    raise UserError(
                        EXIT_BAD_CHECK, f"the check script {check} was deleted during the run; {self.best()}"
                    )
            for path in self.paths:
                if self._stat(path) != self.expected[path]:
                    if path == self.output and self.good is not None:
                        self._write(self.good)
                    raise UserError(EXIT_CHECK_CHANGED_FILES, self._changed(path))

    def _changed(self, path: str) -> str:
        """Who changed a file is not known (the check, or the user, or a script of theirs):
        say what changed, what it means for the run, and what to do."""
        gone = not os.path.lexists(path)
        how = "was deleted during the run" if gone else "changed during the run (size or modification time)"
        if path == self.output:
            now = (
                "it holds the last good program again"
                if self.good is not None
                else "what it holds now is not the run's (no smaller program had been found)"
            )
            if self.moved is not None:
                there = f"it leads to {os.path.realpath(path)} now, which the run left alone; " if not gone else ""
                how = "was deleted or moved during the run" if gone else "leads to another file now"
                now = f"{there}{self.moved}"
            return (
                f"the output {path} {how}: a check must not write the user's files (it gets its own copy "
                f"of the candidate), nor may anything else while the run writes it; {now}; stopped"
                + (f", {self.best()}" if self.good is not None and self.moved is None else "")
            )
        if path == self.script:
            return (
                f"the check script {path} {how}; verdicts of the old one and the new one do not mix, so the "
                f"run stopped; {self.best()}; rerun with --fresh to start over with the new check"
            )
        return (
            f"the input {path} {how}, by someone or by the check (which gets its own copy of the candidate "
            f"and should leave the input alone); the run reduces the input as it was when it started, so it "
            f"stopped; {self.best()}; "
            + ("put it back to reduce it again" if gone else "rerun with --fresh to reduce the input as it is now")
        )

    def restore_output(self) -> None:
        with self.lock:
            if self.good is not None and self._stat(self.output) != self.expected[self.output]:
                self._write(self.good)

    def environment_error(self, exc: OSError) -> UserError:
        """An OSError out of the run, in the user's words (never 'internal error')."""
        if isinstance(exc, ExecutorLost):
            return UserError(EXIT_EXECUTOR, f"{exc}; {self.best()}")
        check = self.script
        if check is not None:
            if not os.path.exists(check):
                return UserError(EXIT_BAD_CHECK, f"the check script {check} was deleted during the run; {self.best()}")
            if not os.access(check, os.X_OK):
                return UserError(
                    EXIT_BAD_CHECK,
                    f"the check script {check} is no longer executable (chmod +x {check}); {self.best()}",
                )
        state = None if self.settings.no_state else self.settings.state_dir or files.default_state_dir(self.output)
        if (
            state is not None
            and exc.filename
            and os.path.dirname(os.path.abspath(exc.filename)) == os.path.abspath(state)
        ):
            return UserError(EXIT_CANNOT_WRITE, f"{cannot_write(state, exc)}; {self.best()}")
        if exc.errno in WRITE_ERRORS and not exc.filename:
            return UserError(
                EXIT_CANNOT_WRITE,
                f"cannot write a candidate into the temporary directory "
                f"{tempfile.gettempdir()}: {exc.strerror}; {self.best()}",
            )
        if exc.errno in (errno.ENOENT, errno.EACCES, errno.EPERM) and check is None:
            return UserError(
                EXIT_BAD_CHECK, f"cannot run the check ({exc.filename or 'its program'}): {exc.strerror}; {self.best()}"
            )
        where = exc.filename or "a file"
        return UserError(EXIT_CANNOT_WRITE, f"cannot write {where}: {exc.strerror}; {self.best()}")
