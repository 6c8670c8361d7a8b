"""The engine with tiny grep oracles: the bar's chains, determinism across -j, the
cache, best-so-far writes."""

from __future__ import annotations

import concurrent.futures
import hashlib
from pathlib import Path

import pytest
from conftest import make_script
from programs import chain

from reducer.core import ir as irutil
from reducer.core.executor import Executor, ExecutorStats
from reducer.core.workspace import MLIRWorkspace
from reducer.session import Settings, reduce_file


def reduce(tmp_path: Path, text: str, check: str, jobs: int = 2, name: str = "in.mlir", **kw) -> tuple[str, object]:
    src = tmp_path / name
    src.write_text(text)
    script = make_script(tmp_path / "check.sh", check)
    out = tmp_path / f"out-j{jobs}.mlir"
    result = reduce_file(Settings(str(src), str(script), str(out), jobs=jobs, **kw))
    return out.read_text(), result


def body_ops(text: str) -> list[str]:
    return [ln.split("=")[1].split()[0] for ln in text.splitlines() if " = " in ln]


class _NoChecks(Executor):
    """Checks nothing; each cancel is only noted, as if it came when the check had just
    finished (the engine's unit tests hand it futures of their own)."""

    def __init__(self) -> None:
        self.workers, self.stats = 1, ExecutorStats()
        self.cancelled: list[concurrent.futures.Future] = []

    def submit(self, data, oracle=None):  # type: ignore[no-untyped-def]
        raise AssertionError("nothing is checked here")

    def cancel(self, future):  # type: ignore[no-untyped-def]
        self.cancelled.append(future)

    def close(self, abort=False):  # type: ignore[no-untyped-def]
        pass


@pytest.mark.parametrize("binary", [False, True], ids=["one-operand", "two-operand"])
def test_200_op_chain_reduces_to_the_one_op_that_matters(tmp_path: Path, binary: bool):
    out, result = reduce(tmp_path, chain(200, binary=binary), 'grep -q math.exp "$1"')
    assert body_ops(out) == ["math.exp"]
    assert result.stats.final.ops == 3  # func.func, math.exp, return
    assert result.stats.oracle_calls < 40  # llvm-reduce needs 62 on the same chain


def test_output_is_identical_for_any_jobs(tmp_path: Path):
    """Any two of three marker ops keep the program interesting, so there are three
    1-minimal results and which one comes out depends on the commit order alone. Checks
    of candidates that keep math.exp are slow, so with more workers the others finish
    first: an engine that committed by arrival would pick another pair."""
    text = chain(40, keep=8).replace("arith.negf %v20", "math.sin %v20").replace("arith.negf %v30", "math.cos %v30")
    check = (
        'n=0; for m in math.exp math.sin math.cos; do grep -q "$m" "$1" && n=$((n+1)); done; '
        'if grep -q math.exp "$1"; then sleep 0.1; fi; [ "$n" -ge 2 ]'
    )
    outs = {}
    judged = {}
    for jobs in (1, 2, 3):
        outs[jobs], result = reduce(tmp_path, text, check, jobs=jobs)
        judged[jobs] = sum(st.judged for st in result.stats.per_strategy.values())
    assert body_ops(outs[1]) == ["math.exp", "math.sin"]  # the pair the enumeration order gives
    assert outs[1] == outs[2] == outs[3]
    # Speculation changes how many checks run, never which verdicts the decisions read.
    assert judged[1] == judged[2] == judged[3]


def test_the_first_interesting_candidate_in_order_wins_whatever_finishes_first(tmp_path: Path):
    """Either of two ops keeps the program interesting; which one survives depends only on
    the enumeration order. The check answers slowly while the op the order keeps is
    present, so with several workers the candidate that drops it is judged first: an
    engine that committed verdicts as they arrive would keep math.exp at -j 4."""
    text = chain(12, keep=3).replace("arith.negf %v8", "math.sin %v8")
    check = 'if grep -q math.sin "$1"; then sleep 0.4; exit 0; fi; grep -q math.exp "$1"'
    outs = {jobs: reduce(tmp_path, text, check, jobs=jobs, strategies=["drop-ops"])[0] for jobs in (1, 4)}
    assert body_ops(outs[1]) == ["math.sin"]  # the chunk that drops math.exp comes first in drop-ops' order
    assert outs[4] == outs[1]


