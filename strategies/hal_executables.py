"""hal-executables: strip a `hal.executable`'s wrappers down to what a codegen failure needs.

An export's workgroup-count region (`count(...) { ... }`) is optional and codegen passes
rarely read it; drop-ops cannot take a region away, so this strategy empties it.
Extra variants go with `globals`, unused functions with `split-functions`.
"""

from __future__ import annotations

from collections.abc import Sequence

from iree.compiler import ir

from reducer.core.strategy import Edit, MLIRProgram, Strategy
from strategies._ir.paths import walk_paths


class HalExecutables(Strategy[MLIRProgram]):
    name = "hal-executables"
    summary = "drop a hal.executable.export's workgroup-count region"

    def opportunities(self, program: MLIRProgram) -> list[Edit]:
        return [
            Edit("drop-count", path)
            for path, op in walk_paths(program.root)
            if op.name == "hal.executable.export" and len(op.regions) and len(op.regions[0].blocks)
        ]

    def apply(self, program: MLIRProgram, edits: Sequence[Edit]) -> ir.Operation | None:
        root = program.clone()
        table = dict(walk_paths(root))
        with root.context, ir.Location.unknown():
            trash = ir.Operation.create("scf.execute_region", regions=1)  # the bindings cannot erase a block
            for e in edits:
                op = table.get(e.path)
                if op is not None and len(op.regions[0].blocks):
                    op.regions[0].blocks[0].append_to(trash.regions[0])
            trash.erase()
        return root
