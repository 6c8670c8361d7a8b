"""The guard on the user's files while checks run (see `Guard`)."""

from __future__ import annotations

import errno
import os
import tempfile
import threading

from reducer.session.files import WRITE_ERRORS, save
from reducer.session.settings import EXIT_BAD_CHECK, EXIT_CANNOT_WRITE, EXIT_CHECK_CHANGED_FILES, Settings, UserError


class Guard:
    """The user's files as they were: a check that writes the input, the output or
    itself is a broken check, and its verdicts cannot be trusted. Also remembers the
    last good output, to put back if the check overwrote it."""

    def __init__(self, settings: Settings, output: str) -> None:
        self.settings = settings
        self.output = output
        self.paths = [settings.input, output] + ([settings.check] if settings.check else [])
        self.expected = {p: self._stat(p) for p in self.paths}
        self.good: bytes | None = None
        self.lock = threading.Lock()

    @staticmethod
    def _stat(path: str) -> tuple[int, int] | None:
        try:
            st = os.stat(path)
        except OSError:
            return None
        return st.st_size, st.st_mtime_ns

    def write_output(self, data: bytes) -> None:
        with self.lock:
            save(self.output, data, "the output", self._where_best())
            self.expected[self.output] = self._stat(self.output)
            self.good = data

    def _where_best(self) -> str:
        if self.good is None:
            return "no smaller program was found before this"
        return f"{self.output} still holds the smallest interesting program so far ({len(self.good)} bytes)"

    def best(self) -> str:
        if self.good is None:
            return f"no smaller program was found; {self.output} was not written"
        return f"{self.output} holds the smallest interesting program so far"

    def check(self, _verdict: object = None) -> None:
        check = self.settings.check
        with self.lock:
            if check is not None and self.expected.get(check) is not None:
                if not os.path.exists(check):
                    raise UserError(
                        EXIT_BAD_CHECK, f"the check script {check} was deleted during the run; {self.best()}"
                    )
            for path in self.paths:
                if self._stat(path) != self.expected[path]:
                    if path == self.output and self.good is not None:
                        save(self.output, self.good, "the output")
                        self.expected[path] = self._stat(path)
                    raise UserError(
                        EXIT_CHECK_CHANGED_FILES,
                        f"{path} changed while the check ran (size or modification time); a check must not write "
                        f"the user's files (it gets its own copy of the candidate); stopped, {self.best()}",
                    )

    def restore_output(self) -> None:
        with self.lock:
            if self.good is not None and self._stat(self.output) != self.expected[self.output]:
                save(self.output, self.good, "the output")
                self.expected[self.output] = self._stat(self.output)

    def environment_error(self, exc: OSError) -> UserError:
        """An OSError out of the run, in the user's words (never 'internal error')."""
        check = self.settings.check
        if check is not None:
            if not os.path.exists(check):
                return UserError(EXIT_BAD_CHECK, f"the check script {check} was deleted during the run; {self.best()}")
            if not os.access(check, os.X_OK):
                return UserError(
                    EXIT_BAD_CHECK,
                    f"the check script {check} is no longer executable (chmod +x {check}); {self.best()}",
                )
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
