"""The executor contract on the local pool: a dead worker costs one retry, a candidate
that kills its worker twice is not interesting, cancel kills a running check's whole
process group and frees its worker, and an aborted pool leaves no process behind."""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import make_script

from reducer.core import oracle as oracle_module
from reducer.core import rundirs
from reducer.core.executor import LocalExecutor, _Cancel, _Slot
from reducer.core.oracle import Cancelled, ScriptOracle
from reducer.core.rundirs import run_scope


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead for our purpose
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_for(predicate, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


@pytest.fixture(autouse=True)
def _in_a_run() -> Iterator[None]:
    """Each test's checks run inside a run's scope, as ireereduce's do: several kill
    their worker mid-check, and only the scope removes what such a check left (its
    temp dir), so the suite leaves nothing in the machine's temp dir."""
    with run_scope():
        yield


def executor(tmp_path: Path, body: str, workers: int = 2) -> LocalExecutor:
    script = make_script(tmp_path / "check.sh", body)
    return LocalExecutor(ScriptOracle(str(script), "in.mlir", 30.0), workers)


def test_a_worker_killed_mid_check_costs_one_retry(tmp_path: Path):
    """The first run of the check kills its worker (kill -9, as the OOM killer would);
    the candidate runs again on a fresh worker and its verdict arrives."""
    marker = tmp_path / "killed-once"
    body = f'if [ ! -e {marker} ]; then touch {marker}; kill -9 $PPID; sleep 5; fi\ngrep -q keep "$1"'
    with executor(tmp_path, body) as ex:
        verdict = ex.submit(b"keep").result(timeout=30)
        assert verdict.interesting and verdict.outcome == "interesting"
        assert ex.stats.lost_workers == 1
        assert ex.run(b"other").interesting is False  # the pool still works


def test_a_candidate_that_kills_its_worker_twice_is_not_interesting(tmp_path: Path):
    with executor(tmp_path, 'if grep -q bomb "$1"; then kill -9 $PPID; sleep 5; fi\nexit 0') as ex:
        verdict = ex.submit(b"bomb").result(timeout=30)
        assert not verdict.interesting and verdict.outcome == "worker died"
        assert ex.stats.lost_workers == 2
        assert ex.run(b"fine").interesting  # the pool survived with fresh workers


def test_cancel_kills_the_running_check_and_frees_its_worker(tmp_path: Path):
    pids = tmp_path / "pids"
    body = f"sleep 60 & echo $! >> {pids}\nwait"
    with executor(tmp_path, body, workers=1) as ex:
        slow = ex.submit(b"slow")
        assert wait_for(lambda: pids.exists() and pids.read_text().strip())
        child = int(pids.read_text().split()[0])
        queued = ex.submit(b"queued")  # waits for the only worker
        ex.cancel(slow)
        assert slow.cancelled()
        # Left alone, both would take 60 s: the child gone and the queued check started
        # well before that are the cancel's doing.
        assert wait_for(lambda: not alive(child), 30.0), "the check's background child survived the cancel"
        assert wait_for(lambda: len(pids.read_text().split()) == 2, 30.0), "the worker was not freed"
        ex.cancel(queued)


def test_a_queued_check_that_is_cancelled_never_starts(tmp_path: Path):
    runs = tmp_path / "runs"
    with executor(tmp_path, f'echo "$(cat "$1")" >> {runs}; sleep 0.5', workers=1) as ex:
        first = ex.submit(b"first")
        second = ex.submit(b"second")
        ex.cancel(second)
        first.result(timeout=10)
    assert runs.read_text().split() == ["first"]


def test_abort_leaves_no_worker_and_no_check_behind(tmp_path: Path):
    pids, woke = tmp_path / "pids", tmp_path / "woke"
    # Within the checks' 30 s timeout: waited for, they would get to the end.
    ex = executor(tmp_path, f"echo $$ >> {pids}; sleep 20; touch {woke}", workers=2)
    workers = [w.process.pid for w in ex._pool]
    for _ in range(3):
        ex.submit(b"x")
    assert wait_for(lambda: pids.exists() and len(pids.read_text().split()) == 2)
    ex.close(abort=True)
    assert not woke.exists()  # it did not wait for the checks to end
    checks = [int(p) for p in pids.read_text().split()]
    assert wait_for(lambda: not any(alive(p) for p in workers + checks), 30.0)
    assert len(pids.read_text().split()) == 2  # the queued one never started


@pytest.mark.parametrize("where", ["as its loop starts", "once its loop runs"])
def test_a_stop_as_the_pool_finishes_starting_leaves_no_worker(monkeypatch: pytest.MonkeyPatch, where: str):
    """Audit 17 (D2): a stop just after the workers were forked, before the pool's loop and
    its exit hook were in place, escaped with the workers alive: the process printed
    "interrupted" and then waited for them at exit, for ever."""
    import psutil

    from reducer.core import executor as pool

    before, forked = {p.pid for p in psutil.Process().children()}, []

    def stop(*_args: object, **_kw: object) -> None:  # the workers are forked by now
        forked.extend(p.pid for p in psutil.Process().children() if p.pid not in before)
        raise KeyboardInterrupt

    if where == "as its loop starts":
        monkeypatch.setattr(pool.threading.Thread, "start", stop)
    else:
        monkeypatch.setattr(pool.atexit, "register", stop)
    with pytest.raises(KeyboardInterrupt):
        LocalExecutor(None, 2)
    monkeypatch.undo()
    try:
        assert len(forked) == 2 and wait_for(lambda: not any(alive(pid) for pid in forked), 30.0), forked
    finally:  # without the fix they would outlive the test, and the test process would wait on them at exit
        for pid in forked:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


# (SIGTERM, SIGINT and SIGHUP are the main process's to handle: a worker that gets one
# goes on, see tests/test_faults_signals.py.)
@pytest.mark.parametrize("sig", [signal.SIGKILL])
def test_a_worker_killed_from_outside_is_replaced(tmp_path: Path, sig: int):
    started = tmp_path / "started"
    with executor(tmp_path, f"echo $PPID >> {started}; sleep 1; exit 0", workers=1) as ex:
        future = ex.submit(b"x")
        assert wait_for(lambda: started.exists() and started.read_text().strip())
        os.kill(int(started.read_text().split()[0]), sig)
        assert future.result(timeout=20).interesting
        assert ex.stats.lost_workers == 1


def test_a_run_survives_a_worker_killed_mid_run_with_the_same_output(tmp_path: Path):
    """kill -9 one worker of a real run after a few checks: exit 0, and the output of the
    run nobody disturbed."""
    import subprocess
    import sys

    from programs import chain

    src = tmp_path / "in.mlir"
    src.write_text(chain(40, keep=11))
    ppids = tmp_path / "ppids"
    make_script(tmp_path / "check.sh", f'echo $PPID >> {ppids}; sleep 0.1; grep -q math.exp "$1"')
    cli = [sys.executable, "-m", "reducer.cli", str(src), "-c", str(tmp_path / "check.sh"), "-j", "3", "-q"]
    assert subprocess.run(cli + ["-o", str(tmp_path / "calm.mlir")], timeout=300).returncode == 0
    ppids.unlink()
    proc = subprocess.Popen(cli + ["-o", str(tmp_path / "killed.mlir")])
    me = str(proc.pid)
    assert wait_for(lambda: ppids.exists() and len([p for p in ppids.read_text().split() if p != me]) >= 6, 60)
    victim = int([p for p in ppids.read_text().split() if p != me][-1])
    os.kill(victim, signal.SIGKILL)
    assert proc.wait(300) == 0
    assert (tmp_path / "killed.mlir").read_text() == (tmp_path / "calm.mlir").read_text()
    assert not alive(victim)


def _core_limits(path: Path) -> list[str]:
    return path.read_text().split()


def test_no_check_can_dump_core_on_the_pool_or_in_this_process(tmp_path: Path):
    """A crashing compiler must not leave a core file per candidate. The pool's workers
    forbid core dumps for themselves (their checks inherit it, and start without a
    function run between fork and exec); anywhere else run_in forbids them per check."""
    seen = tmp_path / "limits"
    body = f'echo "$(ulimit -c) $(ulimit -Hc)" >> {seen}\ngrep "Max core" /proc/$PPID/limits | tr -s " " | cut -d" " -f5,6 >> {seen}'
    with executor(tmp_path, body, workers=1) as ex:
        assert ex.run(b"x").interesting
    assert _core_limits(seen) == ["0", "0", "0", "0"]  # the check's, then its worker's
    seen.unlink()
    oracle = ScriptOracle(str(tmp_path / "check.sh"), "in.mlir", 30.0)
    assert oracle.run(b"x").interesting  # in this process: no pool worker
    assert _core_limits(seen)[:2] == ["0", "0"]


def test_a_check_starts_without_a_function_between_fork_and_exec_where_cores_are_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """A preexec function makes Python fork the whole worker (5 ms in a 130 MB process)
    instead of vfork (0.6 ms), on every check. A pool worker has forbidden core dumps
    already, so its checks need none; elsewhere the function is what forbids them."""
    import resource
    import subprocess

    given: list[object] = []
    real = subprocess.Popen

    def recording(*args, **kwargs):
        given.append(kwargs.get("preexec_fn"))
        return real(*args, **kwargs)

    monkeypatch.setattr(oracle_module.subprocess, "Popen", recording)
    oracle = ScriptOracle(str(make_script(tmp_path / "check.sh", "exit 0")), "in.mlir", 30.0)
    limits = {"off": (0, 0), "on": (0, resource.RLIM_INFINITY)}
    for state in ("off", "on"):
        monkeypatch.setattr(resource, "getrlimit", lambda _which, state=state: limits[state])
        assert oracle.run(b"x").interesting
    assert given == [None, oracle_module.no_core_dumps]


def test_a_check_ends_with_its_exit_code_without_a_pidfd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Where the kernel has no pidfd, a check is waited for by polling, to the same verdict."""

    def unavailable(_pid: int) -> int:
        raise OSError("no pidfd")

    monkeypatch.setattr(os, "pidfd_open", unavailable)
    oracle = ScriptOracle(str(make_script(tmp_path / "check.sh", 'sleep 0.1; grep -q bug "$1"')), "in.mlir", 5.0)
    assert [oracle.run(d).outcome for d in (b"bug", b"fine")] == ["interesting", "not interesting"]


def test_a_cancel_is_seen_when_its_descriptor_wakes_not_at_the_next_poll(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """The pool's cancel wakes the worker's wait on its check, so an obsolete check
    frees its worker at once; polling alone would first finish this one (30 s). Only
    where the check's exit is waited for through a pidfd."""
    try:
        os.close(os.pidfd_open(os.getpid()))
    except (AttributeError, OSError):
        pytest.skip("no pidfd here: a cancel is seen at the next poll")
    monkeypatch.setattr(oracle_module, "CANCEL_POLL", 120.0)
    slot = _Slot()
    cancel = _Cancel(slot, 1)
    oracle = ScriptOracle(str(make_script(tmp_path / "check.sh", "sleep 30")), "in.mlir", None)
    timer = threading.Timer(0.3, lambda: setattr(slot, "value", 1))
    timer.start()
    try:
        with pytest.raises(Cancelled):
            oracle.run(b"x", cancel=cancel)
    finally:
        timer.cancel()
        slot.close()


def test_a_wake_up_meant_for_an_earlier_task_is_drained_and_ignored():
    slot = _Slot()
    earlier, current = _Cancel(slot, 1), _Cancel(slot, 2)
    slot.value = 1
    assert earlier() and not current()
    assert not select.select([current], [], [], 0)[0]  # drained: no busy wake-ups after it
    slot.value = 2
    assert select.select([current], [], [], 0)[0] and current()
    slot.close()


def test_submit_hands_a_check_to_an_idle_worker_itself(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Not via the dispatcher thread, which would first need the GIL that the engine's
    MLIR calls hold for 10-20 ms at a time: here that thread does nothing at all."""
    monkeypatch.setattr(LocalExecutor, "_loop", lambda self: None)
    started = tmp_path / "started"
    ex = executor(tmp_path, f"touch {started}")
    try:
        ex.submit(b"x")
        assert wait_for(started.exists)
    finally:
        ex.close(abort=True)


def test_a_worker_whose_descriptors_are_numbered_past_1024_still_checks(tmp_path: Path):
    """select() refuses descriptors numbered 1024 or more, which a main process with
    hundreds of workers hands out (five per worker): the wait on a check uses poll()."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip("the descriptor limit is below 1200 here")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    filler = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        with executor(tmp_path, 'grep -q keep "$1"', workers=1) as ex:
            assert [ex.run(b"keep").outcome, ex.run(b"drop").outcome] == ["interesting", "not interesting"]
    finally:
        for fd in filler:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _grandchild(pids: Path) -> int:
    return int(pids.read_text().split()[0])


@pytest.mark.parametrize("how", ["timeout", "cancel"])
def test_a_stopped_check_takes_its_whole_process_group_down_at_once(tmp_path: Path, how: str):
    """A timed-out or cancelled check is killed with its whole process group, as it
    ends, not at the run's end. The grandchild here drops the check's tag from its
    environment (as a tool that starts its helpers with a clean environment does), so
    only the group kill reaches it: the per-check tag sweep cannot, and the run's own
    sweep, which would, comes only when the run ends."""
    pids = tmp_path / "pids"
    body = f"env -u {rundirs.CHECK_TAG_ENV} sleep 300 & echo $! >> {pids}\nwait"
    oracle = ScriptOracle(str(make_script(tmp_path / "check.sh", body)), "in.mlir", 2.0 if how == "timeout" else None)

    def started() -> bool:
        return pids.exists() and bool(pids.read_text().strip())

    try:
        if how == "timeout":
            assert oracle.run(b"x").outcome == "timeout"
        else:
            with pytest.raises(Cancelled):
                oracle.run(b"x", cancel=started)
        assert started(), "the check never started its grandchild"
        child = _grandchild(pids)
        assert wait_for(lambda: not alive(child)), "the grandchild outlived its check"
    finally:
        if started():
            with contextlib.suppress(ProcessLookupError):
                os.kill(_grandchild(pids), signal.SIGKILL)


def test_a_finished_checks_setsid_children_go_when_it_ends_not_at_the_run_end(tmp_path: Path):
    """A child that called setsid has left the check's process group; the sweep of the
    check's own tag kills it as the check ends. The run's sweep would too, but only when
    the run ends: until then every check would leave one such process behind."""
    pids = tmp_path / "pids"
    body = f'setsid sleep 300 & echo $! >> {pids}; grep -q bug "$1"'
    oracle = ScriptOracle(str(make_script(tmp_path / "check.sh", body)), "in.mlir", 30.0)
    try:
        assert oracle.run(b"bug").interesting  # the run's scope (this test's fixture) is still open
        child = _grandchild(pids)
        assert wait_for(lambda: not alive(child)), "the setsid child outlived its check"
    finally:
        if pids.exists():
            with contextlib.suppress(ProcessLookupError):
                os.kill(_grandchild(pids), signal.SIGKILL)


# -- what a check may use, and what it leaves (issue 27) ------------------------------------
def _recording_popen(monkeypatch: pytest.MonkeyPatch, into: Path) -> None:
    """Popen, noting in a file (a forked worker's list would stay in the worker) whether a
    function runs between fork and exec."""
    import subprocess

    real = subprocess.Popen

    def recording(*args, **kwargs):
        with open(into, "a") as f:
            f.write(f"{kwargs.get('preexec_fn') is not None}\n")
        return real(*args, **kwargs)

    monkeypatch.setattr(oracle_module.subprocess, "Popen", recording)


def test_where_no_subreaper_runs_checks_the_environment_tag_finds_setsid_children(tmp_path: Path):
    """This process is no subreaper (only the pool's workers are): what a check started
    with setsid is found by the run's environment tag, as before subreapers."""
    from reducer.core import processes

    assert not processes.reaping()
    pids = tmp_path / "pids"
    # Reports the sleep once it runs: the sweep looks for processes, not for forks on the way.
    body = f'setsid sleep 300 & until [ "$(cat /proc/$!/comm)" = sleep ]; do :; done; echo $! >> {pids}'
    oracle = ScriptOracle(str(make_script(tmp_path / "check.sh", body)), "x", 30.0)
    assert oracle.run(b"x").interesting
    # killed by the sweep as the check ends; its death (and init's reaping) may lag a moment
    found = [int(p) for p in pids.read_text().split()]
    assert found and wait_for(lambda: not any(alive(p) for p in found)), "the setsid child outlived its check"


def test_a_pool_worker_kills_what_a_check_left_whatever_its_session_and_environment(tmp_path: Path):
    pids = tmp_path / "pids"
    body = f"setsid env -i {shutil.which('sh')} -c '{shutil.which('sleep')} 300 & echo $! >> {pids}' &\nwait"
    with executor(tmp_path, body, workers=1) as ex:
        assert ex.run(b"x").interesting
        # gone when the verdict arrives, not only when the pool closes
        assert pids.read_text().split() and not any(alive(int(p)) for p in pids.read_text().split())


def test_children_are_found_where_the_kernel_keeps_no_list_of_them():
    """Without /proc/PID/task/TID/children (a kernel built without it), a subreaper finds
    its children by their parent pid."""
    import subprocess

    from reducer.core import processes

    child = subprocess.Popen(["sleep", "30"])
    try:
        assert child.pid in processes.children()
        assert processes._children_by_parent(os.getpid()) == set(processes.children())
    finally:
        child.kill()
        child.wait()
