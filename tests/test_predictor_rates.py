"""Speculation's odds learn each strategy's success rate in the run (issue 31): a strategy
whose candidates keep failing stops being bet on, one that keeps succeeding is bet on
more, and a candidate that repeats a failure keeps its own low odds."""

from __future__ import annotations

from pathlib import Path

from conftest import make_script

from reducer.core import predictor
from reducer.core.engine import Engine
from reducer.core.executor import LocalExecutor
from reducer.core.oracle import ScriptOracle
from reducer.core.trials import Trial
from reducer.core.workspace import TextWorkspace
from strategies.text_lines import TextLines


def _trial(name: str, edits: int = 4, offset: int = 0, chunk: int = 1, verdict: bool | None = None) -> Trial:
    strategy = type(name, (), {"name": name})()
    trial = Trial(strategy, 0, list(range(edits)), offset, chunk, key=b"k", verdict=verdict)  # type: ignore[arg-type]
    trial.lineage = tuple(range(edits))
    return trial


def test_odds_start_at_fresh_and_follow_each_strategys_own_verdicts():
    rates = predictor.Rates()
    assert rates.odds(_trial("a")) == predictor.FRESH
    for _ in range(12):
        rates.record(_trial("fails"), False)
        rates.record(_trial("cuts"), True)
    assert rates.odds(_trial("fails")) < 0.3 < predictor.FRESH < rates.odds(_trial("cuts"))
    assert rates.odds(_trial("untouched")) == predictor.FRESH  # one strategy's verdicts say nothing of another's


def test_the_prior_weighs_as_many_verdicts_as_it_says():
    rates = predictor.Rates()
    for _ in range(predictor.PRIOR_WEIGHT):
        rates.record(_trial("s"), False)
    assert abs(rates.odds(_trial("s")) - predictor.FRESH / 2) < 1e-9


def _engine(tmp_path: Path, text: str) -> Engine:
    script = make_script(tmp_path / "check.sh", 'grep -q keep "$1"')
    ex = LocalExecutor(ScriptOracle(str(script), "in.txt", 10.0), 1)
    return Engine(TextWorkspace(text), [TextLines()], ex, lambda c: None, move_budget=0)


def test_the_decisions_teach_the_rates_fresh_verdicts_only(tmp_path: Path):
    """Every verdict a decision reads reaches the rates, except those of candidates that
    repeat a failure (they have odds of their own, AGAIN)."""
    engine = _engine(tmp_path, "a\nb\nkeep\nc\nd\ne\nf\ng\n")
    fresh: list[bool] = []
    again: list[bool] = []
    decide = engine._decide

    def recording(trial, branch):  # type: ignore[no-untyped-def]
        repeat = engine.speculation.failures.repeats(trial)
        verdict = decide(trial, branch)
        if trial.key is not None:
            (again if repeat else fresh).append(verdict)
        return verdict

    engine._decide = recording  # type: ignore[method-assign]
    with engine.executor:
        engine.run()
    assert fresh and again  # both kinds were read
    assert engine.speculation.rates.read == {"text-lines": [len(fresh), sum(fresh)]}
    assert sum(fresh) < len(fresh)  # some failed: the rate is not just a count of successes


def test_speculation_bets_on_a_strategy_by_its_rate(tmp_path: Path):
    """The odds speculation gives a fresh candidate are its strategy's learnt rate; a
    repeat of a failure stays at AGAIN whatever the rate."""
    engine = _engine(tmp_path, "keep\n")
    spec = engine.speculation
    for _ in range(20):
        spec.read(_trial("text-lines", verdict=True, offset=0))
    fresh = _trial("text-lines", offset=1)
    assert spec.likelihood(fresh) > predictor.FRESH
    failed = _trial("text-lines", offset=2, verdict=False)
    spec.read(failed)
    assert spec.likelihood(_trial("text-lines", offset=2)) == predictor.AGAIN
    engine.executor.close()
