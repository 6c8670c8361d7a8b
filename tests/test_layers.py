"""The rooms of reducer/, by directory: the generic core (reducer/core/) imports neither the
strategies nor the IREE room (reducer/iree/) nor the layer on top (reducer/*.py: cli, api,
session, progress); the IREE room imports neither the top nor the strategies; the
strategies import only the core. Directly or through another module, at run time or for
type checking: read from the source (ast), so an import inside a function counts as much
as one at the top. A new file joins its directory's room without being listed here."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def room_of(module: str) -> str:
    """core, iree, top (reducer/*.py and the package itself) or strategies."""
    parts = module.split(".")
    if parts[0] == "strategies":
        return "strategies"
    if len(parts) > 1 and parts[1] in ("core", "iree"):
        return parts[1]
    return "top"


def modules(directory: str) -> list[str]:
    """Every module in a room's directory (for the top room: reducer/*.py and the
    session package, not the rooms below it)."""
    base = ROOT / directory
    files = [*base.glob("*.py"), *base.glob("session/*.py")] if directory == "reducer" else base.rglob("*.py")
    found = []
    for path in sorted(files):
        rel = path.relative_to(ROOT).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        found.append(".".join(parts))
    return found


#: What each room may not reach.
FORBIDDEN = {
    "core": {"strategies", "iree", "top"},
    "iree": {"strategies", "top"},
    "strategies": {"iree", "top"},
}


def _file(module: str) -> Path | None:
    base = ROOT / module.replace(".", "/")
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def imports(module: str) -> set[str]:
    """Every first-party module `module` names in an import, anywhere in its source."""
    path = _file(module)
    assert path is not None, module
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # a relative import: resolve it against this module's package
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            # `from reducer.iree import signature` names the submodule, not just the package.
            found |= {f"{base}.{a.name}" for a in node.names if _file(f"{base}.{a.name}")}
            found.add(base)
    return {m for m in found if m.split(".")[0] in ("reducer", "strategies")}


def reachable(module: str) -> dict[str, str]:
    """Each first-party module reachable from `module`, with the one that imports it.
    The package `reducer` itself only re-exports the top layer lazily, so reaching it
    counts as reaching the top."""
    seen: dict[str, str] = {}
    todo = [module]
    while todo:
        current = todo.pop()
        for dep in imports(current):
            if dep not in seen and dep != module:
                seen[dep] = current
                todo.append(dep)
    return seen


ROOMED = [(m, "core") for m in modules("reducer/core")]
ROOMED += [(m, "iree") for m in modules("reducer/iree")]
ROOMED += [(m, "strategies") for m in modules("strategies")]


@pytest.mark.parametrize(("module", "room"), ROOMED, ids=[m for m, _ in ROOMED])
def test_each_room_stays_below_the_ones_it_must_not_know(module: str, room: str):
    assert room_of(module) == room
    bad = {dep: via for dep, via in reachable(module).items() if room_of(dep) in FORBIDDEN[room]}
    assert not bad, f"{module} ({room}) reaches " + ", ".join(
        f"{d} ({room_of(d)}, imported by {v})" for d, v in sorted(bad.items())
    )


def test_the_rooms_are_found_from_their_directories():
    """An empty glob would make the check above pass vacuously."""
    core = modules("reducer/core")
    assert {"reducer.core.engine", "reducer.core.workspace", "reducer.core.oracle", "reducer.core.strategy"} <= set(
        core
    )
    iree = modules("reducer/iree")
    assert {"reducer.iree.signature", "reducer.iree.oracles.compile", "reducer.iree.report"} <= set(iree)
    top = modules("reducer")
    assert {"reducer", "reducer.session", "reducer.cli", "reducer.api", "reducer.progress"} <= set(top)
    assert {"reducer.session.run", "reducer.session.wiring"} <= set(top)
    assert all(room_of(m) == "top" for m in top)


def test_the_check_sees_imports_inside_functions_and_from_package_imports():
    """The scanner itself: a lazy import, `from reducer.iree import x` and a relative
    import all count."""
    found = imports("reducer.session.wiring")
    assert "strategies" in found  # imported inside registry()
    assert "reducer.core.dask_executor" in found  # imported inside _dask()
    assert "reducer.iree.dispatch" in imports("reducer.session.triage")  # `from reducer.iree import dispatch, ...`
    assert "reducer.session.wiring" in imports("reducer.session.run")  # `from reducer.session import ..., wiring`


def test_the_check_fails_on_a_forbidden_import(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A core module that imports the IREE room through a relative import is caught."""
    fake = tmp_path / "reducer" / "core"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "leaky.py").write_text("def f():\n    from ..iree import signature\n")
    (tmp_path / "reducer" / "iree").mkdir()
    (tmp_path / "reducer" / "iree" / "__init__.py").write_text("")
    (tmp_path / "reducer" / "iree" / "signature.py").write_text("")
    monkeypatch.setitem(globals(), "ROOT", tmp_path)
    bad = [d for d in reachable("reducer.core.leaky") if room_of(d) in FORBIDDEN["core"]]
    assert bad == ["reducer.iree.signature"] or set(bad) == {"reducer.iree", "reducer.iree.signature"}
