"""What steers speculation (issue 11): the odds it gives a candidate, which candidates
count as repeats of a failure, the next round's order on a speculative branch, and the
final re-checks started while the last round is judged. None of it may change what is
committed; test_engine.py checks that the output is the same for any -j."""

from __future__ import annotations

import concurrent.futures
import contextlib
import hashlib
from collections.abc import Iterator
from pathlib import Path

from conftest import make_script
from programs import chain

from reducer.core import predictor
from reducer.core.cache import key
from reducer.core.engine import Engine
from reducer.core.executor import LocalExecutor
from reducer.core.oracle import ScriptOracle, Verdict
from reducer.core.trials import Branch, Trial
from reducer.core.workspace import Candidate, Size, TextWorkspace
from reducer.session import Settings, check_repeatedly, reduce_file
from strategies.text_lines import TextLines


def test_a_repeat_is_expected_to_fail_and_a_fresh_candidate_to_succeed():
    """predictor.py: measured, a lean towards success keeps more workers useful."""
    assert predictor.odds(again=True) < 0.5 < predictor.odds(again=False)


def _decisions(tmp_path: Path, text: str) -> list[tuple[list[str], bool, bool]]:
    """(chunk, repeat as speculation saw it before the verdict, verdict) per decision."""
    script = make_script(tmp_path / "check.sh", 'grep -q keep "$1"')
    seen: list[tuple[list[str], bool, bool]] = []
    with LocalExecutor(ScriptOracle(str(script), "in.txt", 10.0), 1) as ex:
        ws = TextWorkspace(text)
        engine = Engine(ws, [TextLines()], ex, lambda c: None, move_budget=0)
        decide = engine._decide

        def recording(trial, branch):  # type: ignore[no-untyped-def]
            again = engine.speculation.failures.repeats(trial)
            verdict = decide(trial, branch)
            lines = [trial.ws.program.text[slice(*e.arg)].strip() for e in trial.chunk_edits] if trial.ws else []
            seen.append((lines, again, verdict))
            return verdict

        engine._decide = recording  # type: ignore[method-assign]
        engine.run()
    return seen


def test_a_chunk_holding_all_that_is_left_of_a_failed_one_is_a_repeat(tmp_path: Path):
    """All four lines fail to go; a and b go; then keep and c together are what is left of
    the chunk that failed, followed through the commit by their places in the list."""
    seen = _decisions(tmp_path, "a\nb\nkeep\nc\n")
    assert seen[:3] == [
        (["a", "b", "keep", "c"], False, False),
        (["a", "b"], False, True),
        (["keep", "c"], True, False),
    ]
    assert (["c"], False, True) in seen  # c alone was in no chunk that failed without keep


def _trial(name: str, key: bytes | None, read: bool = False) -> Trial:
    strategy = type(name, (), {"name": name})()
    return Trial(strategy, 0, [], 0, 1, key=key, read=read)  # type: ignore[arg-type]


def test_the_next_rounds_order_on_a_branch_counts_the_verdicts_it_assumes():
    """Strategies are ranked by bytes saved per verdict: a branch that assumes `cut`
    succeeds (saving 40 bytes) after `other` failed twice must rank them so, although no
    decision has read those verdicts yet (the decisions will when they reach it)."""
    ws = TextWorkspace("x" * 50 + "\n")
    main = Branch(ws, iter(()), 1.0)
    main.trials = [_trial("other", b"1", read=True), _trial("other", b"2"), _trial("other", None), _trial("cut", b"3")]
    for t in main.trials:
        t.branch = main
    parent = main.trials[-1]
    parent.ws, parent.candidate = ws, Candidate("y" * 10 + "\n", Size(None, 11), "cut")
    branch = Branch(TextWorkspace("y" * 10 + "\n"), iter(()), 0.7, parent=parent)
    branch.trials = [_trial("cut", b"4"), _trial("cut", None)]
    assumed = Engine._assumed(branch)
    # `other`: one unread verdict (the read one counts already; a rejection is no verdict);
    # `cut`: the commit and the failure after it, and the bytes the commit saves.
    assert assumed == {"other": (1, 0), "cut": (2, 40)}