def test_cache_means_no_text_is_checked_twice(tmp_path: Path):
    log = tmp_path / "seen"
    text = chain(40, keep=10)
    out, result = reduce(tmp_path, text, f'md5sum < "$1" >> {log}; grep -q math.exp "$1"')
    seen = log.read_text().splitlines()

    def md5(s: str) -> str:
        return hashlib.md5(s.encode()).hexdigest() + "  -"

    original, final = md5(text), md5(out)
    reprint = md5(MLIRWorkspace(text, irutil.PrintOptions()).canonical(irutil.PrintOptions()))
    # The original is checked twice and its re-printed form once, while the engine's
    # first candidates may already run beside them; the final program once as a
    # candidate and three times more (the final re-checks, which may start while the
    # last round is judged); the rest once each, but a speculative check cancelled
    # before it started never ran.
    stats = result.stats
    assert original != reprint != final
    assert seen.count(original) == 2 and seen.count(reprint) == 1
    # An early re-check may also have run on the final program while it was on a branch
    # that a commit then left (it is reached again later).
    assert 4 <= seen.count(final) <= 4 + stats.early_rechecks
    engine = [h for h in seen if h not in (original, reprint, final)]
    # Every oracle call ran, or was cancelled: a check cancelled as its verdict came back
    # is read if it is needed after all, not counted as a second call.
    assert stats.oracle_calls - stats.cancelled_checks <= len(engine) + 1 <= stats.oracle_calls + stats.early_rechecks
    # A cancelled check may run again when a decision needs it after all (a move that
    # was undone), and an early re-check of a program that a commit then replaced ran
    # beside that program's check; nothing else is checked twice.
    assert len(engine) - len(set(engine)) <= stats.cancelled_checks + stats.early_rechecks
    assert stats.cache_hits > 0


def test_best_so_far_is_written_at_every_improvement(tmp_path: Path):
    sizes = tmp_path / "sizes"
    out_path = tmp_path / "out-j2.mlir"
    # Read and noted under a lock: two checks may run at once, and the one that read first
    # must note first.
    note = f"[ -e {out_path} ] && wc -c < {out_path} >> {sizes}"
    check = f"flock {tmp_path / 'lock'} sh -c '{note}'; grep -q math.exp \"$1\""
    out, result = reduce(tmp_path, chain(64, keep=50), check)
    original = len(chain(64, keep=50).encode())
    seen = [int(x) for x in sizes.read_text().split()]
    # The output is not written before the first improvement (an earlier result there
    # would be lost), then it only shrinks, whatever order speculative checks ran in.
    assert original not in seen
    assert len(set(seen)) >= 3 and seen == sorted(seen, reverse=True)
    assert len(out.encode()) == result.stats.final.bytes


def test_strategy_selection(tmp_path: Path):
    out, result = reduce(tmp_path, chain(20, keep=5), 'grep -q math.exp "$1"', strategies=["split-functions"])
    assert set(result.stats.per_strategy) == {"split-functions"}
    assert len(body_ops(out)) == 20


def test_check_that_needs_the_original_spelling_falls_back_to_text(tmp_path: Path):
    """MLIR renames %v137 when it re-prints; the reducer must notice and reduce the text instead."""
    out, result = reduce(tmp_path, chain(200, keep=137), 'grep -q "%v137 = math.exp" "$1"')
    assert result.mode == "text"
    assert "%v137 = math.exp" in out
    assert len(out) < 200  # lines, blocks and tokens still cut it down to about that line


def test_committed_text_is_what_mlir_prints():
    """Commit reuses the candidate's text; it must equal a fresh print of the re-parsed module."""
    from conftest import workspace

    from reducer.core import ir as irutil
    from strategies.drop_ops import DropOps

    ws = workspace(chain(10, keep=3))
    s = DropOps()
    cand = ws.materialize(s, s.opportunities(ws.program)[:4])
    ws.commit(cand)
    assert ws.program.text == irutil.to_text(ws.program.root, ws.options)
    assert (ws.size.ops, ws.size.bytes) == (cand.size.ops, cand.size.bytes)
    assert ws.size.volume == irutil.tensor_volume(ws.program.text)  # filled in lazily on commit


def test_volume_breaks_a_tie_only_when_ops_and_bytes_are_equal():
    """Volume is computed only for ties, yet a same-size candidate with smaller shapes still wins."""
    from conftest import workspace

    from reducer.core.workspace import UNKNOWN_VOLUME

    class Rewrite:
        name = "rewrite"

        def apply(self, program, edits):
            return edits[0](program.text)

    two = "func.func @f(%a: tensor<8xf32>) -> tensor<8xf32> {\n  return %a : tensor<8xf32>\n}\n"
    ws = workspace(two + two.replace("@f", "@g"))
    tie = ws.materialize(Rewrite(), [lambda t: t.replace("8x", "1x")])
    assert tie.size.volume == 3 * 2 * 32 < ws.size.volume and tie.size.smaller_than(ws.size)
    one = ws.materialize(Rewrite(), [lambda t: t.split("func.func @g")[0] + "}"])
    assert one.size.volume == UNKNOWN_VOLUME and one.size.smaller_than(ws.size)
    ws.commit(one)
    assert ws.size.volume == 3 * 8 * 32


