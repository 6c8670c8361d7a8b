"""Reduce every benchmark case with ireereduce and with each peer under the same conditions,
then print the comparison table.

    python benchmarks/run.py run [--cases a,b] [--tools x,y] [--cap 300]   # appends to results.json
    python benchmarks/run.py table                                        # prints the Markdown table
    python benchmarks/run.py list                                         # cases and tools

Conditions for every (case, tool): a fresh copy of the input under the name input.mlir, the
same check wrapped to count its calls, the same wall-clock cap, 2 workers where the tool
supports them. At the cap the tool gets SIGINT (all of them save their best on Ctrl-C),
then SIGKILL 20 s later. The output is re-checked with the unwrapped check, and kept in
benchmarks/results/outputs/CASE/TOOL.mlir.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import date
from pathlib import Path

import attrs
import click

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
import measured  # noqa: E402
from cases import BY_NAME, CASES, Case  # noqa: E402

RESULTS = HERE / "results" / "results.json"
OUTPUTS = HERE / "results" / "outputs"
SHRINKRAY = Path(os.environ.get("SHRINKRAY", "/work/peers/shrinkray-venv/bin/shrinkray"))

IREE_REDUCE_SHIM = """
import ctypes, os, sys, iree.compiler
lib = ctypes.CDLL(os.path.join(os.path.dirname(iree.compiler.__file__), "_mlir_libs", "libIREECompiler.so"))
args = ["iree-reduce"] + sys.argv[1:]
argv = (ctypes.c_char_p * (len(args) + 1))(*[a.encode() for a in args], None)
sys.exit(lib.ireeReduceRunMain(len(args), argv))
"""

LITHIUM_CONDITION = """
import subprocess
def interesting(cli_args, temp_prefix):
    return subprocess.run(cli_args).returncode == 0
"""


@attrs.define
class Record:
    case: str
    tool: str
    ops: int | None  # body ops (not module/func/return); None if it doesn't parse
    bytes: int
    seconds: float
    calls: int
    still_interesting: bool
    capped: bool
    exit_code: int
    engine_seconds: float | None = None
    wait_seconds: float | None = None
    cap: float = 0.0
    date: str = ""
    note: str = ""
    commit: str = ""  # the ireereduce commit measured ("+" when the tree had changes)


# --- the tools -------------------------------------------------------------------------------


@attrs.frozen
class Tool:
    """How to run one reducer: its command in the work dir, and where its result lands."""

    name: str
    command: Callable[[Path, Path], list[str]]  # (work dir, check script) -> argv
    result: str = "input.mlir"  # relative to the work dir
    invert: bool = False  # mlir-reduce: non-zero exit means interesting
    available: Callable[[], bool] = lambda: True
    upstream_only: bool = False
    best: Callable[[Path], Path] | None = None  # where its best-so-far is, when not `result`


#: The strategies ireereduce had before the full toolbox (issue 4 compares against them).
FIRST_THREE = "split-functions,shrink-tensors,drop-ops"


def _ireereduce(jobs: int, *extra: str) -> Callable[[Path, Path], list[str]]:
    return lambda w, c: [
        "ireereduce",
        "input.mlir",
        "--check",
        str(c),
        "-o",
        "out.mlir",
        "-j",
        str(jobs),
        "-q",
        "--stats-json",
        "stats.json",
        *extra,
    ]


def _iree_reduce(w: Path, c: Path) -> list[str]:
    (w / "shim.py").write_text(IREE_REDUCE_SHIM)
    return [sys.executable, "shim.py", "-o", "out.mlir", str(c), "input.mlir"]


def _lithium(w: Path, c: Path) -> list[str]:
    (w / "cond.py").write_text(LITHIUM_CONDITION)
    (w / "lithium-tmp").mkdir()
    return ["lithium", "--tempdir", str(w / "lithium-tmp"), "cond.py", str(c), "input.mlir"]


def _lithium_best(w: Path) -> Path:
    """Lithium writes each candidate over the file and restores the best only on a clean
    exit; at the cap its best is its newest saved interesting copy, else the original."""
    tmp = w / "lithium-tmp"
    if not (tmp / "original.mlir").exists():
        return w / "input.mlir"
    keyed = sorted((int(f.name.split("-")[0]), f) for f in tmp.glob("*-interesting*") if f.name.split("-")[0].isdigit())
    return keyed[-1][1] if keyed else tmp / "original.mlir"


def _picire(w: Path, c: Path) -> list[str]:
    return ["picire", "-i", "input.mlir", "--test", str(c), "-p", "-j", "2", "--cache", "content", "-o", "picire-out"]


TOOLS = [
    Tool("ireereduce -j2", _ireereduce(2), "out.mlir"),
    Tool("ireereduce -j1", _ireereduce(1), "out.mlir"),
    Tool("ireereduce -j2 first-three", _ireereduce(2, "--strategies", FIRST_THREE), "out.mlir"),
    Tool("iree-reduce", _iree_reduce, "out.mlir"),
    Tool(
        "mlir-reduce",
        lambda w, c: ["mlir-reduce-19", "input.mlir", f"-reduction-tree=traversal-mode=0 test={c}", "-o", "out.mlir"],
        "out.mlir",
        invert=True,
        available=lambda: shutil.which("mlir-reduce-19") is not None,
        upstream_only=True,
    ),
    Tool(
        "cvise",
        lambda w, c: ["cvise", "--n", "2", "--not-c", "--tidy", "--timeout", "120", str(c), "input.mlir"],
        available=lambda: shutil.which("cvise") is not None,
    ),
    Tool(
        "creduce",
        lambda w, c: ["creduce", "--n", "2", "--not-c", "--tidy", "--timeout", "120", str(c), "input.mlir"],
        available=lambda: shutil.which("creduce") is not None,
    ),
    Tool(
        "shrinkray",
        lambda w, c: [
            str(SHRINKRAY),
            "--parallelism",
            "2",
            "--ui",
            "basic",
            "--no-llm",
            "--timeout",
            "120",
            str(c),
            "input.mlir",
        ],
        available=SHRINKRAY.exists,
    ),
    Tool("lithium", _lithium, available=lambda: shutil.which("lithium") is not None, best=_lithium_best),
    Tool("picire", _picire, "picire-out/input.mlir", available=lambda: shutil.which("picire") is not None),
]
TOOL_BY_NAME = {t.name: t for t in TOOLS}


# --- measuring -------------------------------------------------------------------------------


def wrap_check(work: Path, case: Case, invert: bool) -> Path:
    """The case's check behind a call counter; the same file for every tool."""
    script = work / "check.sh"
    tail = "\nr=$?; [ $r -eq 0 ] && exit 1 || exit 0" if invert else ""
    script.write_text(
        f'#!/bin/sh\necho x >> "{work / "calls"}"\nset -- "$(realpath "${{1:-input.mlir}}")"\n{case.check}{tail}\n'
    )
    script.chmod(0o755)
    return script


