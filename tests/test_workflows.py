"""Phase search, phase dumps and dispatch isolation against a stand-in iree-compile
that follows the real one's flags (the real one is in test_e2e_oracles.py)."""

from __future__ import annotations

import stat
import sys
from pathlib import Path

import pytest

from reducer.core.executor import LocalExecutor
from reducer.iree import dispatch, phases
from reducer.iree.oracles import CompileOracle, parse_command

FAKE = r"""#!{python}
import os, sys, time
args = sys.argv[1:]
flag = lambda name: next((a.split("=", 1)[1] for a in args if a.startswith(name + "=")), None)
PHASES = {phases!r}
src = next(a for a in args if not a.startswith("-") and a != "/dev/null")
text = open(src).read()
to = flag("--compile-to")
start = PHASES.index(flag("--compile-from")) + 1 if flag("--compile-from") else 0
end = PHASES.index(to) if to else len(PHASES) - 1
sources = flag("--iree-hal-dump-executable-sources-to")
if sources:
    for i, body in enumerate(["fine", "bad here", "also fine", "bad too"]):
        open(os.path.join(sources, f"module_main_dispatch_{{[0, 10, 2, 9][i]}}.mlir"), "w").write(body)
if "--compile-mode=hal-executable" in args:
    if "bad" in text:
        sys.stderr.write(f"{{src}}:1:1: error: the flow bug\n")
        sys.exit(1)
    sys.exit(0)
dump = flag("--dump-compilation-phases-to")
for i in range(start, end + 1):
    time.sleep(0.02)
    if dump:
        open(os.path.join(dump, f"input.{{i + 1}}.{{PHASES[i]}}.mlir"), "w").write(f"after {{PHASES[i]}}: " + text)
    if PHASES[i] == "flow" and "bad" in text:
        sys.stderr.write(f"{{src}}:1:1: error: the flow bug\n")
        sys.exit(1)
if "late" in text and not to:  # after the last phase: writing the output
    sys.stderr.write(f"{{src}}:1:1: error: the late bug\n")
    sys.exit(1)
"""


def failing_on(tmp_path: Path, program: bytes) -> CompileOracle:
    """The stand-in compiler's oracle, calibrated on how program fails."""
    tool = tmp_path / "bin" / "iree-compile"
    tool.parent.mkdir(exist_ok=True)
    tool.write_text(FAKE.format(python=sys.executable, phases=phases.PHASES))
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    o = CompileOracle(parse_command(f"{tool} {{input}} -o /dev/null"), "input.mlir", 10)
    return o.calibrate(o.run(program))


@pytest.fixture
def oracle(tmp_path: Path) -> CompileOracle:
    return failing_on(tmp_path, b"bad program")


@pytest.fixture
def executor(oracle: CompileOracle):
    with LocalExecutor(oracle, 2) as ex:
        yield ex


def test_the_phase_search_finds_the_first_failing_phase_in_a_few_compiles(oracle: CompileOracle, executor):
    assert phases.applicable(oracle)
    search = phases.first_failing_phase(oracle, b"bad program", executor)
    assert executor.stats.checks == search.checks  # every compile went through the executor
    assert search.phase == "flow" and search.checks <= 4
    assert search.worth_it()  # stopping at flow skips code generation
    assert not phases.PhaseSearch("executable-targets", 4).worth_it()
    limited = phases.limit(oracle, "flow")
    assert limited.run(b"bad program").interesting and not limited.run(b"good program").interesting
    assert not phases.applicable(limited)  # a command that already stops somewhere is left alone


def test_a_failure_only_the_full_compile_shows_has_no_phase(tmp_path: Path):
    """No --compile-to shows this bug (it comes after the last phase), so the search
    must end past the last phase, with no phase to stop at, not at the last one: the
    report would name that phase, and with --from-phase-dump every check would stop
    there, where no candidate fails, so the reduction would go nowhere."""
    oracle = failing_on(tmp_path, b"late program")
    assert not phases.limit(oracle, phases.PHASES[-1]).run(b"late program").interesting
    with LocalExecutor(oracle, 2) as executor:
        search = phases.first_failing_phase(oracle, b"late program", executor)
        assert executor.stats.checks == search.checks
    assert search.phase is None and not search.worth_it()


def test_reduction_can_start_from_the_phase_before(oracle: CompileOracle, executor):
    found = phases.start_from_dump(phases.limit(oracle, "flow"), b"bad program", "input.mlir", "flow", executor)
    assert found is not None
    text, resumed = found
    assert text == "after dispatch-creation: bad program"
    assert resumed.command.extra[-2:] == ("--compile-from=dispatch-creation", "--compile-to=flow")
    assert resumed.run(text.encode()).interesting


def test_dispatch_isolation_takes_the_first_failing_executable_by_name(oracle: CompileOracle, executor):
    found = dispatch.isolate(oracle, b"bad program", executor)
    assert executor.stats.checks == found.checks - 1  # the executables alone; the dump runs here
    assert found is not None
    # dispatch_9 comes before dispatch_10 as a person reads them (not as strings sort).
    assert found.failing == ("module_main_dispatch_9.mlir", "module_main_dispatch_10.mlir")
    assert found.name == "module_main_dispatch_9.mlir" and found.text == "bad too" and found.executables == 4
    assert found.oracle.command.extra == ("--compile-mode=hal-executable",)