def test_weight_ranks_wider_types_and_dynamic_dims_above_their_simpler_forms():
    """The tie-breaker is what makes type demotion and static shapes count as progress."""
    from reducer.core.ir import tensor_volume as w

    assert w("tensor<4xf64>") > w("tensor<4xf32>") > w("tensor<4xf16>")
    assert w("tensor<?x4xf32>") > w("tensor<1x4xf32>")
    assert w("%x = arith.addf %a, %b : f64") > w("%x = arith.addf %a, %b : f32")
    assert w("complex<f32>") == 0 and w("vector<4xi8>") == 32
    assert w("tensor<f32>") == 32 > w("tensor<f16>")
    # A literal's numbers are skipped, never the types around them.
    assert (
        w(
            "util.global @g = dense<[[1.0, -2.5e+03], [0x7FC00000, 4.0]]> : tensor<2x2xf32> {a = dense<[1.0]> : tensor<1xf16>}"
        )
        == 4 * 32 + 16
    )
    assert w('%c = arith.constant dense<"0x0000803F"> : tensor<1xf32> loc(unknown)\n%y: i8') == 32 + 8


class _Replace:
    """A text move for the tests below: replace one string by another (may grow)."""

    modes = frozenset({"text"})
    shrinks, moves = False, True

    def __init__(self, name: str, pairs: list[tuple[str, str]]) -> None:
        self.name, self.pairs = name, pairs

    def opportunities(self, program):
        from reducer.core.strategy import Edit

        return [Edit("replace", (), i) for i, (old, _new) in enumerate(self.pairs) if old in program.text]

    def apply(self, program, edits):
        text = program.text
        for e in edits:
            old, new = self.pairs[e.arg]
            text = text.replace(old, new)
        return text


def _engine_run(tmp_path: Path, text: str, check: str, strategies: list, budget: int = 10):
    from reducer.core.engine import Engine
    from reducer.core.executor import LocalExecutor
    from reducer.core.oracle import ScriptOracle as Oracle
    from reducer.core.workspace import TextWorkspace

    script = make_script(tmp_path / "check.sh", check)
    written: list[str] = []
    with LocalExecutor(Oracle(str(script), "in.txt", 10.0), 2) as ex:
        ws = TextWorkspace(text)
        engine = Engine(ws, strategies, ex, lambda c: written.append(c.text), move_budget=budget)
        stats = engine.run()
    return ws, stats, written


def test_a_move_is_kept_only_when_reducing_from_it_ends_smaller(tmp_path: Path):
    """`xx` cannot go, but the move xx -> y,y,y can, and its lines reduce to `y`; the move
    xx -> xx,q is interesting too but leads nowhere, so the program comes back."""
    from strategies.text_lines import TextLines

    moves = _Replace("rewrite", [("xx", "xx\nq"), ("xx", "y\ny\ny")])
    ws, stats, written = _engine_run(tmp_path, "a\nxx\nb\n", 'grep -q -e xx -e y "$1"', [TextLines(), moves])
    assert ws.program.text == "y\n" and written[-1] == "y\n"
    assert stats.moves_kept == 1 and stats.moves_tried >= 2
    sizes = [len(t) for t in written]
    assert sizes == sorted(sizes, reverse=True)  # a trial above the best never reaches the output


def test_an_undone_move_takes_back_the_bytes_its_reductions_saved(tmp_path: Path):
    """xx -> xx,q,q is interesting, and reducing from it only removes the q lines again:
    no smaller than before the move, so the move is undone, and so are the bytes the
    summary (and the strategy order) would otherwise credit to those reductions."""
    from strategies.text_lines import TextLines

    moves = _Replace("rewrite", [("xx", "xx\nq\nq")])
    ws, stats, _ = _engine_run(tmp_path, "a\nxx\nb\n", 'grep -q xx "$1"', [TextLines(), moves])
    assert ws.program.text == "xx\n" and stats.moves_tried >= 1 and stats.moves_kept == 0
    assert stats.per_strategy["text-lines"].bytes_saved == len("a\nb\n")


def test_no_moves_when_the_budget_is_zero(tmp_path: Path):
    from strategies.text_lines import TextLines

    moves = _Replace("rewrite", [("xx", "y\ny\ny")])
    ws, stats, _ = _engine_run(tmp_path, "a\nxx\nb\n", 'grep -q -e xx -e y "$1"', [TextLines(), moves], budget=0)
    assert ws.program.text == "xx\n" and stats.moves_tried == 0
    assert stats.per_strategy["rewrite"].oracle_calls == 0  # not even speculatively


