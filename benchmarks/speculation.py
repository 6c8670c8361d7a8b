"""How far speculation can take N workers, in virtual time (issue 11).

    python benchmarks/speculation.py [--jobs 1,2,4,8,16] [--predictors engine,hint,perfect] [--cost 0.005]
                                     [--corpus chain-unary,xf-f6,...] [--results speculation.json]

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
* **engine**: as it is (`reducer/core/predictor.py`: per strategy, learnt in the run);
* **fixed**: the engine's odds before issue 31 (0.1 for a repeated failure, else 0.7);
* **probdd:E**: ProbDD's per-edit probabilities (`ProbDD` below), E edits expected needed
  per list (default 0.5);
* **flat:P**: P for every candidate (e.g. `flat:0.5`), to weigh the engine's odds against;
* **hint**: told only which side of even odds each candidate is on (0.6 if it is
  interesting, 0.4 if not);
* **perfect**: told whether each candidate is interesting: the bound any predictor can
  reach with the llvm-reduce rule and this engine's look-ahead (it asks the predictor
  only about candidates it has built) with that many workers.

`--corpus a,b` adds cases of the benchmark corpus (`benchmarks/cases.py`) with their own
checks, which compile: each text's verdict is recorded in `results/verdicts/CASE.json`
the first time, and replayed after that (`Recorded`), so the corpus rows are exact and
repeatable too, and need the compiler only for a text no run has checked before.

Each cell is the time against one worker with the same predictor (the one-worker run
does not depend on it); the last column is their geometric mean. Results go to
benchmarks/results/speculation.json with the commit measured.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
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
from reducer.core import predictor as predictor_module  # noqa: E402
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


class ProbDD:
    """ProbDD's model (Wang et al., FSE 2021), per edit: each edit is needed with a
    probability, `expected / n` at first for a list of n edits; a chunk succeeds if none
    of its edits is needed; a failed chunk raises its edits' probabilities by Bayes' rule
    (p / (1 - prod(1 - p)) over the chunk). Edits are followed through a sweep's commits
    by lineage (`trials.Lineages`); a candidate that repeats a failure keeps the engine's
    low odds. Installed on a `Speculation` in place of its own odds."""

    def __init__(self, speculation: Any, expected: float) -> None:
        self.speculation, self.expected = speculation, expected
        self.needed: dict[int, float] = {}
        read = speculation.read
        speculation.likelihood = self.likelihood

        def reading(trial: Any) -> None:
            if not trial.verdict:
                self.failed(trial)
            read(trial)

        speculation.read = reading

    def _chunk(self, trial: Any) -> tuple[list[int], float]:
        prior = min(0.5, self.expected / max(len(trial.lineage), 1))
        return list(trial.lineage[trial.offset : trial.offset + trial.chunk]), prior

    def likelihood(self, trial: Any) -> float:
        if not trial.lineage or self.speculation.failures.repeats(trial):
            return predictor_module.odds(self.speculation.failures.repeats(trial))
        chunk, prior = self._chunk(trial)
        none = 1.0
        for edit in chunk:
            none *= 1.0 - self.needed.get(edit, prior)
        return min(0.95, max(0.05, none))

    def failed(self, trial: Any) -> None:
        if not trial.lineage:
            return
        chunk, prior = self._chunk(trial)
        none = 1.0
        for edit in chunk:
            none *= 1.0 - self.needed.get(edit, prior)
        for edit in chunk:
            self.needed[edit] = min(1.0, self.needed.get(edit, prior) / max(1.0 - none, 1e-6))


#: What the told predictors say of an interesting candidate (and 1 minus it of the others).
TOLD = {"hint": 0.6, "perfect": 0.999}


def _marker(marker: bytes) -> Callable[[bytes], bool]:
    return lambda data: marker in data


def cases() -> list[tuple[str, str, Callable[[bytes], bool]]]:
    """(name, program, interesting): the check is "marker is still in the candidate"."""
    return [
        ("fanout", models.fanout(), _marker(b"math.atan2")),
        ("fanout 1/3", models.fanout(bug_callee=1, bug_op=3), _marker(b"math.atan2")),
        ("fanout 7/37", models.fanout(bug_callee=7, bug_op=37), _marker(b"math.atan2")),
        ("transformer", models.transformer(layers=4, bug="f6"), _marker(b"f6E2M3FN")),
        ("scale 1000", models.scale_module(1000), _marker(b"math.cbrt")),
    ]


VERDICTS = HERE / "results" / "verdicts"


class Recorded:
    """A corpus case's check, answered from its recorded verdicts (sha256 of the
    candidate -> interesting), and run for real only on a text never recorded (the
    verdict is then added to the record). With the record committed, the corpus rows
    replay without the compiler, the same every time."""

    def __init__(self, case: Any) -> None:
        self.case = case
        self.path = VERDICTS / f"{case.name}.json"
        self.verdicts: dict[str, bool] = json.loads(self.path.read_text()) if self.path.exists() else {}
        self.ran = 0

    def __call__(self, data: bytes) -> bool:
        key = hashlib.sha256(data).hexdigest()
        if key not in self.verdicts:
            with tempfile.TemporaryDirectory(prefix="speculation-") as d:
                path = os.path.join(d, "input.mlir")
                with open(path, "wb") as f:
                    f.write(data)
                done = subprocess.run(["sh", "-c", self.case.check, "check", path], cwd=d, capture_output=True)
            self.verdicts[key] = done.returncode == 0
            self.ran += 1
        return self.verdicts[key]

    def save(self) -> None:
        if self.ran:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_text(json.dumps(dict(sorted(self.verdicts.items())), indent=0) + "\n")


def corpus(names: str) -> list[tuple[str, str, Callable[[bytes], bool]]]:
    """Cases of the benchmark corpus (benchmarks/cases.py), by name, with recorded verdicts."""
    from cases import BY_NAME

    return [(name, BY_NAME[name].make(), Recorded(BY_NAME[name])) for name in names.split(",") if name]


def simulate(
    workers: int, cost: float, predictor: str, text: str, interesting: Callable[[bytes], bool]
) -> dict[str, Any]:
    """One engine run in virtual time."""
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
    elif predictor == "fixed":
        failures = eng.speculation.failures
        eng.speculation.likelihood = lambda trial: predictor_module.odds(failures.repeats(trial))  # type: ignore[method-assign]
    elif predictor.startswith("probdd"):
        ProbDD(eng.speculation, float(predictor.partition(":")[2] or 0.5))
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
@click.option(
    "--predictors",
    default="engine,hint,perfect",
    show_default=True,
    help="engine, fixed, probdd[:E], hint, perfect or flat:P.",
)
@click.option("--cost", default=0.005, show_default=True, help="Virtual seconds of main-process work per candidate.")
@click.option(
    "--corpus",
    "corpus_names",
    default="",
    help="Also corpus cases (benchmarks/cases.py names, comma-separated), with verdicts recorded in "
    "results/verdicts/ (a text never recorded is checked for real, which needs the case's tools).",
)
@click.option("--synthetic/--no-synthetic", default=True, show_default=True, help="The five generated cases.")
@click.option("--save/--no-save", default=True, show_default=True, help="Write the results file.")
@click.option("--results", default="speculation.json", show_default=True, help="Its name in results/.")
def main(jobs: str, predictors: str, cost: float, corpus_names: str, synthetic: bool, save: bool, results: str) -> None:
    workers = sorted({int(j) for j in jobs.split(",")} - {1})
    todo = (cases() if synthetic else []) + corpus(corpus_names)
    click.echo(f"commit {commit()}; check {CHECK_SECONDS:g} s (virtual); materialising {cost:g} s each")
    click.echo(
        "time against one worker; one worker: "
        + ", ".join(
            f"{name} {simulate(1, cost, 'engine', text, interesting)['virtual_seconds']:.1f} s"
            for name, text, interesting in todo
        )
        + "\n"
    )
    click.echo(
        "| predictor | workers | " + " | ".join(name for name, _, _ in todo) + " | geometric mean | same output |"
    )
    click.echo("|---|---:|" + "---:|" * len(todo) + "---:|---|")
    rows = []
    for predictor in predictors.split(","):
        base = [simulate(1, cost, predictor, text, interesting) for _, text, interesting in todo]
        for n in workers:
            ratios, same = [], True
            for (name, text, interesting), one in zip(todo, base):
                row = simulate(n, cost, predictor, text, interesting)
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
    for _, _, interesting in todo:
        if isinstance(interesting, Recorded):
            interesting.save()
    if save:
        path = HERE / "results" / results
        path.write_text(json.dumps({"commit": commit(), "cost": cost, "rows": rows}, indent=1) + "\n")
        click.echo(f"\nwritten to {path.relative_to(HERE.parent)}")


if __name__ == "__main__":
    main()
