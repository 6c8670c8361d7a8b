"""The run's parts, looked up by name: strategies (the registry), oracles and executors
(one table each), and the engine built from them.

A new oracle is its module plus one row in ORACLES; a new executor, one row in
EXECUTORS. The command line takes its choices from these tables (`--executor`) and its
help from their rows, and docs/contributing.md's recipes point here.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import re
import shlex
import shutil
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

import attrs

from reducer.core.engine import Engine
from reducer.core.executor import Executor, LocalExecutor, OpenFilesLimit
from reducer.core.oracle import Oracle, ScriptOracle
from reducer.core.processes import stops_held
from reducer.core.state import PROGRAM
from reducer.core.strategy import Strategy, canonical_name, discover
from reducer.core.workspace import Candidate, Workspace
from reducer.session.finish import FINAL_CONFIRM
from reducer.session.scripts import check_file, check_script, script_and_args, unrunnable
from reducer.session.settings import (
    EXIT_BAD_CHECK,
    EXIT_BAD_INPUT,
    EXIT_EXECUTOR,
    EXIT_USAGE,
    Settings,
    UserError,
    missing,
    quoted,
)

if TYPE_CHECKING:
    from reducer.iree.oracles.command import Command


def registry() -> dict[str, type[Strategy]]:
    """Every strategy, in run order: the built-in list, then plug-ins. The one place the
    built-ins are named for the core, which never imports them itself."""
    with stops_held():  # importing them loads the MLIR bindings (`reducer.core.ir.new_context`)
        from strategies import BUILTIN
    return discover(BUILTIN)  # plug-ins' imports stay stoppable


def load_deferred(available: dict[str, type[Strategy]]) -> None:
    """Import what the strategies defer (`Strategy.deferred_imports`), so that the engine
    does not wait for it; a module that fails to load is left for the strategy to meet."""
    for name in dict.fromkeys(m for cls in available.values() for m in cls.deferred_imports):
        with contextlib.suppress(Exception):
            importlib.import_module(name)


def select_strategies(
    mode: str,
    only: Sequence[str] | None,
    skip: Sequence[str],
    available: dict[str, type[Strategy]] | None = None,
    supplies: Mapping[str, object] | None = None,
) -> list[Strategy]:
    """Instances in run order (registry order), filtered by mode and the user's lists;
    each given what it `wants` of `supplies` (`open_archives`)."""
    available = registry() if available is None else available
    check_strategy_names(only, skip, available)
    only = None if only is None else [canonical_name(n) for n in only]
    skip = [canonical_name(n) for n in skip]
    given = supplies or {}
    chosen = [
        cls(**{k: given[k] for k in cls.wants if k in given})
        for name, cls in available.items()
        if mode in cls.modes and name not in skip
    ]
    if only is not None:
        chosen = [s for s in chosen if s.name in only]
    return chosen


def check_strategy_names(only: Sequence[str] | None, skip: Sequence[str], available: dict[str, type[Strategy]]) -> None:
    """--strategies and --skip-strategies name strategies that exist (aliases included)."""
    unknown = [n for n in [*(only or []), *skip] if canonical_name(n) not in available]
    if unknown:
        raise UserError(EXIT_USAGE, f"unknown strategy {', '.join(unknown)}; see ireereduce --list-strategies")
    chosen = {canonical_name(n) for n in only} if only else set(available)
    if not chosen - {canonical_name(n) for n in skip}:
        # A run with nothing to try "succeeded" with the input as its output.
        raise UserError(EXIT_USAGE, "--skip-strategies leaves no strategy to run; see ireereduce --list-strategies")


# -- Oracles ---------------------------------------------------------------------------


@attrs.frozen
class OracleKind:
    """One row of ORACLES: when the settings ask for this oracle, and how it is built.
    `flags` are the options only this kind takes (named to the user when they come with
    another kind); `usage` is its line in `ireereduce --help`."""

    usage: str
    chosen: Callable[[Settings], bool]
    build: Callable[[Settings, str, float], Oracle]
    flags: tuple[tuple[str, str], ...] = ()  # (option, Settings field)
    option: str | None = None  # the option that asks for it, as the user is told [default: usage's first word]

    def named(self) -> str:
        return self.option or self.usage.split()[0]


def _timing(settings: Settings) -> bool:
    return settings.slower_than is not None or settings.slower_than_factor is not None


def _script(settings: Settings, basename: str, timeout: float) -> Oracle:
    script, args = script_and_args(settings.check or "")
    # The check runs in its own temp dir: an argument naming a file here (`--test-arg
    # pat.txt`) is given as its absolute path, as llvm-reduce's test, run here, finds it.
    given = tuple(os.path.abspath(a) if a and os.path.exists(a) else a for a in args + tuple(settings.test_args))
    return ScriptOracle(check_script(script), basename, timeout, given)


def _commands(settings: Settings) -> tuple[Command, Command | None, Command]:
    """The compile command, the --against one and the runner, parsed; its program found."""
    from reducer.iree.oracles import parse_command
    from reducer.iree.oracles.command import Command, CommandError

    flag = "--compile"
    try:
        command = parse_command(settings.compile or "", needs_output=settings.mismatch)
        flag = "--against"
        against = parse_command(settings.against, needs_output=settings.mismatch) if settings.against else None
    except CommandError as exc:
        raise UserError(EXIT_USAGE, f"{flag}: {exc}") from None
    try:
        runner = Command(tuple(shlex.split(settings.runner)))
    except ValueError as exc:
        raise UserError(EXIT_USAGE, f"--run: cannot split the command {settings.runner!r}: {exc}") from None
    if settings.mismatch and not runner.argv:
        raise UserError(EXIT_USAGE, "--run: the command is empty; give the runner, such as iree-run-module")
    given = [("--compile", command), ("--against", against)] + ([("--run", runner)] if settings.mismatch else [])
    for option, each in given:
        if each is not None and each.argv:
            _runnable(option, each.argv[0], each.render()[0])
    return _here(command), None if against is None else _here(against), _here(runner)


def _runnable(option: str, program: str, tool: str) -> None:
    """A program the checks will run, refused before the original's check (a compile of
    minutes, for --against or --run) if it cannot run: one line naming the option."""
    path = _found(tool)
    why = unrunnable(path, program) if path and os.path.exists(path) else "is not found; install it or give its path"
    if why is not None:
        raise UserError(EXIT_BAD_CHECK, f"{option}: the program {program!r} {why}")


def _found(tool: str) -> str | None:
    """Where a program the checks run is: a bare name looked up in PATH, as the checks do
    (None when none has it), a relative path from here."""
    found = shutil.which(tool) if os.sep not in tool else tool
    return None if found is None else os.path.abspath(found)


def _here(command: Command) -> Command:
    """A program given by a relative path (`./mycomp.sh`) as an absolute one: the checks
    run in temp dirs, where the relative path names nothing."""
    program = command.argv[0] if command.argv else ""
    if os.sep not in program or os.path.isabs(program):
        return command
    return attrs.evolve(command, argv=(os.path.abspath(program), *command.argv[1:]))


def _mismatch(settings: Settings, basename: str, timeout: float) -> Oracle:
    from reducer.iree.oracles.mismatch import MismatchOracle  # numpy: only a mismatch run needs it

    command, against, runner = _commands(settings)
    if against is None or _timing(settings):
        raise UserError(
            EXIT_USAGE, "--mismatch needs --against COMMAND (the second configuration), and no --slower-than"
        )
    return MismatchOracle(
        command,
        against,
        basename,
        timeout,
        runner,
        settings.function,
        settings.rtol,
        settings.atol,
        allow_slippage=settings.allow_slippage,
        given=_given(settings.inputs),
        parameters=_parameters(settings.parameters),
    )


def open_archives(settings: Settings, text: str) -> dict[str, object]:
    """What the strategies are given beyond the program (`Strategy.wants`): the archives
    --parameters names, each loaded, and each key the program uses from them found.
    A missing or unreadable archive, or a missing key, is one line naming the file (exit 3)."""
    if not settings.parameters:
        return {}
    from reducer.iree.parameters import ArchiveError, Archives, flag, references

    try:
        archives = Archives.open(settings.parameters)
        missing = archives.missing(text)
    except ArchiveError as exc:
        raise UserError(EXIT_BAD_INPUT, str(exc)) from None
    used = list(dict.fromkeys(scope for scope, _ in references(text)))
    unused = [scope for scope in archives.files if scope not in used]
    if unused and any(scope not in archives.files for scope in used):  # a scope mistyped, or left out
        path = archives.paths(unused[0])[0]
        raise UserError(
            EXIT_BAD_INPUT,
            f"{flag(unused[0], path)}: {settings.input} uses no parameter of scope {unused[0]!r} "
            f"(its scopes: {', '.join(repr(s) for s in used)}); give SCOPE=FILE with the scope it uses",
        )
    if missing:
        scope, key = missing[0]
        paths = archives.paths(scope)
        named = " ".join(flag(scope, path) for path in paths)
        which = (
            f"the parameter archive {paths[0]}"
            if len(paths) == 1
            else f"none of the parameter archives {', '.join(paths)}"
        )
        raise UserError(
            EXIT_BAD_INPUT,
            f"{which} ({named}) has {'no key' if len(paths) == 1 else 'the key'} {key!r}, which {settings.input} "
            "uses; give the archive that holds it",
        )
    return {"parameters": archives}


def outside(settings: Settings) -> Callable[[str], int] | None:
    """How the workspace counts what a program needs from files beside it (`Size.outside`):
    its external parameters, when the run was given archives to put them inline from."""
    if not settings.parameters:
        return None
    from reducer.iree.parameters import count

    return count


def programs(settings: Settings) -> list[tuple[str, str]]:
    """The programs the built-in oracles run, by option, as a resume stamps them: after a
    rebuild of the compiler under test, the recorded verdicts are the old build's. Each
    command's program, and an IREE tool it hands its arguments to (`env X=1 iree-compile`,
    `timeout 60 iree-compile`); not what a script of the user's runs."""
    from reducer.iree.oracles.command import IREE_TOOLS, resolve_tool

    given = [("--compile", settings.compile), ("--against", settings.against)]
    given += [("--run", settings.runner)] if settings.mismatch else []
    found = []
    for option, line in given:
        with contextlib.suppress(ValueError):  # the oracle refuses it, in its own words
            argv = shlex.split(line or "")
            for word in argv[:1] + [w for w in argv[1:] if os.path.basename(w) in IREE_TOOLS]:
                found.append((f"{PROGRAM}{option}", _found(resolve_tool(word))))
    if settings.pass_level or settings.pass_pipeline is not None:  # the replay's iree-opt
        found.append((f"{PROGRAM}iree-opt", _found(resolve_tool(replay_tool(settings)))))
    return [(name, path) for name, path in found if path is not None]  # one not found is refused