def test_a_check_cancelled_by_a_commit_is_run_again_when_a_decision_needs_it(tmp_path: Path):
    """Determinism where a cancel is involved. At the fixpoint, while the first move (to
    xx,q: interesting, but reducing from it ends no smaller) is judged, an idle worker
    checks the second (to y,y,y), slow to check; the first move's commit cancels that
    check as it runs. The first move is then undone, and the decision on the second needs
    that very text: a cancelled check is no verdict. Read as "not interesting" (from the
    engine's cache, or from the journal the session runs through), the second move would
    be dropped at -j 4 and kept at -j 1."""
    from reducer.core.cache import JournaledExecutor, VerdictJournal
    from reducer.core.engine import Engine
    from reducer.core.executor import LocalExecutor
    from reducer.core.oracle import ScriptOracle
    from reducer.core.workspace import TextWorkspace
    from strategies.text_lines import TextLines

    script = make_script(tmp_path / "check.sh", 'if grep -q y "$1"; then sleep 1; fi; grep -q -e xx -e y "$1"')
    runs = {}
    for jobs in (1, 4):
        journal = VerdictJournal(str(tmp_path / f"journal-{jobs}"))
        with LocalExecutor(ScriptOracle(str(script), "in.txt", 30.0), jobs) as inner:
            ws = TextWorkspace("a\nxx\nb\n")
            moves = _Replace("rewrite", [("xx", "xx\nq"), ("xx", "y\ny\ny")])
            stats = Engine(ws, [TextLines(), moves], JournaledExecutor(inner, journal), lambda c: None).run()
        journal.close()
        judged = sum(st.judged for st in stats.per_strategy.values())
        runs[jobs] = (ws.program.text, stats.moves_tried, stats.moves_kept, judged)
    assert runs[1][:3] == ("y\n", 2, 1)  # both moves interesting; the second kept, reduced to one y
    assert runs[4] == runs[1]  # and the decisions read as many verdicts


def test_idle_workers_check_the_moves_while_the_last_round_is_judged(tmp_path: Path):
    """The fixpoint's moves are part of what speculation runs ahead to: the move's check
    starts while the round's only candidate (deleting the line) is still being checked."""
    from strategies.text_lines import TextLines

    log = tmp_path / "log"
    stamp = "python3 -c 'import time; print(time.time())'"
    check = (
        f'echo "start $(head -c1 "$1") $({stamp})" >> {log}; sleep 0.5\n'
        f'echo "end $(head -c1 "$1") $({stamp})" >> {log}; grep -q -e xx -e y "$1"'
    )
    moves = _Replace("rewrite", [("xx", "y")])
    ws, stats, _ = _engine_run(tmp_path, "xx\n", check, [TextLines(), moves])
    assert ws.program.text == "y\n" and stats.moves_kept == 1
    runs = {}
    for line in log.read_text().splitlines():
        what, *first, when = line.split()  # the deletion's file is empty: no first character
        runs[(what, "".join(first))] = float(when)
    assert runs[("start", "y")] < runs[("end", "")]


class _SlowLines:
    """text-lines whose listing and apply each also spend `delay` seconds of main-process time."""

    modes = frozenset({"text"})
    shrinks, moves = True, False
    name = "slow-lines"

    def __init__(self, delay: float) -> None:
        from strategies.text_lines import TextLines

        self.inner, self.delay, self.applied, self.listed = TextLines(), delay, 0, 0

    def opportunities(self, program):
        import time

        self.listed += 1
        time.sleep(self.delay)
        return self.inner.opportunities(program)

    def apply(self, program, edits):
        import time

        self.applied += 1
        time.sleep(self.delay)
        return self.inner.apply(program, edits)


def test_engine_seconds_count_main_process_work_and_wait_seconds_idle_time(tmp_path: Path):
    """The engine share (engine s / wall) is what issue 13's bar is read from: it must hold
    every second the main process spends building candidates, and none spent idle while
    a check runs (the check here sleeps, the strategy sleeps in the main process)."""
    import time

    slow = _SlowLines(0.05)
    t0 = time.monotonic()
    _, stats, _ = _engine_run(tmp_path, "a\nb\nc\nd\nkeep\n", 'sleep 1; grep -q keep "$1"', [slow], budget=0)
    wall = time.monotonic() - t0
    assert slow.applied >= 4
    assert stats.engine_seconds >= 0.05 * (slow.applied + slow.listed)  # listing edits is engine work too
    # at least one check was waited for, after at most 0.5 s of speculation (SPECULATION_SLICE)
    assert stats.wait_seconds >= 0.4
    assert stats.engine_seconds + stats.wait_seconds <= wall + 0.05


def test_commits_do_not_measure_volumes_that_no_tie_needs(tmp_path: Path, monkeypatch):
    """Issue 13: scanning a megabyte for its volume at every commit was a fifth of the
    engine's time on the scale module. Ops and bytes decide each commit here, so only the
    original and the final program are scanned, and the final size still has its volume."""
    from conftest import workspace

    from reducer.core import ir as irutil
    from reducer.core.engine import Engine
    from reducer.core.executor import LocalExecutor
    from reducer.core.oracle import ScriptOracle as Oracle
    from strategies.drop_ops import DropOps

    real = irutil.tensor_volume
    scans: list[str] = []
    monkeypatch.setattr(irutil, "tensor_volume", lambda text: scans.append(text) or real(text))
    script = make_script(tmp_path / "check.sh", 'grep -q math.exp "$1"')
    with LocalExecutor(Oracle(str(script), "in.mlir", 10.0), 1) as ex:
        ws = workspace(chain(40, keep=20))
        engine = Engine(ws, [DropOps()], ex, lambda c: None, move_budget=0)
        stats = engine.run()
    assert stats.per_strategy["drop-ops"].accepts >= 2
    assert len(scans) <= 2 and stats.final.volume == real(ws.program.text) > 0
    assert engine.best is not None and engine.best.size == stats.final


