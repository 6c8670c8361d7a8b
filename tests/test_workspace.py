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


def _piecewise(monkeypatch, text: str):
    """A workspace that prints candidates piece by piece whatever its size."""
    import reducer.core.workspace as module

    monkeypatch.setattr(module, "PIECEWISE_BYTES", 0)
    return workspace(text)


class _Apply:
    """A one-off rewrite as a strategy: `apply(program, edits)` runs `rewrite` on a clone."""

    name = "one-off"

    def __init__(self, rewrite) -> None:  # type: ignore[no-untyped-def]
        self.rewrite = rewrite

    def apply(self, program, edits):  # type: ignore[no-untyped-def]
        root = program.clone()
        self.rewrite(root)
        return root


def test_a_candidate_is_printed_one_changed_top_level_op_at_a_time(monkeypatch):
    """Issue 13: printing a megabyte candidate whole for each subset was most of the
    engine's time; the top-level ops it did not change keep their text and op count.
    What comes out is what printing the whole module gives, and only the changed
    function (@mid, whose call to the deleted @leaf is rewired) is printed."""
    from programs import CALL_CHAIN

    from reducer.core import ir as irutil
    from strategies.split_functions import SplitFunctions

    ws = _piecewise(monkeypatch, CALL_CHAIN)
    s = SplitFunctions()
    edits = {(e.kind, e.arg): e for e in s.opportunities(ws.program)}
    printed: list[str] = []
    real = ir.Operation.get_asm
    monkeypatch.setattr(ir.Operation, "get_asm", lambda op, **k: printed.append(op.name) or real(op, **k))
    with ws.scope():
        root = s.apply(ws.program, [edits[("delete", "leaf")]])
    candidate = ws.materialize(s, [edits[("delete", "leaf")]])
    assert printed == ["func.func"] and "@leaf" not in candidate.text
    assert candidate.text == irutil.to_text(root, ws.options)
    assert candidate.size.ops == irutil.count_ops(root)


