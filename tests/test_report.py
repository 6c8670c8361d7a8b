"""The bug report's text: temporary paths become the repro's name, long output is cut,
and the Markdown has what an issue needs. The full report on a real failure, validated
against docs/report-schema.json, is in test_e2e_oracles.py."""

from __future__ import annotations

import tempfile

from reducer.cli import _backends
from reducer.iree import report


def test_the_candidates_temporary_path_becomes_the_repro_name():
    tmp = tempfile.gettempdir()
    out = report.clean_output(f"{tmp}/ireereduce-abc123/input.mlir:3:10: error: boom\n", "model.reduced.mlir")
    assert out == "model.reduced.mlir:3:10: error: boom"


def test_long_output_keeps_its_head_and_tail():
    lines = [f"line {i}" for i in range(500)]
    out = report.clean_output("\n".join(lines), "x.mlir").splitlines()
    assert len(out) == report.OUTPUT_LINES + 1
    assert out[0] == "line 0" and out[-1] == "line 499" and "440 lines" in out[report.OUTPUT_LINES // 2]


def test_the_markdown_has_the_repro_the_command_and_the_facts():
    data = {
        "title": "failed to legalize operation 'x'",
        "signature": {"summary": "exit 1: failed to legalize operation 'x'"},
        "oracle": {"kind": "compile-failure", "reproduce": "iree-compile out.mlir -o /dev/null"},
        "versions": {"ireereduce": "0.1.0", "iree-compile": "IREE 3.13.0", "python": "3.11.7", "platform": "Linux"},
        "input": "in.mlir",
        "seconds": 12.3,
        "oracle_calls": 40,
        "status": "reduced",
        "sizes": {
            "before": {"ops": 500, "bytes": 9000},
            "reduction_start": {"ops": 500, "bytes": 9000},
            "after": {"ops": 3, "bytes": 120},
        },
        "program": "module {}\n",
        "failure_output": "out.mlir:1:1: error: failed to legalize operation 'x'",
        "phase": "stream",
        "dispatch": None,
        "flags_removed": ["--a"],
        "for_upstream": [],
        "rejected_as_different_bug": 7,
    }
    md = report.to_markdown(data)
    assert md.startswith("# failed to legalize operation 'x'\n")
    assert "from `in.mlir` (500 ops, 9000 bytes) to 3 ops, 120 bytes, in 12 s and 40 oracle calls" in md
    for part in (
        "```mlir\nmodule {}\n```",
        "```sh\niree-compile out.mlir -o /dev/null\n```",
        "- failing phase: stream",
        "- flags not needed: `--a`",
        "- candidates rejected as a different bug: 7",
        "- iree-compile: IREE 3.13.0",
    ):
        assert part in md
    assert "dispatch:" not in md and "for upstream" not in md  # facts that do not apply are left out


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


def test_every_oracle_kind_is_in_the_report_schema_enum():
    """A new oracle kind must be added to the schema bots validate against (both copies),
    or this fails: the report's kind comes from the oracle's own declaration."""
    import json
    from pathlib import Path

    from reducer.core.oracle import RepeatOracle, ScriptOracle

    root = Path(__file__).resolve().parent.parent
    enums = [
        set(json.loads(p.read_text())["properties"]["oracle"]["properties"]["kind"]["enum"])
        for p in (root / "docs" / "report-schema.json", root / "reducer" / "schemas" / "report-schema.json")
    ]
    classes = [c for c in _oracle_classes() if c is not RepeatOracle]
    assert len(classes) >= 4
    for cls in classes:
        for enum in enums:
            assert cls.kind in enum, cls
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
