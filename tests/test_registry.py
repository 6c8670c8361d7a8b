"""The one registry: built-ins listed once in run order, plug-ins from entry points after
them, clashes and non-strategies rejected with a warning."""

from __future__ import annotations

import importlib.metadata
import logging
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import make_script

from reducer import session
from reducer.cli import main
from reducer.core.strategy import ENTRY_POINT_GROUP, Edit, Program, Strategy, discover
from strategies import BUILTIN


class _Cut(Strategy):
    """Deletes one word everywhere: text mode, so the tests need no MLIR."""

    modes = frozenset({"text"})
    word = ""

    def opportunities(self, program: Program) -> list[Edit]:
        return [Edit("cut", (), self.word)] if self.word in program.text else []

    def apply(self, program: Program, edits) -> str:
        return program.text.replace(self.word, "")


class CutApple(_Cut):
    name, summary, word = "cut-apple", "drop apple", "apple"


class CutPear(_Cut):
    name, summary, word = "cut-pear", "drop pear", "pear"


class ClashesWithDropOps(CutApple):
    name = "drop-ops"


class NotAStrategy:
    name, summary = "not-a-strategy", "a plain class"


def _plugins(monkeypatch, *pairs: tuple[str, str]) -> None:
    eps = [importlib.metadata.EntryPoint(n, f"test_registry:{v}", ENTRY_POINT_GROUP) for n, v in pairs]
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group=None: eps)


def _reduce(tmp_path: Path) -> str:
    src = tmp_path / "in.txt"
    src.write_text("apple\npear\n")
    check = make_script(tmp_path / "check.sh", 'grep -q apple "$1" || grep -q pear "$1"')
    out = tmp_path / "out.txt"
    session.reduce_file(session.Settings(str(src), str(check), str(out), jobs=1))
    return out.read_text()


@pytest.mark.parametrize("first", ["apple", "pear"])
def test_list_order_is_run_order(tmp_path: Path, monkeypatch, first: str):
    """Either word alone keeps the file interesting, so the strategy listed first makes the
    one cut that is kept and the other's cut is then refused: the survivor names the order."""
    order = [CutApple, CutPear] if first == "apple" else [CutPear, CutApple]
    monkeypatch.setattr(session.wiring, "registry", lambda: {c.name: c for c in order})
    out = _reduce(tmp_path)
    survivor = "pear" if first == "apple" else "apple"
    assert survivor in out and first not in out


def test_plugins_follow_the_builtins_in_entry_point_name_order(monkeypatch):
    _plugins(monkeypatch, ("z-pear", "CutPear"), ("a-apple", "CutApple"))
    assert list(discover(BUILTIN)) == [c.name for c in BUILTIN] + ["cut-apple", "cut-pear"]


@pytest.mark.parametrize("cls", ["ClashesWithDropOps", "NotAStrategy"])
def test_a_clashing_or_foreign_plugin_is_rejected_with_a_warning(monkeypatch, caplog, cls: str):
    _plugins(monkeypatch, ("bad", cls))
    with caplog.at_level(logging.WARNING, logger="reducer.core.strategy"):
        found = discover(BUILTIN)
    assert found["drop-ops"] is next(c for c in BUILTIN if c.name == "drop-ops")
    assert "not-a-strategy" not in found and len(found) == len(BUILTIN)
    assert any("bad" in r.getMessage() and "ignored" in r.getMessage() for r in caplog.records)


def test_list_strategies_prints_the_run_order(monkeypatch):
    _plugins(monkeypatch, ("pear", "CutPear"))
    result = CliRunner().invoke(main, ["--list-strategies"])
    assert result.exit_code == 0, result.output
    names = [line.split()[0] for line in result.output.splitlines() if line.strip()]
    assert names == list(session.registry()) == [c.name for c in BUILTIN] + ["cut-pear"]