def replay_tool(settings: Settings) -> str:
    """The iree-opt that replays a reproducer: for --pass-level, the one beside --compile's
    program when that is given by path (else iree-opt as PATH finds it); without a
    --compile, the settings' own (a crash reproducer as the input)."""
    from reducer.iree.oracles.command import beside

    with contextlib.suppress(ValueError):
        if argv := shlex.split(settings.compile or ""):
            return beside(argv[0], "iree-opt")
    return settings.replay_tool


def split_parameters(spec: str) -> tuple[str, str]:
    """(scope, file) of one --parameters value, as iree-run-module splits it."""
    from reducer.iree.parameters import split_spec

    return split_spec(spec)


def _parameters(specs: Sequence[str]) -> tuple[tuple[str, str], ...]:
    from reducer.iree.parameters import absolute

    return absolute(specs)


def input_entries(entries: Sequence[str]) -> list[str]:
    """--inputs' values one by one: an entry with '=' is one iree-run-module value; others
    may list files (a.npy,b.npy)."""
    return [part.strip() for e in entries for part in ([e] if "=" in e else e.split(",")) if part.strip()]


def _given(entries: Sequence[str]) -> tuple[bytes, ...]:
    """--inputs, read now: the values travel with the oracle (to Dask workers too)."""
    from reducer.iree import inputs

    if entries and not input_entries(entries):  # `--inputs ,` or an empty $VAR: not "generate them"
        raise UserError(EXIT_USAGE, f"--inputs {' '.join(map(repr, entries))} names no input")
    try:
        return tuple(inputs.to_bytes(inputs.given(e)) for e in input_entries(entries))
    except inputs.Unreadable as exc:
        raise UserError(EXIT_BAD_INPUT, f"--inputs: {exc}") from None
    except ValueError as exc:  # a value written wrong: the command line
        raise UserError(EXIT_USAGE, f"--inputs: {exc}") from None