def test_the_final_rechecks_start_while_the_last_round_is_judged(tmp_path: Path):
    """With idle workers, the three re-checks of the final program run alongside the
    checks that prove it 1-minimal, rather than after them (a failing check is slow here,
    so the last round keeps the engine waiting; one strategy keeps that round small)."""
    log = tmp_path / "seen"
    src = tmp_path / "in.mlir"
    src.write_text(chain(12, keep=5))
    check = (
        f'h=$(md5sum < "$1"); echo "start $h" >> {log}; '
        f'if grep -q math.exp "$1"; then r=0; else sleep 1; r=1; fi; echo "end $h" >> {log}; exit $r'
    )
    out = tmp_path / "out.mlir"
    script = make_script(tmp_path / "check.sh", check)
    result = reduce_file(Settings(str(src), str(script), str(out), jobs=8, strategies=["drop-ops"], move_budget=0))
    seen = log.read_text().splitlines()
    final = hashlib.md5(out.read_bytes()).hexdigest() + "  -"
    starts = [i for i, line in enumerate(seen) if line == f"start {final}"]
    assert len(starts) == 4  # as a candidate, then three re-checks: the early ones, not again
    last_other_end = max(i for i, line in enumerate(seen) if line.startswith("end ") and not line.endswith(final))
    assert starts[1] < last_other_end  # the first re-check started before another check ended
    assert result.stats.early_rechecks >= 1


def test_rechecks_are_handed_over_only_for_the_program_they_check(tmp_path: Path):
    """The last round (each line alone, on the final program; a failing check is slow)
    leaves workers free for the re-checks of that program; they go to the caller only if
    it asks about that text, and are stopped otherwise."""
    check = 'if grep -q "^x$" "$1" && grep -q "^y$" "$1"; then sleep 0.5; exit 0; fi; sleep 1; exit 1'
    script = make_script(tmp_path / "check.sh", check)
    for handed_over in (True, False):
        with LocalExecutor(ScriptOracle(str(script), "in.txt", 10.0), 4) as ex:
            ws = TextWorkspace("a\nx\ny\nb\n")
            engine = Engine(ws, [TextLines()], ex, lambda c: None, move_budget=0, confirm=3)
            engine.run()
            assert ws.program.text == "x\ny\n"
            running = [f for fs in engine.confirms.started.values() for f in fs]
            asked = ws.program.text.encode() if handed_over else b"another program\n"
            started = engine.confirmations(asked)
            assert engine.confirmations(asked) == [] and not engine.confirms.started  # handed over once
            if handed_over:
                assert 1 <= len(started) <= 3 and all(f.result().interesting for f in started)
            else:
                assert started == [] and running and all(f.cancelled() or f.done() for f in running)


def test_checks_already_started_are_read_first_and_not_submitted_again():
    class Counting:
        workers = 3

        def __init__(self) -> None:
            self.submitted = 0

        def submit(self, data, oracle=None):  # type: ignore[no-untyped-def]
            self.submitted += 1
            future: concurrent.futures.Future[Verdict] = concurrent.futures.Future()
            future.set_result(Verdict(True, 0))
            return future

        def cancel(self, future) -> None:  # type: ignore[no-untyped-def]
            future.cancel()

        def result(self, future):  # type: ignore[no-untyped-def]
            return future.result()

    ex = Counting()
    early = [ex.submit(b"p") for _ in range(2)]
    oracle = ScriptOracle("/bin/true", "in.txt", 10.0)
    verdicts = check_repeatedly(ex, oracle, b"p", 3, until=lambda v: not v.interesting, started=early)  # type: ignore[arg-type]
    assert len(verdicts) == 3 and ex.submitted == 3  # two early ones, one more

    flipped: concurrent.futures.Future[Verdict] = concurrent.futures.Future()
    flipped.set_result(Verdict(False, 1))
    ex.submitted = 0
    verdicts = check_repeatedly(ex, oracle, b"p", 3, until=lambda v: not v.interesting, started=[flipped])  # type: ignore[arg-type]
    assert [v.interesting for v in verdicts] == [False]  # the started one is read first, and ends it


def test_a_branch_left_behind_by_a_commit_is_not_kept_alive(tmp_path: Path):
    """Each commit opens the branch of the new program; the ones before it hold whole
    programs (megabytes on a big input) and must go once no decision can need them."""
    import gc
    import weakref

    script = make_script(tmp_path / "check.sh", 'grep -q keep "$1"')
    with LocalExecutor(ScriptOracle(str(script), "in.txt", 10.0), 1) as ex:
        engine = Engine(TextWorkspace("a\nkeep\nb\nc\nd\n"), [TextLines()], ex, lambda c: None, move_budget=0)
        made: list[weakref.ref[Branch]] = []
        left_alive: list[int] = []
        opened, decide = engine._success_branch, engine._decide

        def opening(trial):  # type: ignore[no-untyped-def]
            branch = opened(trial)
            made.append(weakref.ref(branch))
            return branch

        def deciding(trial, branch):  # type: ignore[no-untyped-def]
            gc.collect()
            left_alive.append(sum(ref() is not None for ref in made[:-1]))
            return decide(trial, branch)

        engine._success_branch, engine._decide = opening, deciding  # type: ignore[method-assign]
        engine.run()
    assert len(made) >= 3 and max(left_alive) == 0