def test_the_engine_hashes_each_text_once(tmp_path: Path, monkeypatch):
    """Issue 13: a megabyte candidate was hashed for its cache key, again for the
    fingerprint's record, again as the program of the fork speculation makes of it, and
    once more by the journal. A text is now hashed once, whatever asks for its key."""
    import sys
    from collections import Counter

    from conftest import workspace

    import reducer.core.cache as cache_module
    import reducer.core.engine as engine_module
    from reducer.core.cache import JournaledExecutor
    from reducer.core.executor import LocalExecutor
    from reducer.core.oracle import ScriptOracle as Oracle
    from strategies.drop_ops import DropOps
    from strategies.split_functions import SplitFunctions

    real = cache_module.key
    hashed: Counter[bytes] = Counter()
    # Every part of the engine that hashes a text, wherever the split put it.
    hashing = [
        m for name, m in sys.modules.items() if name.startswith("reducer.core") and getattr(m, "key", None) is real
    ]
    assert cache_module in hashing and len(hashing) >= 2
    for module in hashing:
        monkeypatch.setattr(module, "key", lambda data: hashed.update([data]) or real(data))
    funcs = "\n".join(
        f"func.func @f{i}(%x: tensor<4xf32>) -> tensor<4xf32> {{\n"
        f"  %0 = {'math.exp' if i == 3 else 'arith.negf'} %x : tensor<4xf32>\n  return %0 : tensor<4xf32>\n}}"
        for i in range(6)
    )
    script = make_script(tmp_path / "check.sh", 'grep -q math.exp "$1"')
    with LocalExecutor(Oracle(str(script), "in.mlir", 10.0), 2) as inner:
        ex = JournaledExecutor(inner, None)  # the session's executor: it keys verdicts for the journal
        ws = workspace(funcs + "\n")
        stats = engine_module.Engine(ws, [SplitFunctions(), DropOps()], ex, lambda c: None, move_budget=0).run()
    assert stats.per_strategy["split-functions"].accepts >= 1 and len(hashed) >= 5
    assert max(hashed.values()) == 1, [n for n in hashed.values() if n > 1]


def test_a_known_dull_candidate_is_not_built_again(tmp_path: Path, monkeypatch):
    """Issue 13: keeping one function gives the same text again after an unrelated one
    went; with split-functions' fingerprint the engine answers it from the cache without
    building it, and the output is the same as when it builds everything."""
    from strategies.split_functions import SplitFunctions

    funcs = [
        f"func.func private @f{i}(%x: tensor<4xf32>) -> tensor<4xf32> {{\n"
        f"  %0 = {'math.exp' if i == 7 else 'arith.negf'} %x : tensor<4xf32>\n  return %0 : tensor<4xf32>\n}}"
        for i in range(12)
    ]
    calls = "\n".join(f"  %r{i} = call @f{i}(%x) : (tensor<4xf32>) -> tensor<4xf32>" for i in range(12))
    text = (
        "\n".join(funcs)
        + f"\nfunc.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {{\n{calls}\n  return %r7 : tensor<4xf32>\n}}\n"
    )
    real = SplitFunctions.apply
    built: list[int] = []
    monkeypatch.setattr(SplitFunctions, "apply", lambda self, p, e: built.append(1) or real(self, p, e))
    runs = {}
    for fingerprints in (True, False):
        if not fingerprints:
            monkeypatch.setattr(SplitFunctions, "fingerprint", lambda self, p, e: None)
        built.clear()
        work = tmp_path / str(fingerprints)
        work.mkdir()
        out, result = reduce(work, text, 'grep -q math.exp "$1"', jobs=1, strategies=["split-functions"])
        runs[fingerprints] = (out, len(built), result.stats.per_strategy["split-functions"])
    assert runs[True][0] == runs[False][0]
    assert runs[True][2].judged == runs[False][2].judged  # the same decisions read the same verdicts
    assert runs[True][1] < runs[False][1]


def test_the_engine_counts_only_its_own_checks_in_its_statistics(tmp_path: Path):
    """The session checks the original on the same executor before the engine starts;
    those seconds are not the engine's (utilisation would exceed what its workers did)."""
    from reducer.core.engine import Engine
    from reducer.core.executor import LocalExecutor
    from reducer.core.oracle import ScriptOracle
    from reducer.core.workspace import TextWorkspace
    from strategies.text_lines import TextLines

    script = make_script(tmp_path / "check.sh", 'sleep 1; grep -q keep "$1"')
    with LocalExecutor(ScriptOracle(str(script), "in.txt", 10.0), 1) as ex:
        assert ex.run(b"keep\n").interesting  # the session's check of the original
        before = ex.stats.busy_seconds
        stats = Engine(TextWorkspace("keep\n"), [TextLines()], ex, lambda c: None).run()
        after = ex.stats.busy_seconds
    assert before >= 1.0 and after > before  # the original's check, then the engine's
    assert stats.busy_seconds == pytest.approx(after - before)  # the engine's alone


