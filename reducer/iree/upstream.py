"""--for-upstream: make the repro fit to paste into a public bug report.

Deterministic symbol names (the user's model names go), no locations, no discardable
attributes, no dense_resource blobs (CIRCT's name
sanitizers are the only precedent). Each step is only kept if the oracle still finds
the program interesting: a discardable attribute can be what triggers the bug.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from reducer.core import ir as irutil

_SYMBOL = re.compile(r'@([A-Za-z_$.][\w$.-]*|"[^"]*")')
_PREFIX = {"func.func": "f", "util.func": "f", "util.global": "g", "ml_program.global": "g", "hal.executable": "ex"}


def _parse(text: str):
    ctx = irutil.new_context()
    return ctx, irutil.parse(text, ctx)


def strip_locations(text: str) -> str:
    ctx, module = _parse(text)
    with ctx:
        return irutil.to_text(module.operation, irutil.PrintOptions())


def strip_discardable_attributes(text: str) -> str:
    """Dotted attribute names (iree.abi.*, torch.*, ...) and argument/result attributes
    are discardable; hal.* ones are kept (device targets, executable layouts)."""
    ctx, module = _parse(text)
    with ctx:
        for op in [module.operation, *irutil.iter_ops(module.operation)]:
            if op.name.startswith("hal."):
                continue
            for name in [n for n in op.attributes if irutil.discardable(n) and not n.startswith("hal.")]:
                del op.attributes[name]
        return irutil.to_text(module.operation, irutil.PrintOptions())


def drop_resource_blobs(text: str) -> str:
    """dense_resource<blob> becomes a zero splat of its type, and the blobs go."""

    def zero(m: re.Match[str]) -> str:
        element = m.group(2)
        value = "0.0" if re.match(r"b?f|tf32", element) else "false" if element == "i1" else "0"
        return f"dense<{value}>{m.group(1)}"

    text = re.sub(r"dense_resource<[^>]+>(\s*:\s*tensor<(?:[^>]*x)?(\w+)>)", zero, text)
    if "dense_resource<" not in text:
        text = re.sub(r"\{-#.*?#-\}\s*", "", text, flags=re.S)
    _parse(text)
    return text


def rename_symbols(text: str) -> str:
    """Every symbol the program defines gets a short name by kind and order: @f0, @g0, ...
    (all of them: the old names cannot clash with the new ones)."""
    ctx, module = _parse(text)
    mapping: dict[str, str] = {}
    counts: dict[str, int] = {}
    with ctx:
        for op in irutil.iter_ops(module.operation):
            if "sym_name" not in op.attributes:
                continue
            old = str(op.attributes["sym_name"]).strip('"')
            prefix = _PREFIX.get(op.name, "s")
            if old in mapping:
                continue
            mapping[old] = f"{prefix}{counts.get(prefix, 0)}"
            counts[prefix] = counts.get(prefix, 0) + 1

    def swap(m: re.Match[str]) -> str:
        name = m.group(1).strip('"')
        return "@" + mapping[name] if name in mapping else m.group(0)

    renamed = _SYMBOL.sub(swap, text)
    ctx, module = _parse(renamed)
    with ctx:  # printed again: SSA names the printer derived from old symbols (%my_weight) go too
        return irutil.to_text(module.operation, irutil.PrintOptions())


#: In the order they are tried; each keeps the previous ones' result.
STEPS: tuple[tuple[str, Callable[[str], str]], ...] = (
    ("strip locations", strip_locations),
    ("strip discardable attributes", strip_discardable_attributes),
    ("drop dense_resource blobs", drop_resource_blobs),
    ("rename symbols", rename_symbols),
)


def _steps(text: str, keep: Callable[[str], bool]) -> tuple[str, list[str]]:
    """Apply the steps in order, each kept when it changes the text and `keep` says so."""
    done: list[str] = []
    for name, step in STEPS:
        try:
            after = step(text)
        except (irutil.ParseError, irutil.VerifyError):
            continue
        if after != text and keep(after):
            text = after
            done.append(name)
    return text, done


def clean(text: str, interesting: Callable[[str], bool]) -> tuple[str, list[str]]:
    """All steps at once if that stays interesting (one check), else one at a time."""
    together, done = _steps(text, lambda _: True)
    if not done:
        return text, []
    if interesting(together):
        return together, done
    return _steps(text, interesting)
