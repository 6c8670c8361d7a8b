from __future__ import annotations

import os
import shutil
import stat
import sys
from pathlib import Path

import pytest
from hypothesis import settings as hypothesis_settings

sys.path.insert(0, os.path.dirname(__file__))

# CI runs the same examples every time (a property failure there is reproducible, and a
# rare one does not turn a later unrelated change red); no per-example deadline, because
# a loaded machine makes any deadline a timing assertion. HYPOTHESIS_PROFILE picks another.
# Both start from Hypothesis' defaults: recent versions load their own "ci" profile when
# any CI variable is set, and older ones (pyproject allows 6.80) have none.
_defaults = hypothesis_settings.get_profile("default")
hypothesis_settings.register_profile("ci", _defaults, derandomize=True, deadline=None, database=None, print_blob=True)
hypothesis_settings.register_profile("dev", _defaults, deadline=None)
hypothesis_settings.load_profile(
    os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") == "true" else "dev")
)

from reducer.core.ir import PrintOptions  # noqa: E402
from reducer.core.strategy import MLIRProgram  # noqa: E402
from reducer.core.workspace import MLIRWorkspace  # noqa: E402


def make_script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def on_call(counter: Path, k: int, action: str) -> str:
    """Shell lines for a script: run `action` at the script's k-th run (counted in counter),
    as a user would act on a file at some moment during a reduction."""
    return f'n=$(($(cat {counter} 2>/dev/null || echo 0) + 1)); echo $n > {counter}\n[ "$n" = {k} ] && {{ {action}; }}'


def watched_compile(tmp_path: Path, original: str, flag: str, label: str) -> tuple[str, Path]:
    """An iree-compile that logs its compiles of `original` (a file's contents): `label`
    as one given `flag` starts (the compile a triage step makes beside the original's
    check); for a plain one, 'plain-beside' if that one started before it ended (it waits
    up to 5 s for it), else 'plain-alone'. Others (--compile-to, the crash reproducer's)
    go unlogged. The program, and the log."""
    from reducer.iree.oracles.command import resolve_tool

    log, mark, real = tmp_path / "compiles", tmp_path / "beside-started", resolve_tool("iree-compile")
    (tmp_path / "watched").mkdir()
    wrapper = make_script(
        tmp_path / "watched" / "iree-compile",  # by that name: --pass-level wants iree-compile
        f'for a in "$@"; do case "$a" in *.mlir) src="$a";; esac; done\n'
        f'cmp -s "$src" "{original}" || exec {real} "$@"\n'
        f'case "$*" in\n'
        f"  *--compile-to=*|*crash-reproducer*) ;;\n"
        f'  *{flag}*) echo {label} >> "{log}"; touch "{mark}";;\n'
        f'  *) for i in $(seq 50); do [ -e "{mark}" ] && break; sleep 0.1; done\n'
        f'     if [ -e "{mark}" ]; then echo plain-beside; else echo plain-alone; fi >> "{log}";;\n'
        f"esac\n"
        f'exec {real} "$@"',
    )
    return str(wrapper), log


@pytest.fixture
def script(tmp_path: Path):
    def make(body: str, name: str = "check.sh") -> Path:
        return make_script(tmp_path / name, body)

    return make


def workspace(text: str) -> MLIRWorkspace:
    return MLIRWorkspace(text, PrintOptions())


def program(text: str) -> MLIRProgram:
    return workspace(text).program


def _iree_tool_dirs() -> list[str]:
    """Where the wheel's tools are, PATH or not: the interpreter's bin directory (a venv run as
    `.venv/bin/python -m pytest` without activating it) and the compiler package's own lookup.
    Finding them only on PATH let every e2e test skip, and pytest exit 0, in an unactivated venv."""
    dirs = [str(Path(sys.executable).parent)]
    try:
        from iree.compiler.tools.binaries import find_tool

        dirs.append(os.path.dirname(find_tool("iree-compile")))
    except Exception:  # the compiler wheel is not installed: whatever PATH holds
        pass
    return [d for d in dirs if os.access(os.path.join(d, "iree-compile"), os.X_OK)]


# Check scripts call `iree-opt` by name, so the found tools go on PATH for the whole session,
# as activating the venv would have done.
_path = os.environ.get("PATH", "").split(os.pathsep)
os.environ["PATH"] = os.pathsep.join([d for d in _iree_tool_dirs() if d not in _path] + _path)

needs_iree = pytest.mark.skipif(shutil.which("iree-compile") is None, reason="iree-compile not installed")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """Under CI=true an e2e test must run: its skip is turned into a failure, so a missing
    tool or dependency cannot make CI green with nothing tested."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and os.environ.get("CI") == "true" and item.get_closest_marker("e2e") is not None:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"e2e test skipped under CI=true: {reason}"


def apply_edits(strategy, text: str, pick=lambda edits: edits, grow: bool = False):
    """Materialise `pick(edits)` of strategy on text: a Candidate, or the Rejected reason."""
    ws = workspace(text)
    edits = ws.opportunities(strategy)
    return ws.materialize(strategy, pick(edits), grow=grow)


def each_edit(strategy, text: str, grow: bool = False) -> list:
    """Every edit of strategy on text, materialised alone: (edit, Candidate or Rejected)."""
    ws = workspace(text)
    return [(e, ws.materialize(strategy, [e], grow=grow)) for e in ws.opportunities(strategy)]


@pytest.fixture
def primers(monkeypatch: pytest.MonkeyPatch) -> list:
    """The EarlyExecutors a run makes (one per run whose engine is primed while the
    original is checked, see reducer/core/early.py), in order."""
    import reducer.session.overlap
    from reducer.core.early import EarlyExecutor

    made: list[EarlyExecutor] = []

    class Recorded(EarlyExecutor):
        def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(reducer.session.overlap, "EarlyExecutor", Recorded)
    return made


@pytest.fixture
def mismatch(tmp_path: Path) -> Path:
    """The audits' mismatch case: m.mlir for test_faults_audit18.MISMATCH's arguments,
    beside the usual input.mlir and check.sh, with a TMPDIR of its own."""
    from test_faults_audit18 import mismatch_case

    return mismatch_case(tmp_path)
