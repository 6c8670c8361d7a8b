"""Turns (strategy, subset of edits) into a candidate the oracle can judge.

This is where the verifier sits: a candidate that does not parse, does not verify,
or is not strictly smaller than the current program never reaches the cache or the
oracle. Two kinds: MLIR (the normal case) and plain text (input that does not parse).
"""

from __future__ import annotations

import abc
import contextlib
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from reducer.core import ir as irutil
from reducer.core.processes import raise_if_stopped
from reducer.core.resources import REFERENCE, unrenamed, written
from reducer.core.strategy import Edit, MLIRProgram, Program, Strategy

log = logging.getLogger(__name__)


#: A candidate's volume when its ops or bytes already differ from the current program's.
UNKNOWN_VOLUME = -1


@attrs.frozen(order=False)
class Size:
    """Ops (None when the text is not MLIR), then bytes, then tensor volume: the order
    candidates must strictly descend in, which also guarantees the search ends. Before
    all of them, `outside`: what the program needs from files beside it (external
    parameters, as the session counts them), so a program that needs fewer is smaller
    whatever its text costs: putting a weight inline makes the text longer."""

    ops: int | None
    bytes: int
    volume: int = 0
    outside: int = 0

    def smaller_than(self, other: Size) -> bool:
        if self.outside != other.outside:
            return self.outside < other.outside
        if self.ops is not None and other.ops is not None:
            return (self.ops, self.bytes, self.volume) < (other.ops, other.bytes, other.volume)
        # Ops unknown (a text workspace, an earlier output read as a file): bytes, then the
        # volume, as the engine orders them; a text workspace's volumes are all 0.
        return (self.bytes, self.volume) < (other.bytes, other.volume)

    def __str__(self) -> str:
        ops = "" if self.ops is None else f"{self.ops} ops, "
        outside = f", {self.outside} from other files" if self.outside else ""  # inside a progress line's parentheses
        return f"{ops}{self.bytes} bytes{outside}"


@attrs.frozen
class Candidate:
    text: str
    size: Size
    strategy: str  # the name that made it, for the progress events and the diff header
    #: The IR that prints as text, when the workspace built it: a fork or a commit of the
    #: candidate takes it rather than parsing the text again (issue 13: parsing each
    #: committed megabyte was a sixth of the engine's time).
    module: object = attrs.field(default=None, eq=False, repr=False)

    @property
    def data(self) -> bytes:
        return self.text.encode()


@attrs.frozen
class Rejected:
    reason: str  # "no-op", "unparsable", "invalid", "not-smaller", "strategy-error"
    detail: str = ""


