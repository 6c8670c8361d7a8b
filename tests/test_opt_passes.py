from conftest import apply_edits, each_edit

from reducer.core.ir import new_context
from strategies.opt_passes import PIPELINES, OptPasses

TEXT = """
util.global private @g = dense<1.0> : tensor<4xf32>
func.func private @unused() {
  return
}
func.func private @helper(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = arith.addf %x, %x : tensor<4xf32>
  return %y : tensor<4xf32>
}
func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %b = util.optimization_barrier %a : tensor<4xf32>
  %c1 = arith.constant 1.0 : f32
  %c2 = arith.constant 2.0 : f32
  %s = arith.addf %c1, %c2 : f32
  %0 = func.call @helper(%b) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = arith.addf %0, %0 : tensor<4xf32>
  %2 = arith.addf %0, %0 : tensor<4xf32>
  %3 = arith.mulf %1, %2 : tensor<4xf32>
  return %3 : tensor<4xf32>
}
"""


def outcomes() -> dict:
    return {e.arg: c for e, c in each_edit(OptPasses(), TEXT)}


def test_every_pipeline_parses_in_process():
    from iree.compiler import passmanager

    ctx = new_context()
    for pipeline in PIPELINES.values():
        passmanager.PassManager.parse(f"builtin.module({pipeline})", ctx)


def test_each_pipeline_is_its_own_candidate():
    out = outcomes()
    assert "@unused" not in out["symbol-dce"].text and "@helper" in out["symbol-dce"].text
    assert "arith.constant 3.000000e+00" not in out["canonicalize"].text  # dead fold removed
    assert out["cse"].text.count("arith.addf") == 2 and "arith.mulf %2, %2" in out["cse"].text
    assert "optimization_barrier" not in out["drop-compiler-hints"].text
    assert "@helper" not in out["inline"].text and "@unused" not in out["inline"].text


def test_a_pipeline_that_does_nothing_is_not_a_candidate():
    text = "func.func @f(%a: f32) -> f32 {\n  return %a : f32\n}\n"
    assert apply_edits(OptPasses(), text, lambda edits: edits[:1]).reason == "no-op"


def test_a_pipeline_that_left_the_program_unchanged_is_not_run_again(monkeypatch):
    """The sweep tries the pipelines in 21 subsets per program (issue 13): one that left
    the program as it was is skipped while nothing before it in the subset changed it;
    after one that did, it runs, as it may find something to do then."""
    from conftest import workspace
    from iree.compiler import passmanager

    runs: list[str] = []
    real = passmanager.PassManager.parse
    monkeypatch.setattr(
        passmanager.PassManager, "parse", staticmethod(lambda text, ctx=None: runs.append(text) or real(text, ctx))
    )
    ws = workspace(TEXT)
    s = OptPasses()
    edits = {e.arg: e for e in s.opportunities(ws.program)}
    assert ws.materialize(s, [edits["ipo"], edits["cse"]]).text.count("arith.addf") == 2  # ipo: idle here
    runs.clear()
    assert ws.materialize(s, [edits["ipo"]]).reason == "no-op" and runs == []  # known idle: not run
    both = ws.materialize(s, [edits["symbol-dce"], edits["ipo"]])
    assert "@unused" not in both.text and len(runs) == 2  # after symbol-dce changed it, it runs
