"""The bug report: `build` reads a finished run (the session's own Result, with a real
oracle, verdict and statistics) into what docs/report-schema.json describes, temporary
paths become the repro's name, long output is cut, and the Markdown has what an issue
needs. The full report on a real failure is in test_e2e_oracles.py."""

from __future__ import annotations

import collections
import json
import tempfile
from pathlib import Path

import jsonschema
import pytest

from reducer.core.engine import RunStats
from reducer.core.oracle import ScriptOracle, Verdict
from reducer.core.workspace import Size
from reducer.iree import report, signature
from reducer.iree.dispatch import Isolated
from reducer.iree.oracles import CompileOracle, parse_command
from reducer.options import backends as _backends
from reducer.session import Result

SCHEMA = json.loads((Path(__file__).resolve().parent.parent / "docs" / "report-schema.json").read_text())
TRUNCF = "failed to legalize operation 'arith.truncf'"
#: The input: a layer around the op the bug is in, which the reduction removed.
INPUT = """func.func @layer(%a: f32) -> f16 {
  %0 = arith.negf %a : f32
  %1 = arith.truncf %0 : f32 to f16
  return %1 : f16
}
"""
REDUCED = """func.func @f(%a: f32) -> f16 {
  %0 = arith.truncf %a : f32 to f16
  return %0 : f16
}
"""


def finished_run(tmp_path: Path, output: str | None = REDUCED) -> tuple[Result, str]:
    """A compile-failure run of in.mlir that wrote output (None: wrote nothing yet), and
    the input's path; built from the types a session hands the report."""
    src = tmp_path / "in.mlir"
    src.write_text(INPUT)
    out = tmp_path / "in.reduced.mlir"
    if output is not None:
        out.write_text(output)
    stderr = f"{tempfile.gettempdir()}/ireereduce-run-x/ireereduce-y/in.mlir:2:8: error: {TRUNCF}\n"
    found = signature.of(1, stderr)
    oracle = CompileOracle(parse_command("iree-compile {input} -o /dev/null"), "in.mlir", 10.0, expected=found)
    stats = RunStats(
        Size(3, 120),  # where the reduction started: the isolated dispatch
        Size(2, len(REDUCED)),
        oracle_calls=40,
        cache_hits=5,
        outcomes=collections.Counter({"not interesting": 27, "different bug": 7, "interesting": 6}),
    )
    verdict = Verdict(True, 1, seconds=0.4, stderr_tail=stderr, outcome="interesting", signature=found)
    result = Result(str(out), "mlir", stats, 12.3456, 10.0, 0.4, oracle=oracle, final_verdict=verdict)
    result.input_size = Size(4, len(INPUT))
    result.findings.phase = "flow"
    result.findings.started_from = "dispatch-creation"
    result.findings.flags_removed = ["--iree-opt-level=O3"]
    result.findings.dispatch = Isolated(
        "module_main_dispatch_9.mlir", "...", oracle, ("dispatch_9", "dispatch_10"), 4, 5, 1.234
    )
    return result, str(src)


def test_the_report_shows_the_reduced_program_and_what_the_run_found(tmp_path: Path):
    result, src = finished_run(tmp_path)
    data = report.build(result, src, "reduced")
    jsonschema.validate(json.loads(report.to_json(data)), SCHEMA)
    assert data["program"] == REDUCED and not data["trivial"]
    assert (data["input"], data["output"], data["status"]) == (src, result.output, "reduced")
    assert data["title"] == TRUNCF
    assert data["signature"]["summary"] == f"exit 1: {TRUNCF}" and list(data["signature"]["errors"]) == [TRUNCF]
    assert data["failure_output"] == f"in.reduced.mlir:2:8: error: {TRUNCF}"  # the repro's name, not the temp path
    assert data["oracle"] == {"kind": "compile-failure", "reproduce": "iree-compile in.reduced.mlir -o /dev/null"}
    assert data["check_script"] is None
    assert data["sizes"] == {
        "before": {"ops": 4, "bytes": len(INPUT)},
        "reduction_start": {"ops": 3, "bytes": 120},
        "after": {"ops": 2, "bytes": len(REDUCED)},
    }
    assert (data["oracle_calls"], data["cache_hits"], data["seconds"]) == (40, 5, 12.35)
    assert list(data["outcomes"]) == ["different bug", "interesting", "not interesting"]
    assert data["rejected_as_different_bug"] == 7
    assert (data["phase"], data["started_from_phase"]) == ("flow", "dispatch-creation")
    assert data["dispatch"] == {
        "name": "module_main_dispatch_9.mlir",
        "failing": ["dispatch_9", "dispatch_10"],
        "executables": 4,
        "seconds": 1.23,
    }
    assert (data["flags_removed"], data["for_upstream"]) == (["--iree-opt-level=O3"], [])
    assert set(data["versions"]) == {"ireereduce", "python", "iree-compile", "platform"}


