"""How fast does the size go, and not only where does it end? (issue 31)

    python benchmarks/trajectory.py run [--cases a,b] [--label L] [--cap 300] [-j 2]
    python benchmarks/trajectory.py table [--base baseline] [--labels a,b]
    python benchmarks/trajectory.py plot [--out benchmarks/results/trajectory.svg]

`run` reduces every case of the corpus (`benchmarks/cases.py`) with ireereduce at -j 2
under run.py's conditions (a fresh copy, the case's check behind a call counter, the same
cap with a Ctrl-C at it, the output re-checked), with --stats-json, and keeps one row per
(case, label) in benchmarks/results/trajectory.json: oracle calls, the final size, wall
seconds, the time and the checks to reach 10% of the original's bytes, and the run's
trajectory (the size after each commit, against seconds since the run started and
against checks). `table` compares the labels, each against `--base`: total checks, any
final size larger, time to 10%. `plot` draws size against time per case, one line per
label, with matplotlib (the `bench` extra).

The corpus needs `iree-compile` and `iree-opt` on PATH; a case whose check cannot run
here (upstream-divsi needs `mlir-opt-19`) ends with the original not interesting and is
kept with its exit code, outside the totals.
"""

from __future__ import annotations

import json
import math
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import click

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import measured  # noqa: E402
import run as corpus  # noqa: E402
from cases import BY_NAME, CASES  # noqa: E402

RESULTS = HERE / "results" / "trajectory.json"
PLOT = HERE / "results" / "trajectory.svg"
#: The share of the original's bytes the "time to 10%" is measured at.
FRACTION = 0.10


def reached(points: list[dict[str, Any]], fraction: float = FRACTION) -> dict[str, Any] | None:
    """The first point at or below `fraction` of the first point's bytes, if any."""
    if not points:
        return None
    goal = fraction * points[0]["bytes"]
    return next((p for p in points if p["bytes"] <= goal), None)


def measure(case_name: str, label: str, jobs: int, cap: float, commit: str) -> dict[str, Any]:
    """One capped reduction of the case, as run.py runs it, with its trajectory."""
    case = BY_NAME[case_name]
    tool = corpus.Tool(f"ireereduce -j{jobs}", corpus._ireereduce(jobs), "out.mlir")
    text = case.make()
    with tempfile.TemporaryDirectory(prefix="trajectory-bench-") as d:
        rec = corpus.run_one(case, tool, text, cap, outputs=Path(d))
        stats_file = corpus.work_dir(Path(d), case.name, tool.name) / "stats.json"
        stats = json.loads(stats_file.read_text()) if stats_file.exists() else None
    points = stats["trajectory"] if stats else []
    ten = reached(points)
    return {
        "case": case_name,
        "label": label,
        "commit": commit,
        "jobs": jobs,
        "cap": cap,
        "exit_code": rec.exit_code,
        "capped": rec.capped,
        "still_interesting": rec.still_interesting,
        "status": stats["status"] if stats else None,
        "checks": stats["oracle_calls"] if stats else None,  # the engine's oracle calls
        "calls": rec.calls,  # every run of the check, the original's and the final re-checks included
        "original": stats["trajectory"][0] if points else None,
        "final": stats["final"] if stats else None,
        "final_body_ops": rec.ops,
        "seconds": rec.seconds,
        "ten_percent_seconds": ten["seconds"] if ten else None,
        "ten_percent_checks": ten["checks"] if ten else None,
        "trajectory": points,
    }


def load(path: Path = RESULTS) -> list[dict[str, Any]]:
    return json.loads(path.read_text()) if path.exists() else []


def store(row: dict[str, Any], path: Path = RESULTS) -> None:
    """Keep the file up to date after each case: a run stopped halfway keeps its rows."""
    rows = [r for r in load(path) if (r["case"], r["label"]) != (row["case"], row["label"])] + [row]
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(rows, indent=1) + "\n")
    tmp.replace(path)


def _measured(row: dict[str, Any] | None) -> bool:
    """A row with a trajectory: the original was interesting and the run reduced."""
    return row is not None and bool(row["trajectory"])


def _ratio(new: float, old: float) -> str:
    return f"{new / old:.2f}x" if old else ""