def plain_check(work: Path, case: Case) -> Path:
    script = work / "recheck.sh"
    script.write_text(f"#!/bin/sh\n{case.check}\n")
    script.chmod(0o755)
    return script


def body_ops(text: str) -> int | None:
    """Ops a user would count: everything but the module, function and return wrappers."""
    from reducer.core import ir

    try:
        module = ir.parse(text, ir.new_context())
    except ir.ParseError:
        return None
    return ir.count_ops(module.operation, skip=frozenset({"func.func", "func.return"}))


def _slug(tool: str) -> str:
    return tool.replace(" ", "")


def work_dir(outputs: Path, case: str, tool: str) -> Path:
    return outputs / case / ("work-" + _slug(tool))


def score(case: Case, tool: Tool, work: Path, fallback: str) -> tuple[str, bool, bool]:
    """The tool's best output (the input if it wrote none), kept beside the work dir, and
    whether the unwrapped check still finds it interesting."""
    result = tool.best(work) if tool.best else work / tool.result
    text = result.read_text() if result.exists() else fallback
    (work.parent / (_slug(tool.name) + ".mlir")).write_text(text)
    recheck_dir = work / "recheck"
    recheck_dir.mkdir(exist_ok=True)
    (recheck_dir / "input.mlir").write_text(text)
    still = subprocess.run([str(plain_check(work, case)), "input.mlir"], cwd=recheck_dir).returncode == 0
    return text, still, result.exists()


