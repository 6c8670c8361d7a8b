"""--memory-limit: a check whose processes together keep more memory resident than it may
is killed and counted as "out of memory"; address space reserved and never touched (what
AddressSanitizer, Go and the JVM do at start) costs nothing. Real processes, no clocks:
a check that holds its memory sleeps until it is killed, so without the limit it would
time out instead (its timeout is only a guard)."""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import make_script
from test_executor import _recording_popen
from test_faults import SMALL, assert_clean, cli, env

from reducer.core import processes
from reducer.core.executor import LocalExecutor
from reducer.core.oracle import OUT_OF_MEMORY, Oracle, ScriptOracle, Verdict, candidate_dir, judge, run_in


@pytest.fixture
def case(tmp_path: Path) -> Path:
    """test_faults' case: the input, and a TMPDIR of the test's own that assert_clean reads."""
    (tmp_path / "input.mlir").write_text(SMALL)
    (tmp_path / "tmp").mkdir()
    return tmp_path


def _python_check(case: Path, body: str) -> None:
    """check.py: interesting while the candidate keeps math.exp; `body` runs first, with
    the candidate's text in `text`."""
    check = case / "check.py"
    check.write_text(
        f"#!{sys.executable}\nimport sys, time\ntext = open(sys.argv[1]).read()\n{body}\n"
        "sys.exit('math.exp' not in text)\n"
    )
    check.chmod(0o755)


#: Once the last negf is gone: touch `mib` MiB (every byte written) and hold it until killed.
HOG = "if 'arith.negf %1' not in text and 'math.exp' in text:\n    hog = bytearray(b'x') * ({mib} << 20)\n    time.sleep(600)"

#: AddressSanitizer's start, in Python: 4 TiB of address space reserved (more than any
#: machine's memory, so more than any limit), 32 MiB of it touched.
ASAN = (
    "import mmap\n"
    "flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | getattr(mmap, 'MAP_NORESERVE', 0x4000)\n"
    "shadow = mmap.mmap(-1, 4 << 40, flags=flags)\n"
    "for i in range(0, 32 << 20, 4096):\n"
    "    shadow[i] = 1"
)


def _cli_on_a_machine_with(case: Path, ram: int, *args: str) -> subprocess.CompletedProcess[str]:
    """The CLI, on a machine that has `ram` bytes of memory as far as the default limit
    knows (the default is computed in the main process, before any worker starts)."""
    code = (
        "import sys\n"
        "from reducer.core import processes\n"
        f"processes.physical_memory = lambda: {ram}\n"
        "from reducer.__main__ import main\n"
        "main()\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code, *args], cwd=case, capture_output=True, text=True, timeout=600, env=env(case)
    )


def _outcomes(case: Path) -> dict[str, int]:
    return json.loads((case / "s.json").read_text())["outcomes"]


def _limit_line(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if "memory" in ln and "check" in ln and "may use" in ln]
    assert len(lines) == 1, stderr
    return lines[0]


# -- (a) a check that touches more than it may is killed and counted ------------------------


def test_a_check_that_touches_more_than_the_limit_is_killed_and_counted(case: Path):
    """300 MiB touched under --memory-limit 100M: the check is killed (it would sleep till
    its timeout), the candidate counts as out of memory in the stats and the summary, the
    run ends as usual, and nothing of the check is left running."""
    _python_check(case, HOG.format(mib=300))
    args = ["input.mlir", "--check", "check.py", "-j", "2", "--timeout", "60", "--memory-limit", "100M"]
    proc = cli(case, *args, "--stats-json", "s.json")
    assert proc.returncode == 0, proc.stderr
    outcomes = _outcomes(case)
    assert outcomes.get(OUT_OF_MEMORY, 0) >= 1 and "timeout" not in outcomes, outcomes
    assert "out of memory" in proc.stderr.splitlines()[-1]  # the summary's line of checked candidates
    assert "each check may use 100M of memory, its processes together (--memory-limit)" in _limit_line(proc.stderr)
    assert "math.exp" in (case / "input.reduced.mlir").read_text()
    assert (case / "input.mlir").read_text() == SMALL
    assert_clean(case)


def test_the_default_limit_shares_the_machines_memory_among_the_workers(case: Path):
    """No --memory-limit on a machine of 1 GiB and -j 2: each check may use 3/4 of it / 2,
    384M, and one touching 600 MiB is killed and counted."""
    _python_check(case, HOG.format(mib=600))
    args = ["input.mlir", "--check", "check.py", "-j", "2", "--timeout", "120", "--stats-json", "s.json"]
    proc = _cli_on_a_machine_with(case, 1 << 30, *args)
    assert proc.returncode == 0, proc.stderr
    assert _outcomes(case).get(OUT_OF_MEMORY, 0) >= 1, _outcomes(case)
    assert "each check may use 384M of memory" in _limit_line(proc.stderr)
    assert "75% of 1G / 2 workers" in _limit_line(proc.stderr)
    assert_clean(case)