def _geomean(ratios: list[float]) -> float | None:
    ratios = [r for r in ratios if r > 0]
    return math.exp(statistics.fmean(math.log(r) for r in ratios)) if ratios else None


def compare(rows: list[dict[str, Any]], base: str, label: str) -> list[str]:
    """`label` against `base` over the cases both measured: Markdown lines."""
    by = {(r["case"], r["label"]): r for r in rows}
    lines = [
        f"**{label}** against **{base}**",
        "",
        "| case | checks | ratio | final ops (bytes) | base final ops (bytes) | larger | s to 10% | base s to 10% | ratio | checks to 10% | base |",
        "|---|---:|---:|---|---|---|---:|---:|---:|---:|---:|",
    ]
    checks = [0, 0]
    times: list[float] = []
    time_sums = [0.0, 0.0]
    larger: list[str] = []
    for case in CASES:
        new, old = by.get((case.name, label)), by.get((case.name, base))
        if not (_measured(new) and _measured(old)):
            continue
        assert new is not None and old is not None
        checks[0] += new["checks"]
        checks[1] += old["checks"]
        grew = (new["final"]["ops"] or 0, new["final"]["bytes"]) > (old["final"]["ops"] or 0, old["final"]["bytes"])
        if grew:
            larger.append(case.name)
        t_new, t_old = new["ten_percent_seconds"], old["ten_percent_seconds"]
        if t_new is not None and t_old is not None:
            times.append(t_new / t_old)
            time_sums[0] += t_new
            time_sums[1] += t_old
        lines.append(
            f"| {case.name} | {new['checks']} | {_ratio(new['checks'], old['checks'])} | "
            f"{new['final']['ops']} ({new['final']['bytes']}) | {old['final']['ops']} ({old['final']['bytes']}) | "
            f"{'LARGER' if grew else ''} | {_s(t_new)} | {_s(t_old)} | "
            f"{_ratio(t_new, t_old) if t_new is not None and t_old is not None else ''} | "
            f"{_c(new['ten_percent_checks'])} | {_c(old['ten_percent_checks'])} |"
        )
    mean = _geomean(times)
    lines += [
        "",
        f"Total checks {checks[0]} against {checks[1]}: {_ratio(checks[0], checks[1])}. "
        f"Final size larger: {', '.join(larger) if larger else 'none'}. "
        f"Time to 10%: {time_sums[0]:.1f} s against {time_sums[1]:.1f} s in total "
        f"({_ratio(time_sums[0], time_sums[1])}), geometric mean of the ratios "
        f"{f'{mean:.2f}x' if mean is not None else 'n/a'} over {len(times)} cases.",
    ]
    return lines


def _s(seconds: float | None) -> str:
    return "never" if seconds is None else f"{seconds:.1f}"


def _c(checks: int | None) -> str:
    return "never" if checks is None else str(checks)


