"""What the op-level strategies share: the memo on a program and the one symbol analysis
(reducer/core/strategy.py, strategies/_ir/)."""

import sys

from conftest import workspace
from programs import CALL_CHAIN

import strategies._ir.symbols as symbols_module
from reducer.core.strategy import Program
from strategies._ir.paths import Paths
from strategies._ir.symbols import Symbols
from strategies.arguments_to_constants import ArgumentsToConstants
from strategies.globals import Globals
from strategies.remove_results_and_arguments import RemoveResultsAndArguments
from strategies.shrink_values import ShrinkValues
from strategies.split_functions import SplitFunctions
from strategies.values_to_arguments import ValuesToArguments
from strategies.values_to_return import ValuesToReturn

MODULE = CALL_CHAIN

CALL_LEAF, LOAD_G, CALL_MID = (0, 0, 2, 0, 0, 0), (0, 0, 2, 0, 0, 1), (0, 0, 3, 0, 0, 0)


def test_one_analysis_answers_every_symbol_question():
    """Symbols, functions, calls, users and the reference graph come from the same walk."""
    info = workspace(MODULE).program.analysis(Symbols)
    assert info.symbols == {
        "g": (0, 0, 0),
        "leaf": (0, 0, 1),
        "mid": (0, 0, 2),
        "main": (0, 0, 3),
        "unrelated": (0, 0, 4),
    }
    assert list(info.functions) == ["leaf", "mid", "main", "unrelated"]
    assert info.calls == {"leaf": [CALL_LEAF], "mid": [CALL_MID]}
    assert info.users == {"leaf": [CALL_LEAF], "g": [LOAD_G], "mid": [CALL_MID]}
    assert info.pinned == {"g"}  # a load is no call: a global's "signature" cannot change
    assert set(info.graph.edges) == {("mid", "leaf"), ("mid", "g"), ("main", "mid")}
    assert info.referenced == {"leaf", "g", "mid"}
    assert info.called("leaf") and not info.called("main") and not info.fixed_signature("leaf")


def test_a_program_reads_its_symbols_once_for_every_strategy_and_subset(monkeypatch):
    """Seven strategies list their edits and apply one (each apply builds a Rewriter, which
    asks who is called): every op's symbol references are read once in all."""
    reads: list[object] = []
    real = symbols_module.referenced_symbols

    def counting(op):
        reads.append(op)
        return real(op)

    for name, module in list(sys.modules.items()):  # wherever it is imported, not only where it lives
        if name.startswith("strategies") and getattr(module, "referenced_symbols", None) is real:
            monkeypatch.setattr(module, "referenced_symbols", counting)
    symbols_module._FACTS.clear()  # no other test's program read them already
    ws = workspace(MODULE)
    strategies = [
        SplitFunctions(),
        RemoveResultsAndArguments(),
        ArgumentsToConstants(),
        ValuesToReturn(),
        ValuesToArguments(),
        ShrinkValues(),
        Globals(),
    ]
    ws.program.analysis(Symbols)
    first = len(reads)
    applied = 0
    for strategy in strategies:
        edits = ws.opportunities(strategy)
        if edits:
            ws.materialize(strategy, edits[:1], grow=True)
            applied += 1
    assert applied >= 5  # the module gives most of them something to do
    assert len(reads) == first <= len(ws.program.analysis(Paths))


def test_analyses_are_keyed_by_the_analysis_itself_not_by_a_name():
    program = Program("text")

    def first(p: Program) -> str:
        return "first"

    def second(p: Program) -> str:
        return "second"

    second.__name__ = second.__qualname__ = first.__qualname__  # two strategies' helpers, same name
    assert (program.analysis(first), program.analysis(second)) == ("first", "second")

    class Made:
        count = 0

        def __init__(self, p: Program) -> None:
            Made.count += 1

    assert program.analysis(Made) is program.analysis(Made)
    assert Made.count == 1


def test_symbol_references_are_read_from_every_attribute_even_beside_a_complex_literal():
    """The analysis reads an op's attributes all at once (issue 13: one by one was most of
    its time on a megabyte); an op whose complex dense literal the bindings cannot wrap
    still has its other attributes read, nested references included."""
    from reducer.core import ir as irutil

    text = """
func.func private @g() -> tensor<2xcomplex<f32>> {
  %c = arith.constant {keep = [@g, {x = @h}]} dense<[(1.0, 2.0), (3.0, 4.0)]> : tensor<2xcomplex<f32>>
  return %c : tensor<2xcomplex<f32>>
}
func.func private @h() -> tensor<2xf32> {
  %c = arith.constant {keep = [{x = @g}]} dense<[1.0, 2.0]> : tensor<2xf32>
  return %c : tensor<2xf32>
}
func.func @f() {
  %0 = call @g() : () -> tensor<2xcomplex<f32>>
  return
}
"""
    ws = workspace(text)
    found = {
        op.name + str(path[2]): symbols_module.referenced_symbols(op)
        for path, op in ws.program.analysis(Paths).items()
        if len(path) > 3 and op.name != "func.return"
    }
    assert found == {"arith.constant0": {"g", "h"}, "arith.constant1": {"g"}, "func.call2": {"g"}}
    assert irutil.count_ops(ws.program.root) == 9
    assert irutil.count_ops(ws.program.root, skip=frozenset({"func.func", "func.return"})) == 3