def _slow(settings: Settings, basename: str, timeout: float) -> Oracle:
    from reducer.iree.oracles import SlowCompileOracle

    command, against, _ = _commands(settings)
    if settings.slower_than is not None and settings.slower_than_factor is not None:
        raise UserError(EXIT_USAGE, "give one of --slower-than and --slower-than-factor")
    if settings.slower_than_factor is not None and against is None:
        raise UserError(EXIT_USAGE, "--slower-than-factor needs --against COMMAND (the fast compiler or flags)")
    return SlowCompileOracle(
        command,
        basename,
        timeout,
        settings.slower_than,
        settings.slower_than_factor,
        against,
        allow_slippage=settings.allow_slippage,
    )


def _expect_error(settings: Settings) -> None:
    try:
        re.compile(settings.expect_error or "")
    except re.error as exc:
        raise UserError(
            EXIT_USAGE, f"--expect-error {settings.expect_error!r} is not a regular expression: {exc}"
        ) from None


def _compile(settings: Settings, basename: str, timeout: float) -> Oracle:
    from reducer.iree.oracles import CompileOracle

    command, against, _ = _commands(settings)
    if against is not None:
        raise UserError(EXIT_USAGE, "--against goes with --mismatch or --slower-than-factor")
    if settings.pass_level and not command.is_iree_compile():
        raise UserError(EXIT_USAGE, "--pass-level needs an iree-compile command (it writes the crash reproducer)")
    _expect_error(settings)
    return CompileOracle(
        command,
        basename,
        timeout,
        settings.expect_error,
        settings.expect_crash,
        settings.allow_slippage,
    )