def test_a_verdict_that_came_back_is_never_checked_again(tmp_path: Path):
    """A speculative check that finished before the decision reached its candidate is a
    known verdict: the decision reads it, and speculation counts it as known, instead of
    submitting the same text again (which cost a check's time per decision)."""
    import sys

    from reducer.core import ir as irutil
    from reducer.core.engine import Engine
    from reducer.core.executor import LocalExecutor
    from reducer.core.oracle import ScriptOracle
    from reducer.core.workspace import MLIRWorkspace
    from reducer.session import select_strategies

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    import models  # the parallel benchmark's case: nine functions, the bug in one

    class Recording(LocalExecutor):
        def __init__(self, *args) -> None:
            super().__init__(*args)
            self.answered: set[bytes] = set()
            self.again: list[bytes] = []

        def submit(self, data: bytes, oracle=None) -> concurrent.futures.Future:
            if data in self.answered:
                self.again.append(data)
            future = super().submit(data, oracle)
            future.add_done_callback(lambda f: None if f.cancelled() else self.answered.add(data))
            return future

    script = make_script(tmp_path / "check.sh", 'sleep 0.2; grep -q math.atan2 "$1"')
    with Recording(ScriptOracle(str(script), "in.mlir", 10.0), 4) as ex:
        ws = MLIRWorkspace(models.fanout(), irutil.PrintOptions())
        Engine(ws, select_strategies("mlir", None, []), ex, lambda c: None).run()
    assert len(ex.answered) > 20 and not ex.again


def test_an_edit_that_failed_alone_is_known_as_a_repeat_in_the_next_round(tmp_path: Path):
    """The round after a commit lists the edits that failed in the round before; the
    predictor is told they repeat a failure (so speculation does not bet on them)."""
    from reducer.core.engine import Engine
    from reducer.core.executor import LocalExecutor
    from reducer.core.oracle import ScriptOracle
    from reducer.core.workspace import TextWorkspace
    from strategies.text_lines import TextLines

    script = make_script(tmp_path / "check.sh", 'grep -q keep "$1"')
    with LocalExecutor(ScriptOracle(str(script), "in.txt", 10.0), 1) as ex:
        ws = TextWorkspace("keep\na\nb\n")
        engine = Engine(ws, [TextLines()], ex, lambda c: None, move_budget=0)
        repeats: list[tuple[str, bool]] = []
        decide = engine._decide

        def recording(trial, branch):  # type: ignore[no-untyped-def]
            again = engine.speculation.failures.repeats(trial)  # as speculation sees it: before its own verdict
            verdict = decide(trial, branch)
            if trial.key is not None and again:
                repeats.append((trial.strategy.name, verdict))
            return verdict

        engine._decide = recording  # type: ignore[method-assign]
        stats = engine.run()
    assert ws.program.text == "keep\n" and stats.rounds == 2
    assert repeats == [("text-lines", False)]  # `keep` alone, failing again in round two


class _Unwrap:
    """A text strategy for the tests below: strip the outermost pair of parentheses. It is
    `exclusive`, so each commit ends its sweep (and the round)."""

    name, modes, shrinks, moves, exclusive = "unwrap", frozenset({"text"}), True, False, True

    def opportunities(self, program):
        from reducer.core.strategy import Edit

        return [Edit("unwrap", (), i) for i in range(2)] if program.text.startswith("(") else []

    def apply(self, program, edits):
        text = program.text
        return text[1 : text.rindex(")")] + text[text.rindex(")") + 1 :]


class _DeleteChars:
    """Delete single characters of a kind: the z's may go (many bytes, so it ranks first
    once tried), the x may not."""

    name, modes, shrinks, moves = "delete-chars", frozenset({"text"}), True, False

    def opportunities(self, program):
        from reducer.core.strategy import Edit

        return [Edit("char", (), i) for i, c in enumerate(program.text) if c in "zx"]

    def apply(self, program, edits):
        drop = {e.arg for e in edits}
        return "".join(c for i, c in enumerate(program.text) if i not in drop)


