"""The start of a run: the original checked (twice: a flaky check shows), the oracle
calibrated on it, the program read as MLIR or text, and the state a killed run
continues from (which skips all of this)."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from reducer.core import codec
from reducer.core import ir as irutil
from reducer.core.cache import VerdictJournal
from reducer.core.engine import Stopped
from reducer.core.executor import Executor
from reducer.core.limits import Bounded
from reducer.core.oracle import Oracle, RepeatOracle, Verdict
from reducer.core.state import RunState, cannot_write, differences, fingerprint
from reducer.core.workspace import MLIRWorkspace, Size, TextWorkspace, Workspace
from reducer.session import triage
from reducer.session.checks import Beside, check_repeatedly
from reducer.session.files import default_state_dir, user_error
from reducer.session.guard import Guard
from reducer.session.overlap import Reprinted
from reducer.session.scripts import check_file
from reducer.session.settings import (
    EXIT_CANNOT_WRITE,
    EXIT_CHECK_HANGS,
    EXIT_NOT_INTERESTING,
    EXIT_NOT_REPLAYABLE,
    EXIT_STATE_MISMATCH,
    EXIT_STOPPED,
    EXIT_USAGE,
    INITIAL_TIMEOUT,
    Findings,
    Settings,
    UserError,
    check_timeout,
)
from reducer.session.wiring import make_oracle, outside, programs, split_parameters

log = logging.getLogger(__name__)


@codec.record("text", "original_text")
@attrs.frozen
class Start:
    """Where the engine starts, recorded in the state directory so a rerun skips the
    checks that found it."""

    text: str
    oracle: Oracle  # calibrated, with its timeout; not repeated
    verdict: Verdict  # the original's
    timeout: float
    findings: Findings
    original_text: str


def _iree_records() -> None:
    """The IREE room's classes register themselves for the state's codec as they are
    imported; a rerun reads its recorded start before anything else imports them."""
    from reducer.iree import dispatch  # noqa: F401
    from reducer.iree.oracles import mismatch, replay  # noqa: F401


codec.on_unknown(_iree_records)


@attrs.define
class Resume:
    """The state directory of this run, and what it recorded, if it may be continued."""

    state: RunState | None
    fingerprint: dict[str, Any]
    start: Start | None  # the recorded start, when this run continues a killed one


def open_state(settings: Settings, data: bytes, output: str, basename: str = "input.mlir") -> Resume:
    """The run's state directory: a recorded start to continue from, or a clean slate
    (--fresh, or a record that was killed before its start was written). `data`: the
    input's bytes, as the user has them (bytecode is recorded as its text, but a rerun
    must find the same file)."""
    state = None if settings.no_state else RunState(settings.state_dir or default_state_dir(output), output)
    files = [split_parameters(spec) for spec in settings.parameters] + programs(settings)
    fp = fingerprint(settings, data, files, check_file(settings.check))
    recorded = state.load(fp) if state is not None else None
    if state is not None and recorded is not None:
        if settings.fresh:
            state.remove()
        elif recorded[0] != fp:
            raise UserError(
                EXIT_STATE_MISMATCH,
                f"{state.path} holds an interrupted run of another command "
                f"({differences(recorded[0], fp)}); rerun that command to continue it, or add --fresh "
                "to start over",
            )
        else:
            if recorded[1] is not None:
                _same_oracle(state, recorded[1], settings, basename)
            return Resume(state, fp, recorded[1])
    elif state is not None and state.exists():
        state.remove()  # killed before the start was recorded: nothing to continue
    return Resume(state, fp, None)


def _same_oracle(state: RunState, start: Start, settings: Settings, basename: str) -> None:
    """The recorded start's oracle must be the one this command line builds (calibrated
    and triaged): a start.json edited or planted to name another check is refused, and
    nothing it names runs."""
    level = start.findings.pass_level
    if settings.pass_level and level is not None:  # the triage swapped in the reproducer's replay
        settings = triage.replay_settings(settings, str(level["pipeline"]))
    built = make_oracle(settings, basename, start.timeout)
    recorded = [start.oracle] + ([start.findings.dispatch.oracle] if start.findings.dispatch is not None else [])
    for oracle in recorded:
        why = triage.differs(oracle, built)
        if why is not None:
            raise UserError(
                EXIT_STATE_MISMATCH,
                f"{state.path} holds an interrupted run whose check is not this command's ({why}); "
                "nothing it names is run: add --fresh to start over",
            )


def _cannot_write(state: RunState, exc: OSError) -> UserError:
    return UserError(EXIT_CANNOT_WRITE, cannot_write(state.path, exc))


def record_start(resume: Resume, start: Start) -> None:
    """Write the start, so a rerun after a kill skips the checks that found it."""
    if resume.state is not None:
        try:
            resume.state.create(resume.fingerprint, start)
        except OSError as exc:
            raise _cannot_write(resume.state, exc) from None


def open_journal(resume: Resume, notes: list[str]) -> VerdictJournal | None:
    """The verdict journal: what a killed run checked is answered again from it."""
    if resume.state is None:
        return None
    try:
        journal = resume.state.open_journal()
    except OSError as exc:
        raise _cannot_write(resume.state, exc) from None
    if resume.start is not None:
        msg = (
            f"continuing the interrupted run recorded in {resume.state.path} "
            f"({len(journal.verdicts)} verdicts recorded are not checked again)"
        )
        log.info("%s", msg)
        notes.append(msg)
        if others := resume.state.others():  # a run's own directory holds only what runs write
            log.warning(
                "%s also holds %s, which ireereduce did not write: never read, and left there",
                resume.state.path,
                ", ".join(others),
            )
    return journal


def check_original(
    settings: Settings,
    text: str,
    basename: str,
    guard: Guard,
    executor: Executor,
    meanwhile: Callable[[Reprinted | None], object] = lambda early: None,
    reprint_early: bool = True,
    told: Callable[[float | None], object] = lambda timeout: None,
    blob_sizes: Mapping[str, int] | None = None,
    beside: Beside | None = None,
    deadline: float | None = None,
) -> tuple[Oracle, Verdict, float, str | None, Reprinted | None]:
    """Run the check on the original twice (at once, given two workers), or once with
    `beside` as the second look (`judge_original`): a check that disagrees with itself is flaky. While they run, (if `reprint_early`, with two
    workers or more) parse the original and check its re-printed form where that check
    does not depend on these verdicts (see `Reprinted`), and call `meanwhile` with it;
    neither happens while an oracle measures time. `told` hears the checks' timeout;
    `beside` may stand in for the second check (`judge_original`); `deadline`: --max-time's end."""
    first = make_oracle(settings, basename, settings.timeout or INITIAL_TIMEOUT)
    if first.measures_time and settings.timeout is None:
        first = first.with_timeout(None)  # the original's time is the question; a limit could hide it
    told(first.timeout)
    early: list[Reprinted] = []

    # --repeat's verdict is its last run's: only with the timeout fixed is it provably the same.
    # With two workers the re-print queues behind the original's two checks: it starts
    # as soon as one ends, not after the parse that would follow their verdict. (A hang
    # holds its worker only until the run reads it: `Reprinted.verdict` cuts it off at
    # the calibrated timeout.) With one worker it would delay the original's verdict.
    ahead = (
        reprint_early
        and executor.workers >= 2
        and not (first.learns_from_original() or (settings.repeat > 1 and not settings.timeout))
    )

    def while_checking() -> None:
        if ahead:
            judge = RepeatOracle(first, settings.repeat) if settings.repeat > 1 else first
            early.append(Reprinted(text, settings.verify, judge, executor, blob_sizes, outside(settings)))
        meanwhile(early[0] if early else None)

    try:
        oracle, verdict, timeout, flaky = judge_original(
            settings, text, first, guard, executor, None if first.measures_time else while_checking, beside, deadline
        )
    except BaseException:
        for e in early:
            e.cancel()
        if beside is not None:
            beside.cancel()
        raise
    return oracle, verdict, timeout, flaky, early[0] if early else None


