"""MLIR bytecode inputs and outputs (issue 30): read like their text form, checked as
bytecode, written as text unless asked, and refused in one line when unreadable."""

from __future__ import annotations

import concurrent.futures
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import make_script, needs_iree
from programs import COMPILE, F6_ERROR, mlp
from test_faults import BIG, SMALL

from reducer import session
from reducer.core import bytecode
from reducer.core.encoded import Encoded
from reducer.core.executor import Executor, ExecutorStats
from reducer.core.oracle import Oracle, Verdict

#: A check that accepts only bytecode under the input's .mlirbc name, then asks iree-opt.
STRICT = """case "$1" in *.mlirbc) ;; *) exit 1;; esac
[ "$(head -c 4 "$1" | od -An -tx1 | tr -d ' \\n')" = 4d4cef52 ] || exit 1
iree-opt "$1" 2>/dev/null | grep -q math.exp"""


def emit(text: str, path: Path, *flags: str) -> Path:
    """path holding text's bytecode, as iree-opt writes it."""
    src = path.with_suffix(".src.mlir")
    src.write_text(text)
    subprocess.run(["iree-opt", "--emit-bytecode", *flags, str(src), "-o", str(path)], check=True)
    src.unlink()
    return path


def cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, TMPDIR=str(cwd / "tmp"))
    (cwd / "tmp").mkdir(exist_ok=True)
    return subprocess.run(
        [sys.executable, "-m", "reducer.cli", *args], cwd=cwd, capture_output=True, text=True, timeout=300, env=env
    )


def error_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    errors = [ln for ln in stderr.splitlines() if ln.startswith("ireereduce: error")]
    assert len(errors) == 1, stderr
    return errors[0]


# -- the pieces ------------------------------------------------------------------------


class _Recording(Executor):
    """Keeps what reaches it; every check interesting."""

    def __init__(self) -> None:
        self.workers, self.stats, self.seen = 1, ExecutorStats(), []

    def submit(self, data: bytes, oracle: Oracle | None = None) -> concurrent.futures.Future[Verdict]:
        self.seen.append(data)
        f: concurrent.futures.Future[Verdict] = concurrent.futures.Future()
        f.set_result(Verdict(True, 0))
        return f

    def cancel(self, future: concurrent.futures.Future[Verdict]) -> None:
        pass

    def close(self, abort: bool = False) -> None:
        pass


def test_checks_get_bytecode_and_text_without_a_bytecode_form_is_not_checked():
    inner = _Recording()
    executor = Encoded(inner, bytecode.Writer(), "no bytecode form")
    assert executor.run(SMALL.encode()).interesting
    assert bytecode.is_bytecode(inner.seen[0]) and "math.exp" in bytecode.to_text(inner.seen[0])
    verdict = executor.run(b"func.func @f( {")
    assert not verdict.interesting and verdict.stderr_tail == "no bytecode form"
    assert len(inner.seen) == 1


# -- end to end --------------------------------------------------------------------------


@pytest.mark.e2e
@needs_iree
@pytest.mark.parametrize("how", ["grep", "iree-compile"])
def test_text_and_bytecode_forms_of_one_input_reduce_to_the_same_program(tmp_path: Path, how: str):
    model = mlp(layers=4, bad_layer=2)
    (tmp_path / "model.mlir").write_text(model)
    emit(model, tmp_path / "model.mlirbc")
    if how == "grep":
        check = make_script(tmp_path / "check.sh", 'iree-opt "$1" 2>/dev/null | grep -q f6E2M3FN')
    else:
        check = make_script(tmp_path / "check.sh", f'{COMPILE} "$1" -o /dev/null 2>&1 | grep -q "{F6_ERROR}"')
    outs = {}
    for name in ("model.mlir", "model.mlirbc"):
        out = tmp_path / f"{name}.out.mlir"
        proc = cli(tmp_path, name, "--check", str(check), "-j", "2", "-o", str(out))
        assert proc.returncode == 0, proc.stderr
        outs[name] = out.read_text()
    assert outs["model.mlir"] == outs["model.mlirbc"]
    assert "f6E2M3FN" in outs["model.mlirbc"] and outs["model.mlirbc"].count(" = ") <= 3


BLOB = """func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
  %w = arith.constant dense_resource<weights> : tensor<4xf32>
  %0 = arith.addf %a, %w : tensor<4xf32>
  %1 = math.atan2 %0, %a : tensor<4xf32>
  return %1 : tensor<4xf32>
}
{-#
  dialect_resources: {
    builtin: {
      weights: "0x040000000000803F000000400000404000008040"
    }
  }
#-}
"""


@pytest.mark.e2e
@needs_iree
def test_a_blob_keeps_its_key_and_its_bytes_whatever_form_the_input_came_in(tmp_path: Path):
    """Audit 7 (D1): from bytecode (and stdin), the blob stayed in the text, was renamed
    at every parse and was lost from the output (`dense_resource<weights_6_2>`, no
    section), an output ireereduce itself then refused. Now split off as a text file's."""
    (tmp_path / "blob.mlir").write_text(BLOB)
    emit(BLOB, tmp_path / "blob.mlirbc")
    check = make_script(
        tmp_path / "check.sh",
        'iree-opt "$1" 2>/dev/null | grep -q "dense_resource<weights>.*tensor<" && iree-opt "$1" | grep -q math.atan2',
    )
    outs = {}
    for name, out in [("blob.mlir", "t.mlir"), ("blob.mlirbc", "b.mlir"), ("-", "s.mlir"), ("blob.mlirbc", "b.mlirbc")]:
        env = dict(os.environ, TMPDIR=str(tmp_path / "tmp"))
        (tmp_path / "tmp").mkdir(exist_ok=True)
        proc = subprocess.run(
            [sys.executable, "-m", "reducer.cli", name, "--check", str(check), "-j", "2", "-o", out],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
            input=BLOB if name == "-" else None,
        )
        assert proc.returncode == 0, proc.stderr
        outs[out] = bytecode.program_text((tmp_path / out).read_bytes())
    assert outs["t.mlir"] == outs["b.mlir"] == outs["s.mlir"], outs
    for text in outs.values():
        assert "dense_resource<weights>" in text and 'weights: "0x04000000' in text, text
    again = cli(tmp_path, "b.mlir", "--check", str(check), "-o", "again.mlir")  # the output is an input again
    assert again.returncode == 0, again.stderr