def _decisions(tmp_path: Path, text: str, strategies: list) -> tuple[object, object, list[tuple[str, int, int, int]]]:
    """Run the engine at -j 1; every decision read as (strategy, chunk, offset, edits listed)."""
    from reducer.core.engine import Engine
    from reducer.core.executor import LocalExecutor
    from reducer.core.oracle import ScriptOracle
    from reducer.core.workspace import TextWorkspace

    script = make_script(tmp_path / "check.sh", 'grep -q x "$1"')
    read: list[tuple[str, int, int, int]] = []
    with LocalExecutor(ScriptOracle(str(script), "in.txt", 10.0), 1) as ex:
        ws = TextWorkspace(text)
        engine = Engine(ws, strategies, ex, lambda c: None, move_budget=0)
        decide = engine._decide

        def recording(trial, branch):  # type: ignore[no-untyped-def]
            read.append((trial.strategy.name, trial.chunk, trial.offset, len(trial.edits)))
            return decide(trial, branch)

        engine._decide = recording  # type: ignore[method-assign]
        stats = engine.run()
    return ws, stats, read


def test_an_exclusive_strategy_lists_its_alternatives_afresh_after_a_commit(tmp_path: Path):
    """values-to-return's probes are alternatives placed for a fresh sweep: after a commit
    the sweep must not go on from the committed chunk's place in the new list."""
    ws, stats, read = _decisions(tmp_path, "((x))\n", [_Unwrap()])
    assert ws.program.text == "x\n"
    # Each commit starts a new round, whose sweep starts with the whole list.
    assert [(chunk, offset) for _name, chunk, offset, _n in read] == [(2, 0), (2, 0)]
    assert stats.rounds == 3


def test_a_strategy_whose_sweep_failed_rests_until_the_others_stop(tmp_path: Path):
    """After its commit, delete-chars fails in every round (only the x is left to it)
    while unwrap commits a round at a time: it is checked again once unwrap is done, not
    in every round, and the result is the same."""
    text = "(((((" + "z" * 40 + "x)))))\n"
    ws, stats, read = _decisions(tmp_path, text, [_DeleteChars(), _Unwrap()])
    assert ws.program.text == "x\n"
    tries_of_x = [name for name, _c, _o, n in read if name == "delete-chars" and n == 1]
    # The end of its first sweep, the round after (unwrap, untried, went first), and the
    # round of all strategies once unwrap found nothing; not once per unwrap.
    assert len(tries_of_x) == 3
    assert [name for name, *_ in read].count("unwrap") == 5


class _DeleteX:
    """Delete the x: never interesting under the `grep x` check (a strategy late in the
    registry that only costs checks)."""

    name, modes, shrinks, moves = "delete-x", frozenset({"text"}), True, False

    def opportunities(self, program):
        from reducer.core.strategy import Edit

        return [Edit("x", (), i) for i, c in enumerate(program.text) if c == "x"]

    def apply(self, program, edits):
        return program.text.replace("x", "")


def test_a_strategy_last_swept_on_a_program_twice_the_size_counts_as_untried(tmp_path: Path):
    """unwrap commits on the 46-byte text; delete-chars then cuts it to 6 bytes. unwrap's
    numbers come from a program eight times larger, so the next round ranks it with the
    untried strategies, in registry order: before delete-x, which would otherwise go first
    for never having been tried (values-to-return before the strategies after drop-ops)."""
    text = "((" + "z" * 40 + "x))\n"
    ws, _stats, read = _decisions(tmp_path, text, [_Unwrap(), _DeleteChars(), _DeleteX()])
    assert ws.program.text == "x\n"
    order = [name for name, *_ in read]
    unwraps = [i for i, name in enumerate(order) if name == "unwrap"]
    assert order[unwraps[1] - 1] == "delete-chars"  # right after delete-chars' sweep
    assert unwraps[1] < order.index("delete-x")


def test_only_a_sweep_on_a_much_larger_program_makes_a_strategy_stale():
    """The rank itself: untried first in registry order, a strategy swept on a program
    STALE_FACTOR times larger among them, the others by bytes saved per verdict."""
    from reducer.core.engine import STALE_FACTOR, Engine
    from reducer.core.executor import LocalExecutor
    from reducer.core.oracle import ScriptOracle
    from reducer.core.workspace import TextWorkspace

    with LocalExecutor(ScriptOracle("/bin/true", "in.txt", 10.0), 1) as ex:
        ws = TextWorkspace("zzzzx\n")
        engine = Engine(ws, [_Unwrap(), _DeleteChars(), _DeleteX()], ex, lambda c: None)
        engine.stats.per_strategy["unwrap"].judged = 1
        engine.stats.per_strategy["unwrap"].bytes_saved = 2
        engine.stats.per_strategy["delete-chars"].judged = 1
        engine.stats.per_strategy["delete-chars"].bytes_saved = 5
        now = ws.size_known().bytes
        engine._swept_at = {"unwrap": STALE_FACTOR * now - 1, "delete-chars": now}
        assert [s.name for s in engine._ordered()] == ["delete-x", "delete-chars", "unwrap"]
        engine._swept_at["unwrap"] = STALE_FACTOR * now
        assert [s.name for s in engine._ordered()] == ["unwrap", "delete-x", "delete-chars"]


