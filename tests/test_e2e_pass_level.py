"""Crash reproducers with the real iree-compile and iree-opt: a local reproducer given
alone is reduced with its replay as the oracle, a full-pipeline one is refused in one
line, and --pass-level reduces the IR entering the failing pass of a codegen
legalization, a narrow-type emulation and a stream-level failure."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import attrs
import jsonschema
import pytest
from conftest import needs_iree
from programs import COMPILE

from reducer.iree import reproducer, signature
from reducer.session import EXIT_NOT_REPLAYABLE, LimitReached, Settings, reduce_file

pytestmark = [pytest.mark.e2e, needs_iree]

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "f6-legalize" / "model.mlir"
CMD = COMPILE + " {input} -o /dev/null"
SCHEMA = json.loads((ROOT / "docs" / "report-schema.json").read_text())


def models():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import models

    return models


def replay(path: Path) -> signature.Signature:
    """What `iree-opt --run-reproducer` says on a file: the resource alone drives it."""
    proc = subprocess.run(
        ["iree-opt", "--run-reproducer", str(path), "-o", "/dev/null"], capture_output=True, text=True
    )
    return signature.of(proc.returncode, proc.stderr)


def compile_failure(path: Path) -> signature.Signature:
    proc = subprocess.run(f"{COMPILE} {path} -o /dev/null", shell=True, capture_output=True, text=True)
    return signature.of(proc.returncode, proc.stderr)


@pytest.fixture(scope="module")
def local_repro(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The f6 example's local reproducer, as a user makes it with the documented flags."""
    path = tmp_path_factory.mktemp("repro") / "repro.mlir"
    subprocess.run(
        f"{COMPILE} {EXAMPLE} -o /dev/null --mlir-pass-pipeline-crash-reproducer={path} "
        "--mlir-pass-pipeline-local-reproducer --mlir-disable-threading",
        shell=True,
        capture_output=True,
    )
    assert reproducer.find(path.read_text()) is not None
    return path


def test_a_local_reproducer_alone_is_reduced_by_its_replay_and_stays_replayable(local_repro: Path, tmp_path: Path):
    original = replay(local_repro)
    assert original.kind == "error" and "arith.truncf" in original.first_error
    out = tmp_path / "out.mlir"
    result = reduce_file(Settings(str(local_repro), output=str(out), jobs=2))  # no check, no command
    assert result.oracle is not None and result.oracle.kind == "pass-replay"
    text = out.read_text()
    assert "mlir_reproducer" in text and text.count("{-#") == 1  # the resource is back, once
    assert replay(out).matches(original)  # the output replays the same error on its own
    assert result.stats.final.ops is not None and result.stats.final.ops <= 25
    assert local_repro.read_text().count("\n") > 5000  # the input is untouched


def test_a_reproducer_with_the_users_replay_check_is_reduced_as_mlir(tmp_path: Path):
    """The user's check replays each candidate with `iree-opt --run-reproducer`: every
    candidate carries the resource MLIR's printer drops. Without it the check rejected
    the re-printed input, and the run fell back to text (90 s for 22% of the bytes)."""
    from test_replay import LOCAL

    src, out, check = tmp_path / "repro.mlir", tmp_path / "out.mlir", tmp_path / "check.sh"
    src.write_text(LOCAL)
    check.write_text(
        '#!/bin/sh\niree-opt --run-reproducer "$1" -o /dev/null 2>&1 | grep -q "error: failed to legalize"\n'
    )
    check.chmod(0o755)
    result = reduce_file(Settings(str(src), check=str(check), output=str(out), jobs=2))
    assert result.mode == "mlir" and result.oracle is not None and result.oracle.kind == "check-script"
    text = out.read_text()
    assert text.count("{-#") == 1 and text.endswith(reproducer.find(LOCAL).block())  # type: ignore[union-attr]
    assert replay(out).matches(replay(src))
    assert result.stats.final.ops is not None and result.stats.final.ops < result.stats.original.ops  # type: ignore[operator]
    assert src.read_text() == LOCAL


