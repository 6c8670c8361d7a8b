"""MLIR crash reproducers: the IR that entered the failing pass, with the pass pipeline
in an `mlir_reproducer` resource (`{-# external_resources: ... #-}`), replayed by
`iree-opt --run-reproducer`. Replaying one pass costs a fraction of a compile, and it is
what a compiler engineer files (the way IREE's lit tests look).

The MLIR Python bindings drop external resources when they print a module, so the
reduced program loses the resource; `block` writes it back into the output.
"""

from __future__ import annotations

import os
import re
import tempfile
import time

import attrs

from reducer.core import codec
from reducer.iree.oracles.compile import CompileOracle
from reducer.iree.oracles.replay import NO_THREADS, ReplayOracle

#: The flags that make iree-compile write the IR entering the failing pass, replayable alone.
LOCAL_FLAGS = (
    "--mlir-pass-pipeline-crash-reproducer={path}",
    "--mlir-pass-pipeline-local-reproducer",
    "--mlir-disable-threading",
)

_BLOCK = re.compile(r"\{-#(.*?)#-\}", re.DOTALL)
_ENTRY = re.compile(r'\bmlir_reproducer\s*:\s*\{((?:"(?:[^"\\]|\\.)*"|[^"}])*)\}')  # braces in strings do not end it
_PIPELINE = re.compile(r'\bpipeline\s*:\s*"((?:[^"\\]|\\.)*)"')


@codec.record()
@attrs.frozen
class Reproducer:
    """What the resource says: the pipeline to replay, and how to run it."""

    pipeline: str
    disable_threading: bool = True
    verify_each: bool = True

    def block(self) -> str:
        """The resource as MLIR prints it, to append after the module."""
        return (
            "\n{-#\n  external_resources: {\n    mlir_reproducer: {\n"
            f'      pipeline: "{self.pipeline}",\n'
            f"      disable_threading: {str(self.disable_threading).lower()},\n"
            f"      verify_each: {str(self.verify_each).lower()}\n"
            "    }\n  }\n#-}\n"
        )


def find(text: str) -> Reproducer | None:
    """The reproducer resource of a program's text, if it has one."""
    if "mlir_reproducer" not in text:
        return None
    for block in _BLOCK.finditer(text):
        entry = _ENTRY.search(block.group(1))
        if entry is None:
            continue
        pipeline = _PIPELINE.search(entry.group(1))
        if pipeline is None:
            continue
        body = entry.group(1)
        return Reproducer(
            pipeline.group(1),
            re.search(r"\bdisable_threading\s*:\s*false\b", body) is None,
            re.search(r"\bverify_each\s*:\s*false\b", body) is None,
        )
    return None


def strip(text: str) -> str:
    """The text without its reproducer resource (other resource blocks stay)."""
    return _BLOCK.sub(lambda m: "" if _ENTRY.search(m.group(1)) else m.group(0), text).rstrip() + "\n"


@attrs.frozen
class Local:
    """A local reproducer iree-compile wrote, and what it took."""

    text: str
    reproducer: Reproducer
    seconds: float  # the compile that wrote it


def local(oracle: CompileOracle, data: bytes) -> Local | None:
    """Compile once more with the reproducer flags and read the reproducer; None when
    iree-compile wrote none (the failure is not inside a pass). The file is read here, as
    dispatch isolation reads its dump."""
    with tempfile.TemporaryDirectory(prefix="ireereduce-repro-") as out:
        path = os.path.join(out, "repro.mlir")
        writing = oracle.with_command(oracle.command.plus(*(f.format(path=path) for f in LOCAL_FLAGS)))
        start = time.monotonic()
        writing.run(data)
        seconds = time.monotonic() - start
        try:
            with open(path) as f:
                text = f.read()
        except (OSError, UnicodeDecodeError):
            return None
    found = find(text)
    return Local(text, found, seconds) if found is not None else None


def trailer(oracle: ReplayOracle) -> str:
    """The resource the output carries: the pipeline the oracle replays now, so that
    `iree-opt --run-reproducer OUTPUT` fails as the checks did."""
    pipeline = oracle.pipeline()
    if pipeline is None:
        return ""
    return Reproducer(pipeline, oracle.command.has_flag(NO_THREADS)).block()