def hung(oracle: Oracle) -> UserError:
    """The original's check timed out: the run stops there (also --localize-only's)."""
    return UserError(
        EXIT_CHECK_HANGS,
        f"the check did not finish on the original input within {oracle.timeout:g} s; "
        "fix the script or raise --timeout",
    )


def judge_original(
    settings: Settings,
    text: str,
    first: Oracle,
    guard: Guard,
    executor: Executor,
    meanwhile: Callable[[], None] | None,
    beside: Beside | None = None,
    deadline: float | None = None,
) -> tuple[Oracle, Verdict, float, str | None]:
    """The original checked twice, or once and `beside` (which starts with that check),
    when beside agrees with its verdict; a second check if not. At `deadline` (--max-time's
    end) the run stops: nothing is known to be interesting yet, so nothing is written."""
    # A timeout (of a check that does not time things) ends it: the run stops there.
    ends = lambda v: v.timed_out and not first.measures_time  # noqa: E731
    data = text.encode()
    waits = executor if deadline is None else Bounded(executor, deadline, "--max-time reached")
    try:
        takes = beside is not None and not first.measures_time and beside.start(first, executor.workers >= 2, deadline)
        verdicts = check_repeatedly(waits, first, data, 1 if takes else 2, until=ends, meanwhile=meanwhile)
        if takes and beside is not None and not ends(verdicts[0]) and not beside.agrees(verdicts[0]):
            verdicts += check_repeatedly(waits, first, data, 1, until=ends)
    except Stopped:
        raise UserError(
            EXIT_STOPPED,
            f"--max-time {settings.max_time:g} s ran out while the original input was checked; nothing was written",
        ) from None
    except OSError as exc:  # a check's own timeout (a Dask connection's, say) is not --max-time
        raise user_error(exc) from None
    guard.check()
    flaky = None
    if len({v.interesting for v in verdicts}) > 1:
        flaky = "the check passed the original once and failed it once"
        log.warning("the check is flaky: %s; consider --repeat N (a candidate must then pass N times)", flaky)
    verdict = next((v for v in verdicts if v.interesting), verdicts[0])
    for note in verdict.notes:
        log.warning("%s", note)
    if verdict.timed_out and not first.measures_time:
        raise hung(first)
    if verdict.outcome == "not replayable":
        why = first.why_not(verdict)
        if "pipeline-adaptor" not in why:  # a local reproducer: a pass of another iree-opt, or a typo
            raise UserError(
                EXIT_NOT_REPLAYABLE,
                f"{settings.input} is a crash reproducer iree-opt cannot replay ({why}): was it written by "
                "another version of IREE? Make it again with this one's iree-compile, or fix the pipeline",
            )
        raise UserError(
            EXIT_NOT_REPLAYABLE,
            f"{settings.input} is a crash reproducer iree-opt cannot replay ({why}; a "
            "full-pipeline one); make a local one by adding --mlir-pass-pipeline-crash-reproducer=F "
            "--mlir-pass-pipeline-local-reproducer --mlir-disable-threading to the iree-compile command, "
            "or reduce the model with --compile CMD --pass-level",
        )
    if not verdict.interesting:
        from reducer.iree.oracles.mismatch import wrong_function  # numpy's import only on this path

        if (wrong := wrong_function(verdict)) is not None:
            raise UserError(EXIT_USAGE, wrong)
        raise UserError(
            EXIT_NOT_INTERESTING,
            f"the check says the original input is not interesting ({first.why_not(verdict)}); "
            "it must be interesting for the input as given"
            + (" (mlir-reduce users: invert your script's exit codes)" if settings.check is not None else ""),
        )
    seconds = max(v.seconds for v in verdicts)
    timeout = check_timeout(settings.timeout, seconds, 3.0 if first.measures_time else 10.0)
    oracle = first.calibrate(verdict).with_timeout(timeout)
    if verdict.signature is not None and verdict.signature.kind != "ok":
        log.info(
            "the original fails with %s; candidates must fail the same way%s",
            verdict.signature.describe(),
            " (slippage allowed)" if settings.allow_slippage else "",
        )
        _fails_without_a_program(oracle, verdict, guard, executor)
    return oracle, verdict, timeout, flaky