class Workspace(abc.ABC):
    mode: str
    program: Program
    size: Size
    #: The bytes of each `dense_resource` blob the run keeps out of the text
    #: (`reducer.core.resources`), by key: a program's size counts the blobs it uses, as
    #: its file holds them (cut to their types), and not those it no longer uses.
    blob_sizes: Mapping[str, int] = {}
    #: How many things a program's text needs from files beside it (`Size.outside`); None: nothing counted.
    outside: Callable[[str], int] | None = None

    def count_outside(self, text: str) -> int:
        return self.outside(text) if self.outside is not None else 0

    def weigh(self, text: str) -> int:
        """text's bytes as a file: with the blobs it uses."""
        nbytes = len(text.encode())
        if self.blob_sizes and "dense_resource<" in text:
            nbytes += sum(written(text, self.blob_sizes).values())
        return nbytes

    def opportunities(self, strategy: Strategy) -> list[Edit]:
        with self.scope():
            return strategy.opportunities(self.program)

    def scope(self) -> contextlib.AbstractContextManager[object]:
        """What strategies run under: the MLIR context, so they can build types and attributes."""
        return contextlib.nullcontext()

    def materialize(self, strategy: Strategy, edits: Sequence[Edit], grow: bool = False) -> Candidate | Rejected:
        """`grow` admits a candidate that is not smaller (a move), as long as it differs."""
        raise_if_stopped()  # one the bindings dropped while building the last candidate
        try:
            with self.scope():
                result = strategy.apply(self.program, edits)
            if result is None:
                return Rejected("no-op")
            text_or = self._finish(result)
        except (irutil.ParseError, irutil.VerifyError) as exc:
            return Rejected("unparsable" if isinstance(exc, irutil.ParseError) else "invalid", str(exc))
        except Exception as exc:  # a faulty strategy costs its candidate, never the run
            raise_if_stopped(exc)
            log.warning("strategy %s failed on %d edits: %s: %s", strategy.name, len(edits), type(exc).__name__, exc)
            return Rejected("strategy-error", str(exc))
        if isinstance(text_or, Rejected):
            return text_or
        text, size, module = text_or
        if text == self.program.text:  # e.g. a pass that changed nothing: no volume to compare
            return Rejected("no-op" if grow else "not-smaller")
        if not grow and not self._beats(size):
            return Rejected("not-smaller")
        return Candidate(text, size, strategy.name, module)

    def size_known(self) -> Size:
        """The current size as far as it is measured (the volume may be UNKNOWN_VOLUME)."""
        return self.size

    def _beats(self, size: Size) -> bool:
        """Whether a candidate of this size is smaller than the current program."""
        return size.smaller_than(self.size)

    def smaller_than(self, other: Candidate) -> bool:
        """Whether the current program is smaller than other (e.g. the best so far)."""
        return self.size.smaller_than(other.size)

    def measured(self, candidate: Candidate) -> Candidate:
        """candidate with its size measured in full (its volume, if left unknown)."""
        return candidate

    @abc.abstractmethod
    def _finish(self, result: object) -> tuple[str, Size, object] | Rejected:
        """Canonical text and size of what a strategy returned, and the IR that prints
        as that text (None for plain text)."""

    @abc.abstractmethod
    def commit(self, candidate: Candidate) -> None:
        """Make candidate the current program."""

    @abc.abstractmethod
    def fork(self, candidate: Candidate) -> Workspace:
        """A second workspace whose program is candidate: the engine lists and applies edits
        on it while candidate's verdict is pending (speculation), then adopts it if it wins."""

    def adopt(self, other: Workspace) -> None:
        """Make other's program (a fork of this workspace) the current one, without re-parsing."""
        self.__dict__.update({k: v for k, v in other.__dict__.items() if k in ("program", "size", "_size", "_module")})


class TextWorkspace(Workspace):
    mode = "text"

    def __init__(
        self, text: str, blob_sizes: Mapping[str, int] | None = None, outside: Callable[[str], int] | None = None
    ) -> None:
        self.blob_sizes = blob_sizes or {}
        self.outside = outside
        self._set(text)

    def _set(self, text: str) -> None:
        self.program = Program(text)
        self.size = Size(None, self.weigh(text), outside=self.count_outside(text))

    def _finish(self, result: object) -> tuple[str, Size, object] | Rejected:
        if not isinstance(result, str):
            return Rejected("strategy-error", "text strategies must return text")
        return result, Size(None, self.weigh(result), outside=self.count_outside(result)), None

    def commit(self, candidate: Candidate) -> None:
        self._set(candidate.text)

    def fork(self, candidate: Candidate) -> Workspace:
        return TextWorkspace(candidate.text, self.blob_sizes, self.outside)


#: Below this many bytes a candidate is printed whole: matching its top-level ops with the
#: program's costs more than printing a small module.
PIECEWISE_BYTES = 1 << 16


