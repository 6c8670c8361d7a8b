"""Hostile runs, part 2: signals to the whole process group, a tiny open-files limit,
stopped Dask runs, and what checks leave in their temp dir.

Every test asserts the exit code and the message, that the user's files are as they
were, and that no temp dir (TMPDIR points into the test's directory) and no process
is left."""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
from conftest import make_script
from test_faults import BIG, SMALL, assert_clean, cli, env, error_line, start, wait_for

from reducer import session

#: Candidates (fewer negf than BIG) hang: the run is mid-check when it is stopped.
HANG = '[ "$(grep -c negf "$1")" -lt 40 ] && {{ echo $$ >> {pids}; sleep 30; }}; grep -q math.exp "$1"'


@pytest.fixture
def case(tmp_path: Path) -> Path:
    """As tests/test_faults.py's: the input, and an empty TMPDIR for the run."""
    (tmp_path / "input.mlir").write_text(SMALL)
    (tmp_path / "tmp").mkdir()
    return tmp_path


def _children(pid: int) -> int:
    try:
        return len(psutil.Process(pid).children())
    except psutil.Error:
        return 0


def _python(case: Path, script: str, *args: str) -> subprocess.CompletedProcess[str]:
    """script run by this Python in case, with the case's TMPDIR."""
    command = [sys.executable, "-c", script, *args]
    return subprocess.run(command, cwd=case, capture_output=True, text=True, timeout=120, env=env(case))


def _stopped_cleanly(proc: subprocess.Popen[str], case: Path, text: str) -> str:
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == session.EXIT_INTERRUPTED, err
    assert "ireereduce: interrupted" in err.splitlines()[-1], err
    assert "Traceback" not in err and "Exception ignored" not in err, err
    assert "worker died" not in err, err  # a worker killed by the signal is no verdict
    assert (case / "input.mlir").read_text() == text
    assert_clean(case)
    return err


# -- a signal to the whole process group ------------------------------------------------
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_group_signal_mid_run_stops_the_run_not_its_workers(case: Path, signum: int):
    """`kill -TERM -- -PGID` reaches the workers too. One that died of it had its check
    counted as a worker death (and retried on a new worker mid-stop)."""
    (case / "input.mlir").write_text(BIG)
    pids = case / "pids"
    make_script(case / "check.sh", HANG.format(pids=pids))
    proc = start(
        case, "input.mlir", "--check", "check.sh", "-j", "2", "--strategies", "drop-ops", start_new_session=True
    )
    wait_for(lambda: pids.exists() and len(pids.read_text().split()) >= 2)  # both workers busy
    os.killpg(proc.pid, signum)
    _stopped_cleanly(proc, case, BIG)


def test_a_group_signal_while_many_workers_start_stops_the_run(case: Path):
    """-j 300 takes seconds to fork its workers. A SIGTERM to the group then landed in a
    fork's at-fork callbacks, where Python swallows the KeyboardInterrupt ("Exception
    ignored"): the run went on, its workers died of the signal, and it exited 0 calling
    the check flaky."""
    make_script(case / "check.sh", 'sleep 1; grep -q math.exp "$1"')
    proc = start(case, "input.mlir", "--check", "check.sh", "-j", "300", start_new_session=True)
    wait_for(lambda: _children(proc.pid) >= 50)
    os.killpg(proc.pid, signal.SIGTERM)
    _stopped_cleanly(proc, case, SMALL)