def test_a_walk_within_some_top_level_ops_enters_only_those():
    """split-functions rewires a few functions of a megabyte module: its Rewriter walks
    every top-level op but enters only the ones it touches."""
    from strategies._ir.paths import walk_paths

    root = workspace(CALL_CHAIN).program.root
    everything = dict(walk_paths(root))
    top = [p for p in everything if len(p) == 3]
    funcs = [p for p in top if any(len(q) > 3 and q[:3] == p for q in everything)]
    assert len(funcs) >= 2
    assert list(dict(walk_paths(root, within=set()))) == top
    one = dict(walk_paths(root, within={funcs[0]}))
    assert set(one) == set(top) | {p for p in everything if p[:3] == funcs[0]}
    assert dict(walk_paths(root, within=None)) == everything


def test_a_commit_reads_only_the_symbols_of_top_level_ops_it_has_not_seen(monkeypatch):
    """Issue 13: on a megabyte module each split-functions commit read every op's symbol
    references again, though most functions were unchanged. A top-level op whose text a
    program had before is not read; the analysis is the one a full read gives."""
    from reducer.core.strategy import MLIRProgram

    reads: list[str] = []
    real = symbols_module.referenced_symbols
    symbols_module._FACTS.clear()
    monkeypatch.setattr(symbols_module, "referenced_symbols", lambda op: reads.append(op.name) or real(op))
    workspace(MODULE).program.analysis(Symbols)
    changed = MODULE.replace("arith.negf %0", "math.absf %0")
    reads.clear()
    after = workspace(changed).program.analysis(Symbols)
    tops = ["util.global"] + ["func.func"] * 4  # each top-level op's own attributes are read
    assert reads == tops[:3] + ["func.func", "func.call"] + tops[4:]  # inside @main, its line with a @
    public = workspace(MODULE.replace("func.func private @mid", "func.func @mid")).program
    reads.clear()
    public.analysis(Symbols)
    assert reads == tops  # a function made public: nothing inside it is read again

    def fields(info):
        return (
            info.symbols,
            info.functions,
            sorted(info.graph.edges),
            info.users,
            info.calls,
            info.pinned,
            info.referenced,
        )

    from programs import mlp, two_bugs

    nested = "module @inner {\n  func.func private @x() {\n    return\n  }\n}\n"  # a symbol not at the top
    loops = "func.func @loop(%n: index) {\n  scf.forall (%i) in (%n) {\n    func.call @unrelated2() : () -> ()\n  }\n  return\n}\nfunc.func private @unrelated2() {\n  return\n}\n"
    for text in (changed + nested + loops, mlp(layers=3), two_bugs()):
        after = workspace(text).program.analysis(Symbols)
        ws = workspace(text)
        whole = MLIRProgram(ws.program.text + "\n", ws.program.root)  # not the printer's shape: read whole
        assert fields(Symbols(whole)) == fields(after)


def test_symbols_of_a_module_with_aliases_are_read_by_body_too(monkeypatch):
    """An alias (`#map`) does not change which symbols an op refers to (unless it spells
    one: then the module is read whole): the 0.9 MB transformer's functions are read once
    per body as well."""
    text = (
        "#map = affine_map<(d0) -> (d0)>\n"
        "func.func private @f(%x: tensor<4xf32>) -> tensor<4xf32> attributes {m = #map} {\n"
        "  return %x : tensor<4xf32>\n}\n"
        "func.func @g(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
        "  %0 = call @f(%x) : (tensor<4xf32>) -> tensor<4xf32>\n  return %0 : tensor<4xf32>\n}\n"
    )
    reads: list[str] = []
    real = symbols_module.referenced_symbols
    symbols_module._FACTS.clear()
    monkeypatch.setattr(symbols_module, "referenced_symbols", lambda op: reads.append(op.name) or real(op))
    info = workspace(text).program.analysis(Symbols)
    assert reads == ["func.func", "func.func", "func.call"] and info.calls == {"f": [(0, 0, 1, 0, 0, 0)]}
    reads.clear()
    workspace(text.replace("@g", "@h")).program.analysis(Symbols)
    assert reads == ["func.func", "func.func"]  # @g's body, known


def test_the_top_level_cut_of_a_module_with_aliases_skips_the_line_loop(monkeypatch):
    """The fingerprint and the symbol analysis cut every program into its top-level ops;
    the line-by-line loop cost a tenth of a second per megabyte (issue 13). The printer's
    usual shape, aliases before the module included, is cut without it, the same way."""
    import strategies._ir.paths as paths
    from reducer.core.strategy import MLIRProgram

    text = (
        "#map = affine_map<(d0) -> (d0)>\n"
        "func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> attributes {m = #map} {\n"
        "  return %x : tensor<4xf32>\n}\n" + MODULE
    )
    program = workspace(text).program
    expected = paths._cut_lines(program.text)
    assert expected is not None and expected[0].startswith("#map = affine_map")
    monkeypatch.setattr(paths, "_cut_lines", lambda text: None)
    assert paths._cut_top_level(MLIRProgram(program.text, program.root)) == expected