@pytest.mark.e2e
@needs_iree
def test_a_check_that_needs_bytecode_gets_bytecode_under_the_inputs_name(tmp_path: Path):
    emit(BIG, tmp_path / "in.mlirbc")
    make_script(tmp_path / "check.sh", STRICT)
    proc = cli(tmp_path, "in.mlirbc", "--check", "check.sh", "-j", "2")
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "in.reduced.mlir"  # text by default, for people
    text = out.read_text()
    assert "math.exp" in text and "arith.negf" not in text
    assert "as mlir" in proc.stderr


@pytest.mark.e2e
@needs_iree
@pytest.mark.parametrize("how", [["-o", "out.mlirbc"], ["-o", "out.mlir", "--emit-bytecode"]])
def test_the_output_is_bytecode_when_asked_and_iree_opt_reads_it(tmp_path: Path, how: list[str]):
    (tmp_path / "in.mlir").write_text(BIG)
    make_script(tmp_path / "check.sh", 'iree-opt "$1" 2>/dev/null | grep -q math.exp')
    proc = cli(tmp_path, "in.mlir", "--check", "check.sh", "-j", "2", *how, "--report", "report.md")
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / how[1]
    assert bytecode.is_bytecode(out.read_bytes())
    read = subprocess.run(["iree-opt", str(out)], capture_output=True, text=True)
    assert read.returncode == 0, read.stderr
    assert "math.exp" in read.stdout and "arith.negf" not in read.stdout
    assert "math.exp" in (tmp_path / "report.md").read_text()  # the report shows it as text


@pytest.mark.e2e
@needs_iree
@pytest.mark.parametrize(
    "damage, words",
    [
        (lambda data: data[: len(data) // 2], "truncated or corrupt"),
        (lambda data: data[:4] + b"\xff" * 12 + data[16:], "truncated or corrupt"),
        (lambda data: SMALL.encode(), "does not start with MLIR's bytecode magic"),
    ],
    ids=["truncated", "corrupt", "text-named-mlirbc"],
)
def test_unreadable_bytecode_is_one_line_naming_the_file(tmp_path: Path, damage, words: str):
    good = emit(BIG, tmp_path / "good.mlirbc").read_bytes()
    (tmp_path / "in.mlirbc").write_bytes(damage(good))
    make_script(tmp_path / "check.sh", f"touch {tmp_path}/ran; exit 0")
    proc = cli(tmp_path, "in.mlirbc", "--check", "check.sh")
    assert proc.returncode == session.EXIT_BAD_INPUT == 3, proc.stderr
    line = error_line(proc.stderr)
    assert "'in.mlirbc'" in line and words in line, line
    assert "not UTF-8" not in line
    assert not (tmp_path / "ran").exists() and not (tmp_path / "in.reduced.mlir").exists()


def _kill_mid_run(tmp_path: Path, name: str) -> None:
    out = tmp_path / "in.reduced.mlir"
    env = dict(os.environ, TMPDIR=str(tmp_path / "tmp"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "reducer.cli", name, "--check", "check.sh", "-j", "1"],
        cwd=tmp_path,
        stderr=subprocess.DEVNULL,
        env=env,
        start_new_session=True,
    )
    deadline = time.monotonic() + 120
    while not out.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert (tmp_path / "in.reduced.mlir.resume").is_dir()


@pytest.mark.e2e
@needs_iree
def test_a_killed_bytecode_run_continues_and_its_state_knows_the_bytes(tmp_path: Path):
    emit(BIG, tmp_path / "in.mlirbc")
    make_script(tmp_path / "check.sh", "sleep 0.1\n" + STRICT)
    whole = cli(tmp_path, "in.mlirbc", "--check", "check.sh", "-j", "1", "-o", "whole.mlir")
    assert whole.returncode == 0, whole.stderr
    _kill_mid_run(tmp_path, "in.mlirbc")
    again = cli(tmp_path, "in.mlirbc", "--check", "check.sh", "-j", "1")
    assert again.returncode == 0, again.stderr
    assert "continuing the interrupted run recorded in in.reduced.mlir.resume" in again.stderr
    assert (tmp_path / "in.reduced.mlir").read_bytes() == (tmp_path / "whole.mlir").read_bytes()
    assert not (tmp_path / "in.reduced.mlir.resume").exists()
    # The same program in other bytes (another producer string) is another input.
    (tmp_path / "in.reduced.mlir").unlink()
    _kill_mid_run(tmp_path, "in.mlirbc")
    emit(BIG, tmp_path / "in.mlirbc", "--emit-bytecode-producer=elsewhere")
    other = cli(tmp_path, "in.mlirbc", "--check", "check.sh", "-j", "1")
    assert other.returncode == session.EXIT_STATE_MISMATCH, other.stderr
    assert "the input changed" in error_line(other.stderr)
