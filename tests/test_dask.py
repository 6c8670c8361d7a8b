"""The Dask executor: an embedded LocalCluster, and a real `dask scheduler` with three
`dask worker` processes on 127.0.0.1 reducing a real iree-compile failure; the output
is the local pool's, also when a worker is killed with SIGKILL mid-run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from conftest import make_script, needs_iree
from programs import COMPILE, F6_ERROR, chain, mlp

from reducer.session import EXIT_EXECUTOR, Settings, reduce_file

pytest.importorskip("distributed") if os.environ.get("CI") != "true" else None

DASK = [sys.executable, "-m", "dask"]
CLI = [sys.executable, "-m", "reducer.cli"]


def reduce(tmp_path: Path, text: str, check: str, name: str, **kw) -> tuple[str, object]:
    src = tmp_path / "in.mlir"
    src.write_text(text)
    script = tmp_path / "check.sh"
    if not script.exists():
        make_script(script, check)
    out = tmp_path / f"{name}.mlir"
    result = reduce_file(Settings(str(src), str(script), str(out), **kw))
    return out.read_text(), result


def test_a_local_dask_cluster_gives_the_local_pools_output(tmp_path: Path):
    text = chain(60, keep=20) + chain(20, keep=5).replace("@main", "@other")
    check = 'grep -q math.exp "$1"'
    local, _ = reduce(tmp_path, text, check, "local", jobs=2)
    on_dask, result = reduce(tmp_path, text, check, "dask", jobs=2, executor="dask")
    assert on_dask == local
    assert result.stats.workers == 2 and result.stats.oracle_calls > 0


def test_a_local_dask_cluster_passes_the_checks_arguments(tmp_path: Path):
    """`--test-arg` reached the local pool's checks only: on Dask, `grep -q "$2"` got no
    pattern, matched everything, and the run ended at an empty module with exit 0."""
    check = 'grep -q "$2" "$1"'
    text = chain(12, keep=4)
    local, _ = reduce(tmp_path, text, check, "local", jobs=2, test_args=("math.exp",))
    on_dask, result = reduce(tmp_path, text, check, "dask", jobs=2, executor="dask", test_args=("math.exp",))
    assert "math.exp" in local and on_dask == local


def test_a_check_that_kills_its_dask_worker_runs_as_often_as_on_the_local_pool(tmp_path: Path):
    """Dask retries a task whose worker died up to `allowed-failures` times; the embedded
    cluster must give a candidate the local pool's MAX_WORKER_DEATHS runs, no more. With
    one worker, the oracle once scattered to it died with it, and Dask cancelled every
    later check (a -j 1 run hung at its first such candidate)."""
    from reducer.core.dask_executor import DaskExecutor
    from reducer.core.executor import MAX_WORKER_DEATHS
    from reducer.core.oracle import ScriptOracle
    from reducer.core.rundirs import run_scope

    runs = tmp_path / "runs"
    body = f'echo "$(cat "$1")" >> {runs}\nif grep -q bomb "$1"; then kill -9 $PPID; sleep 30; fi\nexit 0'
    check = make_script(tmp_path / "check.sh", body)
    with run_scope():
        ex = DaskExecutor(ScriptOracle(str(check), "in.mlir", 60.0), 1)
        try:
            bomb = ex.submit(b"bomb").result()
            fine = ex.submit(b"fine").result()
        finally:
            ex.close()
    assert bomb.outcome == "worker died" and fine.interesting
    assert runs.read_text().split() == ["bomb"] * MAX_WORKER_DEATHS + ["fine"]


def test_an_embedded_dask_run_leaves_nothing_in_tmpdir(tmp_path: Path):
    """Dask's scheduler and workers make `dask-scratch-space` in TMPDIR and leave it."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    (tmp_path / "in.mlir").write_text(chain(6, keep=2))
    make_script(tmp_path / "check.sh", 'grep -q math.exp "$1"')
    proc = subprocess.run(
        CLI + ["in.mlir", "-c", "./check.sh", "-o", "out.mlir", "-j", "2", "--executor", "dask"],
        cwd=tmp_path,
        env=dict(os.environ, TMPDIR=str(tmp)),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "math.exp" in (tmp_path / "out.mlir").read_text()
    assert [p.name for p in tmp.iterdir()] == []


def test_an_embedded_cluster_outside_a_run_removes_its_scratch_space(tmp_path: Path):
    """Outside a run's directory (the executor used as a library) no run's sweep
    removes the cluster's scratch directory: its close must. (In a process of its own:
    a fork server started outside a run lives as long as its process.)"""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    code = (
        "import os, sys, tempfile\n"
        "from reducer.core.dask_executor import DaskExecutor\n"
        "from reducer.core.oracle import ScriptOracle\n"
        "ex = DaskExecutor(ScriptOracle(sys.argv[1], 'in.mlir', 30.0), 1)\n"
        "assert ex.submit(b'x').result().interesting\n"
        "print(sorted(os.listdir(tempfile.gettempdir())))\n"
        "ex.close()\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("IREEREDUCE_")}
    check = make_script(tmp_path / "check.sh", "exit 0")
    proc = subprocess.run(
        [sys.executable, "-c", code, str(check)],
        env=dict(env, TMPDIR=str(tmp)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "ireereduce-dask-" in proc.stdout  # the scratch space was there while the cluster ran
    assert [p.name for p in tmp.iterdir()] == []


def test_an_unreachable_scheduler_is_one_line_and_a_documented_exit_code(tmp_path: Path):
    src = tmp_path / "in.mlir"
    src.write_text(chain(10, keep=3))
    make_script(tmp_path / "check.sh", 'grep -q math.exp "$1"')
    proc = subprocess.run(
        CLI + [str(src), "-c", str(tmp_path / "check.sh"), "--executor", "dask", "--scheduler", "tcp://127.0.0.1:9"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == EXIT_EXECUTOR
    lines = proc.stderr.strip().splitlines()
    assert lines[-1].startswith("ireereduce: error: cannot reach the Dask scheduler at tcp://127.0.0.1:9")
    assert "Traceback" not in proc.stderr


def test_scheduler_and_resources_need_the_dask_executor(tmp_path: Path):
    src = tmp_path / "in.mlir"
    src.write_text(chain(10, keep=3))
    make_script(tmp_path / "check.sh", 'grep -q math.exp "$1"')
    proc = subprocess.run(
        CLI + [str(src), "-c", str(tmp_path / "check.sh"), "--resources", "GPU=1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and "goes with --executor dask" in proc.stderr


def _worker(tmp: Path, check: Path) -> subprocess.Popen[bytes]:
    """A process like a `dask worker` started on its own: outside any run's scope, it
    judges one candidate the way a task does."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("IREEREDUCE_")}
    env["TMPDIR"] = str(tmp)
    code = (
        "import sys\n"
        "from reducer.core.oracle import ScriptOracle\n"
        "from reducer.core.rundirs import task_scope\n"
        "with task_scope():\n"
        "    print(ScriptOracle(sys.argv[1], 'in.mlir', 60.0).run(b'x').interesting)\n"
    )
    return subprocess.Popen([sys.executable, "-c", code, str(check)], env=env, stdout=subprocess.PIPE)


def _tagged(tmp: Path, checks_only: bool = False) -> list[int]:
    """Live processes started under tmp as their temp dir (`checks_only`: by a check)."""
    import psutil

    from reducer.core.rundirs import CHECK_TAG_ENV

    found = []
    for p in psutil.process_iter():
        try:
            environ = p.environ()
            where = environ.get("TMPDIR", "")
            if (
                (where == str(tmp) or where.startswith(f"{tmp}/"))  # a check's is its own temp dir, in tmp
                and (CHECK_TAG_ENV in environ or not checks_only)
                and p.status() != psutil.STATUS_ZOMBIE
            ):
                found.append(p.pid)
        except psutil.Error:
            continue
    return found


def test_what_a_worker_killed_mid_check_leaves_the_next_check_in_its_temp_dir_sweeps(tmp_path: Path):
    """Outside the run's scope (a remote worker), SIGKILL on the worker left the check's
    candidate directory and its processes (`setsid` ones too) for ever."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    hang = make_script(tmp_path / "hang.sh", f"setsid sleep 300 & echo $PPID > {tmp_path}/worker; sleep 300")
    worker = _worker(tmp, hang)
    wait_for = time.monotonic() + 30
    while not ((tmp_path / "worker").exists() and (tmp_path / "worker").read_text().strip()):
        assert time.monotonic() < wait_for, "the check never started"
        time.sleep(0.05)
    os.kill(worker.pid, signal.SIGKILL)
    worker.wait()
    assert [p.name for p in tmp.iterdir()], "nothing was left to sweep"
    assert len(_tagged(tmp)) == 3  # the check, its sleep and its setsid child: orphans
    quick = _worker(tmp, make_script(tmp_path / "quick.sh", "exit 0"))
    assert quick.communicate(timeout=60)[0].strip() == b"True"
    assert list(tmp.iterdir()) == []
    deadline = time.monotonic() + 30  # a guard: the orphans would sleep for 300 s
    while _tagged(tmp) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _tagged(tmp) == []


@pytest.fixture
def worker_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This process as a `dask worker` started on its own: no run's scope inherited, and
    a temp dir of its own to see what a task leaves there."""
    import tempfile

    from reducer.core.rundirs import RUN_DIR_ENV

    monkeypatch.delenv(RUN_DIR_ENV, raising=False)
    tmp = tmp_path / "worker-tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    return tmp


def test_a_check_run_outside_a_workers_thread_still_gives_its_verdict(tmp_path: Path):
    """A worker whose executor is a process pool sets no worker context, so a check
    there cannot see its task's state: it runs as one nobody cancels, not as an error."""
    from reducer.core.dask_executor import _run_task
    from reducer.core.oracle import ScriptOracle

    oracle = ScriptOracle(str(make_script(tmp_path / "check.sh", 'grep -q atan2 "$1"')), "in.mlir", 60.0)
    assert _run_task(b"math.atan2", oracle).interesting is True
    assert _run_task(b"math.exp", oracle).interesting is False


def test_checks_running_at_once_on_a_worker_never_take_each_other_for_dead(tmp_path: Path, worker_tmp: Path):
    """A worker runs checks in threads; each task's scope sweeps what dead ones left
    first, and must see a live sibling's directory as alive (its lock is held)."""
    import threading

    from reducer.core.oracle import ScriptOracle
    from reducer.core.rundirs import task_scope

    started = tmp_path / "started"
    slow = ScriptOracle(
        str(make_script(tmp_path / "slow.sh", f'touch {started}; sleep 1.5; grep -q atan2 "$1"')), "in.mlir", 60.0
    )
    quick = ScriptOracle(str(make_script(tmp_path / "quick.sh", "exit 0")), "in.mlir", 60.0)
    verdicts: dict[str, bool] = {}

    def judge(name: str, oracle: ScriptOracle) -> None:
        with task_scope():
            verdicts[name] = oracle.run(b"math.atan2").interesting

    first = threading.Thread(target=judge, args=("slow", slow))
    first.start()
    deadline = time.monotonic() + 30
    while not started.exists():
        assert time.monotonic() < deadline, "the slow check never started"
        time.sleep(0.02)
    judge("quick", quick)  # its scope's stale-run sweep runs while the slow check does
    first.join()
    assert verdicts == {"slow": True, "quick": True}
    assert list(worker_tmp.iterdir()) == []


def test_a_staging_dir_of_a_scope_killed_before_its_rename_is_swept_later(worker_tmp: Path):
    """A run directory is made under a staging name and renamed once locked; a process
    killed in between left that directory, which no lock marks as dead or alive."""
    from reducer.core.rundirs import STAGING_PREFIX, STAGING_STALE, task_scope

    old, fresh = (Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=worker_tmp)) for _ in range(2))
    for d in (old, fresh):
        (d / ".lock").write_text(f"{d.parent / ('ireereduce-run-' + d.name[len(STAGING_PREFIX) :])}\n")  # to be
    then = time.time() - STAGING_STALE - 5
    os.utime(old, (then, then))
    with task_scope():
        pass
    assert sorted(p.name for p in worker_tmp.iterdir()) == [fresh.name]  # fresh: maybe a scope being made


def test_one_runs_close_leaves_another_runs_installed_check(tmp_path: Path, worker_tmp: Path):
    """Two runs with the same check share a worker; the first to close removed the one
    installed copy, and the other's checks lost their script or its helper files."""
    import uuid

    from reducer.core.dask_executor import _remove_installed, ship
    from reducer.core.oracle import ScriptOracle

    check = make_script(tmp_path / "check.sh", 'grep -q atan2 "$1"')
    # Owners of their own: a worker process remembers every closed run's copy.
    first, second = (ship(ScriptOracle(str(check), "in.mlir", 60.0), (), uuid.uuid4().hex[:12]) for _ in range(2))
    assert first.run(b"math.atan2").interesting and second.run(b"math.atan2").interesting
    _remove_installed(second.dirname)  # the second run closes
    assert os.path.exists(os.path.join(first.directory(), "check.sh"))
    assert first.run(b"math.atan2").interesting
    _remove_installed(first.dirname)
    assert list(worker_tmp.iterdir()) == []


def test_a_check_that_starts_as_its_run_closes_leaves_no_installed_copy(tmp_path: Path, worker_tmp: Path):
    """A check cancelled just before its run closed can still be starting on its worker
    when the close's removal arrives; it installed the copy again, which then stayed
    (7 embedded-cluster runs in 36). Now a check of a closed run installs nothing, and in
    a worker process a check still running at the close keeps its copy until it ends."""
    import threading
    import uuid

    from reducer.core.dask_executor import _remove_installed, ship
    from reducer.core.oracle import Cancelled, ScriptOracle

    go = tmp_path / "go"  # the check runs until the test has closed its run
    check = make_script(tmp_path / "check.sh", f"while [ ! -e {go} ]; do sleep 0.01; done; exit 0")
    shipped = ship(ScriptOracle(str(check), "in.mlir", 60.0), (), uuid.uuid4().hex[:12])
    verdicts = []
    running = threading.Thread(target=lambda: verdicts.append(shipped.run(b"x")))
    running.start()
    deadline = time.monotonic() + 30
    while not os.path.exists(shipped.directory()):
        assert time.monotonic() < deadline, "the check was never installed"
        time.sleep(0.01)
    _remove_installed(shipped.dirname)  # the run closes while that check runs
    assert os.path.exists(os.path.join(shipped.directory(), "check.sh"))
    with pytest.raises(Cancelled):
        shipped.run(b"y")  # one more check of the closed run
    go.touch()
    running.join()
    assert [v.interesting for v in verdicts] == [True]
    assert list(worker_tmp.iterdir()) == []


# -- a real cluster on 127.0.0.1 ---------------------------------------------------------


class Cluster:
    def __init__(self, tmp: Path, workers: int = 3, gpu_worker: bool = False) -> None:
        self.tmp = tmp
        tmp.mkdir(parents=True, exist_ok=True)
        self.file = tmp / "scheduler.json"
        env = dict(os.environ, DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES="3")
        # The workers' temp dir is theirs alone, to see what they leave there.
        self.worker_tmp = tmp / "worker-tmp"
        self.worker_tmp.mkdir()
        env["TMPDIR"] = str(self.worker_tmp)
        env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
        self.env = env
        self.procs = [
            subprocess.Popen(
                DASK
                + [
                    "scheduler",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    "0",
                    "--no-dashboard",
                    "--scheduler-file",
                    str(self.file),
                ],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        ]
        try:  # a cluster that fails to come up (a loaded machine) leaves no process behind
            self._start(workers, gpu_worker)
        except BaseException:
            self.close()
            raise

    def _start(self, workers: int, gpu_worker: bool) -> None:
        deadline = time.monotonic() + 60
        while not self.file.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        self.address = json.loads(self.file.read_text())["address"]
        for i in range(workers):
            extra = ["--resources", "GPU=1"] if gpu_worker and i == 0 else []
            self.procs.append(
                subprocess.Popen(
                    DASK
                    + [
                        "worker",
                        "--scheduler-file",
                        str(self.file),
                        "--nworkers",
                        "1",
                        "--nthreads",
                        "1",
                        "--host",
                        "127.0.0.1",
                        "--no-dashboard",
                        *extra,
                    ],
                    env=self.env,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                )
            )
        from distributed import Client

        with Client(self.address, timeout="30s") as client:
            client.wait_for_workers(workers, timeout=60)

    def close(self) -> None:
        for p in self.procs:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for p in self.procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()


@pytest.fixture
def cluster(tmp_path: Path):
    c = Cluster(tmp_path / "cluster")
    try:
        yield c
    finally:
        c.close()


@pytest.fixture
def one_worker(tmp_path: Path):
    c = Cluster(tmp_path / "cluster", workers=1)
    try:
        yield c
    finally:
        c.close()


def _started(pid_file: Path) -> Path:
    """The /proc entry of the check that writes its pid to pid_file, once it has."""
    deadline = time.monotonic() + 60
    while not pid_file.exists() or not pid_file.read_text().strip():
        assert time.monotonic() < deadline, "the check never started"
        time.sleep(0.05)
    proc = Path(f"/proc/{pid_file.read_text().strip()}")
    assert proc.exists()  # it runs
    return proc


def _ends(proc: Path, timeout: float) -> bool:
    """Whether the process has ended within timeout seconds."""
    deadline = time.monotonic() + timeout
    while proc.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return not proc.exists()


def test_a_checks_arguments_reach_a_real_clusters_workers(tmp_path: Path, one_worker):
    """`-c "./check.sh math.exp"` on a real cluster gives the local run's output (the
    workers ran the check without its argument, which then accepted an empty module)."""
    (tmp_path / "in.mlir").write_text(chain(12, keep=4))
    where = tmp_path / "where"
    make_script(tmp_path / "check.sh", f'echo "$0" >> {where}\ngrep -q "$2" "$1"')
    outputs = {}
    for name, extra in (("local", []), ("dask", ["--executor", "dask", "--scheduler", one_worker.address])):
        proc = subprocess.run(
            CLI + ["in.mlir", "-c", "./check.sh math.exp", "-o", f"{name}.mlir", "-j", "1", *extra],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr
        outputs[name] = (tmp_path / f"{name}.mlir").read_text()
    assert "math.exp" in outputs["local"] and outputs["dask"] == outputs["local"]
    assert any(path.startswith(str(one_worker.worker_tmp)) for path in where.read_text().split())


@pytest.mark.parametrize("repeat", [1, 2])
def test_check_files_travel_with_the_script_to_a_real_clusters_workers(tmp_path: Path, one_worker, repeat: int):
    """A check that reads a helper beside it (`--check-files`) needs the helper on the
    worker; with `--repeat` the script is wrapped, and must still travel rather than be
    run from this machine's path, which a worker elsewhere does not have."""
    helper = tmp_path / "pattern"
    helper.write_text("math.exp\n")
    where = tmp_path / "where"
    check = f'echo "$PPID $0" >> {where}\ngrep -q "$(cat "$(dirname "$0")/pattern")" "$1"'
    text = chain(12, keep=4)
    local, _ = reduce(tmp_path, text, check, "local", jobs=1, repeat=repeat)
    where.unlink()
    remote, _ = reduce(
        tmp_path,
        text,
        check,
        "cluster",
        jobs=1,
        repeat=repeat,
        executor="dask",
        scheduler=one_worker.address,
        check_files=[str(helper)],
    )
    assert "math.exp" in local and remote == local
    on_workers = [line.split()[1] for line in where.read_text().splitlines() if line.split()[0] != str(os.getpid())]
    assert on_workers, "no check ran on the cluster"
    assert all(path.startswith(str(one_worker.worker_tmp)) for path in on_workers), on_workers


def test_a_check_cancelled_on_a_cluster_is_killed_and_frees_its_worker(tmp_path: Path, one_worker):
    """Dask cannot stop a running task: the check itself must see that its task was
    released and kill its process group, or the one worker stays busy for 60 s."""
    from reducer.core.dask_executor import DaskExecutor
    from reducer.core.oracle import ScriptOracle

    pid, woke = tmp_path / "pid", tmp_path / "woke"
    check = make_script(tmp_path / "check.sh", f'grep -q quick "$1" && exit 0\necho $$ > {pid}; sleep 60; touch {woke}')
    ex = DaskExecutor(ScriptOracle(str(check), "in.mlir", 120.0), 1, scheduler=one_worker.address)
    try:
        slow = ex.submit(b"slow")
        check_proc = _started(pid)
        ex.cancel(slow)
        assert _ends(check_proc, 30.0), "the cancelled check still runs on the worker"
        # The one worker took the next check: it ran before the slow one could have ended.
        assert ex.submit(b"quick").result(timeout=120).interesting
        assert not woke.exists()
    finally:
        ex.close()


def test_a_killed_clients_running_check_is_killed_on_the_worker(tmp_path: Path, one_worker):
    """A main process killed mid-run (OOM, kill -9) cannot cancel anything; the scheduler
    releases a lost client's tasks, and the check must end with them, not run on."""
    pid = tmp_path / "pid"
    check = make_script(tmp_path / "check.sh", f"echo $$ > {pid}; exec sleep 60")
    client = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from reducer.core.dask_executor import DaskExecutor\n"
            "from reducer.core.oracle import ScriptOracle\n"
            "ex = DaskExecutor(ScriptOracle(sys.argv[1], 'in.mlir', 120.0), 1, scheduler=sys.argv[2])\n"
            "ex.submit(b'x')\n"
            "time.sleep(120)\n",
            str(check),
            one_worker.address,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        check_proc = _started(pid)
        client.kill()
        client.wait()
        assert _ends(check_proc, 10.0), "the dead client's check still runs on the worker"
    finally:
        client.kill()
        client.wait()


@pytest.mark.e2e
@needs_iree
def test_a_real_compile_failure_reduces_the_same_on_a_cluster_even_when_a_worker_dies(tmp_path: Path, cluster):
    text = mlp(layers=4, bad_layer=2)
    ppids = tmp_path / "ppids"
    check = f'echo $PPID >> {ppids}\n{COMPILE} "$1" -o /dev/null 2>&1 | grep -q "{F6_ERROR}"'
    local, _ = reduce(tmp_path, text, check, "local", jobs=3)
    ppids.unlink()
    remote, result = reduce(tmp_path, text, check, "cluster", jobs=3, executor="dask", scheduler=cluster.address)
    assert remote == local
    # the original's and the final checks run here; every other ran on one of the three workers
    assert len(set(ppids.read_text().split()) - {str(os.getpid())}) == 3

    # Again, with one worker killed (SIGKILL) once it has run a few checks.
    ppids.unlink()
    (tmp_path / "cluster.mlir").unlink()
    import threading

    killed: list[int] = []

    def killer() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            seen = [p for p in (ppids.read_text().split() if ppids.exists() else []) if p != str(os.getpid())]
            if len(seen) >= 8:
                os.kill(int(seen[-1]), signal.SIGKILL)
                killed.append(int(seen[-1]))
                return
            time.sleep(0.05)

    t = threading.Thread(target=killer)
    t.start()
    again, _ = reduce(tmp_path, text, check, "cluster", jobs=3, executor="dask", scheduler=cluster.address)
    t.join()
    assert killed, "no worker was killed mid-run"
    assert again == local
    # The killed worker's candidate directory and check were swept by a later check there
    # (Dask keeps its own scratch space in the same temp dir).
    assert [p.name for p in cluster.worker_tmp.iterdir() if p.name.startswith("ireereduce")] == []
    assert _tagged(cluster.worker_tmp, checks_only=True) == []


@pytest.mark.e2e
def test_resources_send_every_check_to_a_worker_that_has_them(tmp_path: Path):
    c = Cluster(tmp_path / "cluster", workers=2, gpu_worker=True)
    try:
        ppids = tmp_path / "ppids"
        check = f'echo $PPID >> {ppids}\ngrep -q math.exp "$1"'
        out, result = reduce(
            tmp_path, chain(30, keep=9), check, "gpu", executor="dask", scheduler=c.address, resources={"GPU": 1.0}
        )
        assert result.stats.workers == 1  # one worker has a GPU, so one check at a time
        assert len(set(ppids.read_text().split()) - {str(os.getpid())}) == 1
        assert "math.exp" in out
    finally:
        c.close()


def test_the_embedded_cluster_forks_its_workers_and_leaves_nothing_behind(tmp_path: Path):
    """Dask's default start method spawns each worker as a fresh interpreter (10 s for 8
    workers on 2 cores); the embedded cluster's come from a fork server instead, which
    the run's sweep ends with the run."""
    import psutil

    from reducer.core.dask_executor import DaskExecutor
    from reducer.core.oracle import ScriptOracle
    from reducer.core.rundirs import run_scope

    check = make_script(tmp_path / "check.sh", "exit 0")
    with run_scope():
        ex = DaskExecutor(ScriptOracle(str(check), "in.mlir", 30.0), 2)
        try:
            assert ex.submit(b"x").result().interesting
            pids = ex.client.run(os.getpid).values()
            parents = {" ".join(psutil.Process(pid).parent().cmdline()) for pid in pids}
            assert all("forkserver" in p for p in parents), parents
        finally:
            ex.close()
    time.sleep(0.5)
    left = [p for p in psutil.Process().children(recursive=True) if p.status() != psutil.STATUS_ZOMBIE]
    assert not left, [p.cmdline() for p in left]
