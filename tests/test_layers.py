"""The rooms of reducer/: the generic core imports neither the strategies nor the IREE room,
directly or through another module, at run time or for type checking. Read from the
source (ast), so an import inside a function counts as much as one at the top."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: Engine, workspace, executors, cache, resume state, limits, progress events, the MLIR
#: helpers, and the oracle and strategy contracts.
CORE = [
    "reducer.engine",
    "reducer.workspace",
    "reducer.executor",
    "reducer.dask_executor",
    "reducer.cache",
    "reducer.state",
    "reducer.limits",
    "reducer.progress",
    "reducer.ir",
    "reducer.oracle",
    "reducer.strategy",
]

#: The built-in strategies and the IREE room: built-in oracles, failure signatures,
#: phases, dispatch isolation, flag reduction, upstream report, the installed report.
FORBIDDEN = [
    "strategies",
    "reducer.oracles",
    "reducer.signature",
    "reducer.phases",
    "reducer.dispatch",
    "reducer.flags",
    "reducer.upstream",
    "reducer.report",
    "reducer.session",
    "reducer.api",
    "reducer.cli",
]


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
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # `from reducer import signature` names the submodule, not just the package.
            found |= {f"{node.module}.{a.name}" for a in node.names if _file(f"{node.module}.{a.name}")}
            found.add(node.module)
    return {m for m in found if m.split(".")[0] in ("reducer", "strategies") and m != "reducer"}


def reachable(module: str) -> dict[str, str]:
    """Each first-party module reachable from `module`, with the one that imports it."""
    seen: dict[str, str] = {}
    todo = [module]
    while todo:
        current = todo.pop()
        for dep in imports(current):
            if dep not in seen and dep != module:
                seen[dep] = current
                todo.append(dep)
    return seen


def _forbidden(name: str) -> bool:
    return any(name == f or name.startswith(f + ".") for f in FORBIDDEN)


@pytest.mark.parametrize("module", CORE)
def test_the_core_imports_neither_strategies_nor_the_iree_room(module: str):
    bad = {dep: via for dep, via in reachable(module).items() if _forbidden(dep)}
    assert not bad, f"{module} reaches {', '.join(f'{d} (imported by {v})' for d, v in sorted(bad.items()))}"


def test_the_check_sees_imports_inside_functions_and_from_package_imports(tmp_path: Path):
    """The scanner itself: a lazy import and `from reducer import x` both count."""
    found = imports("reducer.session")
    assert "strategies" in found  # imported inside registry()
    assert "reducer.dispatch" in found  # `from reducer import dispatch, ...`