def test_a_stale_strategy_that_never_cut_an_op_comes_after_the_untried_ones():
    """Where ops are counted, a stale strategy that only ever shortened text (literals,
    types) waits for the untried ones: each op they remove changes that text again."""
    from reducer.core.engine import STALE_FACTOR, Engine
    from reducer.core.executor import LocalExecutor
    from reducer.core.oracle import ScriptOracle
    from reducer.core.workspace import Size, TextWorkspace

    with LocalExecutor(ScriptOracle("/bin/true", "in.txt", 10.0), 1) as ex:
        engine = Engine(TextWorkspace("zx\n"), [_Unwrap(), _DeleteChars(), _DeleteX()], ex, lambda c: None)
        unwrap = engine.stats.per_strategy["unwrap"]
        unwrap.judged, unwrap.bytes_saved = 1, 40
        engine._swept_at = {"unwrap": STALE_FACTOR * 10}
        assert [s.name for s in engine._ordered(size=Size(10, 300))] == ["delete-chars", "delete-x", "unwrap"]
        unwrap.ops_saved = 1
        assert [s.name for s in engine._ordered(size=Size(10, 300))] == ["unwrap", "delete-chars", "delete-x"]


def test_speculation_expects_a_round_of_all_after_one_that_left_some_to_rest():
    """The plan a round makes (every trial failing) goes on with the round of all
    strategies that `_fixpoint` runs next, not with the moves: speculation would check
    moves and start the final re-checks of a program that is not final yet."""
    from reducer.core.engine import Engine
    from reducer.core.executor import LocalExecutor
    from reducer.core.oracle import ScriptOracle
    from reducer.core.workspace import TextWorkspace

    with LocalExecutor(ScriptOracle("/bin/true", "in.txt", 10.0), 1) as ex:
        ws = TextWorkspace("((zx))\n")
        engine = Engine(ws, [_DeleteChars(), _Unwrap()], ex, lambda c: None)
        engine._resting = {"delete-chars"}
        trials = list(engine._plan(ws, engine._ordered(), 0))
    names = [(t.strategy.name, t.next_round) for t in trials]
    assert names[0] == ("unwrap", False)
    assert ("delete-chars", True) in names  # the round of all, after unwrap's sweep
    assert names.index(("delete-chars", True)) < next(i for i, (n, nr) in enumerate(names) if n == "unwrap" and nr)


def test_a_verdict_that_came_back_before_a_commit_read_it_is_kept():
    """A commit cancels the checks no decision can read any more; one that already came
    back (between the last wait and the commit) has its verdict kept in the cache, not
    thrown away, or a later decision on the same text would check it again."""
    from reducer.core.engine import Engine
    from reducer.core.oracle import Verdict
    from reducer.core.trials import Branch
    from reducer.core.workspace import TextWorkspace
    from strategies.text_lines import TextLines

    ex = _NoChecks()
    engine = Engine(TextWorkspace("a\nb\n"), [TextLines()], ex, lambda c: None)
    came_back, running = concurrent.futures.Future(), concurrent.futures.Future()
    came_back.set_result(Verdict(False, 1))
    engine.checks.inflight = {b"came back": came_back, b"running": running}
    engine._cancel(Branch(engine.ws, iter(()), 1.0))
    assert engine.cache.get(b"came back") is False and engine.cache.get(b"running") is None
    assert ex.cancelled == [running] and not engine.checks.inflight


def test_a_check_cancelled_as_it_finished_is_read_when_needed_not_checked_again():
    """A commit may cancel a check whose verdict is on its way back (the executor had
    finished it): the cancel cannot stop it, and if a later decision needs that text
    after all, the verdict is read from the check that ran, not paid for again."""
    from reducer.core.engine import Engine
    from reducer.core.oracle import Verdict
    from reducer.core.trials import Branch, Trial
    from reducer.core.workspace import Candidate, Size, TextWorkspace
    from strategies.text_lines import TextLines

    engine = Engine(TextWorkspace("a\nb\n"), [TextLines()], _NoChecks(), lambda c: None)
    finishing: concurrent.futures.Future = concurrent.futures.Future()
    engine.checks.inflight = {b"finishing": finishing}
    engine._cancel(Branch(engine.ws, iter(()), 1.0))
    assert not engine.checks.inflight
    finishing.set_result(Verdict(True, 0))
    trial = Trial(TextLines(), 0, [], 0, 1, candidate=Candidate("a\n", Size(1, 2), "text-lines"), key=b"finishing")
    engine.checks.submit(trial)
    assert engine.checks.inflight == {b"finishing": finishing} and engine.stats.oracle_calls == 0
    engine.checks.wait()
    assert engine.cache.get(b"finishing") is True
    # A final re-check that finished as it was cancelled is no cancelled check either.
    engine.confirms.started = {b"program": [concurrent.futures.Future()]}
    engine.confirms.stop(keep=set())
    engine._account()
    assert engine.stats.cancelled_checks == 0