def run_one(case: Case, tool: Tool, text: str, cap: float, outputs: Path = OUTPUTS) -> Record:
    commit = measured.commit()  # what is measured is the code at the start
    work = work_dir(outputs, case.name, tool.name)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    (work / "input.mlir").write_text(text)
    (work / "calls").write_text("")
    check = wrap_check(work, case, tool.invert)
    argv = tool.command(work, check)
    log = open(work / "tool.log", "w")
    start = time.monotonic()
    proc = subprocess.Popen(argv, cwd=work, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    capped = False
    try:
        proc.wait(timeout=cap)
    except subprocess.TimeoutExpired:
        capped = True
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    seconds = min(time.monotonic() - start, cap) if capped else time.monotonic() - start
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # leftovers (picire workers, compilers)
    except ProcessLookupError:
        pass
    log.close()
    calls = len((work / "calls").read_text().split())
    out_text, still, wrote = score(case, tool, work, text)
    stats = {}
    if (work / "stats.json").exists():
        stats = json.loads((work / "stats.json").read_text())
    note = "" if wrote else "no output written"
    return Record(
        case=case.name,
        tool=tool.name,
        ops=body_ops(out_text),
        bytes=len(out_text.encode()),
        seconds=round(seconds, 1),
        calls=calls,
        still_interesting=still,
        capped=capped,
        exit_code=proc.returncode,
        engine_seconds=stats.get("engine_seconds"),
        wait_seconds=stats.get("wait_seconds"),
        cap=cap,
        date=date.today().isoformat(),
        note=note,
        commit=commit,
    )


def load() -> list[dict]:
    return json.loads(RESULTS.read_text()) if RESULTS.exists() else []


def save(record: Record) -> None:
    rows = [r for r in load() if (r["case"], r["tool"]) != (record.case, record.tool)]
    rows.append(attrs.asdict(record))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    tmp = RESULTS.with_suffix(".tmp")
    tmp.write_text(json.dumps(rows, indent=1) + "\n")
    tmp.replace(RESULTS)


# --- the CLI ---------------------------------------------------------------------------------


@click.group()
def cli() -> None:
    """ireereduce vs its peers on the benchmark corpus."""


@cli.command("list")
def list_cmd() -> None:
    for c in CASES:
        click.echo(f"case  {c.name:<18} {c.summary}")
    for t in TOOLS:
        click.echo(f"tool  {t.name:<18} {'available' if t.available() else 'NOT INSTALLED'}")


@cli.command()
@click.option("--cases", help="Comma-separated case names [default: all].")
@click.option("--tools", help="Comma-separated tool names [default: all installed].")
@click.option("--cap", type=float, default=300.0, show_default=True, help="Wall-clock cap per (case, tool), seconds.")
def run(cases: str | None, tools: str | None, cap: float) -> None:
    chosen_cases = [BY_NAME[n] for n in cases.split(",")] if cases else CASES
    chosen_tools = [TOOL_BY_NAME[n] for n in tools.split(",")] if tools else [t for t in TOOLS if t.available()]
    for case in chosen_cases:
        text = case.make()
        click.echo(f"{case.name}: {body_ops(text)} ops, {len(text)} bytes", err=True)
        for tool in chosen_tools:
            if tool.upstream_only and not case.upstream:
                continue
            rec = run_one(case, tool, text, cap)
            save(rec)
            click.echo(
                f"  {tool.name:<15} ops={rec.ops} bytes={rec.bytes} {rec.seconds:.1f}s calls={rec.calls} "
                f"still={'yes' if rec.still_interesting else 'NO'}{' CAPPED' if rec.capped else ''} rc={rec.exit_code}",
                err=True,
            )


@cli.command()
@click.argument("case")
@click.argument("tool")
def rescore(case: str, tool: str) -> None:
    """Re-measure a recorded run's output from its kept work dir (after fixing how a tool's best is found)."""
    text, still, _ = score(BY_NAME[case], TOOL_BY_NAME[tool], work_dir(OUTPUTS, case, tool), BY_NAME[case].make())
    for row in load():
        if (row["case"], row["tool"]) == (case, tool):
            row.update(ops=body_ops(text), bytes=len(text.encode()), still_interesting=still)
            save(Record(**row))
            click.echo(f"{case} {tool}: ops={row['ops']} bytes={row['bytes']} still={still}")


def _fmt_ops(r: dict) -> str:
    ops = "unparsable" if r["ops"] is None else str(r["ops"])
    return ops if r["still_interesting"] else f"{ops} (not interesting!)"


def _cell(r: dict | None) -> str:
    if r is None:
        return "not run"
    cap = "+" if r["capped"] else ""
    return f"{_fmt_ops(r)} / {r['seconds']:.0f}{cap} s / {r['calls']}"


def summary(rows: list[dict]) -> None:
    """One row per case: ireereduce against the best peer by final size and by calls."""
    click.echo("Cells: final ops / wall seconds (+ = stopped at the cap) / oracle calls. Peers count only with an")
    click.echo("output that still fails; fewest calls is among peers that removed at least one op.\n")
    click.echo("| case | ops in | ireereduce -j2 | -j1 s | engine share | smallest peer result | fewest-calls peer |")
    click.echo("|---|---:|---|---:|---:|---|---|")
    for case in CASES:
        mine = {r["tool"]: r for r in rows if r["case"] == case.name}
        if not mine:
            continue
        ours = mine.get("ireereduce -j2")
        j1 = mine.get("ireereduce -j1")
        peers = [r for t, r in mine.items() if not t.startswith("ireereduce") and r["still_interesting"] and r["calls"]]
        best = min(peers, key=lambda r: (r["ops"] if r["ops"] is not None else 10**9, r["seconds"]), default=None)
        n_in = body_ops(case.make())
        progressed = [r for r in peers if r["ops"] is not None and r["ops"] < n_in]
        fewest = min(progressed, key=lambda r: r["calls"], default=None)
        j1_s = f"{j1['seconds']:.0f}" if j1 else ""
        share = (
            f"{100 * ours['engine_seconds'] / ours['seconds']:.1f}%"
            if ours and ours.get("engine_seconds") is not None
            else ""
        )
        click.echo(
            f"| {case.name} | {n_in} | {_cell(ours)} | {j1_s} | {share} | "
            f"{best['tool'] + ': ' + _cell(best) if best else 'none'} | {fewest['tool'] + ': ' + _cell(fewest) if fewest else 'none'} |"
        )


@cli.command()
@click.option("--summary", "short", is_flag=True, help="One row per case (what the README carries).")
def table(short: bool) -> None:
    """Print the comparison as Markdown, one block per case, best final size first."""
    rows = load()
    if short:
        summary(rows)
        return
    click.echo(
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; cap per run as shown.\n"
    )
    click.echo("| case | tool | final ops | bytes | wall s | oracle calls | engine share | still fails | notes |")
    click.echo("|---|---|---:|---:|---:|---:|---:|---|---|")
    for case in CASES:
        mine = [r for r in rows if r["case"] == case.name]
        if not mine:
            continue
        original = case.make()
        click.echo(
            f"| **{case.name}** | (original) | {body_ops(original)} | {len(original.encode())} | | | | yes | {case.summary} |"
        )
        mine.sort(
            key=lambda r: (
                not r["still_interesting"],
                r["ops"] if r["ops"] is not None else 10**9,
                r["bytes"],
                r["seconds"],
            )
        )
        for r in mine:
            share = ""
            if r.get("engine_seconds") is not None and r["seconds"]:
                share = f"{100 * r['engine_seconds'] / r['seconds']:.0f}%"
            notes = ", ".join(
                x
                for x in [
                    f"capped at {r['cap']:.0f} s" if r["capped"] else "",
                    r.get("note", ""),
                    f"exit {r['exit_code']}" if r["exit_code"] not in (0, None) and not r["capped"] else "",
                ]
                if x
            )
            click.echo(
                f"| | {r['tool']} | {_fmt_ops(r)} | {r['bytes']} | {r['seconds']:.1f} | {r['calls']} | {share} | "
                f"{'yes' if r['still_interesting'] else 'NO'} | {notes} |"
            )


@cli.command()
@click.option("--tool", default="ireereduce -j2", show_default=True)
def hand(tool: str) -> None:
    """The cases with a hand reduction (benchmarks/hand/): the tool's result against it.
    The bar is 1.1x the hand-reduced size, in ops; bytes show what is left inside them."""
    rows = {(r["case"], r["tool"]): r for r in load()}
    click.echo(f"| case | ops in | hand ops (bytes) | {tool}: ops (bytes) / wall s / calls | ops ratio |")
    click.echo("|---|---:|---|---|---:|")
    for case in CASES:
        if not case.hand:
            continue
        text = (HERE / "hand" / case.hand).read_text()
        h_ops, h_bytes = body_ops(text), len(text.encode())
        r = rows.get((case.name, tool))
        got = (
            f"{_fmt_ops(r)} ({r['bytes']}) / {r['seconds']:.0f}{'+' if r['capped'] else ''} s / {r['calls']}"
            if r
            else "not run"
        )
        ratio = f"{r['ops'] / h_ops:.2f}x" if r and r["ops"] is not None and h_ops else ""
        click.echo(f"| {case.name} | {body_ops(case.make())} | {h_ops} ({h_bytes}) | {got} | {ratio} |")


if __name__ == "__main__":
    cli()
