"""opt-passes: run one cleanup pipeline, in process, as one candidate.

Each pipeline is its own candidate and is never fused into other candidates: a
canonicalization can fold the very op that triggers the bug, and only the oracle can
say whether it did. Greedy rewriting is bounded (iterations and rewrites), so a pass
cannot spin. Pipelines that make the program bigger (inlining) are offered again as
moves once the program is 1-minimal.
"""

from __future__ import annotations

from collections.abc import Sequence

from iree.compiler import ir, passmanager

from reducer.core.ir import same_ir
from reducer.core.strategy import Edit, MLIRProgram, Strategy

#: name -> pipeline on builtin.module, cheapest and most often useful first
PIPELINES: dict[str, str] = {
    "symbol-dce": "symbol-dce",
    "canonicalize": "canonicalize{max-iterations=4 max-num-rewrites=100000}",
    "cse": "cse",
    "inline": "inline{max-iterations=2},symbol-dce",
    "drop-compiler-hints": "iree-util-drop-compiler-hints",
    "fold-globals": "iree-util-fold-globals",
    "ipo": "iree-util-ipo",
    "util-patterns": "iree-util-apply-patterns",
    "int-arithmetic": "iree-util-optimize-int-arithmetic",
    "splat-constants": "iree-util-strip-and-splat-constants",
}


class OptPasses(Strategy[MLIRProgram]):
    name = "opt-passes"
    summary = "run canonicalize, cse, symbol-dce, inline or an IREE cleanup pass, each as one candidate"
    moves = True

    def opportunities(self, program: MLIRProgram) -> list[Edit]:
        return [Edit("pass", (), name) for name in PIPELINES]

    def apply(self, program: MLIRProgram, edits: Sequence[Edit]) -> ir.Operation | None:
        idle = program.analysis(_Idle)
        root = None
        changed = False
        for e in edits:
            if not changed and e.arg in idle:
                continue  # it leaves this program as it is, and the module is still that
            root = root or program.clone()
            try:
                pm = passmanager.PassManager.parse(f"builtin.module({PIPELINES[e.arg]})", root.context)
                pm.run(root)
            except ir.MLIRError:
                return None  # the pass does not apply (or failed): no candidate
            if not changed:
                if same_ir(root, program.root):
                    idle.add(e.arg)
                else:
                    changed = True
        return root if changed else None  # None: every pipeline left the program as it was


class _Idle(set[str]):
    """The pipelines that leave a program unchanged, learnt as its candidates run them.
    The sweep runs the ten pipelines in 21 subsets per program, and on a small program
    that does not simplify, re-running each one in every subset was the largest part of
    the engine's time on the megabyte row (issue 13). A pipeline is deterministic, so
    one that left the program unchanged does so again while the module is still the
    program; once a pipeline changes it, the rest run."""

    def __init__(self, program: MLIRProgram) -> None:
        super().__init__()