def _replay(settings: Settings, basename: str, timeout: float) -> Oracle:
    from reducer.iree.oracles.replay import ReplayOracle

    _expect_error(settings)
    return ReplayOracle.of(
        settings.pass_pipeline or "",
        basename,
        timeout,
        settings.replay_tool,
        expect_error=settings.expect_error,
        expect_crash=settings.expect_crash,
        allow_slippage=settings.allow_slippage,
    )


#: The built-in ways to judge a candidate, tried in order: the first row whose `chosen`
#: holds builds the run's oracle (a Python caller may also hand a ready-made Oracle).
ORACLES: dict[str, OracleKind] = {
    "check": OracleKind(
        "--check SCRIPT                     SCRIPT exits 0 while the bug is still there",
        lambda s: s.check is not None,
        _script,
        (("--test-arg", "test_args"),),
    ),
    "mismatch": OracleKind(
        "--mismatch --compile A --against B two compiled modules give different outputs",
        lambda s: s.mismatch,
        _mismatch,
        (
            ("--mismatch", "mismatch"),
            ("--against", "against"),
            ("--rtol", "rtol"),
            ("--atol", "atol"),
            ("--function", "function"),
            ("--run", "runner"),
            ("--inputs", "inputs"),
        ),
    ),
    "slower": OracleKind(
        "--compile CMD --slower-than S      compiling takes longer than S seconds",
        _timing,
        _slow,
        (("--slower-than", "slower_than"), ("--slower-than-factor", "slower_than_factor"), ("--against", "against")),
        "--slower-than",
    ),
    "compile": OracleKind(
        "--compile CMD                      CMD fails the way it fails on INPUT ({input} = candidate)",
        lambda s: s.compile is not None,
        _compile,
        (("--expect-error", "expect_error"), ("--expect-crash", "expect_crash"), ("--pass-level", "pass_level")),
    ),
    "replay": OracleKind(
        "(a crash reproducer as INPUT)      iree-opt replays its pass pipeline and fails the same way",
        lambda s: s.pass_pipeline is not None,
        _replay,
        (("--expect-error", "expect_error"), ("--expect-crash", "expect_crash")),
        "a crash reproducer as INPUT",
    ),
}