def test_a_reproducer_with_blobs_and_the_users_replay_check_keeps_both(tmp_path: Path):
    """Audit 9 (A1): a reproducer whose section also holds `dense_resource` blobs gave
    its candidates the blobs alone; the check's replay had no pipeline, and the run fell
    back to text (343 checks in 100 s for a third of the bytes). Each candidate and the
    output now hold the blobs they use and the resource."""
    from test_replay import LOCAL

    text = LOCAL.replace(
        "          %c0 = arith.constant 0 : index\n",
        "          %c0 = arith.constant 0 : index\n          %w = arith.constant dense_resource<w2> : tensor<2xf32>\n",
    ).replace(
        "{-#\n  external_resources:",
        '{-#\n  dialect_resources: {\n    builtin: {\n      w2: "0x040000000000804000008040"\n    }\n  },\n'
        "  external_resources:",
    )
    src, out, check = tmp_path / "repro.mlir", tmp_path / "out.mlir", tmp_path / "check.sh"
    src.write_text(text)
    check.write_text(
        "#!/bin/sh\ngrep -q 'dense_resource<w2>' \"$1\" && "
        'iree-opt --run-reproducer "$1" -o /dev/null 2>&1 | grep -q "error: failed to legalize"\n'
    )
    check.chmod(0o755)
    assert subprocess.run([str(check), str(src)]).returncode == 0
    result = reduce_file(Settings(str(src), check=str(check), output=str(out), jobs=2))
    assert result.mode == "mlir"
    written = out.read_text()
    assert "mlir_reproducer" in written and 'w2: "0x0400000000008040' in written  # a shrunk constant's blob is cut
    assert subprocess.run([str(check), str(out)]).returncode == 0 and replay(out).matches(replay(src))
    assert result.stats.final.ops is not None and result.stats.final.ops < result.stats.original.ops  # type: ignore[operator]
    assert src.read_text() == text


def test_a_full_pipeline_reproducer_gets_one_line_on_making_a_local_one(tmp_path: Path):
    from test_replay import FULL

    src = tmp_path / "full.mlir"
    src.write_text(FULL)
    proc = subprocess.run(
        [sys.executable, "-m", "reducer.cli", str(src), "-j", "1", "-q"], capture_output=True, text=True, cwd=tmp_path
    )
    assert proc.returncode == EXIT_NOT_REPLAYABLE
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and str(src) in lines[0]
    assert "--mlir-pass-pipeline-local-reproducer" in lines[0] and "--mlir-disable-threading" in lines[0]
    assert not (tmp_path / "full.reduced.mlir").exists()


def test_a_reproducer_in_bytecode_is_replayed_as_one(tmp_path: Path):
    """Audit 6 (b11), audit 7 (W6): iree-opt replays a reproducer saved as bytecode, but
    the bindings drop its resource, so the input was not seen as one ("give --check")."""
    from test_replay import LOCAL

    text, src, out = tmp_path / "repro.mlir", tmp_path / "repro.mlirbc", tmp_path / "out.mlir"
    text.write_text(LOCAL)
    subprocess.run(["iree-opt", "--emit-bytecode", str(text), "-o", str(src)], check=True)
    result = reduce_file(Settings(str(src), output=str(out), jobs=2))  # no check, no command
    assert result.oracle is not None and result.oracle.kind == "pass-replay"
    assert out.read_text().count("mlir_reproducer") == 1 and replay(out).matches(replay(text))


def test_a_reproducer_in_bytecode_with_the_users_check_asks_for_text(tmp_path: Path):
    """The review: the bytecode each check gets would drop the resource, so the check
    rejected even the original (exit 5, "invert your script's exit codes")."""
    from test_replay import LOCAL

    from reducer.session import EXIT_USAGE, UserError

    text, src = tmp_path / "repro.mlir", tmp_path / "repro.mlirbc"
    text.write_text(LOCAL)
    subprocess.run(["iree-opt", "--emit-bytecode", str(text), "-o", str(src)], check=True)
    check = tmp_path / "check.sh"
    check.write_text(
        '#!/bin/sh\niree-opt --run-reproducer "$1" -o /dev/null 2>&1 | grep -q "error: failed to legalize"\n'
    )
    check.chmod(0o755)
    with pytest.raises(UserError) as err:
        reduce_file(Settings(str(src), check=str(check), output=str(tmp_path / "out.mlir"), jobs=1))
    assert err.value.code == EXIT_USAGE and "give it as text (iree-opt" in str(err.value)


def test_a_local_reproducer_naming_an_unknown_pass_names_it(tmp_path: Path):
    """Audit 7 (W7): the line said "a pass" and called a local reproducer a full-pipeline
    one, with advice on making a local one."""
    from test_replay import LOCAL

    found = reproducer.find(LOCAL)
    assert found is not None
    src = tmp_path / "repro.mlir"
    src.write_text(LOCAL.replace(found.pipeline, "builtin.module(no-such-pass)"))
    proc = subprocess.run(
        [sys.executable, "-m", "reducer.cli", str(src), "-j", "1", "-q"], capture_output=True, text=True, cwd=tmp_path
    )
    assert proc.returncode == EXIT_NOT_REPLAYABLE, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "'no-such-pass' in its pipeline does not refer to a registered pass" in lines[0]
    assert "full-pipeline" not in lines[0] and "another version of IREE" in lines[0]


