"""How far speculation can take N workers, in virtual time (issue 11).

    python benchmarks/speculation.py [--jobs 1,2,4,8,16] [--predictors engine,hint,perfect] [--cost 0.005]

`parallel.py` measures the whole command with a real 1 s check, so its rows carry noise
and the fixed costs around the engine (start-up, the original's checks). This runs only
the engine and the final re-checks (those the engine started while the last round was
judged, then the rest at once, as the session does), with a simulated executor: every check takes
exactly 1 virtual second, and materialising a candidate costs `--cost` virtual seconds of
the main process. So each row is exact and repeatable. Five cases, each with the check
"the marker op is still there": `parallel.py`'s case (`models.fanout()`, math.atan2 in
one of 8 callees) and two with the bug elsewhere, a 4-layer transformer with an f6E2M3FN
multiply, and the 1000-op scale module (math.cbrt deep in its call graph).

Predictors (what `Speculation.likelihood` says of a candidate):
* **engine**: as it is (`reducer/core/predictor.py`);
* **flat:P**: P for every candidate (e.g. `flat:0.5`), to weigh the engine's odds against;
* **hint**: told only which side of even odds each candidate is on (0.6 if it is
  interesting, 0.4 if not);
* **perfect**: told whether each candidate is interesting: the bound any predictor can
  reach with the llvm-reduce rule and this engine's look-ahead (it asks the predictor
  only about candidates it has built) with that many workers.

Each cell is the time against one worker with the same predictor (the one-worker run
does not depend on it); the last column is their geometric mean. Results go to
benchmarks/results/speculation.json with the commit measured.
"""

from __future__ import annotations

import concurrent.futures
import json
import statistics
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
from reducer.core import checks as checks_module  # noqa: E402
from reducer.core import engine as engine_module  # noqa: E402
from reducer.core import ir as irutil  # noqa: E402
from reducer.core import speculation as speculation_module  # noqa: E402
from reducer.core.executor import Executor, ExecutorStats  # noqa: E402
from reducer.core.oracle import Oracle, Verdict  # noqa: E402
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


def cases() -> list[tuple[str, str, bytes]]:
    """(name, program, marker): the check is "marker is still in the candidate"."""
    return [
        ("fanout", models.fanout(), b"math.atan2"),
        ("fanout 1/3", models.fanout(bug_callee=1, bug_op=3), b"math.atan2"),
        ("fanout 7/37", models.fanout(bug_callee=7, bug_op=37), b"math.atan2"),
        ("transformer", models.transformer(layers=4, bug="f6"), b"f6E2M3FN"),
        ("scale 1000", models.scale_module(1000), b"math.cbrt"),
    ]