@attrs.frozen
class _TopLevel:
    """The current program's top-level ops, each with its text and the ops it holds
    (itself included): a candidate reuses them for the ops it did not change."""

    head: str  # the module line
    attributes: dict[str, object]  # the module's, which that line prints
    ops: list[object]  # ir.Operation
    texts: list[str]
    counts: list[int]
    by_name: dict[str, int]  # symbol name -> position
    lazy: dict[str, Any] = attrs.field(factory=dict, eq=False)  # what only some candidates need

    @staticmethod
    def of(program: MLIRProgram) -> _TopLevel | None:
        """Once per program (`program.analysis`); None when its text has another shape
        (aliases, resources, a small program)."""
        if len(program.text) < PIECEWISE_BYTES:
            return None
        cut = program.analysis(irutil.module_cut)  # the strategies' cut too
        root = program.root
        if cut is None or len(root.regions) != 1 or len(root.regions[0].blocks) != 1:
            return None
        ops = [op.operation for op in root.regions[0].blocks[0].operations]
        attributes = _attributes(root)
        if len(ops) != len(cut[1]) or attributes is None:
            return None
        if any(len(op.results) for op in ops):  # `%0 = ...` is numbered module-wide
            return None
        return _TopLevel(
            cut[0],
            attributes,
            ops,
            cut[1],
            [_count(op, text) for op, text in zip(ops, cut[1])],
            {name: i for i, name in enumerate(map(_symbol, ops)) if name is not None},
        )

    def match(self, root: object) -> list[_Match] | None:
        """root's top-level ops, each with the program's op it stands for and whether it
        is that op unchanged; None when root's module differs in shape or attributes."""
        if len(root.regions) != 1 or len(root.regions[0].blocks) != 1:  # type: ignore[attr-defined]
            return None
        attributes = _attributes(root)
        if attributes is None or attributes != self.attributes:
            return None
        matches: list[_Match] = []
        after = 0  # where an op without a name is looked for
        for op in root.regions[0].blocks[0].operations:  # type: ignore[attr-defined]
            op = op.operation
            name = _symbol(op)
            i = self.by_name.get(name, -1) if name is not None else after
            same = 0 <= i < len(self.ops) and irutil.same_ir(op, self.ops[i])
            if same:
                after = i + 1
            matches.append(_Match(op, name, i if 0 <= i < len(self.ops) else -1, same))
        return matches

    def piecewise(
        self, root: object, options: irutil.PrintOptions, verified: bool, matches: list[_Match] | None = None
    ) -> tuple[str, int] | None:
        """root's canonical text and op count, printing and counting only the top-level
        ops that differ from the program's (a split-functions candidate on a megabyte
        module keeps most of them as they were); None when that cannot be done exactly."""
        if matches is None:
            matches = self.match(root)
        if matches is None:
            return None
        texts: list[str] = []
        count = 0
        for m in matches:
            if m.same:
                texts.append(self.texts[m.index])
                count += self.counts[m.index]
                continue
            restyled = self._restyled(m.op, m.index, verified) if m.index >= 0 else None
            if restyled is not None:  # e.g. made public: only its first line is printed again
                texts.append(restyled)
                count += self.counts[m.index]
                continue
            text = irutil.op_text(m.op, options, verified)
            if text is None:
                return None
            texts.append(text)
            count += _count(m.op, text)  # kept: if this candidate is committed, its program has it
        return irutil.join_module(self.head, texts), count

    def verify_changes(self, root: object, matches: list[_Match]) -> bool:
        """Verify root as far as it differs from the (verified) program; False when that
        cannot be told apart, and root must be verified whole. Issue 13: verifying the
        whole candidate was the largest cost left per candidate on a megabyte module.

        An unchanged top-level op verified in the program, and its own verifier sees
        only itself; what it can learn anew is through the symbols it uses (a call's
        types against its callee, in the module's symbol-table check). So the changed
        ops, and the unchanged ones that use a symbol that went or whose function type
        changed, are verified in the module with every other function swapped for a
        declaration of its type (other symbols stay whole): that runs their own verifiers
        and their symbol-use checks. Should that fail, the whole candidate is verified
        for the verdict, so this never rejects a valid one."""
        names = [m.name for m in matches if m.name is not None]
        if len(set(names)) != len(names):  # the module's symbol table rejects it: say why in full
            return False
        changed = [m for m in matches if not m.same]
        present = set(names)
        stale = {n for n in self.by_name if n not in present}  # symbols that went
        for m in changed:
            if m.name is None or m.name in stale:
                continue
            old = self.ops[m.index] if m.index >= 0 else None
            if old is None or _symbol(old) != m.name or not _same_interface(m.op, old):
                stale.add(m.name)
        users = self.users()
        if users is None:
            return False
        affected = {i for name in stale for i in users.get(name, ())}
        check = [m for m in matches if not m.same or m.index in affected]
        if not check:
            return True
        try:
            _verify_swapped(root, matches, check)
        except irutil.VerifyError:
            irutil.verify(root)  # the verdict and its message are the whole module's
        except Exception:  # an op the bindings cannot swap out: verify whole
            return False
        return True

    def users(self) -> dict[str, list[int]] | None:
        """Symbol name (as `_symbol` spells it) -> positions of the top-level ops whose
        text refers to it, once per program; None when a name is spelled with escapes."""
        if "users" not in self.lazy:
            found: dict[str, list[int]] = {}
            escaped = False
            for i, text in enumerate(self.texts):
                refs = _SYMBOL_REF.findall(text)
                escaped = any("\\" in r for r in refs)
                if escaped:
                    break
                for ref in set(refs):
                    found.setdefault(ref if ref.startswith('"') else f'"{ref}"', []).append(i)
            self.lazy["users"] = None if escaped else found
        users: dict[str, list[int]] | None = self.lazy["users"]
        return users

    def _restyled(self, op: Any, i: int, verified: bool) -> str | None:
        """op's text when it is a function that differs from the program's op i only in
        its own attributes (split-functions makes a kept function public): its header
        printed again, its body's text kept. A function prints its attributes in the
        header only; its region must be equal, which it is once op has i's attributes."""
        old = self.ops[i]
        if op.name != "func.func" or old.name != "func.func" or not len(op.regions):  # type: ignore[attr-defined]
            return None
        mine, theirs = _attributes(op), _attributes(old)
        if mine is None or theirs is None or mine == theirs:  # equal: its body differs (a rewired caller)
            return None
        _set_attributes(op, theirs)
        try:
            equal = irutil.same_ir(op, old)
        finally:
            _set_attributes(op, mine)
        if not equal:
            return None
        first, _, body = self.texts[i].partition("\n")
        head = irutil.op_header(op, verified)
        if head is None or first != f"  {irutil.op_header(old, verified)}":
            return None
        return f"  {head}\n{body}"


