"""Big inline weights (issue 30): `dense_resource` blobs stay in the input file, the run
reduces the program that refers to them by key, and each file it writes gets the blobs
its program still uses, copied from the input."""

from __future__ import annotations

import pickle
import subprocess
from pathlib import Path

import pytest
from conftest import make_script, needs_iree
from programs import COMPILE
from test_bytecode import cli

from reducer.core import resources
from reducer.core.ir import PrintOptions
from reducer.core.oracle import candidate_dir, whole
from reducer.core.workspace import Candidate, MLIRWorkspace
from reducer.session.source import load_input, read_input
from strategies.shrink_tensors import ShrinkTensors
from strategies.shrink_values import ShrinkValues

#: Blob data: 16 f32 (a 4-byte alignment word first), not a splat.
HEX_W = "0x04000000" + "".join(f"{i:02X}000000" for i in range(1, 17))
HEX_B = "0x04000000" + "".join(f"{i:02X}00803F" for i in range(1, 17))

MODULE = """module {
  func.func @main(%x: tensor<16xf32>, %a: tensor<4xf32>) -> (tensor<16xf32>, tensor<4xf32>) {
    %w = arith.constant dense_resource<w> : tensor<16xf32>
    %b = arith.constant dense_resource<bias> : tensor<16xf32>
    %s = arith.addf %x, %w : tensor<16xf32>
    %p = arith.mulf %s, %b : tensor<16xf32>
    %e = math.exp %a : tensor<4xf32>
    %t = math.atan2 %e, %a : tensor<4xf32>
    return %p, %t : tensor<16xf32>, tensor<4xf32>
  }
}
"""

SECTION = f"""
{{-#
  dialect_resources: {{
    builtin: {{
      w: "{HEX_W}",
      bias: "{HEX_B}"
    }}
  }}
#-}}
"""

#: What iree-compile 3.13 says of f6E2M3FN arithmetic on the CPU (the op it names varies
#: with what fuses around it: `arith.truncf`, or here a `vector.store`).
LEGALIZE = "failed to legalize operation"

#: A section with more than blobs: a crash reproducer's pipeline.
MIXED = f"""
{{-#
  dialect_resources: {{
    builtin: {{
      w: "{HEX_W}",
      bias: "{HEX_B}"
    }}
  }},
  external_resources: {{
    mlir_reproducer: {{
      pipeline: "builtin.module(canonicalize)",
      disable_threading: false,
      verify_each: true
    }}
  }}
#-}}
"""


def write(tmp_path: Path, section: str = SECTION, name: str = "model.mlir") -> Path:
    path = tmp_path / name
    path.write_text(MODULE + section)
    return path


# -- the pieces ------------------------------------------------------------------------


#: MIXED with another dialect's resource too (which iree-opt does not know).
OTHER = MIXED.replace("    builtin: {", '    acme: {\n      table: "0x0400000001020304"\n    },\n    builtin: {')


def test_the_run_reads_the_program_without_the_blobs_and_keeps_the_rest(tmp_path: Path):
    given = load_input(str(write(tmp_path, OTHER)))
    assert HEX_W[4:] not in given.text and HEX_B[4:] not in given.text
    assert "dense_resource<w>" in given.text and "dense_resource<bias>" in given.text
    # Everything in the section that is not a builtin blob stays in the text as it was.
    assert "mlir_reproducer" in given.text and 'pipeline: "builtin.module(canonicalize)"' in given.text
    assert 'table: "0x0400000001020304"' in given.text and "builtin: {" not in given.text
    assert given.blobs is not None and sorted(given.blobs.spans) == ["bias", "w"]
    assert len(given.data) == 32  # the file's digest, not its bytes
    assert read_input(str(tmp_path / "model.mlir")) == MODULE + OTHER  # the public reader: whole


