"""The state directory (reducer/core/state.py) and its data format (reducer/core/codec.py):
every oracle's start round-trips as JSON and text; nothing in a directory is read before
its fingerprint matches, nor ever run as code; and a run removes only what it made."""

from __future__ import annotations

import json
import logging
import math
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import attrs
import pytest

from reducer.core import codec
from reducer.core.oracle import Oracle, RepeatOracle, ScriptOracle, Verdict
from reducer.core.state import MARKER, NotOurs, RunState
from reducer.iree.dispatch import Isolated
from reducer.iree.oracles import CompileOracle, SlowCompileOracle
from reducer.iree.oracles.command import Command
from reducer.iree.oracles.mismatch import MismatchOracle
from reducer.iree.signature import Signature
from reducer.session import Findings, Start

TEXT = "func.func @f(%a: f32) -> f32 {\n  %0 = math.exp %a : f32\n  return %0 : f32\n}\n"
ORIGINAL = "// the input \u00e9\n" + TEXT
FP: dict[str, Any] = {"settings": {"move_budget": 8}, "input": "ab" * 32, "check": None}

COMPILE = Command(("iree-compile", "{input}", "-o", "/dev/null"), ("--compile-to=flow",))
CRASH = Signature("crash", 6, ("error: 'x' op failed",), ("mlir::foo", "mlir::bar"), "Assertion `x' failed", "FooPass")
ORACLES = {
    "script": ScriptOracle("/abs/check.sh", "input.mlir", 12.5, ("math.exp",)),
    "repeat": RepeatOracle(ScriptOracle("/abs/check.sh", "input.mlir", None), 3),
    "compile": CompileOracle(COMPILE, "input.mlir", 30.0, "op failed", True, False, CRASH),
    "slow": SlowCompileOracle(
        COMPILE, "input.mlir", None, None, 2.5, Command(("iree-compile", "{input}", "--fast")), 3, True, CRASH
    ),
    "mismatch": MismatchOracle(
        Command(("iree-compile", "{input}", "-o", "{output}")),
        Command(("iree-compile", "{input}", "-o", "{output}", "--O0")),
        "input.mlir",
        60.0,
        Command(("iree-run-module", "--device=local-sync")),
        "main",
        1e-2,
        1e-5,
        False,
        Signature("mismatch", 0, ("nan on one side",)),
    ),
}


def start_with(oracle: Oracle) -> Start:
    verdict = Verdict(True, -6, False, 1.25, "stderr\ttail\n", "interesting", oracle.failure())
    dispatch = Isolated(
        "module_main_dispatch_0.mlir", TEXT + "// the executable\n", ORACLES["compile"], ("d0", "d1"), 2, 5, 3.5
    )
    findings = Findings("flow", None, dispatch, ["--x"], ["strip"], 7, ["removed the UTF-8 byte-order mark"])
    return Start(TEXT, oracle, verdict, 12.5, findings, ORIGINAL)


@pytest.mark.parametrize("kind", sorted(ORACLES))
def test_every_oracles_start_round_trips_as_json_and_text(tmp_path: Path, kind: str):
    state = RunState(str(tmp_path / "s"))
    begin = start_with(ORACLES[kind])
    state.create(FP, begin)
    loaded = RunState(str(tmp_path / "s")).load(FP)
    assert loaded is not None
    assert loaded[0] == FP
    assert loaded[1] == begin and type(loaded[1].oracle) is type(begin.oracle)
    assert loaded[1].oracle.failure() == begin.oracle.failure()
    files = sorted(p.name for p in (tmp_path / "s").iterdir())
    assert files == [
        MARKER,
        "run.json",
        "start-findings.dispatch.text.mlir",
        "start-original_text.mlir",
        "start-text.mlir",
        "start.json",
    ]
    assert (tmp_path / "s" / "start-text.mlir").read_text() == TEXT  # the programs are MLIR text
    assert (tmp_path / "s" / "start-original_text.mlir").read_text() == ORIGINAL
    json.loads((tmp_path / "s" / "start.json").read_text())  # the rest is JSON