def test_until_an_output_is_written_the_report_shows_the_input(tmp_path: Path):
    result, src = finished_run(tmp_path, output=None)
    assert report.build(result, src, "stopped")["program"] == INPUT


def test_a_check_script_report_quotes_the_script_and_warns_of_a_trivial_result(tmp_path: Path):
    """A script keeps no failure of its own: the title comes from its output."""
    result, src = finished_run(tmp_path, output="module {\n}\n")
    script = tmp_path / "check.sh"
    script.write_text('#!/bin/sh\ngrep -q truncf "$1"\n')
    result.oracle = ScriptOracle(str(script), "in.mlir", None)
    result.final_verdict = Verdict(True, 0, stderr_tail="warming up\nin.mlir:1:1: error: still there\n")
    data = report.build(result, src, "reduced")
    jsonschema.validate(json.loads(report.to_json(data)), SCHEMA)
    assert data["oracle"] == {
        "kind": "check-script",
        "reproduce": "./check.sh in.reduced.mlir  # exits 0 while the bug is there",
    }
    assert data["check_script"] == {"name": "check.sh", "text": script.read_text()}
    assert data["signature"] is None and data["title"] == "in.mlir:1:1: error: still there"
    assert data["trivial"]
    md = report.to_markdown(data)
    assert '## Check script (`check.sh`)\n\n```sh\n#!/bin/sh\ngrep -q truncf "$1"\n```' in md
    assert "> **Warning:** the reduced program is trivial" in md


def test_the_markdown_has_the_repro_the_command_and_the_facts(tmp_path: Path):
    result, src = finished_run(tmp_path)
    data = report.build(result, src, "reduced")
    md = report.to_markdown(data)
    assert md.startswith(f"# {TRUNCF}\n")
    assert (
        f"from `in.mlir` (4 ops, {len(INPUT)} bytes) to 2 ops, {len(REDUCED)} bytes, in 12 s and 40 oracle calls" in md
    )
    for part in (
        f"```mlir\n{REDUCED.rstrip()}\n```",
        "```sh\niree-compile in.reduced.mlir -o /dev/null\n```",
        f"```\nin.reduced.mlir:2:8: error: {TRUNCF}\n```",
        "- oracle: compile-failure",
        "- failing phase: flow",
        "- dispatch: module_main_dispatch_9.mlir",
        "- flags not needed: `--iree-opt-level=O3`",
        "- candidates rejected as a different bug: 7",
        f"- iree-compile: {data['versions']['iree-compile']}",
    ):
        assert part in md
    assert "for upstream" not in md and "Warning" not in md  # what does not apply is left out


def test_the_candidates_temporary_path_becomes_the_repro_name():
    tmp = tempfile.gettempdir()
    out = report.clean_output(f"{tmp}/ireereduce-abc123/input.mlir:3:10: error: boom\n", "model.reduced.mlir")
    assert out == "model.reduced.mlir:3:10: error: boom"