def test_a_stop_signal_that_reaches_a_worker_is_no_verdict(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """What a signal to the process group does to a worker, alone: the check goes on and
    its verdict stands (a worker that died of it had its check run again, and a second
    such death made the candidate "worker died", not interesting)."""
    import tempfile

    from reducer.core.executor import LocalExecutor
    from reducer.core.oracle import ScriptOracle
    from reducer.core.rundirs import run_scope

    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    ran = tmp_path / "ran"
    check = make_script(tmp_path / "check.sh", f"echo $PPID >> {ran}; sleep 1; exit 0")
    with run_scope():
        ex = LocalExecutor(ScriptOracle(str(check), "in.mlir", 60.0), 1)
        try:
            future = ex.submit(b"x")
            wait_for(lambda: ran.exists() and ran.read_text().strip())
            worker = int(ran.read_text())
            for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                os.kill(worker, signum)
            verdict = future.result()
        finally:
            ex.close()
    assert verdict.interesting and verdict.outcome == "interesting", verdict
    assert ran.read_text().split() == [str(worker)]  # checked once, by the worker signalled
    assert list((tmp_path / "tmp").iterdir()) == []


def test_a_stop_signal_while_a_worker_forks_is_raised_after_the_fork():
    """A fork runs Python's at-fork callbacks, which swallow what a signal handler raises
    in them. While a worker is forked the handlers only note a stop (sent here from
    another thread, as the kernel may hand a process's signal to any thread), which is
    raised once the fork is over."""
    from reducer.core.processes import stops_deferred

    swallowed = []
    go = threading.Event()
    # Started before the block, so it does not inherit the block's signal mask.
    sender = threading.Thread(target=lambda: go.wait() and os.kill(os.getpid(), signal.SIGINT))
    sender.start()
    with pytest.raises(KeyboardInterrupt):  # noqa: PT012  (the signal is raised as the block ends)
        with stops_deferred():
            try:  # what the fork's at-fork callbacks do with an exception
                go.set()
                sender.join()
                for _ in range(10000):
                    time.sleep(0)
            except KeyboardInterrupt:
                swallowed.append(True)
    assert not swallowed
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert not signal.pthread_sigmask(signal.SIG_BLOCK, [])


def test_a_pool_never_closed_does_not_hang_the_exit(tmp_path: Path):
    """multiprocessing stops its daemon processes at exit with SIGTERM, then joins them;
    the workers ignore SIGTERM, so the pool closes itself first."""
    check = make_script(tmp_path / "check.sh", "exit 0")
    (tmp_path / "tmp").mkdir()
    code = (
        "import sys\n"
        "from reducer.core.executor import LocalExecutor\n"
        "from reducer.core.oracle import ScriptOracle\n"
        "ex = LocalExecutor(ScriptOracle(sys.argv[1], 'in.mlir', 30.0), 2)\n"
        "print(ex.submit(b'x').result().interesting)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(check)], capture_output=True, text=True, timeout=60, env=env(tmp_path)
    )
    assert proc.returncode == 0 and proc.stdout == "True\n", proc.stderr
    assert list((tmp_path / "tmp").iterdir()) == []


# -- an open-files limit too low for a worker ------------------------------------------
def _open_files(limit: int):
    def lower() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

    return lower


@pytest.mark.parametrize("limit", [5, 8, 12, 16])
def test_an_open_files_limit_too_low_for_one_worker_is_one_line(case: Path, limit: int):
    """`ulimit -n 16` ended in "internal error: ... Too many open files: '/proc'" and left
    the run directory in TMPDIR; `ulimit -n 5` a traceback from the log queue's lock."""
    make_script(case / "check.sh", f'touch {case}/ran; grep -q math.exp "$1"')
    proc = cli(case, "input.mlir", "--check", "check.sh", "-j", "4", preexec_fn=_open_files(limit))
    assert proc.returncode == session.EXIT_EXECUTOR, proc.stderr
    line = error_line(proc.stderr)
    assert f"the open-files limit (ulimit -n) is {limit}, too low to run a check" in line, line
    assert not (case / "ran").exists() and not (case / "input.reduced.mlir").exists()
    assert (case / "input.mlir").read_text() == SMALL
    assert_clean(case)
    assert not list(case.glob("*.resume"))


def test_a_low_open_files_limit_that_fits_one_worker_runs_on_fewer(case: Path):
    make_script(case / "check.sh", 'grep -q math.exp "$1"')
    proc = cli(case, "input.mlir", "--check", "check.sh", "-j", "4", preexec_fn=_open_files(32))
    assert proc.returncode == 0, proc.stderr
    assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr
    warned = [ln for ln in proc.stderr.splitlines() if "open files" in ln]
    assert len(warned) == 1 and "running 1 checks at once" in warned[0], proc.stderr
    assert "negf" not in (case / "input.reduced.mlir").read_text()
    assert_clean(case)


# -- what checks leave in their temp dir ----------------------------------------------
def test_what_a_check_leaves_in_its_tmpdir_goes_with_it(case: Path):
    """iree-compile killed mid-run leaves its `*_dispatch_*.o` in $TMPDIR. A check's
    TMPDIR (TMP, TEMP) is its own temp dir, removed with it: nothing reaches the user's."""
    seen = case / "seen"
    make_script(
        case / "check.sh",
        f'echo "$TMPDIR $TMP $TEMP" >> {seen}; touch "$TMPDIR/m_dispatch_0.o" "$TMP/a" "$TEMP/b"; '
        f'mkdir "$TMPDIR/sub"; grep -q math.exp "$1"',
    )
    proc = cli(case, "input.mlir", "--check", "check.sh", "-j", "2")
    assert proc.returncode == 0, proc.stderr
    run_dir = case / "tmp"
    for line in seen.read_text().splitlines():
        tmpdir, tmp, temp = line.split()
        assert tmpdir == tmp == temp and tmpdir.startswith(f"{run_dir}/ireereduce-run-"), line
    assert (case / "input.mlir").read_text() == SMALL
    assert_clean(case)


def test_what_a_stopped_check_leaves_in_its_tmpdir_goes_with_it(case: Path):
    """The same for checks stopped mid-run (the run interrupted, the check killed)."""
    (case / "input.mlir").write_text(BIG)
    pids = case / "pids"
    make_script(
        case / "check.sh",
        f'touch "$TMPDIR/m_dispatch_0.o"; [ "$(grep -c negf "$1")" -lt 40 ] && '
        f'{{ echo $$ >> {pids}; sleep 30; }}; grep -q math.exp "$1"',
    )
    proc = start(case, "input.mlir", "--check", "check.sh", "-j", "2", "--strategies", "drop-ops")
    wait_for(lambda: pids.exists() and len(pids.read_text().split()) >= 2)
    proc.send_signal(signal.SIGTERM)
    _stopped_cleanly(proc, case, BIG)


def test_a_keyboard_interrupt_python_swallows_is_raised_again():
    """A stop signal's KeyboardInterrupt raised inside a garbage collector callback, a
    `__del__` or an at-fork callback is only reported ("Exception ignored in ..."): with
    an embedded Dask cluster (whose scheduler watches every collection) a Ctrl-C was
    lost so, and the run went on to exit 0. It comes again a moment later."""
    from reducer.core.processes import interrupts_kept

    class Swallowed:
        def __del__(self) -> None:
            raise KeyboardInterrupt  # what the handler does, where Python cannot pass it on

    before = sys.unraisablehook
    waited = 0
    with pytest.raises(KeyboardInterrupt):  # noqa: PT012  (raised while the loop waits)
        with interrupts_kept():
            Swallowed()
            while waited < 6000:  # a guard: raised again after INTERRUPT_AGAIN
                time.sleep(0.01)
                waited += 1
    assert sys.unraisablehook is before


_STOP_IN_THE_BINDINGS = """
import os, signal, sys
WHERE, STOP = sys.argv[1], int(sys.argv[2])
from iree.compiler import ir
from reducer.core import engine, ir as irutil, workspace
stopped = []
def stop_here(*_args):  # the stop signal's handler runs in this callback, called from C++
    os.kill(os.getpid(), STOP)
    return ir.WalkResult.ADVANCE
def stop_in_the_bindings(how):
    stopped.append(how)
    if how == "walk":  # a visitor of ours (not the run's): it comes out as RuntimeError
        ir.Module.parse("module {}", ir.Context()).operation.walk(stop_here)
    else:  # a diagnostic handler: the bindings print what it raises, and go on
        if how == "our-diagnostic":  # as the context's own handler is
            from reducer.core.processes import NATIVE_CALLBACKS
            NATIVE_CALLBACKS.add(stop_here.__code__)
        ctx = ir.Context()
        ctx.attach_diagnostic_handler(stop_here)
        ir.Location.unknown(ctx).emit_error("a diagnostic no collector takes")
def ready():  # once, when the run has a best-so-far
    return not stopped and os.path.exists("input.reduced.mlir")
count_ops, listed, ran = irutil.count_ops, workspace.Workspace.opportunities, engine.Engine.run
def counted(root, skip=frozenset()):
    if WHERE in ("walk", "our-diagnostic", "other-diagnostic") and ready():  # building a candidate
        stop_in_the_bindings(WHERE)
    if WHERE == "start" and not stopped:  # the input's size, before any check
        stop_in_the_bindings("walk")
    return count_ops(root, skip)
def listing(self, strategy):
    if WHERE == "listing" and ready():  # a strategy lists its edits
        stop_in_the_bindings("walk")
    return listed(self, strategy)
def run(self):
    ran(self)
    if WHERE == "end":  # after the last candidate
        stop_in_the_bindings("other-diagnostic")
irutil.count_ops, workspace.Workspace.opportunities, engine.Engine.run = counted, listing, run
sys.argv = ["ireereduce", "input.mlir", "--check", "check.sh", "--strategies", "drop-ops"]
from reducer.__main__ import main
main()
"""


@pytest.mark.parametrize("where", ["walk", "our-diagnostic", "other-diagnostic", "listing", "end", "start"])
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_stop_inside_an_mlir_callback_stops_the_run(case: Path, where: str, signum: int):
    """CI, on ff5b73b: a Ctrl-C that landed in count_ops' walk visitor came out of the
    bindings as RuntimeError ("Exception raised in callback"), was taken for a faulty
    strategy ("strategy types failed on 1 edits"), and the run ended 0. One that lands in
    a diagnostic handler, raised there, was printed by the bindings as a traceback and
    went no further. All stop the run: exit 130. In the run's own handler, the stop is
    taken a moment later, not raised there; one a plug-in's handler lost (the bindings
    print it) is raised before the next candidate, or as the engine ends. The review:
    one while a strategy lists its edits was "could not list its edits"; one in the
    input's count, before any check, was "internal error"."""
    (case / "input.mlir").write_text(BIG)
    make_script(case / "check.sh", 'grep -q math.exp "$1"')
    proc = _python(case, _STOP_IN_THE_BINDINGS, where, str(int(signum)))
    assert proc.returncode == session.EXIT_INTERRUPTED, proc.stderr
    assert "ireereduce: interrupted" in proc.stderr.splitlines()[-1], proc.stderr
    assert "failed on" not in proc.stderr and "could not list" not in proc.stderr, proc.stderr
    assert "internal error" not in proc.stderr, proc.stderr
    assert where in ("other-diagnostic", "end") or "Traceback" not in proc.stderr, proc.stderr
    assert (case / "input.mlir").read_text() == BIG
    if where != "start":
        assert "math.exp" in (case / "input.reduced.mlir").read_text()  # the best-so-far, kept
    assert_clean(case)


@pytest.mark.parametrize("where", ["diagnostic handler", "count_ops visitor"])
def test_the_runs_own_mlir_callbacks_take_a_stop_a_moment_later(monkeypatch, where: str):
    """A stop that lands in the diagnostic handler every context of the run has, or in
    count_ops' visitor, is not raised there (the bindings would print it and go on, or
    turn it into RuntimeError), but a moment later."""
    from iree.compiler import ir

    from reducer import cli as command
    from reducer.core import ir as irutil
    from reducer.core import processes

    monkeypatch.setattr(processes, "_stop_raised", False)
    monkeypatch.setattr(processes, "_swallowed", False)
    ctx, frames = irutil.new_context(), []
    caller = sys._getframe().f_code if where == "diagnostic handler" else irutil.count_ops.__code__

    def profile(frame, event, _arg):
        if event == "call" and frame.f_back is not None and frame.f_back.f_code is caller:
            if "importlib" not in frame.f_code.co_filename:  # count_ops' import of the bindings
                frames.append(frame)  # Python that the bindings' C++ called

    module = ir.Module.parse("func.func @f() {\n  return\n}", ctx)
    sys.setprofile(profile)
    try:
        if where == "diagnostic handler":
            ir.Location.unknown(ctx).emit_error("a diagnostic")
        else:
            irutil.count_ops(module.operation)
    finally:
        sys.setprofile(None)
    assert frames, f"no Python {where} was called"
    before = signal.signal(signal.SIGINT, command._raise_interrupt)  # what comes again goes here
    try:
        try:
            command._raise_interrupt(signal.SIGINT, frames[0])
        except KeyboardInterrupt:
            pytest.fail(f"raised in the {where}, which the bindings call from C++")
        assert processes.stop_raised()
        waited = 0
        with pytest.raises(KeyboardInterrupt):  # noqa: PT012  (raised while the loop waits)
            while waited < 6000:  # a guard: raised again after INTERRUPT_AGAIN
                time.sleep(0.01)
                waited += 1
        command._raise_interrupt(signal.SIGINT, None)  # raised once: a later stop is not
    finally:
        signal.signal(signal.SIGINT, before)


def test_a_stop_raised_before_its_timer_is_raised_once_and_a_new_run_starts_clean(monkeypatch):
    """The review: the stop `stop_later` will raise again, raised first by a candidate's
    `raise_if_stopped`, came a second time while the run ended; and a new run in the same
    process inherited a pending one."""
    from reducer import cli as command
    from reducer.core import processes

    monkeypatch.setattr(processes, "_stop_raised", False)
    monkeypatch.setattr(processes, "_swallowed", False)
    before = signal.signal(signal.SIGINT, command._raise_interrupt)
    try:
        for new_run in (False, True):
            processes.note_stop()
            processes.stop_later()
            if new_run:
                processes.note_stop(False)
            else:
                with pytest.raises(KeyboardInterrupt):
                    processes.raise_if_stopped()
            try:
                time.sleep(20 * processes.INTERRUPT_AGAIN)  # the timer has come and gone
            except KeyboardInterrupt:
                pytest.fail("the stop was raised again")
        with pytest.raises(KeyboardInterrupt):  # the new run's first stop
            command._raise_interrupt(signal.SIGINT, None)
    finally:
        signal.signal(signal.SIGINT, before)


# -- a stopped Dask run ------------------------------------------------------------------
DASK = ["--executor", "dask", "-j", "2", "--strategies", "drop-ops"]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_dask_run_stopped_by_a_group_signal_is_one_line_and_leaves_nothing(case: Path, signum: int):
    """Ctrl-C reaches the embedded cluster's workers too: they printed tracebacks, and were
    gone before the run removed the check script it had installed in their temp dir."""
    (case / "input.mlir").write_text(BIG)
    pids = case / "pids"
    make_script(case / "check.sh", HANG.format(pids=pids))
    proc = start(case, "input.mlir", "--check", "check.sh", *DASK, start_new_session=True)
    wait_for(lambda: pids.exists() and len(pids.read_text().split()) >= 2, 120)
    os.killpg(proc.pid, signum)
    err = _stopped_cleanly(proc, case, BIG)
    assert not [ln for ln in err.splitlines() if "ERROR" in ln or "Warning" in ln], err


def test_what_a_dask_run_killed_with_sigkill_leaves_the_next_run_removes(case: Path):
    """kill -9 of the main process left the installed check (`ireereduce-check-*`) and
    multiprocessing's `pymp-*` (the fork server's socket) in TMPDIR for good."""
    (case / "input.mlir").write_text(BIG)
    pids = case / "pids"
    make_script(case / "check.sh", HANG.format(pids=pids))
    proc = start(case, "input.mlir", "--check", "check.sh", *DASK, "--no-state")
    wait_for(lambda: pids.exists() and len(pids.read_text().split()) >= 2, 120)
    proc.kill()
    proc.communicate(timeout=60)
    assert any(p.name.startswith("ireereduce-run-") for p in (case / "tmp").iterdir())
    make_script(case / "next.sh", 'grep -q math.exp "$1"')
    done = cli(case, "input.mlir", "--check", "next.sh", "-j", "1", "--no-state")
    assert done.returncode == 0, done.stderr
    assert (case / "input.mlir").read_text() == BIG
    assert_clean(case)


def test_multiprocessings_temp_dir_is_noted_before_the_cluster_starts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Audit 12 (D4): the note came after the cluster's start (a second or more): a run
    killed meanwhile left `pymp-*` in TMPDIR for good. Here the start dies at once, as a
    kill -9 would end it: the note already names the directory."""
    import multiprocessing.util

    import distributed

    from reducer.core.dask_executor import DaskExecutor
    from reducer.core.oracle import ScriptOracle
    from reducer.core.rundirs import OUTSIDE_NOTE, run_scope

    def killed(*args: object, **kw: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(distributed, "LocalCluster", killed)
    check = make_script(tmp_path / "check.sh", "exit 0")
    with run_scope() as run_dir:
        with pytest.raises(KeyboardInterrupt):
            DaskExecutor(ScriptOracle(str(check), "in.mlir", 60.0), 1)
        noted = (Path(run_dir) / OUTSIDE_NOTE).read_text().splitlines()
    assert [line.split(" ", 1)[1] for line in noted] == [multiprocessing.util.get_temp_dir()]


@pytest.mark.parametrize(
    "refusal, said",
    [
        (["--no-state", "--state-dir", "s"], "contradict"),
        (["--bogus-flag"], "No such option"),  # audit 11 (D1): click's refusals came before the sweep
        (["-o", "input.mlir"], "is the input"),  # and so did the paths' check
    ],
    ids=["settings", "parsing", "paths"],
)
def test_a_run_refused_at_once_still_removes_what_a_killed_run_left(case: Path, refusal: list[str], said: str):
    """A resume refused for a bad flag or state exited before the run's scope, and left a
    killed run's directory and hung checks: the README says the next run removes them."""
    (case / "input.mlir").write_text(BIG)
    pids = case / "pids"
    make_script(case / "check.sh", HANG.format(pids=pids))
    proc = start(case, "input.mlir", "--check", "check.sh", "-j", "2", "--strategies", "drop-ops", "--no-state")
    wait_for(lambda: pids.exists() and len(pids.read_text().split()) >= 2, 120)
    proc.kill()
    proc.communicate(timeout=60)
    assert any(p.name.startswith("ireereduce-run-") for p in (case / "tmp").iterdir())
    refused = cli(case, "input.mlir", "--check", "check.sh", *refusal)
    assert refused.returncode == 2 and said in error_line(refused.stderr)
    assert list((case / "tmp").iterdir()) == []
    assert not [p for p in map(int, pids.read_text().split()) if psutil.pid_exists(p)], "hung checks left"


def test_a_run_through_the_api_refused_at_once_removes_a_dead_runs_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """The same for `reduce_file`, which no command line's parsing comes before."""
    import tempfile

    from reducer.core.rundirs import RUN_PREFIX
    from reducer.session import Settings, UserError, reduce_file

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = Path(tempfile.mkdtemp(prefix=RUN_PREFIX))
    (dead / ".lock").write_text(f"{dead}\n")
    with pytest.raises(UserError, match="contradict"):
        reduce_file(Settings(str(tmp_path / "in.mlir"), "check.sh", no_state=True, state_dir=str(tmp_path / "s")))
    assert not dead.exists()


def test_the_sweep_of_dead_runs_keeps_a_users_folders_of_a_like_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Review and audit 10: the sweep, which now comes first in every run (a refused one
    too), removed folders of the user's named like a run's, and what a folder's
    `.outside` named. Only what a run made goes: mkdtemp's name and mode 0700, a lock
    file naming the directory it is in (a renamed copy's names another), for staging
    nothing else, and of what `.outside` names only multiprocessing's own directories."""
    import tempfile

    from reducer.core.rundirs import OUTSIDE_NOTE, RUN_PREFIX, STAGING_PREFIX, remove_stale_runs

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    then = time.time() - 3600

    def folder(name: str, mode: int = 0o700) -> Path:
        path = tmp_path / name
        path.mkdir()
        path.chmod(mode)
        return path

    def made(prefix: str, lock: str | None = None) -> Path:
        path = Path(tempfile.mkdtemp(prefix=prefix, dir=tmp_path))
        if lock is not None:
            (path / ".lock").write_text(lock)
        return path

    def named(path: Path) -> str:
        """What the lock of a run's directory holds: its real path, or the one it is to get."""
        if path.name.startswith(STAGING_PREFIX):
            path = path.parent / (RUN_PREFIX + path.name[len(STAGING_PREFIX) :])
        return f"{os.path.realpath(path)}\n"

    project = folder("my-project")  # private, as mkdtemp makes them, but not multiprocessing's name
    pymp = made("pymp-")  # what a dead run's cluster left: noted, and removed with it
    users = [
        folder("ireereduce-run-ideas"),  # not mkdtemp's name
        folder("ireereduce-run-abcd1234", 0o755),  # not its mode
        folder("ireereduce-run-mydata01"),  # a lock that names nothing
        folder("ireereduce-run-backup01"),  # a copy of a dead run's: its lock names another
        made(STAGING_PREFIX),  # staging without a lock
        made(RUN_PREFIX),  # a lock that is a link
        made(STAGING_PREFIX),  # staging holding more than its lock
        made(STAGING_PREFIX, ""),  # staging whose lock names nothing
        folder("pymp-mine0001", 0o755),  # noted, named as multiprocessing's, but not its mode
        project,
    ]
    for path in users:
        if path != users[7]:
            (path / "notes.txt").write_text("mine")
    (users[6] / ".lock").write_text(named(users[6]))
    (users[2] / ".lock").touch()
    (users[3] / ".lock").write_text("ireereduce-run-abcdefgh\n")
    (users[5] / ".lock").symlink_to(users[5] / "notes.txt")
    stale = made(STAGING_PREFIX)  # a run killed before its rename
    (stale / ".lock").write_text(named(stale))
    dead = made(RUN_PREFIX)  # a run killed with SIGKILL
    (dead / ".lock").write_text(named(dead))
    mine = made("pymp-")  # private and named as multiprocessing's, noted by path alone (audit 12, S1)
    users.append(mine)
    (mine / "notes.txt").write_text("mine")

    def noted(path: Path) -> str:
        return f"{path.stat().st_dev}:{path.stat().st_ino} {path}"

    (dead / OUTSIDE_NOTE).write_text(f"{noted(pymp)}\n{noted(project)}\n{noted(users[8])}\n0:0 {mine}\n{mine}\n")
    for path in [*users, stale]:
        os.utime(path, (then, then))
    remove_stale_runs()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in users)
    assert all((p / "notes.txt").read_text() == "mine" for p in users if p != users[7])


def test_a_copy_of_a_runs_directory_elsewhere_is_never_taken_for_a_dead_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """Audit 12 (D1, D2): the sweep knew a run's directory, and its checks' processes, by
    the directory's name alone. A copy under that name in another temp dir (`cp -a`) was
    removed with the user's notes in it, and a live run's check was killed, read as a
    flaky check. The lock and the tag now hold the directory's real path."""
    import shutil
    import tempfile

    from reducer.core.rundirs import remove_stale_runs, run_scope

    live, other = tmp_path / "t1", tmp_path / "t2"
    live.mkdir()
    other.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(live))
    with run_scope() as run_dir:
        check = subprocess.Popen(["sleep", "60"])  # a check of the live run: it carries the run's tag
        try:
            copy = other / os.path.basename(run_dir)
            shutil.copytree(run_dir, copy)  # the mode and the lock's bytes too
            (copy / "my-notes.txt").write_text("mine")
            monkeypatch.setattr(tempfile, "tempdir", str(other))
            remove_stale_runs()  # as a run refused in the other temp dir does first
            assert check.poll() is None, "the live run's check was killed"
            assert (copy / "my-notes.txt").read_text() == "mine" and (copy / ".lock").exists()
        finally:
            monkeypatch.setattr(tempfile, "tempdir", str(live))
            check.kill()
            check.wait()
    assert not Path(run_dir).exists()