#: The least program there is: what a failure of the command alone fails on too.
EMPTY_MODULE = "module {\n}\n"


def _fails_without_a_program(oracle: Oracle, verdict: Verdict, guard: Guard, executor: Executor) -> None:
    """A built-in oracle's failure that an empty module shows as well is the command's (a
    flag the compiler does not know, a target it lacks), not the program's: reduced, it
    ended in an empty module and exit 0 with only the trivial-result warning. One extra
    compile of nothing says so before the reduction starts."""
    if oracle.measures_time:
        return
    try:
        empty = check_repeatedly(executor, oracle, EMPTY_MODULE.encode(), 1, until=lambda v: True)[0]
    except OSError as exc:
        raise user_error(exc) from None
    guard.check()
    if empty.interesting:
        assert verdict.signature is not None
        said = next((ln.strip() for ln in (empty.stderr_tail or "").splitlines() if ln.strip()), "")
        sig = empty.signature or verdict.signature  # its own: with --allow-slippage it may be another
        if getattr(sig, "first_error", None):  # the signature already quotes it
            said = ""
        # An exit with no error line of its own is told by what the tool said instead.
        told = f"exit {empty.returncode}" if said and getattr(sig, "kind", None) == "error" else sig.describe()
        raise UserError(
            EXIT_NOT_INTERESTING,
            f"the command fails on an empty module too, with {told}"
            + (f" ({said[:200]})" if said else "")
            + ": the failure is in "
            "the command (a flag the tool does not know? a target it lacks?), not in the program; fix the "
            "command (if the failure needs no program, an empty module is its repro)",
        )


