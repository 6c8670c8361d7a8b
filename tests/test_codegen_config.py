"""codegen-config on real lowered IR: what iree-compile 3.13 writes for a tiny matmul at
`--compile-to=executable-configurations` (the IR a codegen pass's crash reproducer holds),
with `translation_info` on the dispatch function and `lowering_config` on its ops."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import each_edit, make_script, needs_iree, program, workspace
from programs import COMPILE

from reducer.core.workspace import Candidate
from reducer.session import Settings, reduce_file
from strategies._ir.paths import walk_paths
from strategies.codegen_config import CodegenConfig, _properties

pytestmark = [pytest.mark.e2e, needs_iree]

MATMUL = """func.func @mm(%a: tensor<4x8xf32>, %b: tensor<8x4xf32>) -> tensor<4x4xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x4xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<4x4xf32>) -> tensor<4x4xf32>
  %r = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x4xf32>) outs(%f : tensor<4x4xf32>) -> tensor<4x4xf32>
  return %r : tensor<4x4xf32>
}
"""
CONFIGS = ("lowering_config", "translation_info")


@pytest.fixture(scope="module")
def lowered(tmp_path_factory: pytest.TempPathFactory) -> str:
    d = tmp_path_factory.mktemp("lowered")
    (d / "mm.mlir").write_text(MATMUL)
    out = d / "cfg.mlir"
    subprocess.run(f"{COMPILE} {d / 'mm.mlir'} --compile-to=executable-configurations -o {out}", shell=True, check=True)
    text = out.read_text()
    assert text.count("lowering_config = #iree_cpu.lowering_config") == 2
    assert text.count("translation_info = #iree_codegen.translation_info") == 1
    return text


def parses(text: str, tmp_path: Path) -> bool:
    path = tmp_path / "c.mlir"
    path.write_text(text)
    return subprocess.run(["iree-opt", str(path), "-o", "/dev/null"], capture_output=True).returncode == 0


def test_each_kind_at_once_first_then_each_occurrence(lowered: str):
    edits = CodegenConfig().opportunities(program(lowered))
    assert [(e.kind, e.arg) for e in edits] == [
        ("all", "translation_info"),
        ("all", "lowering_config"),
        ("drop", "translation_info"),
        ("drop", "lowering_config"),
        ("drop", "lowering_config"),
    ]


def test_all_edits_leave_a_valid_program_without_any_config(lowered: str, tmp_path: Path):
    ws = workspace(lowered)
    cand = ws.materialize(CodegenConfig(), ws.opportunities(CodegenConfig()))
    assert isinstance(cand, Candidate), cand
    assert not any(name in cand.text for name in CONFIGS)
    assert "linalg.matmul" in cand.text and "iree_codegen.dispatch_config" in cand.text
    assert parses(cand.text, tmp_path)
    assert workspace(cand.text).opportunities(CodegenConfig()) == []


def test_a_kind_goes_everywhere_and_the_other_stays(lowered: str):
    ws = workspace(lowered)
    kinds = [e for e in ws.opportunities(CodegenConfig()) if e.kind == "all"]
    cand = ws.materialize(CodegenConfig(), [kinds[1]])
    assert isinstance(cand, Candidate), cand
    assert "lowering_config" not in cand.text and "translation_info = " in cand.text


def test_one_occurrence_goes_alone(lowered: str, tmp_path: Path):
    drops = [(e, c) for e, c in each_edit(CodegenConfig(), lowered) if e.kind == "drop"]
    assert len(drops) == 3
    for e, cand in drops:
        assert isinstance(cand, Candidate), (e, cand)
        for name in CONFIGS:
            assert cand.text.count(f"{name} = ") == lowered.count(f"{name} = ") - (name == e.arg)
    fill = next(c for e, c in drops if e.arg == "lowering_config")  # the first is on linalg.fill
    assert "linalg.fill ins" in fill.text and "linalg.matmul {lowering_config" in fill.text
    assert parses(fill.text, tmp_path)


def test_no_config_no_edit():
    assert CodegenConfig().opportunities(program(MATMUL)) == []


def test_only_codegen_dialect_values_are_offered():
    text = 'func.func @f() attributes {translation_info = "mine", lowering_config = 3 : i64} {\n  return\n}\n'
    assert CodegenConfig().opportunities(program(text)) == []


def test_inherent_attributes_are_read_from_the_properties():
    """What keeps an inherent attribute (a null property after deletion, a printer crash)
    from being offered."""
    text = "func.func @f(%a: f32) -> f32 {\n  %0 = arith.addf %a, %a fastmath<fast> : f32\n  return %0 : f32\n}\n"
    props = {op.name: _properties(op) for _, op in walk_paths(program(text).root)}
    assert props["arith.addf"].startswith("fastmath = #arith.fastmath<fast>")
    assert "sym_name" in props["func.func"] and props["func.return"] == ""


def test_a_reduction_that_needs_only_the_matmul_ends_without_config(lowered: str, tmp_path: Path):
    src = tmp_path / "in.mlir"
    src.write_text(lowered)
    check = make_script(tmp_path / "check.sh", 'iree-opt "$1" >/dev/null 2>&1 && grep -q linalg.matmul "$1"')
    out = tmp_path / "out.mlir"
    result = reduce_file(Settings(str(src), str(check), str(out), jobs=2))
    assert result.stats.final.ops is not None
    text = out.read_text()
    assert "linalg.matmul" in text and not any(name in text for name in CONFIGS), text
    assert src.read_text() == lowered
