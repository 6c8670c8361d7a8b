from conftest import workspace
from programs import CALL_CHAIN

from strategies.split_functions import SplitFunctions

MODULE = CALL_CHAIN


def apply(*picks: tuple[str, str]) -> str:
    ws = workspace(MODULE)
    s = SplitFunctions()
    edits = s.opportunities(ws.program)
    chosen = [e for e in edits if (e.kind, e.arg) in picks]
    assert len(chosen) == len(picks)
    cand = ws.materialize(s, chosen)
    assert hasattr(cand, "text"), cand
    return cand.text


def test_edits_cover_functions_and_symbols():
    ws = workspace(MODULE)
    edits = SplitFunctions().opportunities(ws.program)
    assert {(e.kind, e.arg) for e in edits if e.kind == "keep-only"} == {
        ("keep-only", f) for f in ("leaf", "mid", "main", "unrelated")
    }
    assert {e.arg for e in edits if e.kind == "delete"} == {"g", "leaf", "mid", "main", "unrelated"}


def test_keep_only_keeps_what_the_function_needs_and_makes_it_public():
    out = apply(("keep-only", "mid"))
    assert "@unrelated" not in out and "@main" not in out
    assert "@leaf" in out and "util.global private @g" in out
    assert "func.func @mid" in out  # no longer private: it is the entry point now


def test_keep_only_several_keeps_the_union():
    out = apply(("keep-only", "leaf"), ("keep-only", "unrelated"))
    assert "@leaf" in out and "@unrelated" in out and "@mid" not in out and "@g" not in out


def test_delete_rewires_calls_like_drop_ops():
    out = apply(("delete", "leaf"))
    assert "@leaf" not in out
    assert "call" in out  # main still calls mid
    assert "arith.addf %arg0" in out  # the call result was forwarded from its operand


def test_delete_global_drops_its_loads():
    out = apply(("delete", "g"))
    assert "util.global" not in out


def test_deleting_a_callee_with_all_its_callers():
    out = apply(("delete", "mid"), ("delete", "leaf"), ("delete", "g"))
    assert "@mid" not in out and "@leaf" not in out and "arith.negf %arg0" in out


def test_applying_walks_only_the_functions_whose_uses_it_rewires(monkeypatch):
    """On a megabyte module a walk of every op costs more than the edit (issue 13): deleting
    @leaf rewires its call in @mid, so @mid is walked, and @main and @unrelated are not."""
    import strategies._ir.paths as irs
    import strategies._ir.rewriter as rewriter

    ws = workspace(MODULE)
    s = SplitFunctions()
    edits = s.opportunities(ws.program)  # the analysis (one full walk) is made once per program
    walked: list[str] = []
    real = irs.walk_paths

    def spy(root, prefix=(), within=None):
        walked.append(irs.symbol_name(root) or root.name)
        return real(root, prefix, within)

    monkeypatch.setattr(irs, "walk_paths", spy)
    monkeypatch.setattr(rewriter, "walk_paths", spy)
    cand = ws.materialize(s, [e for e in edits if (e.kind, e.arg) == ("delete", "leaf")])
    assert "@leaf" not in cand.text and "@unrelated" in cand.text
    assert walked == ["mid"]


def test_fingerprint_is_equal_exactly_when_the_result_is():
    """Keeping @main builds the same text before and after the unrelated @unrelated went:
    the engine may skip rebuilding it (issue 13). Anything that changes the result
    (another target, a survivor's text) changes the key."""
    s = SplitFunctions()
    other = "func.func @other(%x: tensor<4xf32>) -> tensor<4xf32> {\n  return %x : tensor<4xf32>\n}\n"
    ws = workspace(MODULE + other)
    edits = {(e.kind, e.arg): e for e in s.opportunities(ws.program)}
    keep_main = s.fingerprint(ws.program, [edits[("keep-only", "main")]])
    assert keep_main is not None
    assert keep_main != s.fingerprint(ws.program, [edits[("keep-only", "mid")]])
    built = ws.materialize(s, [edits[("keep-only", "main")]]).text
    ws.commit(ws.materialize(s, [edits[("delete", "unrelated")]]))
    again = {(e.kind, e.arg): e for e in s.opportunities(ws.program)}[("keep-only", "main")]
    assert s.fingerprint(ws.program, [again]) == keep_main
    assert ws.materialize(s, [again]).text == built
    changed = workspace(MODULE.replace("arith.negf %0", "math.absf %0") + other)
    edits = {(e.kind, e.arg): e for e in s.opportunities(changed.program)}
    assert s.fingerprint(changed.program, [edits[("keep-only", "main")]]) != keep_main