def as_file(text: str, outside: Callable[[str], int] | None = None) -> Size:
    """text's size as an earlier output and the output's floor are compared: in the
    workspace's order (`Size.smaller_than`) on what is known without parsing it: what it
    needs from other files first (`outside`, the workspace's count), then its bytes, then
    the tensors' volume. Bytes alone said a program that needs no parameter archive,
    longer for its inline weights, was larger than one that still needs the archive, and
    an output of shrunk tensors (4xf32 -> 1xf32: the same bytes) was no smaller (audit 13)."""
    return Size(None, len(text.encode()), irutil.tensor_volume(text), outside(text) if outside is not None else 0)


def where_to_start(
    settings: Settings,
    output: str,
    text: str,
    oracle: Oracle,
    guard: Guard,
    executor: Executor,
    original: str,
    findings: Findings,
) -> str:
    """text, or the smaller interesting program an earlier run left in the output
    (`previous_best`), unless --fresh, which warns of what its first improvement replaces."""
    if not settings.fresh and os.path.exists(output):
        previous = previous_best(output, text, oracle, guard, executor, outside(settings), original)
        if previous is not None:
            findings.notes.append(
                f"started from the smaller interesting program already in {output} "
                f"({len(previous.encode())} bytes; --fresh starts from the input)"
            )
            log.info("%s", findings.notes[-1])
            return previous
    elif settings.fresh and os.path.isfile(output) and (held := os.path.getsize(output)):
        log.warning(
            "--fresh: %s holds %d bytes; the run starts from the input, and its first improvement replaces them",
            output,
            held,
        )
    return text