@pytest.mark.e2e
@needs_iree
def test_the_program_with_its_blobs_is_the_file_and_parses(tmp_path: Path):
    path = write(tmp_path, MIXED)
    given = load_input(str(path))
    assert given.blobs is not None
    data = given.blobs.attach(given.text.encode())
    with candidate_dir(data, "model.mlir") as (_tmp, written):
        file = Path(written).read_text()
    assert file == whole(data).decode()
    assert HEX_W in file and HEX_B in file and "mlir_reproducer" in file
    out = subprocess.run(["iree-opt", "-"], input=file, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert HEX_W.upper()[2:] in out.stdout.upper()
    again = pickle.loads(pickle.dumps(data))  # how it reaches a worker
    assert again == data and whole(again) == whole(data)


def test_a_file_gets_only_the_blobs_its_program_uses(tmp_path: Path):
    given = load_input(str(write(tmp_path)))
    assert given.blobs is not None
    program = given.text.replace("dense_resource<bias>", "dense<1.0>")
    file = whole(given.blobs.attach(program.encode())).decode()
    assert HEX_W in file and HEX_B not in file and "bias:" not in file
    none = given.text.replace("dense_resource<bias>", "dense<1.0>").replace("dense_resource<w>", "dense<1.0>")
    assert whole(given.blobs.attach(none.encode())) == none.encode()  # no section at all


def test_a_used_blob_counts_its_bytes_and_an_unused_one_none(tmp_path: Path):
    given = load_input(str(write(tmp_path)))
    assert given.blobs is not None
    ws = MLIRWorkspace(given.text, PrintOptions(), blob_sizes=given.blobs.sizes)
    text = ws.program.text
    assert ws.size.bytes == len(text.encode()) + len(f'"{HEX_W}"') + len(f'"{HEX_B}"')
    dropped = text.replace("dense_resource<bias>", "dense_resource<w>")
    assert ws.weigh(dropped) == len(dropped.encode()) + len(f'"{HEX_W}"')


def test_a_blob_made_a_splat_is_smaller_though_its_key_is_shorter_than_the_splat(tmp_path: Path):
    """`dense_resource<w>` prints shorter than `dense<0.000000e+00>`: only the blob's own
    bytes make the splat progress."""
    given = load_input(str(write(tmp_path)))
    assert given.blobs is not None
    ws = MLIRWorkspace(given.text, PrintOptions(), blob_sizes=given.blobs.sizes)
    strategy = ShrinkTensors()
    edits = [e for e in ws.opportunities(strategy) if e.kind == "splat"]
    made = [ws.materialize(strategy, [e]) for e in edits]
    splats = [c for c in made if isinstance(c, Candidate)]
    assert len(splats) == 2, made


def test_a_program_parsed_again_keeps_the_inputs_keys(tmp_path: Path):
    """The workspace parses text strategies' candidates in its own context, where MLIR
    renames a key it already holds (`w_1`): the key must stay the file's."""
    given = load_input(str(write(tmp_path)))
    assert given.blobs is not None
    ws = MLIRWorkspace(given.text, PrintOptions(), blob_sizes=given.blobs.sizes)
    strategy = ShrinkTensors()
    dims = [e for e in ws.opportunities(strategy) if e.kind == "dim" and e.arg == (4, 1)]
    made = ws.materialize(strategy, dims)
    assert isinstance(made, Candidate), made
    assert "dense_resource<w>" in made.text and "dense_resource<bias>" in made.text, made.text
    ws.commit(made)
    again = ws.materialize(strategy, [e for e in ws.opportunities(strategy) if e.kind == "dim"][:1])
    assert isinstance(again, Candidate) and "dense_resource<w>" in again.text, again
    assert resources.unrenamed("w_1_2", {"w": 1, "w_1": 1}) == "w_1"
    assert resources.unrenamed('"a b_3"', {'"a b"': 1}) == '"a b"'


# -- end to end --------------------------------------------------------------------------


@pytest.mark.e2e
@needs_iree
def test_a_check_that_reads_the_weights_gets_them_and_the_output_keeps_them(tmp_path: Path):
    """iree-opt prints the blob it read: only a candidate file that holds it passes."""
    write(tmp_path, MIXED)
    digits = HEX_W[10:30]
    make_script(tmp_path / "check.sh", f'iree-opt "$1" 2>/dev/null | grep -qi {digits} && grep -q math.atan2 "$1"')
    proc = cli(tmp_path, "model.mlir", "--check", "check.sh", "-j", "2", "-o", "out.mlir")
    assert proc.returncode == 0, proc.stderr
    out = (tmp_path / "out.mlir").read_text()
    assert HEX_W[:30] in out and HEX_B[10:] not in out and "math.atan2" in out  # the blob cut to its type
    assert out.count("dense_resource<") == 1, out


@pytest.mark.e2e
@needs_iree
def test_an_iree_compile_bug_beside_the_weights_reduces_without_them(tmp_path: Path):
    model = MODULE.replace(
        "    %t = math.atan2 %e, %a : tensor<4xf32>\n",
        "    %q = arith.truncf %e : tensor<4xf32> to tensor<4xf6E2M3FN>\n"
        "    %r = arith.extf %q : tensor<4xf6E2M3FN> to tensor<4xf32>\n"
        "    %t = math.atan2 %r, %a : tensor<4xf32>\n",
    )
    (tmp_path / "model.mlir").write_text(model + SECTION)
    make_script(tmp_path / "check.sh", f'{COMPILE} "$1" -o /dev/null 2>&1 | grep -q "{LEGALIZE}"')
    proc = cli(tmp_path, "model.mlir", "--check", "check.sh", "-j", "2", "-o", "out.mlir")
    assert proc.returncode == 0, proc.stderr
    out = (tmp_path / "out.mlir").read_text()
    assert "f6E2M3FN" in out and "{-#" not in out and "dense_resource" not in out, out
    assert out.count(" = ") <= 2, out


def test_a_shrunk_blob_constant_keeps_its_first_elements(tmp_path: Path):
    """shrink-values cuts a blob constant as it cuts a dense literal: the file written for
    the check holds the blob's first elements only, not one repeated value."""
    given = load_input(str(write(tmp_path)))
    assert given.blobs is not None
    ws = MLIRWorkspace(given.text, PrintOptions(), blob_sizes=given.blobs.sizes)
    strategy = ShrinkValues()
    cuts = [e for e in ws.opportunities(strategy) if e.kind == "constant" and e.arg == (0, 8)]
    assert cuts, "the blob constants offer no cut"
    made = ws.materialize(strategy, cuts[:1])
    assert isinstance(made, Candidate), made
    assert "dense_resource<w> : tensor<8xf32>" in made.text, made.text
    file = whole(given.blobs.attach(made.text.encode())).decode()
    assert f'w: "{HEX_W[: 10 + 8 * 8]}"' in file, file  # the alignment word, then 8 of the 16 elements
    assert made.size.bytes == ws.weigh(made.text) < ws.size.bytes


def test_a_blob_used_with_a_type_it_cannot_be_cut_to_is_written_whole():
    sizes = {"w": 100}
    assert resources.written("dense_resource<w> : tensor<2xf32>", sizes) == {"w": 12 + 16}
    assert resources.written("dense_resource<w> : tensor<2xf32> dense_resource<w> : tensor<4xf32>", sizes) == {
        "w": 12 + 32
    }
    assert resources.written("dense_resource<w> : tensor<3xi1>", sizes) == {"w": 100}  # bits, not bytes
    assert resources.written("dense_resource<w> : tensor<?xf32>", sizes) == {"w": 100}
    assert resources.written("dense_resource<w> : tensor<64xf32>", sizes) == {"w": 100}  # never more


class _Seen(Exception):
    pass


def test_the_dispatch_dump_runs_on_the_program_with_its_blobs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Dispatch isolation runs iree-compile on the program itself, not through the
    executor: the run gives it the file with its blobs too."""
    from reducer.iree import dispatch
    from reducer.session import triage
    from reducer.session.settings import Findings, Settings
    from reducer.session.wiring import make_oracle

    def isolate(oracle: object, data: bytes, executor: object) -> None:
        raise _Seen(data)

    monkeypatch.setattr(dispatch, "isolate", isolate)
    path = write(tmp_path)
    given = load_input(str(path))
    assert given.blobs is not None
    settings = Settings(input=str(path), compile="iree-compile {input} -o /dev/null", isolate_dispatch=True)
    oracle = make_oracle(settings, "model.mlir", 10.0)
    with pytest.raises(_Seen) as seen:
        triage.before(settings, given.text, oracle, Findings(), None, given.blobs.attach)  # type: ignore[arg-type]
    assert HEX_W in whole(seen.value.args[0]).decode()


def test_a_program_that_holds_its_own_blob_gets_no_second_copy(tmp_path: Path):
    """A compiler's dump (a localised dispatch) prints the blobs it uses itself."""
    given = load_input(str(write(tmp_path)))
    assert given.blobs is not None
    own = given.text.replace("dense_resource<bias>", "dense<1.0>") + SECTION.replace(f',\n      bias: "{HEX_B}"', "")
    assert whole(given.blobs.attach(own.encode())) == own.encode()


def test_the_fingerprint_covers_the_blobs_bytes(tmp_path: Path):
    """A resumed run must find the same file: another blob value is another input."""
    one = load_input(str(write(tmp_path, SECTION, "one.mlir")))
    same = load_input(str(write(tmp_path, SECTION, "same.mlir")))
    other = load_input(str(write(tmp_path, SECTION.replace(HEX_B[-8:], "0000C03F"), "other.mlir")))
    assert one.text == other.text and one.data == same.data != other.data


def test_a_dask_task_carries_the_whole_file(tmp_path: Path):
    """A Dask worker may be on a machine without the input file: the bytes it gets are
    the program with its blobs, plain bytes."""
    pytest.importorskip("distributed")
    import threading

    from reducer.core.dask_executor import DaskExecutor
    from reducer.core.executor import ExecutorStats

    given = load_input(str(write(tmp_path)))
    assert given.blobs is not None
    sent: list[bytes] = []

    class _Client:
        def submit(self, fn: object, data: bytes, *args: object, **kwargs: object) -> object:
            sent.append(data)
            raise _Seen

    executor = object.__new__(DaskExecutor)
    executor._lock, executor.oracle, executor.client = threading.Lock(), None, _Client()  # type: ignore[assignment]
    executor.memory_limit, executor.resources, executor.stats = 0, {}, ExecutorStats()  # type: ignore[assignment]
    executor._shipped_form = lambda oracle: oracle  # type: ignore[method-assign]
    with pytest.raises(_Seen):
        executor.submit(given.blobs.attach(given.text.encode()), object())  # type: ignore[arg-type]
    assert type(sent[0]) is bytes and HEX_W.encode() in sent[0] and HEX_B.encode() in sent[0]


@pytest.mark.e2e
@needs_iree
def test_a_bytecode_output_holds_the_blobs_it_uses(tmp_path: Path):
    write(tmp_path)
    digits = HEX_W[10:30]
    make_script(tmp_path / "check.sh", f'iree-opt "$1" 2>/dev/null | grep -qi {digits} && grep -q math.atan2 "$1"')
    proc = cli(tmp_path, "model.mlir", "--check", "check.sh", "-j", "2", "-o", "out.mlirbc")
    assert proc.returncode == 0, proc.stderr
    read = subprocess.run(["iree-opt", str(tmp_path / "out.mlirbc")], capture_output=True, text=True)
    assert read.returncode == 0, read.stderr
    assert digits.upper() in read.stdout.upper() and "math.atan2" in read.stdout, read.stdout