def test_memory_limit_0_is_none(case: Path):
    """`--memory-limit 0` on the same small machine: the 600 MiB check is not killed (it
    times out instead, which is what the guard timeout shows)."""
    _python_check(case, HOG.format(mib=600))
    args = ["input.mlir", "--check", "check.py", "-j", "2", "--timeout", "3", "--memory-limit", "0"]
    proc = _cli_on_a_machine_with(case, 1 << 30, *args, "--stats-json", "s.json")
    assert proc.returncode == 0, proc.stderr
    outcomes = _outcomes(case)
    assert OUT_OF_MEMORY not in outcomes and outcomes.get("timeout", 0) >= 1, outcomes
    assert "checks have no memory limit (--memory-limit 0)" in proc.stderr
    assert_clean(case)


def test_the_embedded_dask_clusters_checks_get_the_default_limit(case: Path):
    """--executor dask on this machine: the default shares its memory among the cluster's
    workers, and a task kills its check past it as the local pool does."""
    _python_check(case, HOG.format(mib=600))
    args = ["input.mlir", "--check", "check.py", "-j", "2", "--executor", "dask", "--timeout", "120"]
    proc = _cli_on_a_machine_with(case, 1 << 30, *args, "--stats-json", "s.json")
    assert proc.returncode == 0, proc.stderr
    assert _outcomes(case).get(OUT_OF_MEMORY, 0) >= 1, _outcomes(case)
    assert "each check may use 384M of memory" in _limit_line(proc.stderr)
    assert not [p for p in (case / "tmp").iterdir() if p.name != "dask-scratch-space"]


# -- (b) reserved, untouched address space is not memory in use -----------------------------


@pytest.mark.parametrize("limit", [[], ["--memory-limit", "100M"]], ids=["default", "explicit"])
def test_a_check_that_reserves_terabytes_like_asan_is_not_killed(case: Path, limit: list[str]):
    """Every check maps 4 TiB (MAP_NORESERVE) and touches 32 MiB of it, as an
    AddressSanitizer build does: under the default and under a limit far below 4 TiB it
    runs, and the run reduces as it would without a limit. Under RLIMIT_DATA or RLIMIT_AS
    (the limit this replaced) the mapping failed, the original was not interesting, and
    with --compile the failure became the bug kept."""
    _python_check(case, ASAN)
    args = ["input.mlir", "--check", "check.py", "-j", "2", "--stats-json", "s.json", *limit]
    proc = cli(case, *args)
    assert proc.returncode == 0, proc.stderr
    assert OUT_OF_MEMORY not in _outcomes(case), _outcomes(case)
    out = (case / "input.reduced.mlir").read_text()
    assert "math.exp" in out and "negf" not in out
    assert "each check may use" in _limit_line(proc.stderr)
    assert_clean(case)


