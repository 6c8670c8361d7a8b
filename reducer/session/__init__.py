"""One reduction from start to finish, one file per phase:

- `settings`: what a run is given and gives back (Settings, Result, exit codes, errors);
- `files`: the user's files (reading, path checks, atomic writes), `guard` watching them;
- `scripts`: the user's check script (its arguments, whether it can run, what it names);
- `wiring`: strategies, oracles and executors looked up by name, and the engine;
- `checks`: a program checked several times, read as a sequential loop would;
- `start`: the original's checks, calibration, MLIR or text, the state to resume from;
- `overlap`: what starts while the original's checks run;
- `triage`: IREE's steps before (dispatch, phase) and after (flags, upstream) reducing;
- `finish`: the final re-checks and the walk back past a flaky check;
- `run`: `reduce_file` and the `Run` that takes a reduction through those phases.
"""

from reducer.session.checks import check_repeatedly
from reducer.session.files import WRITE_ERRORS, check_paths, default_output, open_stream, save, write_atomically
from reducer.session.finish import FINAL_CONFIRM, WALKBACK_CONFIRM
from reducer.session.run import reduce_file
from reducer.session.scripts import check_script, shipped_files
from reducer.session.settings import (
    EXIT_BAD_CHECK,
    EXIT_BAD_INPUT,
    EXIT_BUSY,
    EXIT_CANNOT_WRITE,
    EXIT_CHECK_CHANGED_FILES,
    EXIT_CHECK_HANGS,
    EXIT_CODES,
    EXIT_EXECUTOR,
    EXIT_FLAKY,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_NOT_INTERESTING,
    EXIT_NOT_LOCALIZED,
    EXIT_NOT_REPLAYABLE,
    EXIT_OK,
    EXIT_STATE_MISMATCH,
    EXIT_STOPPED,
    EXIT_TRIVIAL,
    EXIT_USAGE,
    INITIAL_TIMEOUT,
    MAX_JOBS,
    MAX_REPEAT,
    Findings,
    Flaky,
    Interrupted,
    LimitReached,
    Result,
    Settings,
    UserError,
    check_limits,
)
from reducer.session.source import EMPTY_INPUT_NAME, decode_input, read_input, read_stdin
from reducer.session.start import Start
from reducer.session.wiring import EXECUTORS, ORACLES, make_executor, make_oracle, registry, select_strategies

__all__ = [
    "check_limits",
    "EXECUTORS",
    "EXIT_BAD_CHECK",
    "EXIT_BAD_INPUT",
    "EMPTY_INPUT_NAME",
    "EXIT_BUSY",
    "EXIT_CANNOT_WRITE",
    "EXIT_CHECK_CHANGED_FILES",
    "EXIT_CHECK_HANGS",
    "EXIT_CODES",
    "EXIT_EXECUTOR",
    "EXIT_FLAKY",
    "EXIT_INTERNAL",
    "EXIT_INTERRUPTED",
    "EXIT_NOT_INTERESTING",
    "EXIT_NOT_LOCALIZED",
    "EXIT_NOT_REPLAYABLE",
    "EXIT_OK",
    "EXIT_STATE_MISMATCH",
    "EXIT_STOPPED",
    "EXIT_TRIVIAL",
    "EXIT_USAGE",
    "FINAL_CONFIRM",
    "INITIAL_TIMEOUT",
    "MAX_JOBS",
    "MAX_REPEAT",
    "ORACLES",
    "WALKBACK_CONFIRM",
    "WRITE_ERRORS",
    "Findings",
    "Flaky",
    "Interrupted",
    "LimitReached",
    "Result",
    "Settings",
    "Start",
    "UserError",
    "check_paths",
    "check_repeatedly",
    "check_script",
    "decode_input",
    "default_output",
    "make_executor",
    "make_oracle",
    "open_stream",
    "read_input",
    "read_stdin",
    "reduce_file",
    "registry",
    "save",
    "select_strategies",
    "shipped_files",
    "write_atomically",
]