def test_the_embedded_clusters_processes_leave_stop_signals_to_the_run(tmp_path: Path):
    """What a signal to the process group does to a worker of the embedded cluster and to
    the fork server that starts them, alone: both go on, and the next check runs on the
    same worker (one that died of it printed a traceback, and a restarted one is slow)."""
    from reducer.core.dask_executor import DaskExecutor
    from reducer.core.oracle import ScriptOracle
    from reducer.core.rundirs import run_scope

    ran = tmp_path / "ran"
    check = make_script(tmp_path / "check.sh", f"echo $PPID >> {ran}; exit 0")
    with run_scope():
        ex = DaskExecutor(ScriptOracle(str(check), "in.mlir", 60.0), 1)
        try:
            assert ex.submit(b"a").result().interesting
            worker = psutil.Process(int(ran.read_text()))
            server = worker.parent()
            assert server is not None and "forkserver" in " ".join(server.cmdline())
            for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                for process in (worker, server):
                    process.send_signal(signum)
            assert ex.submit(b"b").result().interesting
            assert server.is_running() and server.status() != psutil.STATUS_ZOMBIE
        finally:
            ex.close()
    assert ran.read_text().split() == [str(worker.pid)] * 2


# -- a stop while the command is still importing --------------------------------------
_STOP_WHILE_IMPORTING = """
import os, runpy, signal, sys, time
STOP, HOW = int(sys.argv[1]), sys.argv[2]
signal.signal(signal.SIGINT, signal.SIG_IGN)  # a background job of a shell script
class StopAtCli:  # the stop arrives while the command's modules are imported
    def find_spec(self, name, path=None, target=None):
        if name == ("reducer.cli" if HOW == "ireereduce" else "click"):
            os.kill(os.getpid(), STOP)
            time.sleep(0.5)
        return None
sys.meta_path.insert(0, StopAtCli())
sys.argv = ["ireereduce", "input.mlir", "--check", "check.sh"]
if HOW == "ireereduce":  # the console script
    from reducer.__main__ import main
    main()
else:  # python -m reducer.cli
    runpy.run_module("reducer.cli", run_name="__main__", alter_sys=True)
"""


