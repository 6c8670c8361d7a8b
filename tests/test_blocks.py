"""blocks: a cf.cond_br folds to one side and the blocks it no longer reaches go; a block
whose only predecessor branches to it joins that predecessor. Every candidate verifies."""

from __future__ import annotations

from conftest import apply_edits, workspace

from reducer.core.workspace import Candidate
from strategies.blocks import Blocks

LOOP = """func.func @f(%m: memref<4xf32>, %c: i1, %x: f32) {
  %c0 = arith.constant 0 : index
  cf.br ^bb1(%x : f32)
^bb1(%v: f32):
  cf.cond_br %c, ^bb2(%v : f32), ^bb3
^bb2(%w: f32):
  %n = arith.negf %w : f32
  memref.store %n, %m[%c0] : memref<4xf32>
  cf.br ^bb1(%n : f32)
^bb3:
  %e = math.exp %x : f32
  memref.store %e, %m[%c0] : memref<4xf32>
  return
}
"""


def pick(kind: str):
    return lambda edits: [e for e in edits if e.kind == kind][:1]


def test_a_cond_br_folds_to_either_side_and_the_side_not_taken_goes():
    edits = workspace(LOOP).opportunities(Blocks())
    assert sorted(e.kind for e in edits) == ["to-false", "to-true"]  # ^bb1 has two predecessors: no merge
    taken = apply_edits(Blocks(), LOOP, pick("to-true"))
    assert isinstance(taken, Candidate), taken
    assert "cf.cond_br" not in taken.text and "math.exp" not in taken.text and "arith.negf" in taken.text
    other = apply_edits(Blocks(), LOOP, pick("to-false"))
    assert isinstance(other, Candidate), other
    assert "arith.negf" not in other.text and "math.exp" in other.text and "^bb2" not in other.text.split("^bb1")[-1]


def test_a_block_joins_its_only_predecessor_with_the_branch_operands_for_its_arguments():
    text = """func.func @g(%x: f32) -> f32 {
  cf.br ^bb1(%x : f32)
^bb1(%v: f32):
  %n = arith.negf %v : f32
  return %n : f32
}
"""
    merged = apply_edits(Blocks(), text, pick("merge"))
    assert isinstance(merged, Candidate), merged
    assert "^bb1" not in merged.text and "arith.negf %arg0 : f32" in merged.text


def test_after_a_fold_the_chain_of_single_predecessor_blocks_merges():
    taken = apply_edits(Blocks(), LOOP, pick("to-false"))
    assert isinstance(taken, Candidate)
    merges = [e for e in workspace(taken.text).opportunities(Blocks()) if e.kind == "merge"]
    assert merges
    flat = apply_edits(Blocks(), taken.text, lambda edits: [e for e in edits if e.kind == "merge"])
    assert isinstance(flat, Candidate), flat
    assert "^bb" not in flat.text and "cf.br" not in flat.text and "math.exp %arg2" in flat.text


def test_a_fold_passes_the_taken_side_its_own_operands():
    text = """func.func @h(%c: i1, %x: f32, %y: f32) -> f32 {
  cf.cond_br %c, ^bb1(%x : f32), ^bb1(%y : f32)
^bb1(%v: f32):
  return %v : f32
}
"""
    other = apply_edits(Blocks(), text, pick("to-false"))
    assert isinstance(other, Candidate), other
    assert "cf.br ^bb1(%arg2 : f32)" in other.text
    taken = apply_edits(Blocks(), text, pick("to-true"))
    assert isinstance(taken, Candidate), taken
    assert "cf.br ^bb1(%arg1 : f32)" in taken.text
