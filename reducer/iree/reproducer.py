"""MLIR crash reproducers: the IR that entered the failing pass, with the pass pipeline
in an `mlir_reproducer` resource (`{-# external_resources: ... #-}`), replayed by
`iree-opt --run-reproducer`. Replaying one pass costs a fraction of a compile, and it is
what a compiler engineer files (the way IREE's lit tests look).

The MLIR Python bindings drop external resources when they print a module, so the
reduced program loses the resource; `block` writes it back into the output.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import time

import attrs

from reducer.core import codec
from reducer.core.oracle import CancelFn, Verdict, never
from reducer.core.rundirs import scratch_dir
from reducer.iree import dispatch
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
    seconds: float  # the compiles that wrote it
    compiles: int = 1
    executable: str = ""  # the executable source it came from, when one was compiled alone


#: IREE's error after any failure in code generation: the failure is inside one executable.
CODEGEN = "failed to run translation of source executable"
_ERROR_AT = re.compile(r"^(\S+?):(\d+):(\d+): error:", re.MULTILINE)
#: Executables holding the error's location compiled alone, at most: one is the rule.
MOST_ALONE = 3


def local(oracle: CompileOracle, data: bytes, cancel: CancelFn = never) -> Local | None:
    """Compile once more with the reproducer flags and read the reproducer; None when
    iree-compile wrote none (the failure is not inside a pass). The file is read here, as
    dispatch isolation reads its dump."""
    start = time.monotonic()
    with scratch_dir("ireereduce-repro-") as out:
        found = _written(oracle, data, out, cancel)
    return Local(found[0], found[1], time.monotonic() - start) if found is not None else None


def dump_sources(oracle: CompileOracle, data: bytes, folder: str, cancel: CancelFn = never) -> Verdict:
    """Compile data dumping every executable's source, with its locations, into
    folder/sources (`in_executable`'s first step; its verdict is a compile's)."""
    flags = (f"--iree-hal-dump-executable-sources-to={os.path.join(folder, 'sources')}", "--mlir-print-debuginfo")
    return oracle.with_command(oracle.command.plus(*flags)).run(data, cancel)


def in_executable(
    oracle: CompileOracle, data: bytes, dumped: tuple[str, Verdict] | None = None, cancel: CancelFn = never
) -> Local | None:
    """A code generation failure's reproducer, from the one executable that fails: one
    compile dumps every executable's source with its locations (`dump_sources`; or
    `dumped`: the folder it dumped into, and its verdict), the sources holding the
    error's location are compiled alone with the reproducer flags. A local reproducer
    of the whole compile snapshots the whole model before every pass (13 s for the
    shipped example's 2 s compile); one executable's costs a fraction of a second, and
    its IR holds that executable only. None when no source fails alone so."""
    start = time.monotonic() - (dumped[1].seconds if dumped is not None else 0.0)
    with scratch_dir("ireereduce-repro-") as out:
        folder, failed = dumped if dumped is not None else (out, dump_sources(oracle, data, out, cancel))
        dump = os.path.join(folder, "sources")
        alone = dispatch.compiled_alone(oracle)
        for compiles, name in enumerate(_failing_sources(dump, failed.stderr_tail)[:MOST_ALONE], start=2):
            with open(os.path.join(dump, name), "rb") as f:
                found = _written(alone, f.read(), out, cancel)
            if found is not None:
                return Local(found[0], found[1], time.monotonic() - start, compiles, name)
    return None


def _failing_sources(dump: str, stderr: str) -> list[str]:
    """The dumped sources the errors point into: with its sources dumped with their
    locations, iree-compile names the source file in a code generation error; else the
    sources holding an error's location in the input."""
    errors = _ERROR_AT.findall(stderr)
    names = sorted(os.listdir(dump)) if os.path.isdir(dump) else []
    named = [n for n in names if any(os.path.join(dump, n) == path for path, _, _ in errors)]
    if named:
        return named
    places = [f'":{line}:{column})'.encode() for _, line, column in errors]
    held = []
    for name in names:
        with open(os.path.join(dump, name), "rb") as f:
            source = f.read()
        if any(p in source for p in places):
            held.append(name)
    return held


def _written(oracle: CompileOracle, data: bytes, out: str, cancel: CancelFn = never) -> tuple[str, Reproducer] | None:
    """Compile data with the reproducer flags (into directory out); its reproducer."""
    path = os.path.join(out, "repro.mlir")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    oracle.with_command(oracle.command.plus(*(f.format(path=path) for f in LOCAL_FLAGS))).run(data, cancel)
    try:
        with open(path) as f:
            text = f.read()
    except (OSError, UnicodeDecodeError):
        return None
    found = find(text)
    return (text, found) if found is not None else None


def trailer(oracle: ReplayOracle) -> str:
    """The resource the output carries: the pipeline the oracle replays now, so that
    `iree-opt --run-reproducer OUTPUT` fails as the checks did."""
    pipeline = oracle.pipeline()
    if pipeline is None:
        return ""
    return Reproducer(pipeline, oracle.command.has_flag(NO_THREADS)).block()


def in_bytecode(data: bytes) -> str:
    """The resource of a crash reproducer saved as bytecode, which the bindings drop from
    bytecode they read and iree-opt prints; empty if iree-opt cannot print it."""
    from reducer.iree.oracles.command import resolve_tool

    try:
        printed = subprocess.run(
            [resolve_tool("iree-opt"), "--allow-unregistered-dialect", "-", "-o", "-"],
            input=data,
            capture_output=True,
            timeout=120,
        ).stdout.decode(errors="replace")
    except (OSError, subprocess.SubprocessError):
        return ""
    found = find(printed)
    return "" if found is None else found.block()