def simulate(workers: int, cost: float, predictor: str, text: str, marker: bytes) -> dict[str, Any]:
    """One engine run in virtual time."""

    def interesting(data: bytes) -> bool:
        return marker in data

    ex = VirtualExecutor(workers, interesting)
    ws = MLIRWorkspace(text, irutil.PrintOptions(), verify=True)
    eng = engine_module.Engine(
        ws, session.select_strategies("mlir", None, []), ex, lambda c: None, confirm=session.FINAL_CONFIRM
    )
    real_materialize = MLIRWorkspace.materialize

    def materialize(*args: Any, **kwargs: Any) -> Any:  # on the workspace and on its forks
        ex.now += cost
        return real_materialize(*args, **kwargs)

    # The engine's parts that read the clock or wait on checks run in virtual time.
    clocked = [engine_module, checks_module, speculation_module]
    saved = [(m.time, m.__dict__.get("concurrent")) for m in clocked]
    for module in clocked:
        module.time = types.SimpleNamespace(monotonic=lambda: ex.now)  # type: ignore[attr-defined]
        if "concurrent" in module.__dict__:
            module.concurrent = types.SimpleNamespace(  # type: ignore[attr-defined]
                futures=types.SimpleNamespace(wait=ex.wait, FIRST_COMPLETED=None, Future=concurrent.futures.Future)
            )
    MLIRWorkspace.materialize = materialize  # type: ignore[method-assign]
    if predictor in TOLD:
        told = TOLD[predictor]
        eng.speculation.likelihood = lambda trial: told if interesting(trial.candidate.data) else 1 - told  # type: ignore[method-assign]
    elif predictor.startswith("flat:"):
        flat = float(predictor.split(":", 1)[1])
        eng.speculation.likelihood = lambda trial: flat  # type: ignore[method-assign]
    elif predictor != "engine":
        raise click.BadParameter(f"unknown predictor {predictor!r}", param_hint="--predictors")
    try:
        stats = eng.run()
        # The session's final re-checks: those the engine started, then the rest at once.
        data = ws.program.text.encode()
        rechecks = eng.confirmations(data)
        rechecks += [ex.submit(data) for _ in range(session.FINAL_CONFIRM - len(rechecks))]
        while not all(f.done() for f in rechecks):
            ex.wait([f for f in rechecks if not f.done()])
    finally:
        for module, (clock, futures) in zip(clocked, saved):
            module.time = clock  # type: ignore[attr-defined]
            if futures is not None:
                module.concurrent = futures  # type: ignore[attr-defined]
        MLIRWorkspace.materialize = real_materialize  # type: ignore[method-assign]
    return {
        "workers": workers,
        "predictor": predictor,
        "virtual_seconds": round(ex.now, 2),
        "checks": stats.oracle_calls,
        "wasted": stats.wasted_checks,
        "output": ws.program.text,
    }


@click.command()
@click.option(
    "--jobs", default="1,2,4,8,16", show_default=True, help="Worker counts, comma-separated (1 is always run)."
)
@click.option("--predictors", default="engine,hint,perfect", show_default=True, help="engine, hint, perfect or flat:P.")
@click.option("--cost", default=0.005, show_default=True, help="Virtual seconds of main-process work per candidate.")
@click.option("--save/--no-save", default=True, show_default=True, help="Write results/speculation.json.")
def main(jobs: str, predictors: str, cost: float, save: bool) -> None:
    workers = sorted({int(j) for j in jobs.split(",")} - {1})
    todo = cases()
    click.echo(f"commit {commit()}; check {CHECK_SECONDS:g} s (virtual); materialising {cost:g} s each")
    click.echo(
        "time against one worker; one worker: "
        + ", ".join(
            f"{name} {simulate(1, cost, 'engine', text, marker)['virtual_seconds']:.1f} s"
            for name, text, marker in todo
        )
        + "\n"
    )
    click.echo(
        "| predictor | workers | " + " | ".join(name for name, _, _ in todo) + " | geometric mean | same output |"
    )
    click.echo("|---|---:|" + "---:|" * len(todo) + "---:|---|")
    rows = []
    for predictor in predictors.split(","):
        base = [simulate(1, cost, predictor, text, marker) for _, text, marker in todo]
        for n in workers:
            ratios, same = [], True
            for (name, text, marker), one in zip(todo, base):
                row = simulate(n, cost, predictor, text, marker)
                ratios.append(row["virtual_seconds"] / one["virtual_seconds"])
                same = same and row["output"] == one["output"]
                rows.append(
                    {
                        "case": name,
                        **{k: v for k, v in row.items() if k != "output"},
                        "vs_one_worker": round(ratios[-1], 3),
                        "one_worker_seconds": one["virtual_seconds"],
                        "same_output": row["output"] == one["output"],
                    }
                )
            click.echo(
                f"| {predictor} | {n} | "
                + " | ".join(f"{r:.2f}x" for r in ratios)
                + f" | **{statistics.geometric_mean(ratios):.2f}x** | {'yes' if same else 'NO'} |"
            )
    if save:
        path = HERE / "results" / "speculation.json"
        path.write_text(json.dumps({"commit": commit(), "cost": cost, "rows": rows}, indent=1) + "\n")
        click.echo(f"\nwritten to {path.relative_to(HERE.parent)}")


if __name__ == "__main__":
    main()
