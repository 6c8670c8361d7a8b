"""split-functions: delete whole symbols, or keep one function as the entry point.

Keeping a function keeps everything it transitively references (networkx over the
symbol reference graph), so a single candidate can cut a model down to one function;
deleting a symbol drops every op that refers to it, rewiring uses like drop-ops.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import networkx as nx
from iree.compiler import ir

from reducer.core.strategy import Edit, MLIRProgram, Strategy
from strategies._ir.paths import top_level_op, top_level_texts
from strategies._ir.rewriter import Rewriter
from strategies._ir.symbols import Symbols


def _text_digests(program: MLIRProgram) -> list[bytes]:
    """SHA-256 of the text around the top-level ops, then of each one's text: once per
    program, so a fingerprint hashes 32 bytes per surviving op, not its whole text."""
    cut = top_level_texts(program)
    assert cut is not None  # asked only after top_level_texts succeeded
    return [hashlib.sha256(t.encode()).digest() for t in (cut[0], *cut[1])]


class SplitFunctions(Strategy[MLIRProgram]):
    name = "split-functions"
    summary = "delete functions and other symbols, or keep one function (and what it needs) alone"

    def opportunities(self, program: MLIRProgram) -> list[Edit]:
        info = program.analysis(Symbols)
        edits: list[Edit] = []
        if len(info.symbols) > 1:
            edits += [Edit("keep-only", info.symbols[f], f) for f in info.functions]
        edits += [Edit("delete", path, name) for name, path in info.symbols.items()]
        return edits

    @staticmethod
    def _doomed(info: Symbols, edits: Sequence[Edit]) -> tuple[list[str], set[str]]:
        """The functions to keep as entry points, and every symbol that goes."""
        keep_targets = [e.arg for e in edits if e.kind == "keep-only"]
        doomed = {e.arg for e in edits if e.kind == "delete"}
        if keep_targets:
            # One walk from all the targets at once: a search per target (nx.descendants)
            # walked the call graph a hundred times per chunk of the first sweep (issue 13).
            keep = set(nx.multi_source_dijkstra_path_length(info.graph, set(keep_targets)))
            doomed |= set(info.symbols) - keep
        # A top-level symbol that refers to a deleted one goes too (e.g. a global's initializer).
        by_path = {p: n for n, p in info.symbols.items()}
        work = list(doomed)
        while work:
            for user in info.users.get(work.pop(), []):
                owner = by_path.get(user)
                if owner is not None and owner not in doomed:
                    doomed.add(owner)
                    work.append(owner)
        return keep_targets, doomed

    def fingerprint(self, program: MLIRProgram, edits: Sequence[Edit]) -> bytes | None:
        """What the result is made of: the text around the top-level ops (aliases), the
        surviving top-level ops' texts, the entry points made public, the deleted symbols
        they refer to (their uses go) and which survivors something refers to (those get no
        new arguments). Keeping @f again once an unrelated function went gives the same key."""
        cut = top_level_texts(program)
        if cut is None:
            return None
        texts = cut[1]
        info = program.analysis(Symbols)
        keep_targets, doomed = self._doomed(info, edits)
        doomed_paths = {info.symbols[n] for n in doomed}
        survivors = [i for i in range(len(texts)) if (0, 0, i) not in doomed_paths]
        alive = {n for n, p in info.symbols.items() if p not in doomed_paths}
        cut_refs = sorted(n for n in doomed if any(p[:3] not in doomed_paths for p in info.users.get(n, [])))
        digests = program.analysis(_text_digests)  # hashing a megabyte per candidate cost more
        parts = [digests[0], *(digests[i + 1] for i in survivors)]
        tail = [repr(sorted(keep_targets)), repr(cut_refs), repr(sorted(alive & info.referenced))]
        return hashlib.sha256(b"".join(parts) + "\0".join(tail).encode()).digest()

    def apply(self, program: MLIRProgram, edits: Sequence[Edit]) -> ir.Operation | None:
        info = program.analysis(Symbols)
        keep_targets, doomed = self._doomed(info, edits)
        doomed_paths = {info.symbols[n] for n in doomed}
        if not doomed_paths and not any(
            "sym_visibility" in top_level_op(program, info.symbols[t]).attributes for t in keep_targets
        ):
            # Keeping public functions that need everything changes nothing: most of the
            # first sweep on a big module, where cloning and verifying it to find that out
            # cost a quarter of a second per candidate (issue 13).
            return None
        user_paths = {p for n in doomed for p in info.users.get(n, []) if p[:3] not in doomed_paths and len(p) > 3}
        # Only the survivors are copied, and only the functions whose uses are rewired
        # are walked, not the (many) that go whole.
        kept = {i for i, _ in enumerate(program.root.regions[0].blocks[0].operations) if (0, 0, i) not in doomed_paths}
        rewriter = Rewriter(program, within={p[:3] for p in user_paths}, keep=kept)
        root = rewriter.root
        for target in keep_targets:
            if target not in doomed:  # an entry point must not be private, or compilers drop it
                op = rewriter.table[info.symbols[target]]
                if "sym_visibility" in op.attributes:
                    del op.attributes["sym_visibility"]
        rewriter.drop(sorted(user_paths))
        for path in sorted(doomed_paths):
            rewriter.erase(path)
        return root