@pytest.mark.parametrize("how", ["ireereduce", "python -m reducer.cli"])
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_stop_while_the_command_imports_is_exit_130(case: Path, signum: int, how: str):
    """A stop in the first half second was a silent exit 143 or 129, or, for a Ctrl-C to
    a background job (its SIGINT ignored), lost: the run went on to the end. Audit 16
    (D1): through `python -m reducer.cli` the stop handlers came after its imports."""
    make_script(case / "check.sh", f'touch {case}/ran; grep -q math.exp "$1"')
    proc = _python(case, _STOP_WHILE_IMPORTING, str(int(signum)), how)
    assert proc.returncode == session.EXIT_INTERRUPTED, proc.stderr
    assert proc.stderr == "ireereduce: interrupted before the reduction started\n"
    assert not (case / "ran").exists() and not (case / "input.reduced.mlir").exists()
    assert (case / "input.mlir").read_text() == SMALL
    assert_clean(case)


# -- a second stop while the first one ends the run ---------------------------------------
_STOP_AS_THE_SUMMARY_STARTS = """
import os, signal, sys
import reducer.cli as command
real = command._summary
def summary(console, result):  # the stop arrives once the run's result is decided
    os.kill(os.getpid(), signal.SIGINT)
    real(console, result)
command._summary = summary
sys.argv = ["ireereduce", "input.mlir", "--check", "check.sh", "-j", "1"]
from reducer.__main__ import main
main()
"""