def test_a_speculative_branch_orders_the_next_round_by_what_it_assumes(tmp_path: Path):
    """Where speculation runs past the end of a round, the next round's order is asked
    with the verdicts the branch assumes (test above: what they add up to)."""
    script = make_script(tmp_path / "check.sh", 'sleep 0.2; grep -q keep "$1"')
    asked: list[dict[str, tuple[int, int]]] = []
    with LocalExecutor(ScriptOracle(str(script), "in.txt", 10.0), 4) as ex:
        engine = Engine(TextWorkspace("a\nkeep\nb\nc\n"), [TextLines()], ex, lambda c: None, move_budget=0)
        ordered = engine._ordered

        def recording(assumed=None, **kw):  # type: ignore[no-untyped-def]
            if assumed:
                asked.append(assumed)
            return ordered(assumed, **kw)

        engine._ordered = recording  # type: ignore[method-assign]
        engine.run()
    assert asked and all(judged >= 1 for a in asked for judged, _ in a.values())


def test_a_trial_becomes_a_repeat_when_a_failure_that_implies_it_is_read(tmp_path: Path):
    """Speculation asks about a trial before the chunk that implies it is decided: here
    `keep` alone, left of the chunk {a, keep} after `a` went. Once that chunk's failure is
    read, the trial is a repeat, though it was not when first asked."""
    script = make_script(tmp_path / "check.sh", 'grep -q keep "$1"')
    with LocalExecutor(ScriptOracle(str(script), "in.txt", 10.0), 1) as ex:
        ws = TextWorkspace("keep\n")
        engine = Engine(ws, [TextLines()], ex, lambda c: None, move_budget=0)
        left = Trial(TextLines(), 0, engine._edits(ws, TextLines()), 0, 1, lineage=(8,))
        assert not engine.speculation.failures.repeats(left)
        engine.speculation.failures.read += 1  # what _decide does when it reads the failure of {a, keep}
        for member in (7, 8):
            engine.speculation.failures.by_lineage[member].append(frozenset({7, 8}))
        assert engine.speculation.failures.repeats(left)


def test_a_candidate_that_failed_lets_go_of_its_ir(tmp_path: Path):
    """A candidate carries its module for a fork or a commit; one that failed is never
    committed, and kept with its IR until the next commit it would hold a whole module."""
    from reducer.core import ir as irutil
    from reducer.core.workspace import MLIRWorkspace
    from reducer.session import select_strategies

    script = make_script(tmp_path / "check.sh", 'grep -q math.exp "$1"')
    failed: list[object] = []
    with LocalExecutor(ScriptOracle(str(script), "in.mlir", 10.0), 1) as ex:
        ws = MLIRWorkspace(chain(12, keep=5), irutil.PrintOptions())
        engine = Engine(ws, select_strategies("mlir", ["drop-ops"], []), ex, lambda c: None, move_budget=0)
        decide = engine._decide

        def recording(trial, branch):  # type: ignore[no-untyped-def]
            verdict = decide(trial, branch)
            if trial.key is not None and not verdict:
                failed.append(trial.candidate)
            return verdict

        engine._decide = recording  # type: ignore[method-assign]
        engine.run()
        assert failed and all(c.module is None for c in failed)
        assert all(c.module is None for c in engine.checks.made.values() if c in failed)


def test_a_commit_stops_the_rechecks_of_a_program_it_left(tmp_path: Path):
    """Re-checks start on a program that is likely final; once a commit leaves it, they can
    no longer be needed and must free their workers, while those of the program the commit
    made go on. The commit is made here as a decision makes it (`_round` then calls
    `_cancel`): a whole run started such re-checks only when speculation's timing allowed."""
    script = make_script(tmp_path / "check.sh", "sleep 30; exit 0")
    with LocalExecutor(ScriptOracle(str(script), "in.txt", 60.0), 4) as ex:
        ws = TextWorkspace("a\nx\ny\nb\n")
        engine = Engine(ws, [TextLines()], ex, lambda c: None, move_budget=0, confirm=3)
        engine.confirms.start(Branch(ws, iter(()), 1.0))
        left = list(engine.confirms.started[engine.checks.program_key(ws)])
        ws.commit(Candidate("x\ny\n", Size(None, 4), "text-lines"))
        engine.confirms.start(Branch(ws, iter(()), 1.0))
        kept = list(engine.confirms.started[engine.checks.program_key(ws)])
        engine._cancel(Branch(ws, iter(()), 1.0))
        assert left and all(f.cancelled() for f in left)
        assert kept and not any(f.cancelled() for f in kept)
        engine.confirms.stop(keep=set())


