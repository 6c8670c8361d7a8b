"""How far speculation can take N workers, in virtual time (issue 11).

    python benchmarks/speculation.py [--jobs 1,2,4,8,16] [--cost 0.005]

`parallel.py` measures the whole command with a real 1 s check, so its rows carry noise
and the fixed costs around the engine (start-up, the original's checks, the final
re-checks). This runs only the engine on the same case (`models.fanout()`, the check
"math.atan2 is still there") with a simulated executor: every check takes exactly 1
virtual second, and materialising a candidate costs `--cost` virtual seconds of the main
process. So each row is exact and repeatable, and two predictors are compared:

* **learnt**: the engine as it is (`reducer/core/predictor.py`);
* **hint**: told only which side of even odds each candidate is on (0.6 if it is
  interesting, 0.4 if not): how far a predictor that is merely never on the wrong side
  would take the same engine;
* **perfect**: told whether each candidate is interesting: the bound any predictor can
  reach with the llvm-reduce rule and this engine's look-ahead (it asks the predictor
  only about candidates it has built) with that many workers.

Results go to benchmarks/results/speculation.json with the commit measured.
"""

from __future__ import annotations

import concurrent.futures
import json
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import models  # noqa: E402
from measured import commit  # noqa: E402

from reducer import session  # noqa: E402
from reducer.core import engine as engine_module  # noqa: E402
from reducer.core import ir as irutil  # noqa: E402
from reducer.core.executor import Executor, ExecutorStats  # noqa: E402
from reducer.core.oracle import Oracle, Verdict  # noqa: E402
from reducer.core.predictor import SuccessModel  # noqa: E402
from reducer.core.workspace import MLIRWorkspace  # noqa: E402

CHECK_SECONDS = 1.0


class VirtualExecutor(Executor):
    """`workers` checks at a time, each finishing CHECK_SECONDS of virtual time after it
    starts; `wait` jumps the clock to the next finish."""

    def __init__(self, workers: int, interesting: Callable[[bytes], bool]) -> None:
        self.workers, self.stats, self.interesting = workers, ExecutorStats(), interesting
        self.now = 0.0
        self._queue: list[concurrent.futures.Future[Verdict]] = []
        self._running: dict[concurrent.futures.Future[Verdict], float] = {}
        self._data: dict[concurrent.futures.Future[Verdict], bytes] = {}

    def submit(self, data: bytes, oracle: Oracle | None = None) -> concurrent.futures.Future[Verdict]:
        future: concurrent.futures.Future[Verdict] = concurrent.futures.Future()
        self._data[future] = data
        self.stats.checks += 1
        self._queue.append(future)
        self._start()
        return future

    def _start(self) -> None:
        while self._queue and len(self._running) < self.workers:
            self._running[self._queue.pop(0)] = self.now + CHECK_SECONDS

    def cancel(self, future: concurrent.futures.Future[Verdict]) -> None:
        if future in self._queue:
            self._queue.remove(future)
        self._running.pop(future, None)
        future.cancel()
        self.stats.cancelled += 1
        self._start()

    def close(self, abort: bool = False) -> None:
        pass

    def wait(self, futures: list[concurrent.futures.Future[Verdict]], return_when: Any = None) -> tuple[set, set]:
        if not any(f.done() for f in futures):
            self.now = min(self._running[f] for f in futures if f in self._running)
            for future, end in list(self._running.items()):
                if end <= self.now:
                    del self._running[future]
                    self.stats.busy_seconds += CHECK_SECONDS
                    future.set_result(Verdict(self.interesting(self._data[future]), 0, seconds=CHECK_SECONDS))
            self._start()
        return {f for f in futures if f.done()}, {f for f in futures if not f.done()}


#: What the told predictors say of an interesting candidate (and 1 minus it of the others).
TOLD = {"hint": 0.6, "perfect": 0.999}