def test_a_stop_once_the_result_is_decided_leaves_the_summary_whole(case: Path):
    """Audit 16 (W3): a stop after the run had its result, raised in the summary (or in a
    weakref callback there: "Exception ignored in ..."), cut it short."""
    make_script(case / "check.sh", 'grep -q math.exp "$1"')
    proc = _python(case, _STOP_AS_THE_SUMMARY_STARTS)
    assert proc.returncode == 0, proc.stderr
    assert "checked candidates:" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert "math.exp" in (case / "input.reduced.mlir").read_text()
    assert_clean(case)


@pytest.mark.parametrize("when", ["mid-run", "while the original is checked"])
def test_stops_while_a_stopped_run_exits_leave_its_exit_code(case: Path, when: str):
    """Audit 16 (D5): SIGTERMs after the run had said "interrupted", while Python shut
    down (which puts back the default handlers), killed it: exit 143, undocumented."""
    (case / "input.mlir").write_text(BIG)
    slow = f"touch {case}/started; sleep 5" if when != "mid-run" else "sleep 0.2"
    make_script(case / "check.sh", f'{slow}; grep -q math.exp "$1"')
    proc = start(case, "input.mlir", "--check", "check.sh", "-j", "2")
    wait_for(lambda: (case / ("input.reduced.mlir" if when == "mid-run" else "started")).exists())
    proc.send_signal(signal.SIGINT)
    assert proc.stderr is not None
    for line in proc.stderr:  # to the end of what it says
        if line.startswith("ireereduce: interrupted"):
            break
    while proc.poll() is None:  # a supervisor that repeats its SIGTERM until the process is gone
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        time.sleep(0.01)
    assert proc.wait() == session.EXIT_INTERRUPTED
    assert when != "mid-run" or "math.exp" in (case / "input.reduced.mlir").read_text()
    assert_clean(case)