def test_idle_workers_recheck_a_program_whose_own_check_is_still_pending(tmp_path: Path):
    """At the end of a run nothing is left to speculate on but the likely final program,
    whose re-checks would otherwise start only once its own (slow) check is read: idle
    workers (enough for all three) start them alongside it. The final program's first
    check waits (up to 5 s) for another check of the same text to start, and notes
    whether one did."""
    marks = tmp_path / "marks"
    marks.mkdir()
    check = (
        'if [ "$(cat "$1")" != x ]; then grep -q x "$1"; exit $?; fi\n'
        f"touch {marks}/$$\n"
        f"if mkdir {tmp_path}/first 2>/dev/null; then\n"
        "  for i in $(seq 50); do\n"
        f'    if [ "$(ls {marks} | wc -l)" -ge 2 ]; then touch {tmp_path}/overlap; break; fi\n'
        "    sleep 0.1\n"
        "  done\n"
        "fi\n"
        "exit 0\n"
    )
    script = make_script(tmp_path / "check.sh", check)
    with LocalExecutor(ScriptOracle(str(script), "in.txt", 30.0), 8) as ex:
        ws = TextWorkspace("a\nx\nb\n")
        engine = Engine(ws, [TextLines()], ex, lambda c: None, move_budget=0, confirm=3)
        engine.run()
        assert ws.program.text == "x\n"
        started = engine.confirmations(b"x\n")
        assert 1 <= len(started) <= 3 and all(f.result().interesting for f in started)
    assert (tmp_path / "overlap").exists()


@contextlib.contextmanager
def _a_pending_trial(
    tmp_path: Path, workers: int, text: str = "a\nx\nb\n", position: int = 0
) -> Iterator[tuple[Engine, Branch, Trial]]:
    """An engine whose trial at `position` (of one text-lines sweep on text) is being
    checked (every check sleeps, then fails), with the branch its success would open."""
    script = make_script(tmp_path / "check.sh", "sleep 30; exit 1")
    with LocalExecutor(ScriptOracle(str(script), "in.txt", 60.0), workers) as ex:
        ws = TextWorkspace(text)
        engine = Engine(ws, [TextLines()], ex, lambda c: None, move_budget=0, confirm=3)
        branch = Branch(ws, engine._plan(ws, engine._ordered(), 0), 1.0)
        trial = branch.trial(position)
        assert trial is not None
        engine.checks.materialise(trial, ws)
        trial.success = engine._success_branch(trial)
        try:
            yield engine, branch, trial
        finally:
            engine._cancel()


def test_a_failure_read_stops_the_rechecks_of_the_program_it_would_have_made(tmp_path: Path):
    """Idle workers may re-check a program whose own check is pending; once that check is
    read as a failure, the program can never be final and the workers go back to work."""
    with _a_pending_trial(tmp_path, 4) as (engine, branch, trial):
        assert trial.success is not None and trial.key is not None
        engine.confirms.start(trial.success)
        engine.confirms.start(trial.success)
        rechecks = list(engine.confirms.started[engine.checks.program_key(trial.success.ws)])
        engine.cache.put(trial.key, False)  # its check came back: not interesting
        assert engine._decide(trial, branch) is False
        assert len(rechecks) == 2 and all(f.cancelled() for f in rechecks)


def test_rechecks_of_a_pending_program_give_way_to_a_likelier_check(tmp_path: Path):
    """Re-checks started while their program's own check is pending hold workers only
    while nothing likelier needs them: with every worker busy, a trial more likely to be
    needed takes their place (they are cancelled, not left to run their course)."""
    with _a_pending_trial(tmp_path, 4) as (engine, branch, trial):
        assert trial.success is not None
        for _ in range(3):
            engine.confirms.start(trial.success, odds=0.01)
        rechecks = list(engine.confirms.started[engine.checks.program_key(trial.success.ws)])
        assert engine.speculation.busy() == 4
        engine.speculation.fill(branch)
        assert len(rechecks) == 3 and all(f.cancelled() for f in rechecks)
        assert not engine.confirms.standby and len(engine.checks.inflight) >= 2