@attrs.frozen
class _Match:
    """A candidate's top-level op and the program's op it stands for."""

    op: Any
    name: str | None  # its symbol name
    index: int  # the program's op of that name (or, unnamed, the next one in order); -1: none
    same: bool  # structurally equal to it: verified, printed and counted in the program


#: A symbol reference as printed: `@name` or `@"name"` (group 1, without the `@`).
_SYMBOL_REF = re.compile(r'@([A-Za-z_][\w$.]*|"(?:[^"\\\n]|\\.)*")')


def _same_interface(op: Any, old: Any) -> bool:
    """Whether the symbol-use checks of op's users give what they gave against old: a
    function's callers check its type only (func.call, func.constant). Any other kind
    of symbol may be looked into (an executable's entry points): assume it changed."""
    return (
        op.name == old.name == "func.func"
        and "function_type" in op.attributes
        and op.attributes["function_type"] == old.attributes["function_type"]
    )


def _verify_swapped(root: Any, matches: list[_Match], check: list[_Match]) -> None:
    """Verify root with every function outside check taken out for the time being and a
    private declaration of its type in its place (what its callers' checks look up);
    then put back where it was. Moving an op out and in is a pointer swap, where a copy
    of the changed ops costs as much as verifying them."""
    from iree.compiler import ir

    checked = {id(m) for m in check}
    swapped: list[tuple[Any, Any]] = []
    with root.context, ir.Location.unknown(root.context):
        private = ir.StringAttr.get("private")
        try:
            for m in matches:
                op = m.op
                if id(m) in checked or m.name is None or op.name != "func.func" or not len(op.regions[0].blocks):
                    continue  # checked, not a symbol, another kind of symbol, or a declaration already
                attributes = {"sym_name": op.attributes["sym_name"], "function_type": op.attributes["function_type"]}
                declaration = ir.Operation.create(
                    "func.func",
                    attributes={**attributes, "sym_visibility": private},
                    regions=1,
                    ip=ir.InsertionPoint(op),
                )
                try:
                    op.detach_from_parent()
                except BaseException:
                    declaration.erase()
                    raise
                swapped.append((declaration, op))
            irutil.verify(root)
        finally:
            for declaration, op in swapped:
                ir.InsertionPoint(declaration).insert(op)
                declaration.erase()