def simulate(workers: int, cost: float, predictor: str) -> dict[str, Any]:
    """One engine run on the fanout case, in virtual time."""

    def interesting(data: bytes) -> bool:
        return b"math.atan2" in data

    ex = VirtualExecutor(workers, interesting)
    ws = MLIRWorkspace(models.fanout(), irutil.PrintOptions(), verify=True)
    eng = engine_module.Engine(ws, session.select_strategies("mlir", None, []), ex, lambda c: None)
    real_materialize = MLIRWorkspace.materialize

    def materialize(*args: Any, **kwargs: Any) -> Any:  # on the workspace and on its forks
        ex.now += cost
        return real_materialize(*args, **kwargs)

    saved = engine_module.time, engine_module.concurrent
    engine_module.time = types.SimpleNamespace(monotonic=lambda: ex.now)  # type: ignore[assignment]
    engine_module.concurrent = types.SimpleNamespace(  # type: ignore[assignment]
        futures=types.SimpleNamespace(wait=ex.wait, FIRST_COMPLETED=None, Future=concurrent.futures.Future)
    )
    MLIRWorkspace.materialize = materialize  # type: ignore[method-assign]
    sides = [0, 0]  # decisions the learnt model put on the right side of even odds, decisions

    class Scored(SuccessModel):
        def record(self, strategy: str, chunk: int, after: bool, success: bool, again: bool = False) -> None:
            sides[0] += (self.p(strategy, chunk, after, again) >= 0.5) == success
            sides[1] += 1
            super().record(strategy, chunk, after, success, again)

    eng._model = Scored()
    if predictor in TOLD:
        told = TOLD[predictor]
        eng._likelihood = lambda trial, *_: told if interesting(trial.candidate.data) else 1 - told  # type: ignore[method-assign]
    try:
        stats = eng.run()
    finally:
        engine_module.time, engine_module.concurrent = saved
        MLIRWorkspace.materialize = real_materialize  # type: ignore[method-assign]
    return {
        "workers": workers,
        "predictor": predictor,
        "virtual_seconds": round(ex.now, 2),
        "checks": stats.oracle_calls,
        "wasted": stats.wasted_checks,
        "right_side": f"{sides[0]}/{sides[1]}",  # of the learnt model, whichever predictor steered
        "output": ws.program.text,
    }


@click.command()
@click.option("--jobs", default="1,2,4,8,16", show_default=True, help="Worker counts, comma-separated.")
@click.option("--cost", default=0.005, show_default=True, help="Virtual seconds of main-process work per candidate.")
@click.option("--save/--no-save", default=True, show_default=True, help="Write results/speculation.json.")
def main(jobs: str, cost: float, save: bool) -> None:
    rows = []
    click.echo(f"commit {commit()}; check {CHECK_SECONDS:g} s (virtual); materialising {cost:g} s each\n")
    click.echo(
        "| workers | predictor | virtual s | vs 1 worker | checks | wasted | learnt on the right side | same output |"
    )
    click.echo("|---:|---|---:|---:|---:|---:|---:|---|")
    base: dict[str, Any] | None = None
    for predictor in ("learnt", *TOLD):
        for n in [int(j) for j in jobs.split(",")]:
            row = simulate(n, cost, predictor)
            base = base or row
            same = row["output"] == base["output"]
            row["same_output"] = same
            rows.append({k: v for k, v in row.items() if k != "output"})
            click.echo(
                f"| {n} | {row['predictor']} | {row['virtual_seconds']:.1f} | "
                f"{row['virtual_seconds'] / base['virtual_seconds']:.2f}x | {row['checks']} | {row['wasted']} | "
                f"{row['right_side']} | "
                f"{'yes' if same else 'NO'} |"
            )
    if save:
        path = HERE / "results" / "speculation.json"
        path.write_text(json.dumps({"commit": commit(), "cost": cost, "rows": rows}, indent=1) + "\n")
        click.echo(f"\nwritten to {path.relative_to(HERE.parent)}")


if __name__ == "__main__":
    main()