def test_a_pending_program_is_rechecked_only_where_every_recheck_finds_a_worker(tmp_path: Path):
    """The run ends once all three re-checks are read: starting one while its program's
    check is pending shortens nothing unless the other two can start as well. Nor is a
    program re-checked on which no edit makes a candidate to check (what a whole-sweep
    chunk leaves: the odds overrate it)."""
    script = make_script(tmp_path / "check.sh", "sleep 30; exit 1")
    with LocalExecutor(ScriptOracle(str(script), "in.txt", 60.0), 5) as ex:
        ws = TextWorkspace("a\nx\ny\nb\n")
        engine = Engine(ws, [TextLines()], ex, lambda c: None, move_budget=0, confirm=3)
        branch = Branch(ws, engine._plan(ws, engine._ordered(), 0), 1.0)
        first, second, third = branch.trial(0), branch.trial(1), branch.trial(2)
        assert first is not None and second is not None and third is not None
        engine.checks.materialise(second, ws)  # a, x: leaves y and b
        after = engine._success_branch(second)
        assert not engine.speculation.confirm_wanted(after, pending=True)  # nothing checkable on it yet
        on_it = after.trial(0)
        assert on_it is not None
        engine.checks.materialise(on_it, after.ws)
        assert on_it.key is not None and engine.speculation.busy() == 2
        assert engine.speculation.confirm_wanted(after, pending=True)  # three workers idle
        engine.checks.materialise(third, ws)
        assert engine.speculation.busy() == 3 and not engine.speculation.confirm_wanted(after, pending=True)
        assert not engine.speculation.confirm_wanted(after)  # not without `pending`, ever
        engine._cancel()


def test_a_failure_stops_the_rechecks_of_every_program_it_led_to(tmp_path: Path):
    """A failure read ends the programs of the trials that follow its success too, and a
    failure that came back before a decision read it stops their re-checks already."""
    for read in (True, False):
        with _a_pending_trial(tmp_path, 8, "a\nx\ny\nb\n", 1) as (engine, branch, trial):  # leaves y, b
            assert trial.success is not None and trial.key is not None
            nested = trial.success.trial(0)
            assert nested is not None
            engine.checks.materialise(nested, trial.success.ws)
            nested.success = engine._success_branch(nested)
            engine.confirms.start(nested.success, odds=0.5)
            rechecks = list(engine.confirms.started[engine.checks.program_key(nested.success.ws)])
            engine.cache.put(trial.key, False)  # trial's check came back: not interesting
            if read:
                assert engine._decide(trial, branch) is False
            else:
                engine.speculation.fill(branch)
            assert rechecks and all(f.cancelled() for f in rechecks), read


def test_no_standby_while_a_program_known_to_be_interesting_lacks_its_rechecks(tmp_path: Path):
    """The current program (known to be interesting) may be final; a pending candidate's
    program rated likelier by the odds, which lean towards success, does not take the
    workers its re-checks would need."""
    script = make_script(tmp_path / "check.sh", "sleep 30; exit 1")
    with LocalExecutor(ScriptOracle(str(script), "in.txt", 60.0), 8) as ex:
        ws = TextWorkspace("a\nx\n")
        engine = Engine(ws, [TextLines()], ex, lambda c: None, move_budget=0, confirm=3)
        engine.cache.put(key(b""), False)  # nothing left, and "a" alone: known failures
        engine.cache.put(key(b"a\n"), False)
        branch = Branch(ws, engine._plan(ws, engine._ordered(), 0), 1.0)
        for position in range(3):  # all of it, then each line alone
            trial = branch.trial(position)
            assert trial is not None
            engine.checks.materialise(trial, ws)
        pending = branch.trials[1]  # without "a": being checked
        assert pending.verdict is None and branch.trials[0].verdict is branch.trials[2].verdict is False
        pending.success = engine._success_branch(pending)
        on_it = pending.success.trial(0)
        while on_it is not None:  # "x" removed (this round, and the next): known to fail
            engine.checks.materialise(on_it, pending.success.ws)
            assert on_it.verdict is False
            on_it = pending.success.trial(len(pending.success.trials))
        assert engine.speculation.confirm_wanted(pending.success, pending=True)
        best = engine.speculation.most_likely(branch)
        assert best is not None and best[1] is None and best[2] is branch  # the current program's re-check
        engine._cancel()