#: Ops inside a top-level op, by `irutil.body_key`: a commit keeps most of them (or
#: only makes them public), and counting a megabyte again per program cost as much as
#: verifying it. Bounded, as it keeps the texts.
_COUNTS: irutil.BodyCache[int] = irutil.BodyCache()


def _count(op: Any, text: str) -> int:
    """Ops in op, itself included, counted once per body text."""
    key = irutil.body_key(op, text)
    found = _COUNTS.get(key) if key is not None else None
    if found is None:
        found = irutil.count_ops(op) + 1
        if key is not None:
            _COUNTS.put(key, found)
    return found


def _set_attributes(op: Any, attributes: dict[str, object]) -> None:
    for name in list(op.attributes.keys()):
        if name not in attributes:
            del op.attributes[name]
    for name, value in attributes.items():
        op.attributes[name] = value


def _attributes(op: object) -> dict[str, object] | None:
    try:
        return dict(op.attributes.items())  # type: ignore[attr-defined]
    except TypeError:  # an attribute the bindings cannot wrap (a complex dense literal)
        return None


def _symbol(op: object) -> str | None:
    attributes = op.attributes  # type: ignore[attr-defined]
    if "sym_name" not in attributes:
        return None
    return str(attributes["sym_name"])


class MLIRWorkspace(Workspace):
    mode = "mlir"
    program: MLIRProgram  # what lets an MLIR strategy rely on `program.root`
    _size: Size

    @property
    def size(self) -> Size:  # type: ignore[override]
        """The current program's size. Its volume is measured on first use: a fork made
        for speculation is rarely compared on volume, and scanning a megabyte for it
        costs more than parsing it."""
        if self._size.volume == UNKNOWN_VOLUME:
            self._size = attrs.evolve(self._size, volume=irutil.tensor_volume(self.program.text))
        return self._size

    def size_known(self) -> Size:
        return self._size

    def _beats(self, size: Size) -> bool:
        current = self._size
        if (size.ops, size.bytes) == (current.ops, current.bytes):
            current = self.size  # only a tie needs the volume
        return size.smaller_than(current)

    def smaller_than(self, other: Candidate) -> bool:
        # Only a tie in ops and bytes needs the volumes: the engine asks this at every
        # commit, and scanning a megabyte twice per commit was a fifth of its time.
        mine = self._size
        if (mine.ops, mine.bytes) != (other.size.ops, other.size.bytes):
            return mine.smaller_than(other.size)
        return self.size.smaller_than(self.measured(other).size)

    def measured(self, candidate: Candidate) -> Candidate:
        if candidate.size.volume != UNKNOWN_VOLUME:
            return candidate
        if candidate.text == self.program.text:
            return attrs.evolve(candidate, size=self.size)
        return attrs.evolve(candidate, size=attrs.evolve(candidate.size, volume=irutil.tensor_volume(candidate.text)))

    def __init__(
        self,
        text: str,
        options: irutil.PrintOptions,
        verify: bool = True,
        blob_sizes: Mapping[str, int] | None = None,
        outside: Callable[[str], int] | None = None,
    ) -> None:
        self.options = options
        self.verify = verify
        self.blob_sizes = blob_sizes or {}
        self.outside = outside
        self.ctx = irutil.new_context()
        self._set(irutil.parse(text, self.ctx))

    def _keys(self, text: str) -> str:
        """text with each blob key as the input spells it. Parsing a program again in this
        context renames its keys (`weights` -> `weights_1`: MLIR keeps one blob per name
        in a context), and the key is what finds a blob in the input file."""
        if not self.blob_sizes or "dense_resource<" not in text:
            return text
        known = self.blob_sizes

        def fix(m: re.Match[str]) -> str:
            key = unrenamed(m.group(1), known)
            return m.group(0) if key == m.group(1) else f"dense_resource<{key}>"

        return REFERENCE.sub(fix, text)

    @contextlib.contextmanager
    def scope(self):
        from iree.compiler import ir

        with self.ctx, ir.Location.unknown(self.ctx):
            yield

    def canonical(self, options: irutil.PrintOptions) -> str:
        """The program printed with options; with the workspace's own, that is its text
        already (printing a megabyte module again costs as much as the first time)."""
        if options == self.options:
            return self.program.text
        return self._keys(irutil.to_text(self.program.root, options, verified=False))

    def reprint(self, options: irutil.PrintOptions) -> None:
        """Switch print options (e.g. keep locations when the check depends on them)."""
        self.options = options
        self._set(irutil.parse(self.canonical(options), self.ctx))

    def _set(self, module: object, known: Candidate | None = None) -> None:
        """Make module current; a committed candidate already carries its canonical text and size."""
        self._module = module  # keeps the IR alive
        root = module.operation  # type: ignore[attr-defined]  # module is an ir.Module; typed object so a test double fits
        if known is not None:
            self.program, self._size = MLIRProgram(known.text, root), known.size
            return
        text = self._keys(irutil.to_text(root, self.options, verified=False))
        self.program = MLIRProgram(text, root)
        top = self.program.analysis(_TopLevel.of)  # its counts are what candidates reuse
        ops = sum(top.counts) if top is not None else irutil.count_ops(root)
        self._size = Size(ops, self.weigh(text), UNKNOWN_VOLUME, self.count_outside(text))

    def _finish(self, result: object) -> tuple[str, Size, object] | Rejected:
        keep = None
        if isinstance(result, str):
            keep = irutil.parse(result, self.ctx)
            root = keep.operation
        else:
            root = result
        # Unverified, an invalid module prints whole in generic form, which pieces would not.
        top = self.program.analysis(_TopLevel.of) if keep is None and self.verify else None
        matches = top.match(root) if top is not None else None
        partly = top is not None and matches is not None and top.verify_changes(root, matches)
        if self.verify and not partly:
            irutil.verify(root)
        built = None
        if top is not None and matches is not None:
            built = top.piecewise(root, self.options, self.verify, matches)
        if built is None and partly:
            irutil.verify(root)  # printed whole below, as verified
        if built is not None:
            text, ops = built
        else:
            ops = irutil.count_ops(root)
            if ops == self._size.ops and irutil.same_ir(root, self.program.root):
                # A pass that changed nothing (most of opt-passes' candidates on a big program):
                # the same IR prints the current text, which materialize rejects unprinted.
                return self.program.text, self._size, None
            text = irutil.to_text(root, self.options, verified=self.verify)
        text = self._keys(text)
        nbytes = self.weigh(text)
        # Volume only breaks ties; scanning a megabyte for it costs more than printing it.
        # A pass that changed nothing ties too, but materialize rejects the same text unmeasured.
        tie = (ops, nbytes) == (self._size.ops, self._size.bytes) and text != self.program.text
        outside = self.count_outside(text)
        size = Size(ops, nbytes, irutil.tensor_volume(text) if tie else UNKNOWN_VOLUME, outside)
        return text, size, keep if keep is not None else root

    def _module_of(self, candidate: Candidate) -> object:
        """The IR strategies see once candidate is the program: the IR it was printed from
        (programs are never mutated, so forks may share it), else its text parsed."""
        if candidate.module is not None:
            return candidate.module
        return irutil.parse(candidate.text, self.ctx)

    def commit(self, candidate: Candidate) -> None:
        self._set(self._module_of(candidate), known=candidate)

    def fork(self, candidate: Candidate) -> Workspace:
        other = object.__new__(MLIRWorkspace)
        other.options, other.verify, other.ctx = self.options, self.verify, self.ctx
        other.blob_sizes, other.outside = self.blob_sizes, self.outside
        with self.scope():
            other._set(self._module_of(candidate), known=candidate)
        return other