def test_only_the_first_stop_raises_unless_python_swallowed_it(monkeypatch):
    """A second Ctrl-C shortly after the first raised KeyboardInterrupt again, sometimes
    inside a garbage collector callback: "Exception ignored in ... WeakKeyDictionary",
    a traceback on stderr of a run that exits 130 (about one run in 10 to 40)."""
    from reducer import cli as command
    from reducer.core import processes

    monkeypatch.setattr(processes, "_stop_raised", False)
    monkeypatch.setattr(processes, "_swallowed", False)
    with pytest.raises(KeyboardInterrupt):
        command._raise_interrupt(signal.SIGINT, None)
    command._raise_interrupt(signal.SIGINT, None)  # the run is ending already: noted, not raised
    command._raise_interrupt(signal.SIGTERM, None)
    monkeypatch.setattr(processes, "_swallowed", True)  # what interrupts_kept's hook records
    with pytest.raises(KeyboardInterrupt):
        command._raise_interrupt(signal.SIGINT, None)
    command._raise_interrupt(signal.SIGINT, None)


def test_a_stop_while_the_mlir_bindings_make_a_context_waits_for_them(monkeypatch: pytest.MonkeyPatch):
    """Audit 7 (D2, D3): a SIGTERM in the tenth of a second the bindings load aborted the
    run (a KeyboardInterrupt raised in Python code the native module called: "terminate
    called after throwing an instance of 'nanobind::python_error'") or was swallowed and
    the run ended 0. The stop now waits for the native code and is raised after it."""
    from iree.compiler import ir

    from reducer.core import ir as irutil

    real, done = ir.Context, []

    def context_that_gets_a_stop() -> ir.Context:
        signal.raise_signal(signal.SIGTERM)  # the handler below runs at the next bytecode: here
        made = real()
        done.append(made)  # the native code ran to its end
        return made

    def stop(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(ir, "Context", context_that_gets_a_stop)
    previous = signal.signal(signal.SIGTERM, stop)
    try:
        with pytest.raises(KeyboardInterrupt):
            irutil.new_context()
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert len(done) == 1  # raised after the context was made, not inside its making
