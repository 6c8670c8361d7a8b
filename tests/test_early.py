"""Checks started while the original is checked (issue 11): the engine's first candidates
run on the workers the original's checks leave idle, and their verdicts count only where
the calibrated check would give them too."""

from __future__ import annotations

import collections
import hashlib
import time
from pathlib import Path

from conftest import make_script
from programs import chain

from reducer.core.cache import JournaledExecutor, VerdictJournal, key
from reducer.core.early import EarlyExecutor, provably_same
from reducer.core.executor import LocalExecutor
from reducer.core.oracle import RepeatOracle, ScriptOracle, Verdict


def test_an_early_verdict_is_the_calibrated_ones_only_if_no_timeout_could_have_cut_it():
    early = ScriptOracle("check.sh", "in.mlir", 300.0)
    quick, slow = Verdict(True, 0, seconds=0.5), Verdict(True, 0, seconds=12.0)
    assert provably_same(early, quick, early.with_timeout(10.0))
    assert not provably_same(early, slow, early.with_timeout(10.0))  # 10 s would have cut it off
    assert not provably_same(early, Verdict(False, None, timed_out=True, seconds=0.5), early.with_timeout(10.0))
    assert not provably_same(early, quick, ScriptOracle("other.sh", "in.mlir", 10.0))
    # --repeat's verdict is its last run's: provable only with the very same oracle.
    assert provably_same(RepeatOracle(early, 2), slow, RepeatOracle(early, 2))
    assert not provably_same(RepeatOracle(early, 2), quick, RepeatOracle(early, 2).with_timeout(10.0))


def test_an_early_verdict_the_calibrated_check_would_give_is_kept_and_journaled(tmp_path: Path):
    check = make_script(tmp_path / "check.sh", "sleep 0.3; exit 0")
    provisional = ScriptOracle(str(check), "in.mlir", 300.0)
    journal = VerdictJournal(str(tmp_path / "journal"))
    seen: list[Verdict] = []
    with LocalExecutor(None, 2) as inner:
        early = EarlyExecutor(inner, provisional)
        future = early.submit(b"module {}\n", provisional)
        early.adopt(JournaledExecutor(inner, journal, after=seen.append), provisional.with_timeout(30.0))
        assert future.result(timeout=30).interesting
        assert (early.kept, early.redone, inner.stats.checks) == (1, 0, 1)
    assert key(b"module {}\n") in journal.verdicts  # a rerun after kill -9 replays it
    assert len(seen) == 1  # the session's check on the user's files saw it


def test_an_early_verdict_slower_than_the_calibrated_timeout_is_checked_again(tmp_path: Path):
    check = make_script(tmp_path / "check.sh", "sleep 0.6; exit 0")
    provisional = ScriptOracle(str(check), "in.mlir", 300.0)
    with LocalExecutor(None, 2) as inner:
        early = EarlyExecutor(inner, provisional)
        future = early.submit(b"module {}\n", provisional)
        time.sleep(1.0)  # finished, with the provisional oracle's verdict: interesting
        early.adopt(JournaledExecutor(inner, None), provisional.with_timeout(0.3))
        verdict = future.result(timeout=30)
    assert verdict.timed_out and not verdict.interesting  # what a check cut off at 0.3 s says
    assert (early.kept, early.redone, inner.stats.checks) == (0, 1, 2)


def test_an_early_check_still_running_past_the_calibrated_timeout_is_not_waited_for(tmp_path: Path):
    """A provisional timeout is long (the original's time is not known yet): a check that
    hangs would hold its worker that long. Once the real timeout is known, it is cut off."""
    check = make_script(tmp_path / "check.sh", "sleep 60; exit 0")
    provisional = ScriptOracle(str(check), "in.mlir", 300.0)
    with LocalExecutor(None, 2) as inner:
        early = EarlyExecutor(inner, provisional)
        future = early.submit(b"module {}\n", provisional)
        start = time.monotonic()
        early.adopt(JournaledExecutor(inner, None), provisional.with_timeout(0.5))
        verdict = future.result(timeout=30)
        assert time.monotonic() - start < 10
    assert verdict.timed_out
    assert early.redone == 1


