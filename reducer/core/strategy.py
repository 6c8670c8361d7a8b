"""The contract between the engine and a strategy.

A strategy lists the reductions it could make to the current program as a list of
`Edit`s, and applies any subset of them to a fresh copy. It never runs the oracle,
never caches and never sees processes: the engine decides which subsets to try.
"""

from __future__ import annotations

import abc
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

import attrs

if TYPE_CHECKING:  # pragma: no cover
    from iree.compiler import ir

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "ireereduce.strategies"


@attrs.frozen(order=True)
class Edit:
    """One reduction opportunity, stable while the program it was listed on is current.

    `path` locates an op (region, block, op index triples from the module down);
    text-level edits leave it empty and say where they act in `arg`.
    """

    kind: str
    path: tuple[int, ...] = ()
    # The strategy's own payload (a span, a symbol name, a type). It must be hashable and
    # ordered, as edits are cached and sorted, but each strategy reads its own shape back,
    # so it is typed Any rather than forcing a cast at every use.
    arg: Any = None

    def __str__(self) -> str:
        where = "/".join(map(str, self.path))
        return f"{self.kind}@{where or '-'}{'' if self.arg is None else f'({self.arg})'}"


T = TypeVar("T")
P = TypeVar("P", bound="Program")


@attrs.define
class Program:
    """What a strategy sees: the current program as canonical text. An `MLIRProgram` adds
    the parsed module; a text strategy reads `text` from either."""

    text: str
    _memo: dict[Callable[[Any], Any], Any] = attrs.field(factory=dict, init=False, repr=False, eq=False)

    def analysis(self: P, kind: Callable[[P], T]) -> T:
        """`kind(self)`, computed once per program and shared by every strategy and every
        subset (the program is immutable). Keyed by the analysis itself (a class, or a
        function), so two strategies cannot collide on a name, and the type checker knows
        what comes back."""
        try:
            return self._memo[kind]
        except KeyError:
            found = self._memo[kind] = kind(self)
            return found


@attrs.define
class MLIRProgram(Program):
    """A program that parsed: `root` is the current module, never None, and must not be
    mutated; `clone()` gives a private copy to rewrite. MLIR strategies (`Strategy[MLIRProgram]`)
    get one: the session runs them only on a workspace that parsed its input."""

    root: ir.Operation

    def clone(self) -> ir.Operation:
        return self.root.clone()


class Strategy(abc.ABC, Generic[P]):
    """A pluggable reduction. Subclasses set `name`, `summary` and `modes`; where it runs
    is its place in the registry list the session passes to the engine. The parameter is
    the program it reads: `Strategy[MLIRProgram]` for one that walks the IR (its `modes`
    include "mlir"), `Strategy[Program]` for one that reads text only."""

    name: ClassVar[str]
    summary: ClassVar[str]
    #: "mlir": needs the parsed IR; "text": works on any text (the fallback when parsing fails).
    modes: ClassVar[frozenset[str]] = frozenset({"mlir"})
    #: Used in the main loop, where only strictly smaller candidates are judged.
    shrinks: ClassVar[bool] = True
    #: Also offers moves: candidates that need not be smaller, tried once the program is
    #: 1-minimal and kept only if reducing from them ends smaller (Vulcan, Shrink Ray).
    moves: ClassVar[bool] = False
    #: Its edits are alternatives (a subset applies one of them): after a commit its sweep
    #: stops, and the next round lists them afresh for the new program.
    exclusive: ClassVar[bool] = False
    #: Modules it imports only where it applies an edit, as they are slow to load: the
    #: session loads them while the original is checked, once the engine's first checks
    #: are on their way (`session.registry` stays quick for that).
    deferred_imports: ClassVar[tuple[str, ...]] = ()
    #: What the run gives it beyond the program, by the names of its constructor's keyword
    #: arguments (e.g. "parameters": the archives the run was given). The session passes
    #: those it has, and nothing else: the strategy must work without them.
    wants: ClassVar[tuple[str, ...]] = ()

    @abc.abstractmethod
    def opportunities(self, program: P) -> list[Edit]:
        """Every edit this strategy could make, in a fixed order (largest expected win first)."""

    @abc.abstractmethod
    def apply(self, program: P, edits: Sequence[Edit]) -> ir.Operation | str | None:
        """Apply `edits` together to a copy of `program`.

        Return the rewritten module (from `program.clone()`), new text (which the engine
        parses and verifies), or None when this subset makes no sense.
        """

    def fingerprint(self, program: P, edits: Sequence[Edit]) -> bytes | None:
        """Optional: a key of what `apply(program, edits)` would print, cheaper than building
        it, such that equal keys (on any two programs) mean equal texts. The engine then
        skips building a candidate it already knows is not interesting (e.g. keeping one
        function, again, after an unrelated one went). None: no such key."""
        return None


#: llvm-reduce's delta pass names for the strategies that do the same job here, so a
#: `--skip-strategies operands-zero` carried over from llvm-reduce means what it meant there.
ALIASES: dict[str, str] = {
    "operands-zero": "replace-with-zero",
    "operands-to-args": "values-to-arguments",
    "operands-skip": "forward-operands",
    "arguments": "remove-results-and-arguments",
    "ir-passes": "opt-passes",
}


def canonical_name(name: str) -> str:
    """The strategy an llvm-reduce alias stands for; any other name as it is."""
    return ALIASES.get(name, name)


def discover(builtin: Sequence[type[Strategy]]) -> dict[str, type[Strategy]]:
    """The registry in run order: `builtin` as given, then the plug-ins a downstream package
    registers under `ireereduce.strategies`, by entry-point name. The caller passes the
    built-ins so this contract module never imports them. A plug-in that is not a
    Strategy, or whose name is taken, is rejected with a warning rather than silently
    replacing (or shadowing) what the user asked for."""
    import importlib.metadata  # about 50 ms, and only discovery needs it: not at start-up

    found: dict[str, type[Strategy]] = {cls.name: cls for cls in builtin}
    try:
        eps: Any = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
    except Exception:  # pragma: no cover - broken metadata must not stop a reduction
        eps = []
    for ep in sorted(eps, key=lambda ep: ep.name):
        try:
            cls = ep.load()
        except Exception as exc:  # a broken plug-in is reported, not fatal
            log.warning("strategy plug-in %s could not be loaded: %s", ep.name, exc)
            continue
        if not (isinstance(cls, type) and issubclass(cls, Strategy)):
            log.warning("strategy plug-in %s (%s) is not a Strategy subclass; ignored", ep.name, ep.value)
            continue
        name = getattr(cls, "name", None)
        if not isinstance(name, str) or name in found or name in ALIASES:
            log.warning(
                "strategy plug-in %s (%s) reuses the name %r of a strategy already registered; ignored",
                ep.name,
                ep.value,
                name,
            )
            continue
        found[name] = cls
    return found