def test_piecewise_texts_equal_whole_prints_on_every_strategy(monkeypatch):
    """Every built-in IR strategy's candidates on a model with loops, globals and calls
    (the toolbox program has none of the module-wide spellings) print and count as the
    whole module does."""
    from programs import CALL_CHAIN, mlp

    import strategies
    from reducer.core import ir as irutil
    from reducer.core.workspace import _TopLevel

    compared = 0
    for text in (CALL_CHAIN, mlp(layers=4)):
        ws = _piecewise(monkeypatch, text)
        top = ws.program.analysis(_TopLevel.of)
        assert top is not None
        for kind in strategies.BUILTIN:
            strategy = kind()
            if strategy.name.startswith("text") or strategy.name == "opt-passes":
                continue
            edits = ws.opportunities(strategy)
            for chunk in (edits[:1], edits[-1:], edits[: len(edits) // 2]):
                with ws.scope():
                    root = strategy.apply(ws.program, chunk) if chunk else None
                if root is None or isinstance(root, str):
                    continue
                built = top.piecewise(root, ws.options, verified=False)
                if built is not None:
                    assert built == (irutil.to_text(root, ws.options, verified=False), irutil.count_ops(root))
                    compared += 1
    assert compared >= 20


def test_an_op_that_would_need_an_alias_makes_the_whole_module_print(monkeypatch):
    """Printed alone, an op spells an affine map inline; in the module the printer makes
    it a `#map` alias at the top. A changed op with one must not be pasted in alone."""
    from reducer.core import ir as irutil

    text = (
        "func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {\n  return %a : tensor<4xf32>\n}\n"
        "func.func @g(%a: tensor<4xf32>) -> tensor<4xf32> {\n  return %a : tensor<4xf32>\n}\n"
    )
    ws = _piecewise(monkeypatch, text)

    def add_map(root):  # type: ignore[no-untyped-def]
        func = root.regions[0].blocks[0].operations[1]
        func.attributes["my.map"] = ir.Attribute.parse("affine_map<(d0) -> (d0)>")

    with ws.scope():
        candidate = ws.materialize(_Apply(add_map), [], grow=True)
    assert candidate.text.startswith("#map = affine_map")
    assert candidate.text == irutil.to_text(irutil.parse(candidate.text, ws.ctx).operation, ws.options)


def test_split_module_cuts_only_the_printers_plain_shape():
    from reducer.core import ir as irutil

    text = "module {\n  func.func @f() {\n    return\n  }\n  util.global private @g : i32\n}\n"
    head, texts = irutil.split_module(text)
    assert head == "module {" and texts == ["  func.func @f() {\n    return\n  }", "  util.global private @g : i32"]
    assert irutil.join_module(head, texts) == text
    assert irutil.split_module("module {\n}\n") == ("module {", [])
    assert irutil.split_module("#map = affine_map<(d0) -> (d0)>\n" + text) is None  # aliases
    assert irutil.split_module(text.replace("\n  util", "\n\n  util")) is None  # an empty line
    assert irutil.split_module(text + "\n{-#\n#-}\n") is None  # resources


def test_a_committed_program_counts_only_the_top_level_ops_it_has_not_seen(monkeypatch):
    """After a split-functions commit most functions are the ones the last program had,
    and the one it changed was counted when the candidate was built: counting their ops
    again per program cost as much as verifying the module (issue 13)."""
    from programs import CALL_CHAIN

    import reducer.core.workspace as module
    from reducer.core import ir as irutil
    from strategies.split_functions import SplitFunctions

    module._COUNTS.clear()
    ws = _piecewise(monkeypatch, CALL_CHAIN)
    ws.program.analysis(module._TopLevel.of)
    s = SplitFunctions()
    edits = {(e.kind, e.arg): e for e in s.opportunities(ws.program)}
    ws.commit(ws.materialize(s, [edits[("delete", "leaf")]]))  # @mid changes, the rest stays
    counted: list[str] = []
    real = irutil.count_ops
    monkeypatch.setattr(irutil, "count_ops", lambda op, *a: counted.append(op.name) or real(op, *a))
    top = ws.program.analysis(module._TopLevel.of)
    assert counted == [] and sum(top.counts) == real(ws.program.root)  # @mid: counted as a candidate


def test_a_function_made_public_prints_only_its_header_again(monkeypatch):
    """Keeping @mid makes it public: its body is the program's, so only its first line is
    printed again (issue 13: split-functions' first sweep makes every function of a
    megabyte module public). The text is what printing the whole module gives."""
    from programs import CALL_CHAIN

    from reducer.core import ir as irutil
    from strategies.split_functions import SplitFunctions

    ws = _piecewise(monkeypatch, CALL_CHAIN)
    s = SplitFunctions()
    edits = {(e.kind, e.arg): e for e in s.opportunities(ws.program)}
    printed: list[bool] = []
    real = ir.Operation.get_asm
    monkeypatch.setattr(
        ir.Operation, "get_asm", lambda op, **k: printed.append(k.get("skip_regions", False)) or real(op, **k)
    )
    candidate = ws.materialize(s, [edits[("keep-only", "mid")]])
    assert "func.func @mid(" in candidate.text and printed and all(printed)
    with ws.scope():
        root = s.apply(ws.program, [edits[("keep-only", "mid")]])
    assert candidate.text == irutil.to_text(root, ws.options)
    assert candidate.size.ops == irutil.count_ops(root)


def test_a_function_whose_body_changed_too_is_printed_whole(monkeypatch):
    from programs import CALL_CHAIN

    from reducer.core import ir as irutil

    ws = _piecewise(monkeypatch, CALL_CHAIN)

    def public_and_fast(root):  # type: ignore[no-untyped-def]
        leaf = root.regions[0].blocks[0].operations[1]
        del leaf.attributes["sym_visibility"]
        exp = leaf.regions[0].blocks[0].operations[0]
        exp.attributes["fastmath"] = ir.Attribute.parse("#arith.fastmath<fast>")

    with ws.scope():
        candidate = ws.materialize(_Apply(public_and_fast), [], grow=True)
        root = _Apply(public_and_fast).apply(ws.program, [])
    assert "fastmath<fast>" in candidate.text and candidate.text == irutil.to_text(root, ws.options)


def test_a_program_is_counted_once_per_top_level_op(monkeypatch):
    """The per-op counts candidates reuse also give the program's size: counting the
    module whole as well cost another walk of the megabyte (issue 13)."""
    from programs import CALL_CHAIN

    import reducer.core.workspace as module
    from reducer.core import ir as irutil

    module._COUNTS.clear()
    counted: list[str] = []
    real = irutil.count_ops
    monkeypatch.setattr(irutil, "count_ops", lambda op, *a: counted.append(op.name) or real(op, *a))
    ws = _piecewise(monkeypatch, CALL_CHAIN)
    assert "builtin.module" not in counted and len(counted) == 5
    assert ws.size.ops == real(ws.program.root)


def test_a_fork_or_commit_takes_the_candidates_ir_without_parsing(monkeypatch):
    """Parsing each committed megabyte again was a sixth of the engine's time (issue 13):
    the IR a candidate was printed from becomes the program; a candidate that has none
    (the engine's snapshot of a program) is parsed."""
    from programs import CALL_CHAIN

    from reducer.core import ir as irutil
    from reducer.core.workspace import Candidate
    from strategies.split_functions import SplitFunctions

    ws = workspace(CALL_CHAIN)
    s = SplitFunctions()
    edits = {(e.kind, e.arg): e for e in s.opportunities(ws.program)}
    candidate = ws.materialize(s, [edits[("delete", "leaf")]])
    parsed: list[int] = []
    real = irutil.parse
    monkeypatch.setattr(irutil, "parse", lambda text, ctx: parsed.append(1) or real(text, ctx))
    fork = ws.fork(candidate)
    assert parsed == [] and fork.program.text == candidate.text
    assert irutil.to_text(fork.program.root, ws.options) == candidate.text
    ws.commit(Candidate(candidate.text, candidate.size, "snapshot"))
    assert parsed == [1] and ws.program.text == candidate.text


def test_the_caches_by_body_text_are_bounded_by_the_text_they_keep():
    """A process that reduces many programs (the API) must not keep every text it read."""
    from reducer.core.ir import BodyCache

    cache: BodyCache[int] = BodyCache(budget=10)
    cache.put(("func.func", "abcdef"), 1)
    cache.put(("func.func", "ghij"), 2)
    assert len(cache) == 2 and cache.chars == 10
    cache.put(("func.func", "k"), 3)
    assert list(cache.values()) == [3] and cache.chars == 1


def test_top_level_ops_with_results_print_whole(monkeypatch):
    """`%1 = ...` at the top level is numbered across the module: once an op with results
    before it goes, its old text would keep the old number. Such a module prints whole."""
    text = (
        "func.func @g() {\n  return\n}\n%s = tensor.empty() : tensor<4xf32>\n"
        "func.func @f() {\n  return\n}\n%t = tensor.empty() : tensor<8xf32>\n"
    )
    ws = _piecewise(monkeypatch, text)
    assert "%1 = tensor.empty() : tensor<8xf32>" in ws.program.text
    erase_first = _Apply(lambda root: root.regions[0].blocks[0].operations[1].erase())
    made = ws.materialize(erase_first, [Edit("x")])
    assert not isinstance(made, Rejected)
    assert "%0 = tensor.empty() : tensor<8xf32>" in made.text  # as a whole print numbers it


def test_unverified_candidates_print_whole_as_an_invalid_module_would(monkeypatch):
    """With --no-verify an invalid candidate prints whole in the generic form; pieces of
    it in the custom form would be another text for the same candidate."""
    from programs import CALL_CHAIN

    import reducer.core.workspace as module
    from reducer.core import ir as irutil

    monkeypatch.setattr(module, "PIECEWISE_BYTES", 0)
    ws = module.MLIRWorkspace(CALL_CHAIN, irutil.PrintOptions(), verify=False)
    drop_leaf = _Apply(lambda root: root.regions[0].blocks[0].operations[1].erase())  # its callers stay
    made = ws.materialize(drop_leaf, [Edit("x")])
    assert not isinstance(made, Rejected)
    assert made.text.startswith('"builtin.module"()')  # the generic form of an invalid module


def _functions_with_bodies(root) -> list[str]:  # type: ignore[no-untyped-def]
    return [
        str(op.attributes["sym_name"]).strip('"')
        for op in root.regions[0].blocks[0].operations
        if op.operation.name == "func.func" and len(op.regions[0].blocks)
    ]


def test_a_big_candidate_verifies_only_the_functions_it_changed(monkeypatch):
    """Issue 13: verifying the whole megabyte module was the largest cost left per
    candidate. The program verified; a candidate that changed only @mid's body verifies
    @mid (the other functions stand as declarations of their types while it does) and
    comes out as printing the whole module gives."""
    from programs import CALL_CHAIN

    from reducer.core import ir as irutil

    ws = _piecewise(monkeypatch, CALL_CHAIN)

    def fast_mid(root):  # type: ignore[no-untyped-def]
        mid = root.regions[0].blocks[0].operations[2]
        add = mid.regions[0].blocks[0].operations[2]
        add.attributes["fastmath"] = ir.Attribute.parse("#arith.fastmath<fast>")

    verified: list[list[str]] = []
    real = irutil.verify
    monkeypatch.setattr(irutil, "verify", lambda op: verified.append(_functions_with_bodies(op)) or real(op))
    with ws.scope():
        candidate = ws.materialize(_Apply(fast_mid), [], grow=True)
        root = _Apply(fast_mid).apply(ws.program, [])
    assert verified == [["mid"]]
    assert not isinstance(candidate, Rejected) and "fastmath<fast>" in candidate.text
    assert candidate.text == irutil.to_text(root, ws.options)
    assert irutil.to_text(candidate.module, ws.options) == candidate.text  # the IR is whole again


def test_a_callee_whose_type_changed_is_checked_against_its_unchanged_callers(monkeypatch):
    """@leaf's new type no longer fits @mid's call: @mid did not change, but its call's
    check (the module's symbol-use verification) must run again, and reject it."""
    from programs import CALL_CHAIN

    ws = _piecewise(monkeypatch, CALL_CHAIN)

    def retype_leaf(root):  # type: ignore[no-untyped-def]
        leaf = root.regions[0].blocks[0].operations[1]
        t = ir.RankedTensorType.parse("tensor<4xf32>")
        ir.Operation.create(
            "func.func",
            attributes={
                "sym_name": ir.StringAttr.get("leaf"),
                "function_type": ir.TypeAttr.get(ir.FunctionType.get([t, t], [t])),
                "sym_visibility": ir.StringAttr.get("private"),
            },
            regions=1,
            ip=ir.InsertionPoint(leaf),
        )
        leaf.erase()

    with ws.scope():
        made = ws.materialize(_Apply(retype_leaf), [])
    assert isinstance(made, Rejected) and made.reason == "invalid" and "operand" in made.detail, made


def test_a_function_deleted_under_its_unchanged_caller_is_rejected(monkeypatch):
    from programs import CALL_CHAIN

    ws = _piecewise(monkeypatch, CALL_CHAIN)
    drop_leaf = _Apply(lambda root: root.regions[0].blocks[0].operations[1].erase())  # @mid still calls it
    with ws.scope():
        made = ws.materialize(drop_leaf, [])
    assert isinstance(made, Rejected) and made.reason == "invalid" and "leaf" in made.detail, made


def test_a_changed_function_that_does_not_verify_is_rejected(monkeypatch):
    from programs import CALL_CHAIN

    ws = _piecewise(monkeypatch, CALL_CHAIN)

    def break_main(root):  # type: ignore[no-untyped-def]
        main = root.regions[0].blocks[0].operations[3]
        ret = list(main.regions[0].blocks[0].operations)[-1].operation
        ir.Operation.create("func.return", ip=ir.InsertionPoint(ret))
        ret.erase()

    with ws.scope():
        made = ws.materialize(_Apply(break_main), [])
    assert isinstance(made, Rejected) and made.reason == "invalid", made


def test_a_program_is_cut_into_top_level_ops_once(monkeypatch):
    """The workspace's pieces and the strategies' per-op texts (split-functions'
    fingerprint, the symbol facts) are the same cut of a megabyte text: made once per
    program, not once by each (issue 13)."""
    from programs import CALL_CHAIN

    import strategies._ir.paths as paths
    from reducer.core import ir as irutil
    from reducer.core.workspace import _TopLevel

    real = irutil.split_module
    cuts: list[int] = []

    def counting(text):  # type: ignore[no-untyped-def]
        cuts.append(len(text))
        return real(text)

    monkeypatch.setattr(irutil, "split_module", counting)
    monkeypatch.setattr(paths, "split_module", counting)
    ws = _piecewise(monkeypatch, CALL_CHAIN)
    assert ws.program.analysis(_TopLevel.of) is not None
    assert paths.top_level_texts(ws.program) is not None
    assert cuts == [len(ws.program.text)]


def test_partial_verification_agrees_with_whole_on_every_strategy(monkeypatch):
    """On every built-in IR strategy's candidates (valid ones, and each one broken by
    deleting a function it still calls or changing a callee's type under its callers),
    verifying only what changed gives the whole module's verdict, and leaves the
    candidate's IR as it found it."""
    from programs import CALL_CHAIN, mlp

    import strategies
    from reducer.core import ir as irutil
    from reducer.core.workspace import _TopLevel

    def whole(root) -> bool:  # type: ignore[no-untyped-def]
        try:
            irutil.verify(root)
        except irutil.VerifyError:
            return False
        return True

    def partly(top, root, matches) -> bool:  # type: ignore[no-untyped-def]
        try:
            return top.verify_changes(root, matches) or whole(root)
        except irutil.VerifyError:
            return False

    def drop_callee(root):  # type: ignore[no-untyped-def]
        for op in root.regions[0].blocks[0].operations:
            text = str(op)
            if op.operation.name == "func.func" and "private" in text.partition("\n")[0]:
                op.operation.erase()
                return

    compared, broken = 0, 0
    for text in (CALL_CHAIN, mlp(layers=4)):
        ws = _piecewise(monkeypatch, text)
        top = ws.program.analysis(_TopLevel.of)
        for kind in strategies.BUILTIN:
            strategy = kind()
            if strategy.name.startswith("text"):
                continue
            edits = ws.opportunities(strategy)
            for chunk in (edits[:1], edits[-1:], edits[: len(edits) // 2]):
                for breaking in (None, drop_callee):
                    with ws.scope():
                        root = strategy.apply(ws.program, chunk) if chunk else None
                        if root is None or isinstance(root, str):
                            continue
                        if breaking is not None:
                            breaking(root)
                        matches = top.match(root)
                        if matches is None:
                            continue
                        before = irutil.to_text(root, ws.options, verified=False)
                        valid = whole(root)
                        assert partly(top, root, matches) == valid, (strategy.name, chunk, breaking)
                        assert irutil.to_text(root, ws.options, verified=False) == before
                        compared += 1
                        broken += not valid
    assert compared >= 40 and broken >= 5


def test_a_function_that_cannot_be_swapped_out_means_verifying_whole(monkeypatch):
    """Should the bindings refuse to take a function out for the time being, the
    candidate is verified whole instead: a valid one is still a candidate, as printed."""
    from programs import CALL_CHAIN

    from reducer.core import ir as irutil

    ws = _piecewise(monkeypatch, CALL_CHAIN)

    def refuse(op):  # type: ignore[no-untyped-def]
        raise RuntimeError("cannot detach")

    def fast_main(root):  # type: ignore[no-untyped-def]
        negf = root.regions[0].blocks[0].operations[3].regions[0].blocks[0].operations[1]
        negf.attributes["fastmath"] = ir.Attribute.parse("#arith.fastmath<fast>")

    monkeypatch.setattr(ir.Operation, "detach_from_parent", refuse)
    with ws.scope():
        made = ws.materialize(_Apply(fast_main), [], grow=True)  # @leaf and @mid would stand aside
        root = _Apply(fast_main).apply(ws.program, [])
    assert not isinstance(made, Rejected) and "fastmath<fast>" in made.text, made
    assert made.text == irutil.to_text(root, ws.options)


def test_a_function_whose_body_changed_is_not_compared_again_as_made_public(monkeypatch):
    """A caller whose call to a deleted function was rewired keeps its attributes: it
    cannot be the program's function made public, so it is not compared again for that
    (issue 13: most changed ops of a split-functions candidate are such callers)."""
    from programs import CALL_CHAIN

    from reducer.core import ir as irutil
    from strategies.split_functions import SplitFunctions

    ws = _piecewise(monkeypatch, CALL_CHAIN)
    s = SplitFunctions()
    edits = {(e.kind, e.arg): e for e in s.opportunities(ws.program)}
    compared: list[str] = []
    real = irutil.same_ir
    monkeypatch.setattr(irutil, "same_ir", lambda a, b: compared.append(a.name) or real(a, b))
    candidate = ws.materialize(s, [edits[("delete", "leaf")]])  # @mid's call goes
    assert not isinstance(candidate, Rejected) and "@leaf" not in candidate.text
    assert len(compared) == 4  # @g, @mid, @main, @unrelated: once each, to match them