def make_oracle(settings: Settings, basename: str, timeout: float) -> Oracle:
    """The user's check script, or the built-in oracle the flags describe (ORACLES)."""
    if settings.oracle is not None:
        if settings.check is not None or settings.compile is not None:
            raise UserError(EXIT_USAGE, "give an oracle, a check script or a compile command, not several")
        return settings.oracle.with_timeout(timeout)
    given = [x for x in (settings.check, settings.compile, settings.pass_pipeline) if x is not None]
    if len(given) != 1:
        raise UserError(
            EXIT_USAGE,
            "give exactly one of --check SCRIPT or --compile COMMAND (a crash reproducer as INPUT needs neither)",
        )
    kind = next(kind for kind in ORACLES.values() if kind.chosen(settings))
    oracle = kind.build(settings, basename, timeout)  # its own errors first: they say more
    refuse_other_flags(settings, kind)
    return oracle


def check_oracle(settings: Settings) -> None:
    """The oracle's command-line errors (a quote not closed, an option of another oracle)
    before any worker starts: its start lines would come before the one error line. So
    is a workflow without the iree-compile failure it needs, found after the original's
    checks before."""
    oracle = make_oracle(settings, os.path.basename(settings.input) or "input.mlir", 1.0)
    if settings.isolate_dispatch or settings.from_phase_dump:
        from reducer.iree.oracles import CompileOracle

        if not isinstance(oracle, CompileOracle):
            raise UserError(EXIT_USAGE, "--isolate-dispatch and --from-phase-dump need a --compile failure oracle")
        if oracle.kind != "pass-replay" and not oracle.command.is_iree_compile():
            raise UserError(EXIT_USAGE, "--isolate-dispatch and --from-phase-dump need an iree-compile command")


def refuse_other_flags(settings: Settings, kind: OracleKind) -> None:
    """An option of another oracle (ORACLES' flags) would be ignored without a word: refused."""
    takes = {field for _, field in kind.flags}
    defaults = {f.name: f.default for f in attrs.fields(Settings)}
    for flag, field in dict(flag for other in ORACLES.values() for flag in other.flags).items():
        value, default = getattr(settings, field), defaults[field]
        if field in takes or value == default or not (value or default):
            continue
        # An option that asks for an oracle itself (--mismatch) goes with the command it judges.
        names = (k.named() for k in ORACLES.values() if field in {f for _, f in k.flags})
        owners = dict.fromkeys(ORACLES["compile"].named() if flag.startswith(n) else n for n in names)
        raise UserError(EXIT_USAGE, f"{flag} goes with {' or '.join(owners)}, not with {kind.named()}")


# -- Executors -------------------------------------------------------------------------