def test_the_codec_keeps_the_types_json_does_not_have():
    value = (float("nan"), float("inf"), -math.inf, b"\0\xff", {1: ("a", None)}, [True, 2, 2.5])
    data = json.loads(json.dumps(codec.encode(value), allow_nan=False))
    back = codec.decode(data)
    assert math.isnan(back[0]) and back[1:4] == (math.inf, -math.inf, b"\0\xff") and back[4:] == value[4:]


def test_a_class_not_registered_is_neither_written_nor_read():
    @attrs.frozen
    class Unknown:
        x: int

    with pytest.raises(codec.CodecError, match="not a class a record may hold"):
        codec.encode(Unknown(1))
    for bad in (
        {"$class": "builtins:eval", "$fields": {}},
        {"$class": "os:system", "$fields": {"command": "true"}},
        {"$class": codec.name_of(Verdict), "$fields": {"interesting": True, "returncode": 0, "evil": 1}},
        {"$class": codec.name_of(Verdict), "$fields": {}},  # required fields missing
        {"$set": [1]},
        {"$text": "../../etc/passwd"},  # no reader given: programs are read only from a state
    ):
        with pytest.raises(codec.CodecError):
            codec.decode(bad)


def test_reading_a_state_never_imports_a_module_it_names(tmp_path: Path, monkeypatch, caplog):
    (tmp_path / "planted_module.py").write_text(f"open({str(tmp_path / 'PWNED')!r}, 'w').close()\nclass Evil: pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    state = RunState(str(tmp_path / "s"))
    state.create(FP, start_with(ORACLES["script"]))
    (tmp_path / "s" / "start.json").write_text('{"$class": "planted_module:Evil", "$fields": {}}')
    with caplog.at_level(logging.WARNING):
        assert state.load(FP) is None
    assert not (tmp_path / "PWNED").exists() and "planted_module" not in sys.modules
    assert "cannot be continued" in caplog.text and "planted_module:Evil" in caplog.text


def test_the_start_is_not_read_unless_the_fingerprint_matches(tmp_path: Path, caplog):
    state = RunState(str(tmp_path / "s"))
    state.create(FP, start_with(ORACLES["script"]))
    (tmp_path / "s" / "start.json").write_text("not json at all")
    other = dict(FP, input="cd" * 32)
    with caplog.at_level(logging.WARNING):
        assert state.load(other) == (FP, None)  # the caller says what differs
    assert caplog.text == ""  # the start was not opened


def test_a_program_name_outside_the_state_is_not_read(tmp_path: Path, caplog):
    (tmp_path / "secret.mlir").write_text("secret")
    state = RunState(str(tmp_path / "s"))
    state.create(FP, start_with(ORACLES["script"]))
    start = json.loads((tmp_path / "s" / "start.json").read_text())
    start["$fields"]["text"] = {"$text": "../secret"}
    (tmp_path / "s" / "start.json").write_text(json.dumps(start))
    with caplog.at_level(logging.WARNING):
        assert state.load(FP) is None
    assert "not a program's name" in caplog.text


def test_a_users_directory_is_refused_and_never_touched(tmp_path: Path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "run.json").write_text('{"format": 2, "fingerprint": {}}')
    (mine / "verdicts.jsonl").write_text("mine\n")
    before = {p.name: p.read_bytes() for p in mine.iterdir()}
    state = RunState(str(mine))
    assert "holds files ireereduce did not write" in (state.refusal() or "")
    assert not state.exists() and state.load(FP) is None
    state.remove()
    with pytest.raises(NotOurs) as err:
        state.create(FP, start_with(ORACLES["script"]))
    assert isinstance(err.value, OSError)
    assert {p.name: p.read_bytes() for p in mine.iterdir()} == before
    (tmp_path / "file").write_text("x")
    assert "is not a directory" in (RunState(str(tmp_path / "file")).refusal() or "")
    assert "does not exist" in (RunState(str(tmp_path / "no" / "s")).refusal() or "")
    assert RunState(str(tmp_path / "new")).refusal() is None


def test_a_run_removes_the_directory_it_made_and_empties_one_it_was_given(tmp_path: Path):
    made = RunState(str(tmp_path / "made"))
    made.create(FP, start_with(ORACLES["script"]))
    made.open_journal()
    assert made.refusal() is None and made.exists()
    made.remove()
    assert not (tmp_path / "made").exists()
    (tmp_path / "given").mkdir()
    given = RunState(str(tmp_path / "given"))
    assert given.refusal() is None
    given.create(FP, start_with(ORACLES["script"]))
    given.remove()
    assert (tmp_path / "given").is_dir() and list((tmp_path / "given").iterdir()) == []


def test_files_someone_else_puts_in_a_runs_directory_stay(tmp_path: Path, caplog):
    state = RunState(str(tmp_path / "s"))
    state.create(FP, start_with(ORACLES["script"]))
    (tmp_path / "s" / "notes.txt").write_text("mine")
    (tmp_path / "s" / "start.json.d").mkdir()
    (tmp_path / "s" / "start-x.mlir").mkdir()  # a run's name, but a directory: the user's (review)
    (tmp_path / "s" / "start-x.mlir" / "mine.txt").write_text("mine")
    assert state.others() == ["notes.txt", "start-x.mlir", "start.json.d"]  # what a resume warns of
    with caplog.at_level(logging.WARNING):
        state.remove()
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == [MARKER, "notes.txt", "start-x.mlir", "start.json.d"]
    assert "notes.txt, start-x.mlir, start.json.d, which ireereduce did not write" in caplog.text
    # Still the run's (the marker stays), but a run's name taken by a directory is not used:
    # the next run is refused in one line naming it, and records nothing there (audit 14).
    assert "(its start-x.mlir is a directory)" in (state.refusal() or "")
    assert state.load(FP) is None
    with pytest.raises(OSError):
        state.create(FP, start_with(ORACLES["script"]))
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == [MARKER, "notes.txt", "start-x.mlir", "start.json.d"]


def test_a_start_that_cannot_be_recorded_means_starting_over(tmp_path: Path, caplog):
    class Opaque(Oracle):  # not an attrs class
        timeout = None

        def run(self, data, cancel=None):  # type: ignore[no-untyped-def]
            raise AssertionError

        def reproducer(self, path: str) -> str:
            return ""

    state = RunState(str(tmp_path / "s"))
    with caplog.at_level(logging.WARNING):
        state.create(FP, start_with(Opaque()))
    assert "cannot record this run's start" in caplog.text
    assert state.exists() and state.load(FP) is None
    state.remove()
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize("kind", ["compile", "mismatch"])
def test_a_rerun_reads_an_iree_start_before_importing_the_iree_room(tmp_path: Path, kind: str):
    """A rerun reads its start first thing; the IREE room's classes register as it is
    imported, which the session does for the state's codec when it meets one."""
    RunState(str(tmp_path / "s")).create(FP, start_with(ORACLES[kind]))
    code = (
        "import json, sys\n"
        "from reducer.core.state import RunState\n"
        "import reducer.session\n"
        "assert 'reducer.iree.oracles' not in sys.modules\n"
        f"start = RunState({str(tmp_path / 's')!r}).load(json.loads(sys.argv[1]))[1]\n"
        "print(type(start.oracle).__name__, start.findings.dispatch.oracle.expected.kind)\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-c", code, json.dumps(FP)], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [type(ORACLES[kind]).__name__, "crash"]


def test_a_journal_reads_only_verdicts_it_wrote_and_never_through_a_link(tmp_path):
    """Found by the independent hostile run: a planted `"i": "yes"` was trusted as a
    verdict (the walk back then put the original over a smaller result), and a
    verdicts.jsonl linked to a user's file had the journal appended to that file."""
    import errno

    from reducer.core.cache import VerdictJournal

    good = '{"k":"00","i":false,"o":"","t":false}\n'
    path = tmp_path / "verdicts.jsonl"
    path.write_text(good + '{"k":"01","i":"yes","o":"","t":false}\n' + '{"k":"02","i":true,"o":"","t":false}\n')
    journal = VerdictJournal(str(path))
    journal.close()
    assert list(journal.verdicts) == [bytes.fromhex("00")]  # read up to the first it did not write
    assert path.read_text() == good
    diary = tmp_path / "diary.txt"
    diary.write_text("my own words\n")
    linked = tmp_path / "linked.jsonl"
    linked.symlink_to(diary)
    with pytest.raises(OSError) as err:
        VerdictJournal(str(linked))
    assert err.value.errno == errno.ELOOP
    assert diary.read_text() == "my own words\n"


@pytest.mark.parametrize(
    "call",
    ["VerdictJournal(path)", "read_regular(path)"],
    ids=["journal", "start"],
)
def test_a_fifo_in_the_state_is_refused_never_waited_on(tmp_path, call: str):
    """Audit 14 (DF1): a FIFO put in place of a state file blocked the rerun for ever in
    open(); one put there after the directory was checked is an OSError at once."""
    fifo = tmp_path / "file"
    os.mkfifo(fifo)
    code = (
        "import sys\nfrom reducer.core.cache import VerdictJournal, read_regular\n"
        f"path = {str(fifo)!r}\n"
        f"try:\n    {call}\nexcept OSError as exc:\n    print('refused', exc.strerror)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() in ("refused not a regular file", "refused No such device or address"), out
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_fifo_or_link_put_under_a_runs_name_during_the_run_is_left_at_its_end(tmp_path: Path, caplog):
    """The run's end removes its own files by name, but only regular files: a FIFO or a
    link someone put there under run.json or verdicts.jsonl is theirs, and stays, told."""
    state = RunState(str(tmp_path / "s"))
    state.create(FP, start_with(ORACLES["script"]))
    (tmp_path / "s" / "run.json").unlink()
    os.mkfifo(tmp_path / "s" / "run.json")
    (tmp_path / "s" / "verdicts.jsonl").symlink_to(tmp_path / "diary.txt")
    with caplog.at_level(logging.WARNING):
        state.remove()
    left = sorted(p.name for p in (tmp_path / "s").iterdir())
    assert left == [MARKER, "run.json", "verdicts.jsonl"]
    assert "it holds run.json, verdicts.jsonl, which ireereduce did not write" in caplog.text


def test_a_start_program_cut_short_is_not_continued(tmp_path: Path, caplog):
    """Audit 18 W11: a start program cut short (a power cut before the disk had it, or a
    hand) was read as it was: the run said the input "does not parse as MLIR", reduced it
    as text, and ended at 9 bytes where the run uninterrupted ends at 136."""
    state = RunState(str(tmp_path / "s"))
    state.create(FP, start_with(ORACLES["script"]))
    program = tmp_path / "s" / "start-text.mlir"
    program.write_bytes(program.read_bytes()[:20])
    with caplog.at_level(logging.WARNING):
        assert RunState(str(tmp_path / "s")).load(FP) is None
    assert "start-text.mlir is not the program the run recorded" in caplog.text


def test_a_state_an_earlier_version_wrote_without_digests_still_continues(tmp_path: Path):
    state = RunState(str(tmp_path / "s"))
    begin = start_with(ORACLES["script"])
    state.create(FP, begin)
    run = json.loads((tmp_path / "s" / "run.json").read_text())
    assert set(run["programs"]) == {"text", "original_text", "findings.dispatch.text"}
    del run["programs"]
    (tmp_path / "s" / "run.json").write_text(json.dumps(run))
    loaded = RunState(str(tmp_path / "s")).load(FP)
    assert loaded is not None and loaded[1] == begin
