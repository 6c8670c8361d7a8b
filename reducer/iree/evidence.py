"""What a report shows of a numeric mismatch: the reduced program run once more on both
configurations, the inputs each side took (in its own types, written beside the report
so the repro runs as filed), the worst element, and the commands that show it."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile

import attrs
import numpy as np

from reducer.core.oracle import candidate_dir
from reducer.iree import inputs, signature
from reducer.iree.localize import number, worst
from reducer.iree.oracles.mismatch import MismatchOracle


@attrs.frozen
class Evidence:
    function: str
    inputs: dict[str, list[tuple[str, np.ndarray]]]  # side -> (ABI type, value in that type)
    output: int  # the first output that differs
    element: tuple[int, ...]  # its worst element
    a_value: float
    b_value: float
    kind: str

    def error(self) -> float:
        return abs(self.a_value - self.b_value)


def gather(oracle: MismatchOracle, data: bytes, basename: str) -> Evidence | None:
    """Both sides run on the oracle's inputs; None when they fail or agree."""
    with candidate_dir(data, basename) as (tmp, path):
        values, sides = oracle.values(), []
        for side, command in (("a", oracle.compile), ("b", oracle.against)):
            ran = oracle.side(side, command, path, tmp, values)
            if ran.failed is not None or ran.values is None:
                return None
            sides.append(ran)
            values = ran.values
    a, b = sides[0].outputs, sides[1].outputs
    sig = signature.numeric(a, b, oracle.rtol, oracle.atol)
    if sig.kind != "mismatch" or sig.code is None or a[sig.code].shape != b[sig.code].shape:
        return None
    x, y = a[sig.code], b[sig.code]
    element = worst(x, y, oracle.rtol, oracle.atol)
    taken = {name: [(t, inputs.cast(v, t)) for t, v in zip(s.types, s.values or [])] for name, s in zip("ab", sides)}
    return Evidence(
        sides[0].function, taken, sig.code, element, float(x[element]), float(y[element]), sig.first_error or ""
    )


def _flags(taken: list[tuple[str, np.ndarray]], folder: str, prefix: str) -> list[str]:
    """iree-run-module --input values: tensors as .npy files in folder, scalars inline."""
    out = []
    for k, (t, value) in enumerate(taken):
        if inputs.parse(t)[0] is None:  # index too
            out.append(inputs.scalar(value, t))
        else:
            file = f"{prefix}input{k}.npy"
            _save(os.path.join(folder, file), value)
            out.append(f"@{os.path.basename(folder)}/{file}")
    return out


def _save(path: str, value: np.ndarray) -> None:
    """np.save, atomically: whatever is under that name is replaced, never written
    through (a link) or waited on (a FIFO)."""
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".ireereduce-", suffix=".npy")
    try:
        with os.fdopen(fd, "wb") as f:
            np.save(f, value, allow_pickle=False)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def ship(oracle: MismatchOracle, evidence: Evidence, folder: str, program: str) -> dict[str, object]:
    """Write the inputs into folder (input{k}.npy; b-input{k}.npy where side b takes other
    types) and say how to show the difference: the report's 'difference' section. The
    folder is made here, or is one the run checked at its start: one that became a link or
    a file since (someone else's) is refused, never written through (NotADirectoryError)."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(folder)
    if not stat.S_ISDIR(os.lstat(folder).st_mode):
        raise NotADirectoryError(errno.ENOTDIR, "it changed during the run: not a folder ireereduce made", folder)
    a, b = evidence.inputs["a"], evidence.inputs["b"]
    given = {"a": _flags(a, folder, "")}
    given["b"] = given["a"] if [t for t, _ in b] == [t for t, _ in a] else _flags(b, folder, "b-")
    compiles = {"a": oracle.compile.shell(input=program, output="a.vmfb")}
    compiles["b"] = oracle.against.shell(input=program, output="b.vmfb")
    run = oracle.run_shell()
    runs = [
        " ".join(
            [run, f"--module={side}.vmfb", f"--function={evidence.function}"] + [f"--input={f}" for f in given[side]]
        )
        for side in "ab"
    ]
    error = evidence.error()
    return {
        "configurations": compiles,
        "function": evidence.function,
        "inputs_folder": os.path.basename(folder),
        "inputs": {side: [f.lstrip("@") for f in fs] for side, fs in given.items()},
        "worst": {
            "output": evidence.output,
            "index": list(evidence.element),
            "a": number(evidence.a_value),
            "b": number(evidence.b_value),
            "error": error if np.isfinite(error) else None,
            "kind": evidence.kind,
        },
        "commands": "\n".join([compiles["a"], compiles["b"], *runs]),
    }
