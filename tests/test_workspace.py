"""The workspace is where the verifier sits: a strategy's output that does not verify
never becomes a candidate, so the oracle never sees it."""

from __future__ import annotations

from conftest import workspace
from iree.compiler import ir

from reducer.core.strategy import Edit, Program, Strategy
from reducer.core.workspace import Rejected

TEXT = """
func.func @f(%a: f32) -> f32 {
  %b = math.exp %a : f32
  return %b : f32
}
"""


class _DropReturnOperand(Strategy):
    """Returns IR that prints, and is smaller, but does not verify: the return loses its
    operand while the function still declares an f32 result."""

    name, summary = "drop-return-operand", "a strategy that breaks the IR"

    def opportunities(self, program: Program) -> list[Edit]:
        return [Edit("break", (0, 0, 0, 0, 0, 1))]

    def apply(self, program: Program, edits) -> object:
        root = program.clone()
        func = root.regions[0].blocks[0].operations[0]
        ret = list(func.regions[0].blocks[0].operations)[-1].operation
        with ret.location:
            ir.Operation.create("func.return", ip=ir.InsertionPoint(ret))
        ret.erase()
        return root


def test_ir_that_does_not_verify_is_rejected_before_the_oracle():
    ws = workspace(TEXT)
    strategy = _DropReturnOperand()
    result = ws.materialize(strategy, strategy.opportunities(ws.program))
    assert isinstance(result, Rejected) and result.reason == "invalid", result


def test_volume_is_measured_only_when_a_comparison_needs_it(monkeypatch):
    """Scanning a megabyte for its volume costs more than parsing it (issue 13): a fork made
    for speculation, and a candidate whose text did not change (a pass that did nothing),
    must not pay for it; the volume is still right once asked for."""
    from conftest import workspace
    from programs import chain

    from reducer.core import ir as irutil
    from reducer.core.workspace import Rejected
    from strategies.drop_ops import DropOps

    real = irutil.tensor_volume
    scans: list[int] = []
    monkeypatch.setattr(irutil, "tensor_volume", lambda text: scans.append(len(text)) or real(text))

    class Unchanged:
        name = "unchanged"

        def apply(self, program, edits):
            return program.clone()

    ws = workspace(chain(20, keep=5))
    assert ws.materialize(Unchanged(), []) == Rejected("not-smaller")
    assert ws.materialize(Unchanged(), [], grow=True) == Rejected("no-op")
    drop = DropOps()
    candidate = ws.materialize(drop, drop.opportunities(ws.program)[:4])
    fork = ws.fork(candidate)
    assert scans == []
    assert fork.size.volume == real(fork.program.text) and len(scans) == 1
    assert fork.size.volume == real(fork.program.text) and len(scans) == 1  # measured once


def test_a_tie_with_the_best_so_far_is_broken_by_volumes_measured_then():
    """The engine compares each commit with the best so far without measuring volumes
    (issue 13); when ops and bytes tie, both volumes are measured and decide."""
    from conftest import workspace

    from reducer.core.workspace import UNKNOWN_VOLUME, Candidate, Size

    two = "func.func @f(%a: tensor<8xf32>) -> tensor<8xf32> {\n  return %a : tensor<8xf32>\n}\n"
    wide = workspace(two)
    narrow = workspace(two.replace("8x", "1x"))
    best = Candidate(wide.program.text, Size(wide.size_known().ops, wide.size_known().bytes, UNKNOWN_VOLUME), "s")
    assert narrow.size_known().volume == UNKNOWN_VOLUME
    assert narrow.smaller_than(best) and not wide.smaller_than(best)
    assert wide.measured(best).size.volume == 3 * 8 * 32
    assert not workspace(two + two.replace("@f", "@g")).smaller_than(best)  # more ops: no volume needed


def test_a_candidate_equal_to_the_program_is_rejected_without_printing(monkeypatch):
    """Issue 13: most opt-passes candidates on a big program change nothing, and printing
    each to find that out was a third of the engine's printing on the scale module. Equal
    IR is rejected as printing it would have been; different IR of as many ops is printed."""
    from conftest import workspace
    from iree.compiler import ir
    from programs import chain

    from reducer.core import ir as irutil
    from reducer.core.workspace import Candidate, Rejected

    printed: list[int] = []
    real = irutil.to_text
    monkeypatch.setattr(irutil, "to_text", lambda op, *a, **k: printed.append(1) or real(op, *a, **k))

    class Rewrite:
        name = "rewrite"

        def apply(self, program, edits):
            root = program.clone()
            for op in irutil.iter_ops(root):
                if edits and op.name == "math.exp":
                    op.attributes["fastmath"] = ir.Attribute.parse("#arith.fastmath<fast>")
            return root

    ws = workspace(chain(20, keep=5))
    printed.clear()  # the workspace prints its program once
    with ws.scope():
        assert ws.materialize(Rewrite(), []) == Rejected("not-smaller")
        assert ws.materialize(Rewrite(), [], grow=True) == Rejected("no-op")
        assert printed == []
        changed = ws.materialize(Rewrite(), ["fast"], grow=True)
    assert isinstance(changed, Candidate) and "fastmath<fast>" in changed.text and printed == [1]


def test_the_canonical_form_in_the_workspace_options_is_its_text_unprinted(monkeypatch):
    """The session asks for the input's re-printed form (to check it) right after the
    workspace printed it: with the same options that is the text it has, not a second
    print of a megabyte module. Other options still print."""
    from programs import chain

    from reducer.core import ir as irutil

    printed: list[int] = []
    real = irutil.to_text
    monkeypatch.setattr(irutil, "to_text", lambda op, *a, **k: printed.append(1) or real(op, *a, **k))
    ws = workspace(chain(20, keep=5))
    printed.clear()
    assert ws.canonical(ws.options) == ws.program.text
    assert printed == []
    generic = ws.canonical(irutil.PrintOptions(generic=True))
    assert printed == [1] and generic != ws.program.text