def test_a_pool_check_starts_with_no_rlimit_and_no_function_before_exec(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """A limit is measured, not set: the check's RLIMIT_DATA and RLIMIT_AS are the
    worker's (unlimited here), and it starts without a preexec function (vfork, not fork)."""
    seen, preexec = tmp_path / "seen", tmp_path / "preexec"
    _recording_popen(monkeypatch, preexec)
    oracle = ScriptOracle(
        str(make_script(tmp_path / "check.sh", f"ulimit -d >> {seen}; ulimit -v >> {seen}")), "in.mlir", 30.0
    )
    if resource.getrlimit(resource.RLIMIT_DATA)[0] != resource.RLIM_INFINITY:
        pytest.skip("this test's process has a data limit of its own")
    with LocalExecutor(oracle, 1, memory_limit=256 << 20) as ex:
        assert ex.run(b"x").interesting
        assert ex.memory_limit == 256 << 20
    assert seen.read_text().split().count("unlimited") == 2, seen.read_text()
    assert preexec.read_text().split() == ["False"]


# -- (c) the check's processes together -------------------------------------------------------


def _hold(tmp_path: Path, mib: int, pid_file: Path | None = None) -> str:
    """The command of a Python process that touches `mib` MiB and sleeps until it is
    killed. Given `pid_file`, it first waits until its parent, the shell whose pid is
    `$$`, has exited (it is an orphan), then writes its pid there."""
    hold = tmp_path / "hold.py"
    hold.write_text(
        "import os, sys, time\n"
        "if len(sys.argv) > 2:\n"
        "    while os.getppid() == int(sys.argv[3]):\n"
        "        time.sleep(0.01)\n"
        "    with open(sys.argv[2], 'w') as f:\n"
        "        f.write(str(os.getpid()))\n"
        "x = bytearray(b'x') * (int(sys.argv[1]) << 20)\n"
        "time.sleep(600)\n"
    )
    return f"{sys.executable} {hold} {mib}" + (f" {pid_file} $$" if pid_file else "")


def test_children_that_each_stay_under_the_limit_count_together(tmp_path: Path):
    """Two children of 60 MiB each, under a limit of 100M for the check: neither alone
    reaches it, both together do, and the check is killed for it."""
    body = f"{_hold(tmp_path, 60)} &\n{_hold(tmp_path, 60)} &\nwait"
    oracle = ScriptOracle(str(make_script(tmp_path / "check.sh", body)), "in.mlir", 120.0)
    with LocalExecutor(oracle, 1, memory_limit=100 << 20) as ex:
        verdict = ex.run(b"x")
    assert verdict.outcome == OUT_OF_MEMORY and not verdict.interesting, verdict
    assert verdict.stderr_tail.splitlines()[-1] == (
        "ireereduce: the check was killed at its memory limit (100M; --memory-limit)"
    )


def test_an_orphan_the_worker_reaps_counts_for_its_check(tmp_path: Path):
    """The hog's parent exits at once and it leaves the session: it is no longer the
    check's descendant nor in its group, but the worker, a subreaper, is its parent now,
    and counts it for the check that is running; both are killed."""
    pid = tmp_path / "pid"
    setsid = shutil.which("setsid")
    body = (
        f"sh -c '{setsid} {_hold(tmp_path, 300, pid)} &'\n"
        f'until [ -s {pid} ]; do sleep 0.05; done\nwhile kill -0 "$(cat {pid})" 2>/dev/null; do sleep 0.05; done'
    )
    oracle = ScriptOracle(str(make_script(tmp_path / "check.sh", body)), "in.mlir", 120.0)
    with LocalExecutor(oracle, 1, memory_limit=100 << 20) as ex:
        verdict = ex.run(b"x")
    assert verdict.outcome == OUT_OF_MEMORY, verdict
    hog = int(pid.read_text())
    assert not os.path.exists(f"/proc/{hog}"), "the orphan outlived its check"


def test_a_killed_check_is_not_interesting_whatever_the_oracle_makes_of_it(tmp_path: Path):
    """An oracle that wants a failing command (as --expect-error does) would take the
    SIGKILL for one: killed for memory, the candidate is still not interesting."""

    class WantsFailure(Oracle):
        kind = "check-script"
        timeout = 120.0

        def run(self, data: bytes, cancel=lambda: False) -> Verdict:  # type: ignore[no-untyped-def]
            with candidate_dir(data, "in.mlir") as (tmp, _):
                r = run_in(["sh", "-c", _hold(tmp_path, 300)], tmp, self.timeout, cancel=cancel)
            return Verdict(r.returncode != 0, r.returncode, r.timed_out, r.seconds, r.stderr, "interesting")

        def reproducer(self, path: str) -> str:
            return path

    verdict = judge(WantsFailure(), b"x", memory=100 << 20)
    assert (verdict.interesting, verdict.outcome, verdict.returncode) == (False, OUT_OF_MEMORY, -9)


def test_a_check_that_fails_on_its_own_is_plainly_not_interesting(tmp_path: Path):
    """Nothing to kill: a check that asks for a terabyte at once gets a MemoryError from
    the kernel and fails before it touches anything; a plain failure is no different.
    Neither is "out of memory", which is what the limit did."""
    check = tmp_path / "check.py"
    check.write_text(
        f"#!{sys.executable}\nimport sys\nwhat = open(sys.argv[1]).read()\n"
        "if what == 'huge':\n    x = bytearray(1 << 40)\nsys.exit(what != 'fine')\n"
    )
    check.chmod(0o755)
    oracle = ScriptOracle(str(check), "in.mlir", 120.0)
    with LocalExecutor(oracle, 1, memory_limit=100 << 20) as ex:
        verdicts = {d: ex.run(d.encode()) for d in ("huge", "plain", "fine")}
    assert {d: v.outcome for d, v in verdicts.items()} == {
        "huge": "not interesting",
        "plain": "not interesting",
        "fine": "interesting",
    }
    assert "MemoryError" in verdicts["huge"].stderr_tail


def test_a_check_that_times_out_under_its_memory_limit_is_a_timeout(tmp_path: Path):
    """Its verdict came from the clock: killed at its timeout while it held 150 MiB of
    the 200M it may use."""
    oracle = ScriptOracle(str(make_script(tmp_path / "check.sh", f"{_hold(tmp_path, 150)}\necho done")), "in.mlir", 2.0)
    with LocalExecutor(oracle, 1, memory_limit=200 << 20) as ex:
        assert ex.run(b"x").outcome == "timeout"


def test_the_default_limit(monkeypatch: pytest.MonkeyPatch):
    """3/4 of the memory over the workers, at least 256M; none where memory cannot be
    read; the start line says which."""
    monkeypatch.setattr(processes, "physical_memory", lambda: 8 << 30)
    assert processes.default_memory_limit(4) == int(0.75 * (8 << 30) / 4)
    assert processes.default_memory_limit(1000) == 256 << 20
    limit, line = processes.memory_limit(None, 4)
    assert limit == 1610612736 and "1.5G" in line and "75% of 8G / 4 workers" in line
    assert processes.memory_limit(0, 4) == (0, "checks have no memory limit (--memory-limit 0)")
    assert processes.memory_limit(1 << 30, 4)[0] == 1 << 30
    monkeypatch.setattr(processes, "physical_memory", lambda: 0)
    assert processes.default_memory_limit(4) == 0
    assert processes.memory_limit(None, 4)[0] == 0