def test_pass_level_reduces_the_failing_pass_and_reports_both_commands(tmp_path: Path):
    src = tmp_path / "model.mlir"
    src.write_text(EXAMPLE.read_text())
    out, report = tmp_path / "out.mlir", tmp_path / "report.json"
    md = tmp_path / "report.md"
    from reducer import api

    done = api.reduce(src, compile=CMD, pass_level=True, output=out, jobs=2, report=str(md), report_json=str(report))
    result = done.result
    data = json.loads(report.read_text())
    jsonschema.validate(data, SCHEMA)
    level = data["pass_level"]
    assert level is not None and "iree-convert-to-llvm" in level["pipeline"]
    # The failing executable compiled alone wrote it: its IR holds that executable only.
    assert level["executable"] == "module_main_dispatch_17.mlir"
    assert result.stats.original.ops is not None and result.stats.original.ops < 400, result.stats.original
    assert level["input_level"].startswith("iree-compile ") and " model.mlir " in level["input_level"]
    assert data["oracle"]["kind"] == "pass-replay"
    assert data["oracle"]["reproduce"].startswith("iree-opt --pass-pipeline='builtin.module(")
    assert replay(out).first_error == compile_failure(src).first_error  # the same error, at the pass
    assert result.stats.final.ops is not None and result.stats.final.ops <= 25
    markdown = md.read_text()
    assert "iree-opt --run-reproducer" in markdown and level["input_level"] in markdown


def test_pass_level_dumps_the_sources_beside_the_originals_check(tmp_path: Path):
    """A code generation failure's reproducer comes from the executables' sources one
    compile dumps. That compile starts with the original's first check and, failing the
    same way, is its second check: the original is compiled plainly once, not twice,
    and the sources are not dumped twice."""
    from conftest import watched_compile

    src = tmp_path / "model.mlir"
    src.write_text(EXAMPLE.read_text())
    program, log = watched_compile(tmp_path, str(src), "dump-executable-sources-to", "dumped")
    settings = Settings(
        str(src), compile=program + CMD[len("iree-compile") :], pass_level=True, output=str(tmp_path / "out.mlir")
    )
    with pytest.raises(LimitReached) as stopped:  # the start is what is counted here
        reduce_file(attrs.evolve(settings, jobs=2, max_checks=2))
    level = stopped.value.args[0].findings.pass_level
    assert level is not None and level["executable"] == "module_main_dispatch_17.mlir"
    assert sorted(log.read_text().split()) == ["dumped", "plain-beside"]
    # Audit 18 W14: which iree-opt replays is said (none beside the wrapper: PATH's).
    replays = shutil.which("iree-opt")
    assert replays and any(f"with {replays}," in n for n in stopped.value.args[0].findings.notes)


@pytest.mark.parametrize("linked", [False, True], ids=["path", "link to it"])
def test_pass_level_replays_with_the_iree_opt_beside_the_compiler_given_by_path(tmp_path: Path, linked: bool):
    """The review: a compiler engineer's own build, given by path, wrote the reproducer,
    and iree-opt as PATH found it (another build, or the wheel's) replayed it. The
    build's own iree-opt replays it now; audit 17 (W5): also through a link to it."""
    import shutil

    from conftest import make_script

    build = tmp_path / "build" / "tools"
    build.mkdir(parents=True)
    calls = tmp_path / "opt-calls"
    make_script(build / "iree-compile", f'exec {shutil.which("iree-compile")} "$@"')
    make_script(build / "iree-opt", f'echo >> {calls}; exec {shutil.which("iree-opt")} "$@"')
    src = tmp_path / "model.mlir"
    src.write_text(EXAMPLE.read_text())
    out = tmp_path / "out.mlir"
    program = build / "iree-compile"
    if linked:
        (tmp_path / "bin").mkdir()
        (tmp_path / "bin" / "iree-compile").symlink_to(program)
        program = tmp_path / "bin" / "iree-compile"
    command = CMD.replace("iree-compile", str(program), 1)
    with pytest.raises(LimitReached) as stopped:  # the triage, and a few checks of the reduction
        reduce_file(Settings(str(src), compile=command, pass_level=True, output=str(out), jobs=2, max_checks=4))
    result = stopped.value.result
    assert result.findings.pass_level is not None
    assert result.oracle is not None and result.oracle.kind == "pass-replay"
    assert result.oracle.reproducer("r.mlir").startswith(f"{build / 'iree-opt'} --pass-pipeline=")
    assert calls.exists() and len(calls.read_text()) >= 2  # the triage's replay, and the reduction's