def previous_best(
    output: str,
    text: str,
    oracle: Oracle,
    guard: Guard,
    executor: Executor,
    outside: Callable[[str], int] | None = None,
    original: str = "",
) -> str | None:
    """The output of an earlier run, if it is smaller than text (`as_file`) and still
    interesting. What the check rejects (an earlier result for another bug, a file of the
    user's) is never replaced, nor is an interesting program no smaller than text that is
    not the input itself (ireereduce writes none such: the user's own): the run stops
    before it writes anything (--fresh replaces it). A bounded executor's deadline passed
    (--max-time) is `Stopped`."""
    try:
        with open(output, "rb") as f:
            held = f.read()
    except OSError:
        return None
    if not held.strip():  # an empty file (mktemp's): nothing to lose
        return None
    try:
        previous: str | None = _program(held)
    except (UnicodeDecodeError, ValueError):
        previous = None
    interesting = False
    if previous is not None:
        try:  # twice, for a flaky check: refusing costs the user a rerun
            verdicts = check_repeatedly(executor, oracle, previous.encode(), 2, until=lambda v: v.interesting)
        except OSError as exc:
            raise user_error(exc) from None
        guard.check()
        interesting = verdicts[-1].interesting
    if not interesting:
        held_what = "a program the check rejects" if previous is not None else "something that is not a program"
        raise UserError(
            EXIT_USAGE,
            f"{output} already holds {held_what} "
            "(a result for another bug, or a file of yours?); it is kept: give -o another path, move it away, "
            "or --fresh to replace it",
        )
    assert previous is not None
    if as_file(previous, outside).smaller_than(as_file(text, outside)) or _smaller_program(previous, text, outside):
        return previous
    if previous not in (text, original):
        raise UserError(
            EXIT_USAGE,
            f"{output} already holds an interesting program no smaller than the input (a file of yours?); "
            "it is kept: give -o another path, move it away, or --fresh to replace it",
        )
    return None


def _smaller_program(previous: str, text: str, outside: Callable[[str], int] | None) -> bool:
    """previous smaller than text in the engine's own order (ops, then bytes and volume as
    printed), where as files it is not: what ireereduce writes is printed (`module {`,
    `%arg0`: longer than the input as given) and may have fewer ops but more bytes. Both
    are parsed, only on this path: a refusal costs the user a rerun (audit 13)."""
    try:
        mine, theirs = (MLIRWorkspace(t, irutil.PrintOptions(), False, None, outside) for t in (previous, text))
    except irutil.ParseError:
        return False  # not MLIR: as files was the whole comparison
    return mine.size.smaller_than(theirs.size)


def _program(data: bytes) -> str:
    """An output's program as text, whether it holds text or bytecode (-o x.mlirbc)."""
    from reducer.core import bytecode

    if not bytecode.is_bytecode(data):
        return data.decode()
    try:
        return bytecode.to_text(data)
    except bytecode.BytecodeError:
        raise UnicodeDecodeError("utf-8", data, 0, 1, "unreadable bytecode") from None


def choose_workspace(
    text: str,
    judged: Callable[[bytes], bool],
    verify: bool,
    early: Reprinted | None = None,
    blob_sizes: Mapping[str, int] | None = None,
    count_outside: Callable[[str], int] | None = None,
) -> Workspace:
    """MLIR if the input parses and the check still likes it once re-printed; else text.
    `blob_sizes`: the bytes of the blobs kept out of text, by key; `count_outside`: what a
    program needs from other files (`Workspace.outside`)."""
    try:
        parsed = early.parsed(text, verify) if early is not None else None
        if isinstance(parsed, irutil.ParseError):
            raise parsed
        ws = parsed or MLIRWorkspace(text, irutil.PrintOptions(), verify, blob_sizes, count_outside)
    except irutil.ParseError as exc:
        log.warning(
            "input does not parse as MLIR (%s); falling back to text reduction (lines, balanced blocks, tokens)", exc
        )
        return TextWorkspace(text, blob_sizes, count_outside)
    for options in (irutil.PrintOptions(), irutil.PrintOptions(debug_info=True), irutil.PrintOptions(generic=True)):
        canonical = ws.canonical(options)
        if canonical == text or judged(canonical.encode()):
            if options != ws.options:
                log.warning("the check needs the IR printed with %s; keeping that form", options)
                ws.reprint(options)
            return ws
    log.warning("the check rejects the input once MLIR re-prints it; falling back to text reduction")
    return TextWorkspace(text, blob_sizes, count_outside)


def size_of(text: str) -> Size:
    """The input's size as the workspace would measure it, for reports, when a workflow
    started the reduction elsewhere."""
    try:
        module = irutil.parse(text, irutil.new_context())
    except irutil.ParseError:
        return Size(None, len(text.encode()))
    return Size(
        irutil.count_ops(module.operation),
        len(irutil.to_text(module.operation, irutil.PrintOptions(), verified=False).encode()),
    )