def test_early_checks_are_cancelled_when_the_run_starts_elsewhere(tmp_path: Path):
    check = make_script(tmp_path / "check.sh", "sleep 60; exit 0")
    provisional = ScriptOracle(str(check), "in.mlir", 300.0)
    with LocalExecutor(None, 2) as inner:
        early = EarlyExecutor(inner, provisional)
        futures = [early.submit(b"module {}\n", provisional), early.submit(b"module {\n}\n", provisional)]
        time.sleep(0.3)
        early.discard()
        assert all(f.cancelled() for f in futures)
        assert inner.stats.cancelled == 2  # their process groups were killed, the workers freed


def test_the_engine_starts_its_first_candidates_while_the_original_is_checked(tmp_path: Path):
    """With eight workers, the original's two checks and the re-print's leave five idle:
    the engine's first candidates start on them at once. What the run decides is the
    -j 2 run's, and no text is checked twice."""
    from reducer.session import Settings, reduce_file

    src, log = tmp_path / "in.mlir", tmp_path / "log"
    # Spelled unlike MLIR prints it, so the re-printed form is checked as well.
    src.write_text(chain(16, keep=5).replace(" = ", "  =  "))
    stamp = "python3 -c 'import time; print(time.time())'"
    check = make_script(
        tmp_path / "check.sh",
        f'tag=candidate; cmp -s "$1" {src} && tag=original\n'
        f'echo "start:$({stamp}):$tag:$(md5sum < "$1" | cut -c1-12)" >> {log}\n'
        f'if [ $tag = original ]; then sleep 2; else sleep 0.2; fi; grep -q math.exp "$1"; rc=$?\n'
        f'echo "end:$({stamp}):$tag:-" >> {log}; exit $rc',
    )
    outs = {}
    for jobs in (2, 8):
        log.unlink(missing_ok=True)
        out = tmp_path / f"out-{jobs}.mlir"
        result = reduce_file(Settings(str(src), str(check), str(out), jobs=jobs, no_state=True))
        outs[jobs] = out.read_text()
    assert outs[8] == outs[2]
    lines = [line.split(":") for line in log.read_text().split()]
    original_end = min(float(t) for what, t, tag, _ in lines if what == "end" and tag == "original")
    candidates = sorted(float(t) for what, t, tag, _ in lines if what == "start" and tag == "candidate")
    # The re-print and at least one candidate of the engine's start before the original's end.
    assert len([t for t in candidates if t < original_end]) >= 2
    checked = collections.Counter(h for what, _, tag, h in lines if what == "start" and tag == "candidate")
    final = hashlib.md5(outs[8].encode()).hexdigest()[:12]
    # Early verdicts were used: a text is checked again only as a re-check of a program
    # the run committed (the engine starts those early when a program looks final).
    again = sum(n - 1 for h, n in checked.items() if h != final)
    assert again <= result.stats.early_rechecks


def test_early_checks_are_stopped_when_the_check_rejects_the_reprinted_program(tmp_path: Path):
    """The check wants the input's own spelling, so the run reduces it as text, not on the
    parse the engine was primed on: the primed candidates' checks (which would hang here)
    are killed, and the run is not held up by them."""
    from reducer.core import ir as irutil
    from reducer.core.workspace import MLIRWorkspace
    from reducer.session import Settings, reduce_file

    src, reprint = tmp_path / "in.mlir", tmp_path / "reprint.mlir"
    text = chain(16, keep=5).replace(" = ", "  =  ")
    src.write_text(text)
    reprint.write_text(MLIRWorkspace(text, irutil.PrintOptions()).canonical(irutil.PrintOptions()))
    done = tmp_path / "original-checked"
    check = make_script(
        tmp_path / "check.sh",
        f'if cmp -s "$1" {src}; then sleep 2; touch {done}; exit 0; fi\n'
        f'if cmp -s "$1" {reprint}; then exit 1; fi\n'
        f"if [ ! -e {done} ]; then sleep 60; exit 1; fi\n"  # the primed candidates
        'grep -q "  =  " "$1" && grep -q math.exp "$1"',
    )
    start = time.monotonic()
    result = reduce_file(Settings(str(src), str(check), str(tmp_path / "out.mlir"), jobs=8, no_state=True))
    assert result.mode == "text"
    assert time.monotonic() - start < 40
    assert "math.exp" in (tmp_path / "out.mlir").read_text()