@pytest.mark.parametrize(
    ("make", "pipeline"),
    [
        (lambda m: m.transformer(bug="i4dyn"), "iree-codegen-emulate-narrow-type"),  # narrow-type emulation
        (lambda m: m.convnet(bug="i4odd"), "iree-stream-encode-host-tensors"),  # stream, before codegen
    ],
    ids=["narrow-type", "stream"],
)
def test_pass_level_on_the_corpus_failures_keeps_the_error(tmp_path: Path, make, pipeline: str):
    src = tmp_path / "model.mlir"
    src.write_text(make(models()))
    out = tmp_path / "out.mlir"
    result = reduce_file(Settings(str(src), compile=CMD, pass_level=True, output=str(out), jobs=2))
    assert result.findings.pass_level is not None and pipeline in str(result.findings.pass_level["pipeline"])
    assert replay(out).first_error == compile_failure(src).first_error
    assert result.stats.final.ops is not None and result.stats.final.ops <= 25


def test_a_compile_run_failing_in_a_pass_says_pass_level_is_one_flag_away(tmp_path: Path):
    src = tmp_path / "model.mlir"
    src.write_text(models().convnet(bug="i4odd"))
    proc = subprocess.run(
        [sys.executable, "-m", "reducer.cli", str(src), "--compile", CMD, "-j", "2", "-q", "--max-checks", "2"],
        capture_output=True,
        text=True,
    )
    assert "a pass-level repro is one flag away" in proc.stderr, proc.stderr[-2000:]


def test_the_passes_the_failure_does_not_need_leave_the_pipeline_and_the_output_resource(tmp_path: Path):
    """Pipeline reduction on a reproducer input: the flag reduction's pass variants drop
    the two cse passes, and the output's resource names the pipeline left."""
    from test_replay import LOCAL

    found = reproducer.find(LOCAL)
    assert found is not None
    longer = found.pipeline.replace("builtin.module(hal.executable(", "builtin.module(cse,hal.executable(", 1)
    longer = longer.replace("builtin.module(iree-convert-to-llvm", "builtin.module(cse,iree-convert-to-llvm")
    src = tmp_path / "repro.mlir"
    src.write_text(reproducer.strip(LOCAL) + reproducer.Reproducer(longer).block())
    out = tmp_path / "out.mlir"
    result = reduce_file(Settings(str(src), output=str(out), jobs=2))
    left = reproducer.find(out.read_text())
    assert left is not None and left.pipeline == found.pipeline, result.findings.flags_removed
    assert replay(out).matches(replay(src))


def test_pass_level_on_dask_workers_gives_the_local_output(tmp_path: Path):
    """The replays run on an embedded Dask cluster's workers (iree-opt found there): the
    same reproducer and the same output as the local pool's."""
    src = tmp_path / "model.mlir"
    src.write_text(EXAMPLE.read_text())
    outputs = {}
    for executor in ("local", "dask"):
        out = tmp_path / f"{executor}.mlir"
        result = reduce_file(
            Settings(str(src), compile=CMD, pass_level=True, output=str(out), jobs=2, executor=executor)
        )
        assert result.oracle is not None and result.oracle.kind == "pass-replay"
        assert result.findings.pass_level is not None and result.stats.oracle_calls > 10
        outputs[executor] = out.read_text()
    assert outputs["dask"] == outputs["local"]
    assert replay(tmp_path / "dask.mlir").first_error == compile_failure(src).first_error


def test_an_executables_reproducer_that_replays_otherwise_falls_back_to_the_whole_compile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """When the executable compiled alone gives a reproducer whose replay does not fail
    the compile's way, the whole compile writes one, as before the shortcut."""
    calls = []

    def passing(oracle, data, dumped=None, cancel=None):
        calls.append(1)
        return reproducer.Local("module {}\n", reproducer.Reproducer("builtin.module(cse)"), 0.1, 2, "x.mlir")

    monkeypatch.setattr(reproducer, "in_executable", passing)
    src = tmp_path / "model.mlir"
    src.write_text(EXAMPLE.read_text())
    out = tmp_path / "out.mlir"
    result = reduce_file(Settings(str(src), compile=CMD, pass_level=True, output=str(out), jobs=2))
    level = result.findings.pass_level
    assert calls == [1] and level is not None and level["executable"] is None
    assert "iree-convert-to-llvm" in str(level["pipeline"])
    assert replay(out).first_error == compile_failure(src).first_error