def _local(settings: Settings, oracle: Oracle | None) -> Executor:
    given = [
        flag
        for flag, value in (
            ("--scheduler", settings.scheduler),
            ("--resources", settings.resources),
            ("--check-files", settings.check_files),
        )
        if value
    ]
    if given:
        raise UserError(
            EXIT_USAGE,
            f"{' and '.join(given)} {'goes' if len(given) == 1 else 'go'} with --executor dask; the local executor would ignore "
            f"{'it' if len(given) == 1 else 'them'}",
        )
    try:
        return LocalExecutor(oracle, settings.workers(), settings.memory_limit)
    except OpenFilesLimit as exc:
        raise UserError(EXIT_EXECUTOR, str(exc)) from None


def _shippable(path: str) -> str | None:
    """Why a file of --check-files cannot go to the workers: said before a cluster starts,
    naming the option, not later as a check that "cannot run"."""
    if not os.path.exists(path):
        return missing("--check-files", path)
    if os.path.isdir(path):
        return f"--check-files {quoted(path)} is a directory; give the files in it"
    if not os.path.isfile(path):  # a FIFO would block the read that ships it, /dev/zero never end
        return f"--check-files {quoted(path)} is not a regular file; give a file the check reads"
    try:
        with open(path, "rb"):
            pass
    except OSError as exc:
        return f"--check-files {quoted(path)} cannot be read: {exc.strerror}"
    return None


def _dask(settings: Settings, oracle: Oracle | None) -> Executor:
    # Shipped by bare name beside the check script: two of one name would overwrite each other.
    names = {os.path.basename(script): "the check script"} if (script := check_file(settings.check)) else {}
    for path in settings.check_files:
        why = _shippable(path)
        if why is not None:
            raise UserError(EXIT_BAD_CHECK, why)
        name = os.path.basename(path)
        if name in names:
            raise UserError(
                EXIT_USAGE,
                f"--check-files {quoted(path)} has the name of {names[name]}; files reach the workers by name, "
                "beside the check: rename one",
            )
        names[name] = quoted(path)
    try:
        from reducer.core.dask_executor import DaskExecutor, ExecutorUnavailable
    except ImportError:
        raise UserError(EXIT_EXECUTOR, "--executor dask needs Dask: pip install 'ireereduce[dask]'") from None
    try:
        return DaskExecutor(
            oracle,
            settings.workers(),
            settings.scheduler,
            settings.resources,
            settings.check_files,
            memory_limit=settings.memory_limit,
        )
    except ExecutorUnavailable as exc:
        raise UserError(EXIT_EXECUTOR, str(exc)) from None


#: Where checks run, by `--executor` name: the first is the default.
EXECUTORS: dict[str, Callable[[Settings, Oracle | None], Executor]] = {"local": _local, "dask": _dask}


def make_executor(settings: Settings, oracle: Oracle | None, factory: type[Executor] | None = None) -> Executor:
    """The executor the settings name; every check of the run goes through it (with
    oracle None, each submit names its oracle)."""
    if factory is not None:
        return factory(oracle, settings.workers())  # type: ignore[call-arg]  # the ABC declares no __init__; every executor takes these two
    if settings.executor not in EXECUTORS:
        raise UserError(EXIT_USAGE, f"unknown executor {settings.executor!r}; give one of {', '.join(EXECUTORS)}")
    return EXECUTORS[settings.executor](settings, oracle)


def build_engine(
    settings: Settings,
    ws: Workspace,
    strategies: Sequence[Strategy],
    executor: Executor,
    judge: Oracle,
    inner: Executor,
    on_event: Callable[[str, dict[str, object]], None],
    on_improve: Callable[[Candidate], None] = lambda candidate: None,
    should_stop: Callable[[], str | None] | None = None,
) -> Engine:
    """The engine for the run (or for its primed start, see overlap.py)."""
    return Engine(
        ws,
        strategies,
        executor,
        on_improve,
        move_budget=settings.move_budget,
        oracle=judge,
        on_event=on_event,
        should_stop=should_stop,
        # The final re-checks may start while the last round is judged, on the inner
        # executor (the journal would answer them), unless they time the compiler.
        confirm=0 if judge.measures_time else FINAL_CONFIRM,
        confirm_on=inner,
    )
