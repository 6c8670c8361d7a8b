"""Caps that keep the code a newcomer can live in: no function over 80 lines (the click
entry point, mostly its option table, over 150) and no module over 700 lines, in the
package and the strategies. ruff's C90/PLR0915 cap complexity and statements; lines are
counted here, from the source, decorators excluded."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MAX_FUNCTION_LINES = 80
MAX_ENTRY_POINT_LINES = 150
MAX_MODULE_LINES = 700
ENTRY_POINT = ("reducer/cli.py", "main")

SOURCES = sorted(p for d in ("reducer", "strategies") for p in (ROOT / d).rglob("*.py"))


def too_long(path: Path) -> list[str]:
    """Each function or method of path longer than its cap, as 'name: N lines'."""
    rel = path.relative_to(ROOT).as_posix()
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            cap = MAX_ENTRY_POINT_LINES if (rel, node.name) == ENTRY_POINT else MAX_FUNCTION_LINES
            if lines > cap:
                found.append(f"{node.name}: {lines} lines (cap {cap})")
    return found


@pytest.mark.parametrize("path", SOURCES, ids=[p.relative_to(ROOT).as_posix() for p in SOURCES])
def test_functions_and_modules_stay_within_their_caps(path: Path):
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_MODULE_LINES, f"{path.relative_to(ROOT)}: {lines} lines (cap {MAX_MODULE_LINES})"
    assert not too_long(path), f"{path.relative_to(ROOT)}: " + "; ".join(too_long(path))


def test_the_cap_sees_a_long_function_and_not_its_decorators(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The counter itself: a body of 81 lines is caught, 200 decorator lines are not counted."""
    monkeypatch.setitem(globals(), "ROOT", tmp_path)
    long = tmp_path / "long.py"
    long.write_text("def f():\n" + "    x = 1\n" * 80)
    decorated = tmp_path / "decorated.py"
    decorated.write_text("@d\n" * 200 + "def g():\n    pass\n")
    assert too_long(long) == ["f: 81 lines (cap 80)"]
    assert too_long(decorated) == []
    assert SOURCES, "no sources found: the caps would pass vacuously"
