"""--report / --report-json: what a bot files as a bug, and what a person pastes.

The JSON follows docs/report-schema.json (schema id "ireereduce-report/1"); the Markdown
is the same content laid out as an issue body.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import platform
import re
import subprocess
import tempfile
from collections.abc import Sequence
from typing import Any, Protocol

import attrs

from reducer.core import ir as irutil
from reducer.core.bytecode import program_text
from reducer.core.engine import RunStats
from reducer.core.oracle import Oracle, Verdict
from reducer.core.workspace import Size
from reducer.iree import parameters
from reducer.iree.dispatch import Isolated
from reducer.iree.oracles.command import resolve_tool
from reducer.iree.signature import Signature

log = logging.getLogger(__name__)


class Findings(Protocol):
    """What the workflows found, as the report reads it (the session's `Findings`)."""

    @property
    def phase(self) -> str | None: ...
    @property
    def started_from(self) -> str | None: ...
    @property
    def dispatch(self) -> Isolated | None: ...
    @property
    def flags_removed(self) -> Sequence[str]: ...
    @property
    def for_upstream(self) -> Sequence[str]: ...
    @property
    def localized(self) -> dict[str, Any] | None: ...
    @property
    def pass_level(self) -> dict[str, Any] | None: ...


class Result(Protocol):
    """A finished run, as the report reads it: the session's `Result` fits. A protocol, so
    this room need not import the session that sits on top of it."""

    @property
    def output(self) -> str: ...
    @property
    def stats(self) -> RunStats: ...
    @property
    def seconds(self) -> float: ...
    @property
    def findings(self) -> Findings: ...
    @property
    def oracle(self) -> Oracle | None: ...
    @property
    def final_verdict(self) -> Verdict | None: ...
    @property
    def input_size(self) -> Size | None: ...
    @property
    def written(self) -> bool: ...


SCHEMA = "ireereduce-report/1"
#: Lines of the failure output a report keeps (head and tail).
OUTPUT_LINES = 60


@functools.cache
def versions() -> dict[str, str]:
    import importlib.metadata  # about 50 ms: only a report needs it, not every run's start-up

    def first_lines(argv: list[str]) -> str:
        try:
            out = subprocess.run(argv, capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.TimeoutExpired):
            return "unavailable"
        return " ".join(line.strip() for line in out.splitlines()[:2] if line.strip()) or "unavailable"

    try:
        mine = importlib.metadata.version("ireereduce")
    except importlib.metadata.PackageNotFoundError:
        mine = "unknown"
    return {
        "ireereduce": mine,
        "python": platform.python_version(),
        "iree-compile": first_lines([resolve_tool("iree-compile"), "--version"]),
        "platform": platform.platform(),
    }


def clean_output(text: str, name: str) -> str:
    """The candidate's temporary path becomes the repro's file name; long output is cut."""
    tmp = re.escape(tempfile.gettempdir())
    text = re.sub(tmp + r"/ireereduce-[^/\s]+/[^\s:]+", lambda _: name, text)  # a name is no template
    lines = text.rstrip().splitlines()
    if len(lines) > OUTPUT_LINES:
        half = OUTPUT_LINES // 2
        lines = lines[:half] + [f"[... {len(lines) - OUTPUT_LINES} lines ...]"] + lines[-half:]
    return "\n".join(lines)


#: How much of a check script a report quotes.
SCRIPT_LIMIT = 20000


def title(sig: Any, failure_output: str, input_path: str, kind: str) -> str:
    """What the issue is called: the failure itself (first error line, or the crash frame
    or assertion), not the oracle's name."""
    if sig is not None and sig.kind == "crash":
        return sig.describe()
    if sig is not None and sig.first_error:
        return irutil.first_line(sig.first_error)
    lines = [ln.strip() for ln in failure_output.splitlines() if ln.strip()]
    errors = [ln for ln in lines if re.search(r"\berror\b|Assertion|Segmentation fault|Aborted", ln, re.I)]
    if errors or lines:
        return (errors or lines)[0][:200]
    what = {"numeric-mismatch": "outputs differ", "compile-time": "slow compilation"}.get(kind, "still fails")
    return f"{os.path.basename(input_path) if input_path != '-' else 'input'}: {what} (reduced test case)"


def script_text(oracle: Oracle | None) -> dict[str, str] | None:
    """A check script's name and text: the report must show what "interesting" meant."""
    path = oracle.script_path() if oracle is not None else None
    if not path:
        return None
    try:
        with open(path, "rb") as f:
            data = f.read(SCRIPT_LIMIT + 1)
        text = data[:SCRIPT_LIMIT].decode()
    except (OSError, UnicodeDecodeError):
        text = "(not readable as text)"
    else:
        if len(data) > SCRIPT_LIMIT:
            text += "\n[... cut ...]"
    return {"name": os.path.basename(path), "text": text}


def build(
    result: Result, input_path: str, status: str, inputs_folder: str | None = None, beside: str = "this report"
) -> dict[str, Any]:
    """The report's content; the output file holds the program the report shows (until
    a run has found something smaller, the input does). A numeric mismatch's inputs are
    written to inputs_folder, for its commands (`beside`: what the folder is beside)."""
    shown = result.output if os.path.exists(result.output) and result.written else input_path
    program = ""
    if os.path.isfile(shown):
        with open(shown, "rb") as f:
            program = program_text(f.read())  # bytecode (an input, -o x.mlirbc) shown as text
    oracle = result.oracle
    verdict = result.final_verdict
    sig = (
        verdict.signature
        if verdict is not None and verdict.signature is not None
        else oracle.failure()
        if oracle is not None
        else None
    )
    kind = oracle.kind if oracle is not None else "check-script"
    name = os.path.basename(result.output)
    found = result.findings
    original = result.input_size or result.stats.original
    start = result.stats.original
    failure = clean_output(verdict.stderr_tail, name) if verdict is not None else ""
    reproduce = oracle.reproducer(name) if oracle is not None else ""
    shown_by = difference(oracle, program, name, inputs_folder, beside)  # a mismatch's commands, its inputs shipped
    return {
        "schema": SCHEMA,
        "title": title(sig, failure, input_path, kind),
        "status": status,
        "input": input_path,
        "output": str(result.output),
        "oracle": {"kind": kind, "reproduce": shown_by["commands"] if shown_by else reproduce},
        "check_script": script_text(oracle),
        "trivial": irutil.trivial(program),
        "signature": dict(attrs.asdict(sig), summary=sig.describe()) if isinstance(sig, Signature) else None,
        "failure_output": failure,
        "program": program,
        "sizes": {
            "before": {"ops": original.ops, "bytes": original.bytes},
            "reduction_start": {"ops": start.ops, "bytes": start.bytes},
            "after": {"ops": result.stats.final.ops, "bytes": result.stats.final.bytes},
        },
        "oracle_calls": result.stats.oracle_calls,
        "cache_hits": result.stats.cache_hits,
        "seconds": round(result.seconds, 2),
        "outcomes": dict(sorted(result.stats.outcomes.items())),
        "rejected_as_different_bug": result.stats.outcomes.get("different bug", 0),
        "phase": found.phase,
        "started_from_phase": found.started_from,
        "dispatch": {
            "name": found.dispatch.name,
            "failing": list(found.dispatch.failing),
            "executables": found.dispatch.executables,
            "seconds": round(found.dispatch.seconds, 2),
        }
        if found.dispatch
        else None,
        "localized": found.localized,
        "pass_level": found.pass_level,
        "difference": shown_by,
        "flags_removed": list(found.flags_removed),
        "for_upstream": list(found.for_upstream),
        "parameters": parameters.needed(program),  # what the reproducer still reads from an archive
        "versions": versions(),
    }


def difference(
    oracle: Oracle | None, program: str, name: str, folder: str | None, beside: str = "this report"
) -> dict[str, Any] | None:
    """A numeric mismatch's evidence (reducer/iree/evidence.py): the final program run
    once more, its inputs shipped in folder; None for other oracles, when it agrees, or
    when the folder cannot take them (said in one line: the report goes without them)."""
    from reducer.iree.oracles.mismatch import MismatchOracle

    if folder is None or not isinstance(oracle, MismatchOracle) or not program:
        return None
    from reducer.iree import evidence

    found = evidence.gather(oracle, program.encode(), name)
    if found is None:
        return None
    try:
        return evidence.ship(oracle, found, folder, name) | {"inputs_beside": beside}
    except OSError as exc:
        log.warning(
            "the report's inputs were not written to %s (%s); the report leaves out the commands that show "
            "the difference",
            folder,
            exc.strerror or exc,
        )
        return None


def _localized(report: dict[str, Any]) -> list[str]:
    """The Markdown of where a mismatch starts and how to see it."""
    lines = []
    where = report.get("localized")
    if where:
        lines += [
            "## Where the outputs start to differ",
            "",
            f"The first dispatch that goes wrong: #{where['index']} of {where['dispatches']}, `{where['name']}`"
            + (f" (on b: #{where['index_b']} `{where['name_b']}`)" if where["name_b"] != where["name"] else "")
            + f"; {where['kind']} at output {where['output']} index {where['element']}: "
            f"a = {where['a']}, b = {where['b']}"
            + (f" (|a - b| = {where['error']:g})" if where["error"] is not None else "")
            + ("; its inputs agree." if where["inputs_agree"] else "."),
            "",
        ]
        if where.get("note"):
            lines += [where["note"], ""]
    diff = report.get("difference")
    if diff:
        worst = diff["worst"]
        lines += [
            "## The difference",
            "",
            f"- configuration a: `{diff['configurations']['a']}`",
            f"- configuration b: `{diff['configurations']['b']}`",
            f"- worst element: output {worst['output']} index {worst['index']}: a = {worst['a']}, "
            f"b = {worst['b']}"
            + (f", |a - b| = {worst['error']:g}" if worst["error"] is not None else "")
            + f" ({worst['kind']})",
            f"- inputs: in `{diff['inputs_folder']}/`, beside {diff.get('inputs_beside', 'this report')}",
            "",
            "```sh",
            diff["commands"],
            "```",
            "",
        ]
    return lines


def _pass_level(report: dict[str, Any]) -> list[str]:
    """--pass-level: the command above replays the failing pass alone (the program is a
    crash reproducer: `iree-opt --run-reproducer` replays it too); the input's own command."""
    level = report.get("pass_level")
    if not level:
        return []
    return [
        "The program is the IR that entered the failing pass, with the pass pipeline in its `mlir_reproducer` "
        f"resource (`iree-opt --run-reproducer` replays it). A replay took {level['replay_seconds']:g} s, "
        f"a compile {level['compile_seconds']:g} s. The original input fails with:",
        "",
        "```sh",
        level["input_level"],
        "```",
        "",
    ]


def to_markdown(report: dict[str, Any]) -> str:
    sizes = report["sizes"]
    before, after = sizes["before"], sizes["after"]

    def size(s: dict[str, Any]) -> str:
        return (f"{s['ops']} ops, " if s["ops"] is not None else "") + f"{s['bytes']} bytes"

    lines = [
        f"# {report['title']}",
        "",
        f"Reduced by ireereduce {report['versions']['ireereduce']} from `{os.path.basename(report['input'])}` "
        f"({size(before)}) to {size(after)}, in {report['seconds']:.0f} s and {report['oracle_calls']} oracle calls.",
        "",
        "## Reproducer",
        "",
        "```mlir",
        report["program"].rstrip(),
        "```",
        "",
        "## Command",
        "",
        "```sh",
        report["oracle"]["reproduce"],
        "```",
        "",
    ]
    lines += _pass_level(report)
    lines += _localized(report)
    if report.get("check_script"):
        script = report["check_script"]
        lines += [f"## Check script (`{script['name']}`)", "", "```sh", script["text"].rstrip(), "```", ""]
    if report.get("trivial"):
        lines += [
            "> **Warning:** the reduced program is trivial (an empty module or a function that only",
            "> returns); the check probably accepts programs without the bug.",
            "",
        ]
    lines += [
        "## Output",
        "",
        "```",
        report["failure_output"] or "(none)",
        "```",
        "",
        "## Details",
        "",
    ]
    facts = [
        ("oracle", report["oracle"]["kind"]),
        ("status", report["status"]),
        ("failing phase", report.get("phase")),
        ("dispatch", report["dispatch"]["name"] if report.get("dispatch") else None),
        ("flags not needed", ", ".join(f"`{f}`" for f in report["flags_removed"]) or None),
        ("for upstream", ", ".join(report["for_upstream"]) or None),
        ("needs a parameter archive for", ", ".join(f"`{k}`" for k in report.get("parameters", [])) or None),
        ("candidates rejected as a different bug", report["rejected_as_different_bug"]),
        ("iree-compile", report["versions"]["iree-compile"]),
        ("python", report["versions"]["python"]),
        ("platform", report["versions"]["platform"]),
    ]
    lines += [f"- {k}: {v}" for k, v in facts if v is not None]
    return "\n".join(lines) + "\n"


def to_json(report: dict[str, Any]) -> str:
    return json.dumps(report, indent=1, sort_keys=True) + "\n"