def per_label(rows: list[dict[str, Any]], label: str) -> list[str]:
    """One label's rows and totals: Markdown lines."""
    lines = [
        f"**{label}**",
        "",
        "| case | commit | status | checks | final ops | final bytes | of original | wall s | s to 10% | checks to 10% | commits |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    total_checks, total_seconds = 0, 0.0
    for case in CASES:
        r = next((x for x in rows if (x["case"], x["label"]) == (case.name, label)), None)
        if r is None:
            continue
        if not _measured(r):
            lines.append(f"| {case.name} | {r['commit']} | exit {r['exit_code']}: not measured | | | | | | | | |")
            continue
        total_checks += r["checks"]
        total_seconds += r["seconds"]
        original, final = r["original"], r["final"]
        capped = "+" if r["capped"] else ""
        commits = sum(p["event"] == "commit" for p in r["trajectory"])
        lines.append(
            f"| {case.name} | {r['commit']} | {r['status']}{'' if r['still_interesting'] else ' (NOT interesting)'} | "
            f"{r['checks']} | {final['ops']} | {final['bytes']} | {100 * final['bytes'] / original['bytes']:.2f}% | "
            f"{r['seconds']:.1f}{capped} | {_s(r['ten_percent_seconds'])} | {_c(r['ten_percent_checks'])} | {commits} |"
        )
    lines += ["", f"Total: {total_checks} checks, {total_seconds:.1f} s of wall time."]
    return lines


@click.group()
def cli() -> None:
    """The corpus's size against time and checks, per label."""


@cli.command("run")
@click.option("--cases", help="Comma-separated case names [default: all].")
@click.option(
    "--label", default="baseline", show_default=True, help="What this run measures; rows are per (case, label)."
)
@click.option("-j", "--jobs", default=2, show_default=True, type=click.IntRange(1))
@click.option("--cap", type=float, default=300.0, show_default=True, help="Wall-clock cap per case, seconds.")
@click.option("--results", type=click.Path(path_type=Path), default=RESULTS, show_default=True)
def run_cmd(cases: str | None, label: str, jobs: int, cap: float, results: Path) -> None:
    chosen = [BY_NAME[n] for n in cases.split(",")] if cases else CASES
    commit = measured.commit()  # what is measured is the code at the start
    for case in chosen:
        row = measure(case.name, label, jobs, cap, commit)
        store(row, results)
        click.echo(
            f"{case.name}: exit {row['exit_code']}, {row['checks']} checks, final {row['final']}, "
            f"{row['seconds']:.1f} s, 10% at {_s(row['ten_percent_seconds'])} s / {_c(row['ten_percent_checks'])} checks",
            err=True,
        )


@cli.command()
@click.option("--base", default="baseline", show_default=True, help="The label the others are compared with.")
@click.option("--labels", help="Comma-separated labels [default: all in the file].")
@click.option("--results", type=click.Path(path_type=Path), default=RESULTS, show_default=True)
def table(base: str, labels: str | None, results: Path) -> None:
    """Per case and totals for each label, then each label against the base."""
    rows = load(results)
    names = labels.split(",") if labels else list(dict.fromkeys(r["label"] for r in rows))
    for name in names:
        click.echo("\n".join(per_label(rows, name)) + "\n")
    for name in names:
        if name != base and any(r["label"] == base for r in rows):
            click.echo("\n".join(compare(rows, base, name)) + "\n")


@cli.command()
@click.option("--results", type=click.Path(path_type=Path), default=RESULTS, show_default=True)
@click.option("--out", type=click.Path(path_type=Path), default=PLOT, show_default=True)
@click.option("--labels", help="Comma-separated labels [default: all in the file].")
def plot(results: Path, out: Path, labels: str | None) -> None:
    """Size (% of the original's bytes, log scale) against seconds, one panel per case
    (SVG, or PNG for an --out ending in .png)."""
    import matplotlib

    matplotlib.use("Agg")
    # Text as text (searchable, smaller) and fixed ids: the same results give the same file.
    matplotlib.rcParams.update({"svg.fonttype": "none", "svg.hashsalt": "ireereduce"})
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FormatStrFormatter

    rows = [r for r in load(results) if _measured(r)]
    names = labels.split(",") if labels else list(dict.fromkeys(r["label"] for r in rows))
    cases = [c.name for c in CASES if any(r["case"] == c.name for r in rows)]
    cases += sorted({r["case"] for r in rows} - set(cases))
    if not cases:
        raise click.ClickException(f"{results} holds no measured row")
    cols = min(3, len(cases))
    nrows = math.ceil(len(cases) / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(4.2 * cols, 3.0 * nrows), squeeze=False)
    for ax, case in zip(axes.flat, cases):
        for name in names:
            r = next((x for x in rows if (x["case"], x["label"]) == (case, name)), None)
            if r is None:
                continue
            first = r["trajectory"][0]["bytes"] or 1
            xs = [0.0] + [p["seconds"] for p in r["trajectory"]]
            ys = [100.0] + [100.0 * p["bytes"] / first for p in r["trajectory"]]
            ax.step(xs, ys, where="post", label=f"{name} ({r['commit']})")
        ax.axhline(100 * FRACTION, color="grey", linewidth=0.5, linestyle=":")
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))
        ax.set_title(case, fontsize=9)
        ax.set_xlabel("seconds", fontsize=8)
        ax.set_ylabel("% of original bytes", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=6)
    for ax in list(axes.flat)[len(cases) :]:
        ax.set_visible(False)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    svg = out.suffix.lower() == ".svg"  # else the format its suffix names (.png)
    fig.savefig(out, metadata={"Date": None} if svg else None)
    plt.close(fig)
    click.echo(f"written to {out}")


if __name__ == "__main__":
    cli()