def test_long_output_keeps_its_head_and_tail():
    lines = [f"line {i}" for i in range(500)]
    out = report.clean_output("\n".join(lines), "x.mlir").splitlines()
    assert len(out) == report.OUTPUT_LINES + 1
    assert out[0] == "line 0" and out[-1] == "line 499" and "440 lines" in out[report.OUTPUT_LINES // 2]


def test_backends_shorthand_builds_both_compile_commands():
    a, b, mismatch = _backends("llvm-cpu,vmvx", "--iree-opt-level=O2")
    assert mismatch
    assert a.startswith(
        "iree-compile {input} --iree-hal-target-device=local --iree-hal-local-target-device-backends=llvm-cpu --iree-llvmcpu-target-cpu=generic"
    )
    assert (
        b
        == "iree-compile {input} --iree-hal-target-device=local --iree-hal-local-target-device-backends=vmvx --iree-opt-level=O2 -o {output}"
    )


def test_the_title_is_the_failure_not_the_oracle():
    from reducer.iree import signature

    crash = signature.of(
        -6,
        'iree-compile: Foo.cpp:12: void f(): Assertion `x && "bad"\' failed.\n'
        "Stack dump:\n #0 0x1 llvm::sys::PrintStackTrace()\n #4 0x5 mlir::iree::Bar::run()\n",
    )
    assert report.title(crash, "", "in.mlir", "compile-failure") == crash.describe()
    error = signature.of(1, "in.mlir:3:10: error: failed to legalize operation 'arith.truncf'\n")
    assert report.title(error, "", "in.mlir", "compile-failure") == "failed to legalize operation 'arith.truncf'"
    out = "warming up\nx.mlir:2:3: error: 'math.exp' op broken\n"
    assert report.title(None, out, "in.mlir", "check-script") == "x.mlir:2:3: error: 'math.exp' op broken"
    assert report.title(None, "", "in.mlir", "check-script") == "in.mlir: still fails (reduced test case)"


def _oracle_classes() -> list[type]:
    import importlib
    import pkgutil

    import reducer.iree.oracles as package
    from reducer.core.oracle import Oracle

    for info in pkgutil.iter_modules(package.__path__):  # registers every built-in oracle, lazy ones too
        importlib.import_module(f"{package.__name__}.{info.name}")

    found, todo = [], [Oracle]
    while todo:
        for sub in todo.pop().__subclasses__():
            todo.append(sub)
            if sub.__module__.startswith("reducer.") and not getattr(sub, "__abstractmethods__", None):
                found.append(sub)
    return found


def test_every_oracle_kind_is_a_name_the_report_schema_takes():
    """The report's kind comes from the oracle's own declaration, and the schema bots
    validate against (both copies) takes any such name, so a new oracle is its module and
    one row in ORACLES, with no schema edit."""
    import json
    from pathlib import Path

    import jsonschema

    from reducer.core.oracle import RepeatOracle, ScriptOracle

    root = Path(__file__).resolve().parent.parent
    schemas = [
        json.loads(p.read_text())["properties"]["oracle"]["properties"]["kind"]
        for p in (root / "docs" / "report-schema.json", root / "reducer" / "schemas" / "report-schema.json")
    ]
    classes = [c for c in _oracle_classes() if c is not RepeatOracle]
    assert len(classes) >= 4
    kinds = {c.kind for c in classes}  # a shipped or repeated check script keeps its kind
    assert {"check-script", "compile-failure", "numeric-mismatch", "compile-time"} <= kinds
    for kind in kinds:
        for schema in schemas:
            jsonschema.validate(kind, schema)
    for schema in schemas:  # the pattern is a real constraint, not "any string"
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate("Compile Failure", schema)
    assert RepeatOracle(ScriptOracle("check.sh", "in.mlir", None), 3).kind == "check-script"


def test_a_repeated_oracle_shows_the_script_and_failure_of_the_one_it_repeats(tmp_path):
    """`--repeat N` wraps the oracle; the report still reads the check script and the
    failure the candidates were held to through the contract, not through the wrapper."""
    from reducer.core.oracle import RepeatOracle, ScriptOracle
    from reducer.iree.oracles import CompileOracle, parse_command
    from reducer.iree.report import script_text
    from reducer.iree.signature import Signature

    script = tmp_path / "check.sh"
    script.write_text('#!/bin/sh\ngrep -q bug "$1"\n')
    shown = script_text(RepeatOracle(ScriptOracle(str(script), "in.mlir", None), 3))
    assert shown == {"name": "check.sh", "text": script.read_text()}
    signature = Signature("error", 1, errors=("bug",))
    compile_ = CompileOracle(parse_command("iree-compile {input}"), "in.mlir", 10, expected=signature)
    assert RepeatOracle(compile_, 2).failure() == signature
    assert script_text(compile_) is None