def test_a_fingerprint_hashes_each_text_once_per_program(monkeypatch):
    """The engine asks a fingerprint of every candidate (issue 13): hashing the surviving
    texts each time cost as much as printing on a megabyte. Each top-level op's text is
    hashed once per program; a fingerprint then hashes 32 bytes per survivor."""
    import hashlib

    import strategies.split_functions as module

    hashed: list[int] = []

    def sha256(data: bytes = b""):
        hashed.append(len(data))
        return hashlib.sha256(data)

    monkeypatch.setattr(module, "hashlib", type("H", (), {"sha256": staticmethod(sha256)}))
    s = SplitFunctions()
    ws = workspace(MODULE)
    edits = s.opportunities(ws.program)
    s.fingerprint(ws.program, edits[:1])
    hashed.clear()
    for e in edits:
        s.fingerprint(ws.program, [e])
    assert len(hashed) == len(edits) and max(hashed) < len(ws.program.text) / 2


def test_keeping_public_functions_that_need_everything_is_a_no_op_without_a_clone(monkeypatch):
    """Most of the first sweep on a big module keeps halves of functions that together
    need every symbol (issue 13): cloning and verifying a megabyte to find it unchanged
    cost a quarter of a second each. Keeping @main and @unrelated (both public) is known
    to change nothing; keeping the private @mid still builds (it becomes public)."""
    from reducer.core.strategy import MLIRProgram
    from reducer.core.workspace import Rejected

    ws = workspace(MODULE)
    s = SplitFunctions()
    edits = {(e.kind, e.arg): e for e in s.opportunities(ws.program)}
    clones: list[int] = []
    real = MLIRProgram.clone
    monkeypatch.setattr(MLIRProgram, "clone", lambda self: clones.append(1) or real(self))
    both = [edits[("keep-only", "main")], edits[("keep-only", "unrelated")]]
    assert ws.materialize(s, both) == Rejected("no-op") and clones == []
    assert "func.func @mid" in ws.materialize(s, [edits[("keep-only", "mid")]]).text


def test_only_the_surviving_top_level_ops_are_copied(monkeypatch):
    """Keeping @mid of a megabyte module copied the whole module and erased the rest,
    which cost as much as the rest of the candidate (issue 13): the survivors are copied
    into a new module, and the text is the one cloning and erasing gives."""
    from reducer.core import ir as irutil
    from reducer.core.strategy import MLIRProgram

    ws = workspace("module attributes {my.flag} {\n" + MODULE + "}\n")
    s = SplitFunctions()
    edits = {(e.kind, e.arg): e for e in s.opportunities(ws.program)}
    chosen = [edits[("keep-only", "mid")], edits[("delete", "leaf")]]
    import strategies.split_functions as module

    clones: list[int] = []
    real = MLIRProgram.clone
    monkeypatch.setattr(MLIRProgram, "clone", lambda self: clones.append(1) or real(self))
    with ws.scope(), monkeypatch.context() as patch:
        whole = module.Rewriter
        patch.setattr(module, "Rewriter", lambda program, within=None, keep=None: whole(program, within))
        expected = s.apply(ws.program, chosen)  # the module cloned, then the rest erased
    assert clones == [1]
    with ws.scope():
        built = s.apply(ws.program, chosen)
    assert clones == [1]
    assert irutil.to_text(built, ws.options) == irutil.to_text(expected, ws.options)
    assert "attributes {my.flag}" in irutil.to_text(built, ws.options)
